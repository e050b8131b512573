"""Load `lua/*.lua` (package data), resolve `--- @include "includes/x"` lines, check headers and key counts.

A script is named `<operation>-<numkeys>.lua` (BullMQ style); its header must list KEYS, ARGV, Returns and
Side effects. `load_all()` returns one `LuaScript` per operation, ready for redis-py's `register_script`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

_INCLUDE = re.compile(r'^--- @include "([\w/]+)"\s*$', re.M)
_NAME = re.compile(r"^(?P<op>[a-zA-Z]+)-(?P<nkeys>\d+)\.lua$")
HEADER_WORDS = ("KEYS:", "ARGV:", "Returns:", "Side effects:")


class ScriptError(RuntimeError):
    """A Lua file is malformed (bad name, missing header, unknown include)."""


@dataclass(frozen=True)
class LuaScript:
    name: str  # operation, e.g. "registerBroker"
    num_keys: int
    source: str  # with includes resolved


def _root():
    return resources.files("service.lua")


def _read(rel: str) -> str:
    path = _root().joinpath(rel)
    if not path.is_file():
        raise ScriptError(f"missing Lua file {rel}")
    return path.read_text(encoding="utf-8")


def resolve_includes(source: str, seen: tuple[str, ...] = ()) -> str:
    def repl(m: re.Match[str]) -> str:
        inc = m.group(1)
        if inc in seen:
            raise ScriptError(f"include cycle through {inc}")
        return resolve_includes(_read(inc + ".lua"), seen + (inc,))

    return _INCLUDE.sub(repl, source)


def check_header(filename: str, source: str) -> None:
    header = source.split("]]", 1)[0] if source.startswith("--[[") else ""
    missing = [w for w in HEADER_WORDS if w not in header]
    if missing:
        raise ScriptError(f"{filename}: header lacks {', '.join(missing)}")
    m = _NAME.match(filename)
    if not m:
        raise ScriptError(f"{filename}: name must be <operation>-<numkeys>.lua")
    used = {int(k) for k in re.findall(r"KEYS\[(\d+)\]", resolve_includes(source))}
    if used and max(used) > int(m.group("nkeys")):
        raise ScriptError(f"{filename}: uses KEYS[{max(used)}] but its name declares {m.group('nkeys')}")


@cache
def load_all() -> dict[str, LuaScript]:
    out: dict[str, LuaScript] = {}
    for entry in sorted(_root().iterdir(), key=lambda p: p.name):
        if not entry.name.endswith(".lua"):
            continue
        m = _NAME.match(entry.name)
        if not m:
            raise ScriptError(f"{entry.name}: name must be <operation>-<numkeys>.lua")
        source = entry.read_text(encoding="utf-8")
        check_header(entry.name, source)
        out[m.group("op")] = LuaScript(m.group("op"), int(m.group("nkeys")), resolve_includes(source))
    return out
