"""The bad-input battery on the native door: every bad registration is refused with SYSTEM_ERROR and a remark
saying why, nothing is written, and the connection goes on serving."""

from __future__ import annotations

import pytest

from service.remoting import codes, fastjson
from tests.battery import FIELD_CASES, KV_NAME_CASES, KV_NAMES_KEPT, KV_VALUE_CASES, TOPIC_CASES
from tests.remoting.test_door import register_body, register_ext

SYSTEM_ERROR = 1
EXT_NAME = {"zoneName": "__ZONE_NAME"}  # the zone travels in RocketMQ's ext field

NATIVE_ONLY = [  # text-carried numbers must be ASCII decimals
    {"brokerId": "\uff10"}, {"brokerId": "0x1"}, {"brokerId": "-1"}, {"brokerId": " 0"},
    {"heartbeatTimeoutMillis": "soon"}, {"heartbeatTimeoutMillis": "5"}, {"bodyCrc32": "abc"},
]


async def state(door):
    return await door.ns.store.version(), sorted(await door.ns.store.redis.keys("*"))


async def refused(door, ext, body):
    c = await door.client()
    before = await state(door)
    r = await c.request(codes.REGISTER_BROKER, ext, body)
    assert r.code == SYSTEM_ERROR and r.remark, (ext, r)
    assert await state(door) == before
    assert (await c.request(codes.GET_BROKER_CLUSTER_INFO)).code == 0  # still serving


@pytest.mark.parametrize(("field", "value"), FIELD_CASES, ids=[f"{f}={v!r}" for f, v in FIELD_CASES])
async def test_bad_fields(door, field, value):
    await refused(door, register_ext(**{EXT_NAME.get(field, field): value}), register_body())


@pytest.mark.parametrize("topic", TOPIC_CASES, ids=repr)
async def test_bad_topics(door, topic):
    await refused(door, register_ext(), register_body({topic: 4, "Fine": 4}))


@pytest.mark.parametrize("over", NATIVE_ONLY, ids=repr)
async def test_bad_text_numbers(door, over):
    await refused(door, register_ext(**over), register_body())


@pytest.mark.parametrize(("code", "ext"), [
    (codes.PUT_KV_CONFIG, {"namespace": "ns\n", "key": "k", "value": "v"}),
    (codes.PUT_KV_CONFIG, {"namespace": "ns", "key": "k"}),
    (codes.DELETE_TOPIC_IN_NAMESRV, {"topic": "T\n"}),
    (codes.DELETE_TOPIC_IN_NAMESRV, {"topic": "T", "clusterName": "a b"}),
    (codes.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "b\n"}),
    (codes.GET_TOPICS_BY_CLUSTER, {"cluster": "c\n"}),
])
async def test_other_bad_requests(door, code, ext):
    c = await door.client()
    before = await state(door)
    r = await c.request(code, ext)
    assert r.code == SYSTEM_ERROR and r.remark, r
    assert await state(door) == before


KV_BAD = ([{"namespace": n, "key": "k", "value": "v"} for n in [*KV_NAME_CASES, ""]]
          + [{"namespace": "ns", "key": n, "value": "v"} for n in [*KV_NAME_CASES, ""]]
          + [{"namespace": "ns", "key": "k", "value": v} for v in KV_VALUE_CASES])


@pytest.mark.parametrize("ext", KV_BAD, ids=lambda e: repr(e)[:60])
@pytest.mark.parametrize("serialize", ["JSON", "ROCKETMQ"])
async def test_bad_kv_names_and_values(door, ext, serialize):
    c = await door.client()
    before = await state(door)
    r = await c.request(codes.PUT_KV_CONFIG, ext, serialize=serialize)
    assert r.code == SYSTEM_ERROR and r.remark, r
    assert await state(door) == before


@pytest.mark.parametrize("name", KV_NAMES_KEPT, ids=repr)
@pytest.mark.parametrize("serialize", ["JSON", "ROCKETMQ"])
async def test_kv_names_java_keeps_are_kept(door, name, serialize):
    """Any text but control characters, as namespace and as key, read back as written by each request (issue 42)."""
    c = await door.client()
    for ns, key in ((name, "k"), ("ns", name)):
        r = await c.request(codes.PUT_KV_CONFIG, {"namespace": ns, "key": key, "value": name}, serialize=serialize)
        assert r.code == 0, r
        r = await c.request(codes.GET_KV_CONFIG, {"namespace": ns, "key": key}, serialize=serialize)
        assert (r.code, r.ext_fields) == (0, {"value": name})
        r = await c.request(codes.GET_KVLIST_BY_NAMESPACE, {"namespace": ns}, serialize=serialize)
        assert fastjson.loads(r.body)["table"][key] == name
        assert (await c.request(codes.DELETE_KV_CONFIG, {"namespace": ns, "key": key})).code == 0
        r = await c.request(codes.GET_KV_CONFIG, {"namespace": ns, "key": key})
        assert r.code != 0
