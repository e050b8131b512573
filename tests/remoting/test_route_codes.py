"""GET_ROUTEINFO_BY_TOPIC answers as the Java NameServer does for any name it has no route for: an invalid
topic name (Java validates nothing there, it only looks the name up) is TOPIC_NOT_EXIST (17), not SYSTEM_ERROR."""

from __future__ import annotations

import pytest

from service.remoting import codes
from tests.remoting.test_door import register

TOPIC_NOT_EXIST = 17
INVALID = ["bad topic", "x/y", "a" * 128, "topic\u00e9", "semi;colon", "dot.ted"]


@pytest.mark.parametrize("serialize", ["JSON", "ROCKETMQ"])
@pytest.mark.parametrize("topic", INVALID, ids=range(len(INVALID)))
async def test_an_invalid_topic_name_is_topic_not_exist(door, serialize, topic):
    c = await door.client()
    await register(c)
    before = sorted(await door.ns.store.redis.keys("*"))
    r = await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, serialize=serialize)
    assert r.code == TOPIC_NOT_EXIST, r.remark
    assert r.remark == f"No topic route info in name server for the topic: {topic}" and r.body == b""
    assert sorted(await door.ns.store.redis.keys("*")) == before
    assert (await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA"})).code == 0  # still served
