"""The bad-input battery on the native door: every bad registration is refused with SYSTEM_ERROR and a remark
saying why, nothing is written, and the connection goes on serving."""

from __future__ import annotations

import pytest

from service.remoting import codes
from tests.battery import FIELD_CASES, TOPIC_CASES
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
    (codes.PUT_KV_CONFIG, {"namespace": "ns", "key": "k k", "value": "v"}),
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
