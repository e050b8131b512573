"""Static and key checks of lua/controller/, the same house rules as tests/lua/test_headers.py applies to lua/:
headers and key counts, no globals, no literal key names, and the keys the scripts write are the ones
ControllerKeys names (all under the registry's hash tag)."""

from __future__ import annotations

import re
from importlib import resources

import fakeredis
import pytest

from service.store.controller import ControllerKeys, ControllerStore, load_controller_scripts
from service.store.scripts import check_header
from tests.lua.test_headers import strip_comments, undeclared_names

CTL = resources.files("service.lua").joinpath("controller")
FILES = sorted(p.name for p in CTL.iterdir() if p.name.endswith(".lua"))


def test_every_controller_file_is_loaded():
    assert len(FILES) >= 9
    assert sorted(f"{s.name}-{s.num_keys}.lua" for s in load_controller_scripts().values()) == FILES


@pytest.mark.parametrize("name", FILES)
def test_header_and_house_rules(name):
    src = CTL.joinpath(name).read_text(encoding="utf-8")
    roles = check_header(name, src)
    assert set(roles) <= {"groups", "alive"}  # what ControllerStore._run knows how to pass
    script = load_controller_scripts()[name.rsplit("-", 1)[0]]
    assert undeclared_names(script.source) == [], name
    code = strip_comments(script.source)
    assert "cmsgpack" not in code and not re.search(r'rcall\(\s*"[A-Z]+"\s*,\s*"', code), name
    assert not re.search(r"""rcall\(\s*["']keys["']""", code, re.I), name


async def test_the_scripts_write_only_the_keys_controller_keys_names():
    r = fakeredis.FakeAsyncRedis(decode_responses=True)
    s = ControllerStore(r, prefix="kp")
    await s.apply_broker_id("C", "b", 1, "10.0.0.1:1;1", now=1)
    await s.apply_broker_id("C", "b", 2, "10.0.0.2:1;1", now=1)
    await s.heartbeat("C", "b", 1, "10.0.0.1:1", now=1)
    await s.elect_master("b", 1, now=1)
    k = ControllerKeys("kp")
    assert set(await r.keys("*")) == {k.groups, k.alive, k.group("b"), k.replicas("b"), k.check_codes("b"),
                                      k.heartbeat("C", "b", 1)}
    assert all(key.startswith("{kp}:ctl:") for key in await r.keys("*"))
    await s.expire(now=10**9)
    await s.clean_broker_data("C", "b", None, True, now=10**9)
    assert await r.keys("*") == []  # nothing left behind
    await r.aclose()
