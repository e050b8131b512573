"""The layering the README's Architecture picture shows, enforced on the imports of every module.

Doors (http, remoting, admin) call the core; the core holds the rules and calls the store; the store is the only
code that imports redis. The core imports no web framework and no wire format, so a new door is a thin file.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SERVICE = Path(__file__).resolve().parents[2] / "service"
WIRE = {"aiohttp", "orjson", "service.remoting", "service.http", "json"}  # frameworks and wire formats


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


def modules(package: str) -> list[Path]:
    root = SERVICE / package if package else SERVICE
    return sorted(root.glob("*.py")) if package == "" else sorted(root.rglob("*.py"))


def touches(names: set[str], prefixes: set[str]) -> set[str]:
    return {n for n in names if any(n == p or n.startswith(p + ".") for p in prefixes)}


@pytest.mark.parametrize("path", modules("core"), ids=lambda p: p.name)
def test_the_core_imports_no_framework_no_wire_format_no_redis(path):
    bad = touches(imports_of(path), WIRE | {"redis", "fakeredis"})
    assert not bad, f"service/core/{path.name} imports {bad}"


@pytest.mark.parametrize("path", [p for d in ("http", "remoting", "admin") for p in modules(d)],
                         ids=lambda p: str(p.relative_to(SERVICE)))
def test_doors_reach_redis_only_through_the_core(path):
    bad = touches(imports_of(path), {"redis", "fakeredis", "service.store"})
    assert not bad, f"{path.relative_to(SERVICE)} imports {bad}: a door talks to the core, not to the store"


def test_only_the_store_imports_redis():
    for path in SERVICE.rglob("*.py"):
        rel = path.relative_to(SERVICE)
        if rel.parts[0] == "store":
            continue
        bad = touches(imports_of(path), {"redis", "fakeredis"})
        assert not bad, f"service/{rel} imports {bad}: only service/store/ talks to Redis"


@pytest.mark.parametrize("name", [f"models/{p.name}" for p in modules("models")] + ["errors.py", "config.py"])
def test_data_and_rules_modules_import_nothing_of_the_layers_above(name):
    bad = touches(imports_of(SERVICE / name), {"service.core", "service.store", "service.http", "service.remoting",
                                               "redis", "aiohttp"})
    assert not bad, f"service/{name} imports {bad}"


def test_the_store_knows_nothing_of_the_core_or_the_doors():
    for path in modules("store"):
        bad = touches(imports_of(path), {"service.core", "service.http", "service.remoting", "aiohttp"})
        assert not bad, f"service/store/{path.name} imports {bad}"


def module_name(path: Path) -> str:
    parts = path.relative_to(SERVICE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_the_skew_package_never_imports_the_cli():
    """The CLI imports the skew job; shared command-line plumbing lives below both (service/cmdline.py)."""
    for path in modules("skew"):
        bad = touches(imports_of(path), {"service.cli", "service.admin", "service.server"})
        assert not bad, f"service/skew/{path.name} imports {bad}"


def test_no_import_cycles_between_modules():
    """Imports anywhere in a module (lazy ones inside functions too) form no cycle; a package's __init__, which
    Python imports before any of its modules, is left out."""
    paths = {module_name(p): p for p in SERVICE.rglob("*.py") if p.name != "__init__.py"}

    def imported(path: Path) -> set[str]:  # `from service.skew import job` imports the module service.skew.job
        out = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                out |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                out |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        return out

    graph = {name: {m for m in imported(path) if m in paths and m != name} for name, path in paths.items()}
    done: set[str] = set()

    def visit(name: str, trail: list[str]) -> None:
        if name in trail:
            raise AssertionError("import cycle: " + " -> ".join([*trail[trail.index(name):], name]))
        if name in done:
            return
        for nxt in sorted(graph[name]):
            visit(nxt, [*trail, name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])
