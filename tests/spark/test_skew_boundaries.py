"""The skew job reaches Redis only through the store (service/store/snapshot_reader.py): nothing in
service/skew builds a key, imports redis-py or touches the store's Keys or client."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import service.skew

SKEW = Path(service.skew.__file__).parent
# What a key of the schema looks like (lua/README.md): the hash tag `{prefix}:` or one of the kinds.
KEYISH = re.compile(r"^\{[\w.-]+\}|\}:|:snaps?\b|\bsnap:|report:skew|\blease:[\w{]")


def _strings(tree: ast.AST) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append((node.lineno, node.value))
        elif isinstance(node, ast.JoinedStr):  # f"{{{prefix}}}:snaps" -> "{", "}:snaps"
            out += [(node.lineno, v.value) for v in node.values if isinstance(v, ast.Constant)]
    return out


def violations(source: str, name: str) -> list[str]:
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"{name}:{node.lineno}: import {a.name}" for a in node.names if a.name.split(".")[0] == "redis"]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if mod.split(".")[0] == "redis" or mod == "service.store.keys":
                found.append(f"{name}:{node.lineno}: from {mod} import ...")
            if any(a.name in ("Keys", "redis") for a in node.names):
                found.append(f"{name}:{node.lineno}: imports {[a.name for a in node.names]}")
        elif isinstance(node, ast.Attribute) and node.attr in ("keys", "client", "redis", "_client"):
            parent_calls = False  # dict.keys() is fine; `reader.keys.x` / `reader.client.get` are not
            for outer in ast.walk(tree):
                if isinstance(outer, ast.Call) and outer.func is node:
                    parent_calls = True
                    break
            if not (node.attr == "keys" and parent_calls):
                found.append(f"{name}:{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Name) and node.id in ("Keys", "redis"):
            found.append(f"{name}:{node.lineno}: {node.id}")
    for lineno, text in _strings(tree):
        if KEYISH.search(text):
            found.append(f"{name}:{lineno}: key-like literal {text[:40]!r}")
    return found


def test_the_checker_catches_what_the_old_reader_did():
    old = '''
import redis
from service.store.keys import Keys
def index_key(prefix):
    return f"{{{prefix}}}:snaps"
def part(prefix, sid, i):
    return "{" + prefix + "}:snap:" + sid
def f(reader):
    return reader.keys.snapshots, reader.client.get("x"), {}.keys()
'''
    found = violations(old, "old.py")
    assert any("import redis" in v for v in found)
    assert any("service.store.keys" in v for v in found)
    assert sum("key-like literal" in v for v in found) >= 2
    assert any(".keys" in v for v in found) and any(".client" in v for v in found)
    assert not any(v.endswith(":9: .keys") and "{}" in v for v in found)


def test_service_skew_builds_no_key_and_does_not_import_redis():
    files = sorted(SKEW.glob("*.py"))
    assert {p.name for p in files} >= {"job.py", "transforms.py", "report.py"}
    found = [v for p in files for v in violations(p.read_text(), p.name)]
    assert found == []


def test_no_module_shadows_the_standard_library():
    """service/skew/ is sys.path[0] when spark-submit runs service/skew/job.py: no name may hide a stdlib
    module (io.py did)."""
    import sys

    names = {p.stem for p in SKEW.glob("*.py")} - {"__init__"}
    assert names & set(sys.stdlib_module_names) == set()
