"""Helpers of the chart tests, which render helm/ with Helm's own engine.

helm-python-sdk (import name helm_python) binds Helm v4's Go SDK: no helm binary is involved.

`render(values)` returns the parsed manifests; the value sets the tests iterate over are the chart defaults,
an inline production-like set and every helm/ci/*.yaml file.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART_DIR = ROOT / "helm"
CI_DIR = CHART_DIR / "ci"
RELEASE = "demo"
NAMESPACE = "rmq"
# Kubernetes version the manifests are validated against (kubernetes-validate ships schemas for 1.25..1.37);
# the chart's Chart.yaml accepts >= 1.27.
K8S_VERSION = "1.31.0"

# An inline production-like set (the file ci/production-values.yaml is another one): external Redis with a
# password Secret, HPA on, tokens from an existing Secret.
PRODUCTION_VALUES: dict[str, Any] = {
    "auth": {"existingSecret": "namesrv-tokens"},
    "redis": {
        "enabled": False,
        "url": "rediss://redis.prod.internal:6380/0",
        "existingSecret": "managed-redis",
        "existingSecretPasswordKey": "password",
    },
    "autoscaling": {"enabled": True, "minReplicas": 3, "maxReplicas": 9},
    "serviceMonitor": {"enabled": True},
}


def ci_value_files() -> list[Path]:
    return sorted(CI_DIR.glob("*.yaml"))


def value_sets() -> list[Any]:
    """pytest params: (id, values) for the defaults, the inline production set and each ci/*.yaml."""
    params = [pytest.param({}, id="defaults"), pytest.param(PRODUCTION_VALUES, id="production-inline")]
    for path in ci_value_files():
        params.append(pytest.param(yaml.safe_load(path.read_text()) or {}, id=f"ci/{path.name}"))
    return params


@dataclass
class Rendered:
    values: dict[str, Any]
    merged: dict[str, Any]
    docs: list[dict[str, Any]] = field(default_factory=list)
    sources: dict[int, str] = field(default_factory=dict)  # id(doc) -> template path
    notes: str = ""

    def all(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.docs if d["kind"] == kind]

    def one(self, kind: str, suffix: str | None = None) -> dict[str, Any]:
        found = [d for d in self.all(kind) if suffix is None or d["metadata"]["name"].endswith(suffix)]
        assert len(found) == 1, (
            f"expected one {kind} (suffix {suffix!r}), got {[d['metadata']['name'] for d in found]}"
        )
        return found[0]

    def maybe(self, kind: str, suffix: str | None = None) -> dict[str, Any] | None:
        found = [d for d in self.all(kind) if suffix is None or d["metadata"]["name"].endswith(suffix)]
        assert len(found) <= 1
        return found[0] if found else None

    @property
    def deployment(self) -> dict[str, Any]:
        return self.one("Deployment")

    @property
    def worker(self) -> dict[str, Any]:
        (container,) = [
            c for c in self.deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "namesrv"
        ]
        return container

    @property
    def configmap(self) -> dict[str, str]:
        """The workers' settings (not the Grafana dashboard's ConfigMap)."""
        (found,) = [d for d in self.all("ConfigMap") if not d["metadata"]["name"].endswith("-dashboard")]
        return found["data"]

    def pod_specs(self) -> list[tuple[str, dict[str, Any]]]:
        """(kind/name, pod spec) of every workload: Deployment, StatefulSet, CronJob, bare Pod (helm test)."""
        out = []
        for d in self.docs:
            name = f"{d['kind']}/{d['metadata']['name']}"
            if d["kind"] in ("Deployment", "StatefulSet"):
                out.append((name, d["spec"]["template"]["spec"]))
            elif d["kind"] == "CronJob":
                out.append((name, d["spec"]["jobTemplate"]["spec"]["template"]["spec"]))
            elif d["kind"] == "Pod":
                out.append((name, d["spec"]))
        return out


def values_reference() -> list[tuple[str, str, str]]:
    """(key path, default, description) of every key of values.yaml, from its `# --` comments (helm-docs)."""
    text = (CHART_DIR / "values.yaml").read_text()
    defaults = yaml.safe_load(text)
    rows: list[tuple[str, str, str]] = []
    stack: list[tuple[int, str]] = []
    comment: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("# --"):
            comment = [stripped[4:].strip()]
            continue
        if stripped.startswith("#"):
            if comment:
                comment.append(stripped[1:].strip())
            continue
        m = re.match(r"^(\s*)([A-Za-z0-9_.-]+):", line)
        if not m:
            comment = []
            continue
        indent = len(m.group(1))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, m.group(2)))
        path = [k for _, k in stack]
        value: Any = defaults
        for k in path:
            value = value[k]
        default = "" if isinstance(value, dict) and value else f"`{json.dumps(value)}`"
        rows.append((".".join(path), default, " ".join(comment)))
        comment = []
    return rows


def values_table() -> list[str]:
    """The Markdown table helm/README.md carries under "Values"; `python tests/helm/chartkit.py` prints it."""
    rows = ["| Key | Default | Description |", "|-----|---------|-------------|"]
    for key, default, desc in values_reference():
        desc = desc.replace("|", "\\|")
        rows.append(f"| `{key}` | {default} | {desc} |")
    return rows


README_START, README_END = "<!-- values-table:start -->\n", "<!-- values-table:end -->"


def write_readme_table() -> None:
    """Replace the table between the markers of helm/README.md."""
    path = CHART_DIR / "README.md"
    head, rest = path.read_text().split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    path.write_text(head + README_START + "\n".join(values_table()) + "\n" + README_END + tail)


# Settings the chart derives from other values rather than listing them under `config` (tests/helm keeps this
# list and the templates in step).
DERIVED = {"port", "redis_url", "remoting_port", "redis_sentinels", "redis_master_name", "redis_cluster",
           "redis_cluster_nodes", "redis_sentinel_tls", "redis_tls_ca_file", "redis_tls_cert_file",
           "redis_tls_key_file"}


def sync_config(skip_prefixes: tuple[str, ...] = ()) -> list[str]:
    """Add every non-secret application setting missing from values.yaml `config` (with the app's default and
    help) and from values.schema.json (type, range, choices). Returns the camelCase keys added."""
    import sys

    sys.path.insert(0, str(ROOT))
    from service.config import SETTINGS

    values_path, schema_path = CHART_DIR / "values.yaml", CHART_DIR / "values.schema.json"
    text = values_path.read_text()
    config = (yaml.safe_load(text) or {}).get("config", {})
    schema = json.loads(schema_path.read_text())
    props = schema["properties"]["config"]["properties"]
    kinds = {bool: "boolean", int: "integer", float: "number", str: "string"}
    lines, added = [], []
    for s in SETTINGS:
        if s.secret or s.name in DERIVED or s.camel in config or s.name.startswith(skip_prefixes):
            continue
        default = json.dumps(s.default) if not isinstance(s.default, str) else json.dumps(s.default)
        lines += [f"  # -- {s.help[0].upper() + s.help[1:]}.", f"  {s.camel}: {default}"]
        prop: dict[str, Any] = {"type": kinds[s.kind], "description": f"{s.env}: {s.help}"}
        for bound in ("minimum", "maximum"):
            if getattr(s, bound) is not None:
                v = getattr(s, bound)
                prop[bound] = int(v) if float(v).is_integer() else v
        if s.choices:
            prop["enum"] = list(s.choices)
        props[s.camel] = prop
        added.append(s.camel)
    if added:  # insert at the end of the `config:` block (the first top-level key after it)
        head, _, rest = text.partition("\nconfig:\n")
        block_end = re.search(r"^\S", rest, re.M)
        cut = block_end.start() if block_end else len(rest)
        body = rest[:cut].rstrip("\n") + "\n" + "\n".join(lines) + "\n\n"
        values_path.write_text(head + "\nconfig:\n" + body + rest[cut:])
        schema_path.write_text(json.dumps(schema, indent=2) + "\n")
    return added


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--write"]:
        write_readme_table()
    elif sys.argv[1:2] == ["--sync-config"]:  # --sync-config [SKIP_PREFIX ...]
        print("added:", ", ".join(sync_config(tuple(sys.argv[2:]))) or "nothing")
        write_readme_table()
    else:
        print("\n".join(values_table()))
