"""The KV config's shapes (KVConfigManager's tables): a namespace's table, a whole config checked entry by
entry, and what an import changed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from service.errors import InvalidArgument
from service.models.validators import kv_name, kv_value


@dataclass(frozen=True, slots=True)
class KvTable:
    table: dict[str, str]

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table}


MAX_KV_PROBLEMS = 100  # entries named in one refusal of a whole KV config (the count is always complete)


def kv_config_problems(value: Any) -> list[dict[str, Any]]:
    """Every entry of a whole KV config (Java's KVConfigSerializeWrapper.configTable, {namespace: {key: value}})
    that breaks the rules, each {namespace, key?, problem}: an import is refused as a whole, naming them all."""
    if not isinstance(value, dict):
        return [{"problem": "configTable: an object {namespace: {key: value}} is required"}]
    problems: list[dict[str, Any]] = []
    for ns, table in value.items():
        try:
            kv_name(ns, "namespace")
        except InvalidArgument as err:
            problems.append({"namespace": ns, "problem": err.message})
        if not isinstance(table, dict):
            problems.append({"namespace": ns, "problem": "an object {key: value} is required, not "
                                                         f"{type(table).__name__}"})
            continue
        for key, v in table.items():
            for check, what, field_name in ((kv_name, key, "key"), (kv_value, v, "value")):
                try:
                    check(what, field_name)
                except InvalidArgument as err:
                    problems.append({"namespace": ns, "key": key, "problem": err.message})
    return problems


def kv_config(value: Any) -> dict[str, dict[str, str]]:
    """A whole KV config, checked entry by entry; any entry that breaks a rule refuses it all (InvalidArgument
    naming each, details `problems`, the first MAX_KV_PROBLEMS of them, and `count`)."""
    problems = kv_config_problems(value)
    if problems:
        shown = "; ".join(" ".join(f"{k} {p[k]!r}" for k in ("namespace", "key") if k in p) + ": " + p["problem"]
                          for p in problems[:5])
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise InvalidArgument(f"configTable: {len(problems)} entr{'y' if len(problems) == 1 else 'ies'} cannot be "
                              f"taken, nothing was written: {shown}{more}",
                              field="configTable", problems=problems[:MAX_KV_PROBLEMS], count=len(problems))
    return value


@dataclass(frozen=True, slots=True)
class KvImportResult:
    """What an import changed (or, dry, would change), per namespace: keys added, changed (before, after),
    unchanged, removed (replace: in the namespace, not in the import) and kept (merge: not in the import, left as
    they are); `created` when the namespace did not exist."""

    dry_run: bool
    replace: bool
    namespaces: list[dict[str, Any]]

    @classmethod
    def of(cls, table: dict[str, dict[str, str]], before: dict[str, tuple[bool, dict[str, str]]], *,
           dry_run: bool, replace: bool) -> KvImportResult:
        out = []
        for ns, kv in table.items():
            existed, old = before[ns]
            added = {k: v for k, v in kv.items() if k not in old}
            changed = {k: {"before": old[k], "after": v} for k, v in kv.items() if k in old and old[k] != v}
            unchanged = sorted(k for k, v in kv.items() if old.get(k) == v)
            rest = {k: v for k, v in old.items() if k not in kv}
            out.append({"namespace": ns, "created": not existed, "added": dict(sorted(added.items())),
                        "changed": dict(sorted(changed.items())), "unchanged": unchanged,
                        "removed": dict(sorted(rest.items())) if replace else {},
                        "kept": [] if replace else sorted(rest)})
        return cls(dry_run, replace, out)

    def totals(self) -> dict[str, int]:
        t = {"namespacesCreated": sum(n["created"] for n in self.namespaces)}
        for part in ("added", "changed", "unchanged", "removed", "kept"):
            t[part] = sum(len(n[part]) for n in self.namespaces)
        return t

    @property
    def changes(self) -> int:
        t = self.totals()
        return t["namespacesCreated"] + t["added"] + t["changed"] + t["removed"]

    def to_dict(self) -> dict[str, Any]:
        return {"dryRun": self.dry_run, "replace": self.replace, "totals": self.totals(),
                "namespaces": self.namespaces}
