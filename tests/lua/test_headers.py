"""Static checks of lua/: headers, key counts, key derivations that agree with service/store/keys.py, house rules.

- every script has the header block (KEYS:, ARGV:, Returns:, Side effects:); its file name's key count, its
  header KEYS, its `local K` table and the keys RouteStore really passes (recorded on the wire) all agree;
- every `base .. "x:"` derivation in Lua is a builder of service/keys.py (statically, and by checking that the
  keys the scripts actually write are the ones the Python builders name);
- no `cmsgpack`, no blocking `KEYS` command, no literal key names, no globals (a small Lua scanner below).
"""

from __future__ import annotations

import inspect
import re
from importlib import resources
from pathlib import Path

import fakeredis
import pytest

from service.models import RegisterBroker, TopicConfig
from service.store import RouteStore
from service.store import chunked as chunked_module
from service.store import kv_tables as kv_tables_module
from service.store import members as members_module
from service.store import routes as store_module
from service.store import sweeps as sweeps_module
from service.store.keys import ORDER_TOPIC_CONFIG, Keys
from service.store.scripts import HEADER_WORDS, ScriptError, check_header, load_all, resolve_includes

LUA = resources.files("service.lua")
SCRIPT_FILES = sorted(p.name for p in LUA.iterdir() if p.name.endswith(".lua"))
INCLUDE_FILES = sorted("includes/" + p.name for p in LUA.joinpath("includes").iterdir()
                       if p.name.endswith(".lua"))
ALL_FILES = SCRIPT_FILES + INCLUDE_FILES


def source(rel: str) -> str:
    return LUA.joinpath(rel).read_text(encoding="utf-8")


def test_there_are_scripts():
    assert len(SCRIPT_FILES) >= 15 and "registerBroker-8.lua" in SCRIPT_FILES
    assert {"includes/common.lua", "includes/brokers.lua"} <= set(INCLUDE_FILES)


# ---------------------------------------------------------------- headers and key counts

@pytest.mark.parametrize("name", SCRIPT_FILES)
def test_header_block(name):
    src = source(name)
    check_header(name, src)  # raises ScriptError
    header = src.split("]]", 1)[0]
    assert src.startswith("--[[")
    for word in HEADER_WORDS:
        assert word in header, f"{name}: no {word}"
    # the summary line says what the script does, before KEYS:
    summary = header[4:header.index("KEYS:")].strip()
    assert len(summary) > 20, f"{name}: header has no summary"


@pytest.mark.parametrize("name", SCRIPT_FILES)
def test_key_count_agrees_with_name(name):
    m = re.fullmatch(r"([a-zA-Z]+)-(\d+)\.lua", name)
    assert m, name
    nkeys = int(m.group(2))
    resolved = resolve_includes(source(name))
    used = {int(k) for k in re.findall(r"KEYS\[(\d+)\]", resolved)}
    assert used == set(range(1, nkeys + 1)), f"{name}: uses KEYS{sorted(used)}, named for {nkeys}"
    script = load_all()[m.group(1)]
    assert script.num_keys == nkeys
    assert "@include" not in script.source


def test_header_documents_every_argv():
    """An ARGV index used in the body appears in the header's ARGV section (or the header says 'pairs')."""
    for name in SCRIPT_FILES:
        src = source(name)
        header, body = src.split("]]", 1)
        argv_doc = header[header.index("ARGV:"):header.index("Returns:")]
        used = {int(i) for i in re.findall(r"ARGV\[(\d+)\]", body)}
        documented = {int(i) for i in re.findall(r"(?<![\w.])(\d+) ", argv_doc)}
        if "pairs" in argv_doc or "1.." in argv_doc:
            continue
        assert used <= documented, f"{name}: ARGV {sorted(used - documented)} not in the header"


def test_every_script_is_used_by_the_store_and_vice_versa():
    sources = "".join(inspect.getsource(m) for m in (store_module, kv_tables_module, chunked_module, sweeps_module,
                                                         members_module))
    called = set(re.findall(r'_(?:run|call)\(\s*"(\w+)"', sources))
    assert called == set(load_all()), (called ^ set(load_all()))


def test_load_all_covers_every_file():
    assert sorted(f"{s.name}-{s.num_keys}.lua" for s in load_all().values()) == SCRIPT_FILES


GOOD = '''--[[
  Do a thing.

  KEYS:
    1 things       SET    {P}:things, all things
  ARGV:
    1 x
  Returns:
    {1}
  Side effects: none.
]]
local rcall = redis.call
local K = { things = KEYS[1] }
return rcall("SCARD", K.things)
'''


def test_check_header_accepts_a_good_script():
    check_header("thing-1.lua", GOOD)


@pytest.mark.parametrize("filename, src, why", [
    ("thing-1.lua", GOOD.replace("  Side effects: none.\n", ""), "Side effects"),
    ("thing-1.lua", GOOD.replace("KEYS:", "Keys"), "KEYS:"),
    ("thing-1.lua", GOOD.replace("  Returns:\n    {1}\n", ""), "Returns:"),
    ("thing-1.lua", GOOD.replace("ARGV:", "args"), "ARGV:"),
    ("thing-1.lua", 'local rcall = redis.call\nreturn rcall("SCARD", KEYS[1])\n', "header"),
    ("thing-1.lua", "-- KEYS: ARGV: Returns: Side effects:\nreturn 1\n", "header"),  # not a --[[ block
    ("thing.lua", GOOD, "name"),
    ("Thing_1.lua", GOOD, "name"),
    ("thing-0.lua", GOOD, "the name says 0"),
    ("thing-2.lua", GOOD, "the name says 2"),
    ("thing-1.lua", GOOD.replace("local K = { things = KEYS[1] }\n", ""), "no `local K"),
    ("thing-1.lua", GOOD.replace("things = KEYS[1]", "stuff = KEYS[1]"), "disagrees with the header"),
    ("thing-1.lua", GOOD.replace("K.things)", "K.things, K.other)"), "without receiving them"),
    ("thing-1.lua", GOOD.replace('"SCARD", K.things', '"SCARD", KEYS[1]'), "not KEYS[i]"),
])
def test_check_header_rejects_a_bad_script(filename, src, why):
    with pytest.raises(ScriptError, match=re.escape(why) if why != "header" else "header lacks"):
        check_header(filename, src)


def test_unknown_include_is_an_error():
    with pytest.raises(ScriptError, match="missing Lua file"):
        resolve_includes('--- @include "includes/no_such_file"\n')


# ---------------------------------------------------------------- key derivations vs service/keys.py

DERIVED = re.compile(r'base\s*\.\.\s*"([^"]*)"')


def builder_outputs() -> tuple[set[str], dict[str, str]]:
    """(suffixes of the fixed keys, {prefix of a per-entity key: builder name}) of Keys("p")."""
    k = Keys("p")
    fixed, per_entity = set(), {}
    for name, attr in vars(Keys).items():
        if name.startswith("_") or name == "base":
            continue
        if isinstance(attr, property):
            value = getattr(k, name)
            assert value.startswith(k.base), name
            fixed.add(value[len(k.base):])
        elif callable(attr):
            nargs = len(inspect.signature(attr).parameters) - 1
            value = getattr(k, name)(*[f"ARG{i}" for i in range(nargs)])
            assert value.startswith(k.base), name
            per_entity[value[len(k.base):].split("ARG0", 1)[0]] = name
    return fixed, per_entity


def test_lua_key_derivations_match_keys_py():
    fixed, per_entity = builder_outputs()
    assert {"t:", "b:", "ba:", "bt:", "c:", "l:", "kv:"} <= set(per_entity)  # sanity of the probe
    literals = {lit for rel in ALL_FILES for lit in DERIVED.findall(source(rel))}
    assert literals, "no derivations found: the pattern is stale"
    k = Keys("p")
    constants = {k.kv(ORDER_TOPIC_CONFIG)[len(k.base):]}
    for lit in sorted(literals):
        ok = lit in fixed or lit in per_entity or lit in constants
        assert ok, f'lua derives base .. "{lit}" but service/keys.py has no such builder'


def test_lua_live_member_matches_keys_py():
    """Lua joins (cluster, addr) with keys.live_member's separator, and splits on it in the expiry scan."""
    k = Keys("p")
    sep = k.live_info("C", "A")[len(k.base + "l:C"):-1]
    joins = [m for rel in ALL_FILES
             for m in re.findall(r'(?:cluster|meta\[1\]|ARGV\[1\])\s*\.\.\s*"([^"]*)"\s*\.\.', source(rel))]
    assert len(joins) >= 6 and set(joins) == {sep}
    assert "^([^" + sep + "]*)" + sep in source("expireBrokers-7.lua")


class RecordingRedis(fakeredis.FakeAsyncRedis):
    """fakeredis that records every EVALSHA's key list (the calls still run)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.calls: list[tuple[str, list[str]]] = []

    async def execute_command(self, *args, **options):
        if args and args[0] == "EVALSHA":
            n = int(args[2])
            self.calls.append((args[1], list(args[3:3 + n])))
        return await super().execute_command(*args, **options)


async def test_the_store_passes_each_script_exactly_its_declared_keys():
    """Run every store operation; each EVALSHA carries the keys its script's header declares, in order."""
    import hashlib

    from service.models import BrokerIdentity, QueueData

    r = RecordingRedis(decode_responses=True)
    s = RouteStore(r, prefix="p")
    k = s.keys
    await s.load_scripts()
    await s.register_broker(RegisterBroker("C1", "B1", 0, "10.0.0.1:1", "", {"T1": TopicConfig()}), now=1)
    await s.heartbeat("C1", "10.0.0.1:1")
    await s.touch_live([("C1", "10.0.0.1:1", 5)])
    await s.get_route("T1")
    await s.cluster_info()  # in steps (clusterInfoStep)
    await s.cluster_info_at()  # whole (clusterInfo)
    await s.topic_list("all")
    await s.cluster_topics("C1")
    await s.register_topic("T2", [QueueData("B1", 1, 1, 6, 0)])
    await s.delete_topic("T2")
    await s.wipe_write_perm("B1")
    await s.member_group("B1")
    await s.kv_put("NS", "k", "v")
    await s.kv_get("NS", "k")
    await s.kv_list("NS")
    await s.kv_delete("NS", "k")
    await s.kv_import({"NS": {"k": "v"}}, replace=True, dry_run=False)
    await s.kv_export()
    await s.put_runtime_config({"a": "b"})
    _ = [rows async for rows in s.snapshot_pages()]
    await s.chunked_registration(RegisterBroker("C1", "B3", 0, "10.0.0.3:1", "", {"T4": TopicConfig(),
                                                                                  "T5": TopicConfig()}),
                                 1, delete_topic_with_broker_registration=True, cross_cluster_topics=["T4"]).run()
    await s.register_broker(RegisterBroker("C1", "B2", 0, "10.0.0.2:1", "", {"T3": TopicConfig()}),
                            connection="conn-1", now=2)
    assert await s.drop_connection("conn-1", [("C1", "10.0.0.2:1")]) == [("C1", "10.0.0.2:1", "B2", 1)]
    await s.unregister_broker(BrokerIdentity("C1", "B1", 0, "10.0.0.1:1"))
    await s.expire(now=10**13)
    await s.finish_sweeps()
    members = members_module.MemberStore(s)
    await members.announce(members_module.member("10.0.0.9:9876", "w1"), 15_000)
    await members.live()
    by_sha = {hashlib.sha1(sc.source.encode()).hexdigest(): sc for sc in load_all().values()}
    role_key = {"topics": k.topics, "brokers": k.brokers, "clusters": k.clusters, "live": k.live,
                "deadlines": k.deadlines, "filters": k.filter_servers, "ver": k.version, "kvns": k.kv_namespaces,
                "config": k.runtime_config, "sweeps": k.sweeps, "members": k.members}
    entity = {("getRoutes", "topic"): k.topic("T1"), ("registerTopic", "topic"): k.topic("T2"),
              ("deleteTopic", "topic"): k.topic("T2"), ("writePerm", "brokerTopics"): k.broker_topics("B1"),
              ("memberGroup", "brokerAddrs"): k.broker_addrs("B1")}
    seen = set()
    for sha, keys in r.calls:
        script = by_sha[sha]
        seen.add(script.name)
        assert len(keys) == script.num_keys, script.name
        for role, key in zip(script.key_roles, keys, strict=True):
            want = role_key.get(role) or entity.get((script.name, role)) or (k.kv("NS") if role == "kv" else None)
            assert key == want, (script.name, role, key)
    assert seen == set(load_all())
    await r.aclose()


async def test_key_base_in_lua_matches_keys_py():
    r = fakeredis.FakeAsyncRedis(decode_responses=True)
    script = "local rcall = redis.call\n" + resolve_includes('--- @include "includes/common"\n') + \
        "\nreturn key_base(KEYS[1])\n"
    for prefix in ("nsrv", "a.b-c", "x"):
        k = Keys(prefix)
        assert await r.eval(script, 1, k.topics) == k.base
    await r.aclose()


async def test_scripts_write_the_keys_keys_py_names():
    """End to end: after a register, a KV put and a config put, the keys Python builds are the ones Lua wrote,
    and there is no other key."""
    r = fakeredis.FakeAsyncRedis(decode_responses=True)
    s = RouteStore(r, prefix="kp")
    k = s.keys
    await s.register_broker(RegisterBroker("C1", "B1", 0, "10.0.0.1:10911", "10.0.0.1:10912",
                                           {"T1": TopicConfig()}, filter_server_list=["10.0.0.1:1"]), now=1,
                            digest="d1")
    await s.kv_put(ORDER_TOPIC_CONFIG, "T1", "B1:8")
    await s.kv_import({"NS2": {"k": "v"}, "NS3": {}}, replace=False, dry_run=False)
    await s.put_runtime_config({"x": "y"})
    expected = {k.topics, k.brokers, k.clusters, k.live, k.deadlines, k.filter_servers, k.version,
                k.kv_namespaces, k.runtime_config, k.topic("T1"), k.broker_data("B1"), k.broker_addrs("B1"),
                k.broker_topics("B1"), k.cluster("C1"), k.live_info("C1", "10.0.0.1:10911"),
                k.kv(ORDER_TOPIC_CONFIG), k.kv("NS2"), k.topic_gens, k.registration("d1"), k.cluster_info_version,
                k.topic_list_version, k.cluster_info_log, k.broker_lines}
    assert set(await r.keys("*")) == expected
    await r.aclose()


# ---------------------------------------------------------------- house rules

def test_no_cmsgpack_and_no_keys_command():
    keys_cmd = re.compile(r"""(?:rcall|redis\.p?call)\(\s*["']keys["']""", re.I)
    for rel in ALL_FILES:
        code = strip_comments(source(rel))
        assert "cmsgpack" not in code, rel
        assert not keys_cmd.search(code), f"{rel}: the blocking KEYS command"
        assert "redis.call" not in code.replace("local rcall = redis.call", ""), f"{rel}: use rcall"


def test_no_literal_key_names():
    """A key argument is a KEYS entry, a K.* role or derived from `base`: never a bare string literal."""
    literal_key = re.compile(r'rcall\(\s*"[A-Z]+"\s*,\s*"')
    for rel in ALL_FILES:
        assert not literal_key.search(strip_comments(source(rel))), rel


@pytest.mark.parametrize("name", SCRIPT_FILES)
def test_scripts_use_no_globals(name):
    problems = undeclared_names(load_all()[name.split("-")[0]].source)
    assert problems == [], f"{name}: globals {problems}"


def test_includes_define_locals_only():
    for rel in INCLUDE_FILES:
        for line in strip_comments(source(rel)).splitlines():
            assert not re.match(r"^function\b", line), f"{rel}: global function: {line}"


@pytest.mark.parametrize("src, bad", [
    ("x = 1\n", ["x"]),
    ("local x = 1\nx = 2\nreturn x\n", []),
    ("function helper() return 1 end\n", ["helper"]),
    ("local function helper(a, b) return a + b end\nreturn helper(1, 2)\n", []),
    ("local t = { seen = {}, n = 0 }\nt.n = t.n + 1\nreturn t.seen\n", []),
    ("local s = 'a' .. undefined_thing\n", ["undefined_thing"]),
    ("for k, v in pairs(ARGV) do local y = k .. v end\n", []),
    ("for i = 1, #KEYS do count = i end\n", ["count"]),
    ("local a, b = 1, 2\nc, a = 3, 4\n", ["c"]),
    ("tonumber = nil\n", ["tonumber"]),
    ("local rcall = redis.call\nrcall(\"GET\", KEYS[1]) -- a comment naming foo\n", []),
    ("local s = \"quoted bar baz\"\n", []),
    ("--[[ block comment with global_word = 1 ]]\nlocal a = 1\n", []),
])
def test_global_scanner(src, bad):
    assert undeclared_names(src) == bad


# A small Lua scanner, enough for this code base: strings and comments removed, then every identifier must be
# a local declared somewhere (local, local function, parameters, for variables) or a sandbox builtin, and no
# builtin may be assigned. Scope-insensitive on purpose: it errs on the side of accepting.

BUILTINS = {"redis", "KEYS", "ARGV", "string", "table", "math", "tonumber", "tostring", "ipairs", "pairs",
            "unpack", "type", "next", "select", "error", "pcall", "assert", "bit", "cjson", "struct", "_G"}
LUA_KEYWORDS = {"and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if", "in",
                "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while"}
TOKEN = re.compile(r"""
    (?P<lcomment>--\[(?P<eq1>=*)\[.*?\](?P=eq1)\])
  | (?P<comment>--[^\n]*)
  | (?P<lstring>\[(?P<eq2>=*)\[.*?\](?P=eq2)\])
  | (?P<string>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
  | (?P<number>0[xX][0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)
  | (?P<name>[A-Za-z_]\w*)
  | (?P<op>\.\.\.|\.\.|==|~=|<=|>=|[-+*/%^#<>=(){}\[\];:,.])
  | (?P<ws>\s+)
""", re.S | re.X)


def tokens(src: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(src):
        m = TOKEN.match(src, pos)
        if m is None:
            raise ValueError(f"cannot scan Lua at {src[pos:pos + 20]!r}")
        kind = m.lastgroup
        if kind in ("eq1", "eq2"):
            kind = "lcomment" if m.group("lcomment") else "lstring"
        if kind not in ("ws", "comment", "lcomment"):
            out.append((kind, m.group()))
        pos = m.end()
    return out


def strip_comments(src: str) -> str:
    return re.sub(r"--\[(=*)\[.*?\]\1\]|--[^\n]*", "", src, flags=re.S)


def undeclared_names(src: str) -> list[str]:
    toks = tokens(src)
    declared: set[str] = set()
    # pass 1: declarations
    for i, (_, text) in enumerate(toks):
        if text == "local" or text == "for":
            j = i + 1
            if toks[j][1] == "function":
                declared.add(toks[j + 1][1])
                continue
            while j < len(toks) and toks[j][0] == "name":
                declared.add(toks[j][1])
                if toks[j + 1][1] != ",":
                    break
                j += 2
        elif text == "function":
            j = i + 1
            while toks[j][1] != "(":
                j += 1
            j += 1
            while toks[j][1] != ")":
                if toks[j][0] == "name":
                    declared.add(toks[j][1])
                j += 1
    # pass 2: uses
    bad: list[str] = []
    brackets: list[str] = []
    for i, (kind, text) in enumerate(toks):
        if text in "({[" and kind == "op":
            brackets.append(text)
        elif text in ")}]" and kind == "op":
            brackets.pop()
        if kind != "name" or text in LUA_KEYWORDS:
            continue
        prev = toks[i - 1][1] if i else ""
        nxt = toks[i + 1][1] if i + 1 < len(toks) else ""
        if prev in (".", ":"):
            continue  # a field or a method
        if nxt == "=" and brackets and brackets[-1] == "{":
            continue  # a table constructor key
        if prev == "function" and text in declared and toks[i - 2][1] == "local":
            continue
        if text in BUILTINS:
            if nxt == "=" and not (brackets and brackets[-1] == "{") and prev != "local":
                bad.append(text)  # assigning a builtin
            continue
        if text not in declared and text not in bad:
            bad.append(text)
    return bad


def test_sources_are_where_the_package_says():
    """The shipped package data is the repository's lua/ directory (an editable install reads it directly)."""
    assert Path(str(LUA)).joinpath("registerBroker-8.lua").is_file()
