"""`namesrv admin kv import | export | copy`: the KV config moved between Apache's NameServer and ours, every
namespace in one step. The file is Apache's own kvConfig.json (`{"configTable":{namespace:{key:value}}}`, as
KVConfigManager persists it with fastjson, 4.9.x and 5.x alike), so `export` writes one Apache's NameServer can
start from (its `kvConfigPath`) and `import` takes the one it wrote; `copy` reads a running NameServer's
namespaces over the native door (GET_KVLIST_BY_NAMESPACE, 219).

Nothing is written by surprise: every write is first a dry run, shown; changing or removing a key already set
asks on a terminal (`--yes` elsewhere); a file or source holding anything the server cannot take is refused as a
whole, each entry named, before anything is sent (docs/migrating.md).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import unicodedata
from collections.abc import Callable
from typing import Any

from service.admin.client import (
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    AdminError,
    HttpApi,
    RemotingApi,
    connect,
)
from service.admin.terminal import confirm, read_token
from service.models import kv_config_problems

Table = dict[str, dict[str, str]]
SHOWN_VALUE = 80  # characters of a value shown in the human plan (--json has them whole)


def add_actions(kv_cmds: Any, action: Callable[[Any, str, str], argparse.ArgumentParser]) -> None:
    """`kv import`, `kv export` and `kv copy` beside the other `kv` actions."""
    p = action(kv_cmds, "import", "write a kvConfig.json (Apache's NameServer's KV file) in one step")
    p.add_argument("file", help="Apache's kvConfig.json (- for standard input)")
    _write_options(p)
    p.add_argument("--namespace", action="append", metavar="NS", help="only this namespace of the file "
                   "(repeatable; default: all)")
    p.add_argument("--encoding", default="utf-8", help="the file's encoding (default utf-8; a 4.9.x NameServer "
                   "writes it in its JVM's default charset)")

    p = action(kv_cmds, "export", "write the KV config as Apache's kvConfig.json (it can start from it)")
    p.add_argument("file", help="where to write it (- for standard output)")
    p.add_argument("--namespace", action="append", metavar="NS", help="only this namespace (repeatable; required "
                   "with rmq://, which cannot list namespaces)")
    p.add_argument("--force", action="store_true", help="overwrite FILE if it exists")

    p = action(kv_cmds, "copy", "copy namespaces from a running NameServer (Apache's or ours) in one step")
    p.add_argument("--from", dest="source", required=True, metavar="URL",
                   help="the NameServer to read: rmq://host:9876 (any NameServer), or http://host:8080 (ours)")
    p.add_argument("--namespace", action="append", metavar="NS", help="a namespace to copy (repeatable; required "
                   "with rmq://, which cannot list namespaces; default over http://: all)")
    p.add_argument("--from-token-file", metavar="PATH", help="token for --from, if it is ours with tokens on")
    _write_options(p)


def _write_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dry-run", action="store_true", help="show what would change, write nothing")
    p.add_argument("--replace", action="store_true", help="also delete the keys of each namespace written that "
                   "the source lacks (default: keep them)")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask before changing or removing keys already "
                   "set")


# ------------------------------------------------------------------ the file

def parse_kv_file(raw: bytes, name: str, encoding: str = "utf-8") -> Table:
    """kvConfig.json as Apache's NameServer writes it, checked: a malformed file is refused with the line and
    column, one holding anything the server cannot take with each entry named."""
    if not raw.strip():
        raise AdminError(EXIT_USAGE, f"{name}: the file is empty (Apache's NameServer writes "
                                     '{"configTable":{namespace:{key:value}}})')
    try:
        text = raw.decode(encoding)
    except LookupError:
        raise AdminError(EXIT_USAGE, f"--encoding {encoding!r}: no such encoding") from None
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise AdminError(EXIT_USAGE, f"{name}: line {line} column {column} (byte {exc.start}): not {encoding} "
                                     f"(0x{raw[exc.start]:02x}). A 4.9.x NameServer writes kvConfig.json in its "
                                     "JVM's default charset: give it with --encoding (e.g. GBK), or read the KV "
                                     "live with `kv copy --from rmq://HOST:9876`") from None
    duplicates: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for k, v in items:
            if k in seen:
                duplicates.append(k)
            seen[k] = v
        return seen

    text = text.removeprefix("\ufeff")
    try:
        doc = json.loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError as exc:
        why = ("the file ends before its JSON does: cut short?" if exc.pos >= len(text.rstrip())
               else "not the JSON Apache's NameServer writes")
        raise AdminError(EXIT_USAGE, f"{name}: line {exc.lineno} column {exc.colno}: {exc.msg} ({why})") from None
    if duplicates:
        raise AdminError(EXIT_USAGE, f"{name}: {', '.join(json.dumps(d, ensure_ascii=False) for d in duplicates)} "
                                     "appears twice in one object (which value counts is unclear): nothing was "
                                     "written")
    if not isinstance(doc, dict) or "configTable" not in doc:
        raise AdminError(EXIT_USAGE, f"{name}: no configTable: a kvConfig.json is "
                                     '{"configTable":{namespace:{key:value}}}')
    others = sorted(set(doc) - {"configTable"})
    if others:
        raise AdminError(EXIT_USAGE, f"{name}: unexpected field(s) {', '.join(map(repr, others))} beside "
                                     "configTable: is it a kvConfig.json?")
    return checked(doc["configTable"], name)


def checked(table: Any, source: str) -> Table:
    """`table` if the server can take every entry of it; else every entry it cannot take on stderr, and exit 2."""
    problems = kv_config_problems(table)
    if problems:
        for p in problems:
            where = " ".join(f"{k} {_shown(p[k])}" for k in ("namespace", "key") if k in p)
            print(f"  {where + ': ' if where else ''}{p['problem']}", file=sys.stderr)
        n = len(problems)
        raise AdminError(EXIT_USAGE, f"{source}: {n} entr{'y' if n == 1 else 'ies'} cannot be taken (listed "
                                     "above; docs/deviations.md, KV), nothing was written")
    return table


def kv_file_text(table: Table) -> str:
    """Apache's layout, compact as fastjson writes it; namespaces and keys sorted, non-ASCII as UTF-8."""
    return json.dumps({"configTable": table}, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def write_file(path: str, text: str, force: bool) -> None:
    """All or nothing: a temporary file beside `path`, renamed over it."""
    if path == "-":
        sys.stdout.write(text + "\n")
        return
    if os.path.exists(path) and not force:
        raise AdminError(EXIT_USAGE, f"{path} exists: pass --force to overwrite it")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise AdminError(EXIT_USAGE, f"cannot write {path}: no folder {folder}")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".kvConfig.", dir=folder)
    except OSError as exc:  # a folder it may not write in
        raise AdminError(EXIT_USAGE, f"cannot write {path}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as exc:  # a folder in the way, a full disk: nothing written
        os.unlink(tmp)
        raise AdminError(EXIT_USAGE, f"cannot write {path}: {exc.strerror}") from None
    except BaseException:
        os.unlink(tmp)
        raise


# ------------------------------------------------------------------ reading a NameServer

def read_namespaces(api: HttpApi | RemotingApi, namespaces: list[str] | None, where: str) -> Table:
    """The namespaces asked for (all of them: HTTP only, the native protocol cannot list namespaces); one asked for
    that the server lacks is an error (exit 1)."""
    if isinstance(api, HttpApi):
        table = api.kv_config(namespaces)["configTable"]
    else:
        if not namespaces:
            raise AdminError(EXIT_USAGE, f"{where} is the native door, which has no way to list KV namespaces: name "
                                         "them with --namespace NS (ORDER_TOPIC_CONFIG, ...)")
        table = {}
        for ns in namespaces:
            try:
                table[ns] = api.kv_list(ns)["table"]
            except AdminError as err:
                if err.exit_code != EXIT_NOT_FOUND:
                    raise
    missing = [ns for ns in namespaces or () if ns not in table]
    if missing:
        raise AdminError(EXIT_NOT_FOUND, f"{where} has no KV namespace {', '.join(map(_shown, missing))}: nothing "
                                         "was written", "QUERY_NOT_FOUND")
    return table


# ------------------------------------------------------------------ commands

def cmd_import(api: HttpApi | RemotingApi, args: argparse.Namespace, out: Any) -> int:
    if args.file == "-":
        raw, name = sys.stdin.buffer.read(), "standard input"
    else:
        try:
            with open(args.file, "rb") as fh:
                raw = fh.read()
        except OSError as exc:
            raise AdminError(EXIT_USAGE, f"{args.file}: {exc.strerror}") from None
        name = args.file
    table = parse_kv_file(raw, name, args.encoding)
    if args.namespace:
        missing = [ns for ns in args.namespace if ns not in table]
        if missing:
            raise AdminError(EXIT_NOT_FOUND, f"{name} has no namespace {', '.join(map(_shown, missing))}: nothing "
                                             "was written")
        table = {ns: table[ns] for ns in args.namespace}
    return write_table(api, args, out, table, name)


def cmd_export(api: HttpApi | RemotingApi, args: argparse.Namespace, out: Any) -> int:
    where = _where(api)
    table = read_namespaces(api, args.namespace, where)
    table = {ns: dict(sorted(kv.items())) for ns, kv in sorted(table.items())}
    write_file(args.file, kv_file_text(table), args.force)
    keys = sum(len(kv) for kv in table.values())
    if args.file != "-":
        out.done({"file": args.file, "namespaces": {ns: len(kv) for ns, kv in table.items()}},
                 f"wrote {args.file}: {len(table)} namespace(s), {keys} key(s) from {where} "
                 "(Apache's kvConfig.json layout)")
    return EXIT_OK


def cmd_copy(api: HttpApi | RemotingApi, args: argparse.Namespace, out: Any) -> int:
    token, access_key = read_token(argparse.Namespace(token_file=args.from_token_file, access_key=None), {}) \
        if args.from_token_file else (None, "admin")
    source = connect(args.source, token, timeout=args.timeout)
    if isinstance(source, RemotingApi):
        source.access_key = access_key
    try:
        table = checked(read_namespaces(source, args.namespace, args.source), args.source)
    finally:
        if isinstance(source, RemotingApi):
            source.close()
    return write_table(api, args, out, table, args.source)


def write_table(api: HttpApi | RemotingApi, args: argparse.Namespace, out: Any, table: Table, source: str) -> int:
    """A dry run first, shown; then, unless --dry-run or nothing would change, the write itself (asking first
    when it changes or removes keys already set), its own answer shown: what the script changed."""
    from service.admin.render import show

    if not isinstance(api, HttpApi):
        raise AdminError(EXIT_USAGE, "writing a KV config in one step needs the HTTP door (--server http://…): the "
                                     "native protocol writes one key at a time (PUT_KV_CONFIG)")
    target = _where(api)
    plan = api.kv_import(table, replace=args.replace, dry_run=True)
    totals = plan["totals"]
    if args.dry_run or not _changes(totals):
        plan["source"], plan["server"] = source, target
        out.data(plan, lambda: plan_text(plan, source, target, asked_dry=args.dry_run))
        return EXIT_OK
    if totals["changed"] or totals["removed"]:
        if not out.json:
            show(out.console, plan_text(plan, source, target))
        confirm(args, f"Change {totals['changed']} and remove {totals['removed']} key(s) already set on {target}?")
    res = api.kv_import(table, replace=args.replace, dry_run=False)
    res["source"], res["server"] = source, target
    out.data(res, lambda: plan_text(res, source, target))
    return EXIT_OK


def _changes(totals: dict[str, int]) -> int:
    return totals["namespacesCreated"] + totals["added"] + totals["changed"] + totals["removed"]


def _where(api: HttpApi | RemotingApi) -> str:
    return api.base if isinstance(api, HttpApi) else f"rmq://{api.host}:{api.port}"


# ------------------------------------------------------------------ showing a plan

def _shown(text: str) -> str:
    """A name as typed, quoted (JSON style) when it would not read back as itself: empty, edge spaces, control or
    invisible characters."""
    if text and text == text.strip() and not any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")
                                                 for c in text):
        return text
    return json.dumps(text, ensure_ascii=False)


def _value(text: str) -> str:
    v = _shown(text) if text else '""'
    return v if len(v) <= SHOWN_VALUE else v[:SHOWN_VALUE - 1] + "…"


def plan_text(res: dict[str, Any], source: str, target: str, asked_dry: bool = False) -> str:
    """One line per key added (+), changed (~) or removed (-), counts of the unchanged and kept, per namespace;
    the totals; and what happened: nothing written (dry run), written in one step, or nothing to change."""
    t = res["totals"]
    lines = [f"KV {'dry run' if asked_dry else 'import'}: {source} -> {target}"]
    for n in res["namespaces"]:
        size = len(n["added"]) + len(n["changed"]) + len(n["unchanged"]) + len(n["removed"]) + len(n["kept"])
        notes = [w for w, on in (("new namespace", n["created"]), ("empty", not size)) if on]
        lines.append(_shown(n["namespace"]) + (f" ({', '.join(notes)})" if notes else ""))
        lines += [f"  + {_shown(k)} = {_value(v)}" for k, v in n["added"].items()]
        lines += [f"  ~ {_shown(k)}: {_value(c['before'])} -> {_value(c['after'])}" for k, c in n["changed"].items()]
        lines += [f"  - {_shown(k)} (was {_value(v)})" for k, v in n["removed"].items()]
        if n["unchanged"]:
            lines.append(f"  = {len(n['unchanged'])} unchanged")
        if n["kept"]:
            lines.append(f"  kept: {len(n['kept'])} key(s) not in the source ({', '.join(map(_shown, n['kept'][:5]))}"
                         f"{', …' if len(n['kept']) > 5 else ''}; --replace deletes them)")
    lines.append(f"{len(res['namespaces'])} namespace(s), {t['namespacesCreated']} new; keys: {t['added']} added, "
                 f"{t['changed']} changed, {t['removed']} removed, {t['unchanged']} unchanged, {t['kept']} kept")
    lines.append("nothing to change" if not _changes(t) else "dry run: nothing written" if asked_dry
                 else "written in one step")
    return "\n".join(lines)
