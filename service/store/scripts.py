"""Load `lua/*.lua` (package data), resolve `--- @include "includes/x"` lines, check every script's contract.

A script is named `<operation>-<numkeys>.lua` (BullMQ style: the number is the script's own key count). Its
header lists KEYS (one `<index> <role> <TYPE> <what>` line each), ARGV, Returns and Side effects, and its body
names the same roles once: `local K = { role = KEYS[1], ... }`. `load_all()` checks that the name, the header,
the K table and every `K.<role>` the script (with its includes) uses all agree, so a file name always tells
what a script touches.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

from redis.exceptions import NoScriptError

_INCLUDE = re.compile(r'^--- @include "([\w/]+)"\s*$', re.M)
_NAME = re.compile(r"^(?P<op>[a-zA-Z]+)-(?P<nkeys>\d+)\.lua$")
_HEADER_KEY = re.compile(r"^\s{4}(\d+)\s+([a-zA-Z]+)\s+(SET|ZSET|HASH|STRING)\b", re.M)
_K_TABLE = re.compile(r"^local K = \{ (.*) \}$", re.M)
_K_ENTRY = re.compile(r"^([a-zA-Z]+) = KEYS\[(\d+)\]$")
_K_USE = re.compile(r"\bK\.([a-zA-Z]+)")
HEADER_WORDS = ("KEYS:", "ARGV:", "Returns:", "Side effects:")


class ScriptError(RuntimeError):
    """A Lua file is malformed (bad name, missing header, unknown include, keys that disagree)."""


@dataclass(frozen=True)
class LuaScript:
    name: str  # operation, e.g. "registerBroker"
    key_roles: tuple[str, ...]  # KEYS[1..n] by role, e.g. ("live", "deadlines")
    source: str  # with includes resolved

    @property
    def num_keys(self) -> int:
        return len(self.key_roles)


async def call_loaded(redis: Any, shas: dict[str, str], script: LuaScript,
                      call: Callable[[str], Awaitable[Any]]) -> Any:
    """`call(sha)` with the script's SHA (loaded on first use); after NOSCRIPT (a Redis restart, a failover, SCRIPT
    FLUSH) the script is loaded again and called once more."""
    sha = shas.get(script.name)
    if sha is None:
        sha = shas[script.name] = await redis.script_load(script.source)
    try:
        return await call(sha)
    except NoScriptError:
        sha = shas[script.name] = await redis.script_load(script.source)
        return await call(sha)


def _root() -> Traversable:
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


def check_header(filename: str, source: str) -> tuple[str, ...]:
    """Check one script's contract; return its key roles in KEYS order."""
    m = _NAME.match(filename)
    if not m:
        raise ScriptError(f"{filename}: name must be <operation>-<numkeys>.lua")
    header = source.split("]]", 1)[0] if source.startswith("--[[") else ""
    missing = [w for w in HEADER_WORDS if w not in header]
    if missing:
        raise ScriptError(f"{filename}: header lacks {', '.join(missing)}")
    keys_block = header.split("KEYS:", 1)[1].split("ARGV:", 1)[0]
    declared = [(int(i), role) for i, role, _ in _HEADER_KEY.findall(keys_block)]
    roles = tuple(role for _, role in declared)
    if [i for i, _ in declared] != list(range(1, len(declared) + 1)):
        raise ScriptError(f"{filename}: header KEYS must be numbered 1..n, one per line")
    if len(roles) != int(m.group("nkeys")):
        raise ScriptError(f"{filename}: header declares {len(roles)} keys but the name says {m.group('nkeys')}")
    table = _K_TABLE.search(source)
    if table is None:
        raise ScriptError(f"{filename}: no `local K = {{ role = KEYS[i], ... }}` line")
    entries = [_K_ENTRY.match(e.strip()) for e in table.group(1).split(",")]
    if any(e is None for e in entries):
        raise ScriptError(f"{filename}: the K table must be `role = KEYS[i]` entries")
    k_roles = tuple(e.group(1) for e in entries if e)
    if k_roles != roles or [int(e.group(2)) for e in entries if e] != list(range(1, len(roles) + 1)):
        raise ScriptError(f"{filename}: K table {k_roles} disagrees with the header KEYS {roles}")
    used = set(_K_USE.findall(resolve_includes(source)))
    if not used <= set(roles):
        raise ScriptError(f"{filename}: uses K.{sorted(used - set(roles))} without receiving them in KEYS")
    body = _K_TABLE.sub("", source).replace("key_base(KEYS[1])", "")
    if re.search(r"KEYS\[(\d+)\]", body.split("]]", 1)[-1]):
        raise ScriptError(f"{filename}: use K.<role>, not KEYS[i], outside the K table")
    return roles


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
        roles = check_header(entry.name, source)
        out[m.group("op")] = LuaScript(m.group("op"), roles, resolve_includes(source))
    return out
