"""GET_ROUTEINFO_BY_TOPIC answers as the Java NameServer does for any name it has no route for: an invalid
topic name (Java validates nothing there, it only looks the name up) is TOPIC_NOT_EXIST (17), not SYSTEM_ERROR;
and the remark is Java's to the byte, FAQ link included."""

from __future__ import annotations

import pytest

from service.remoting import codes
from tests.remoting.test_door import QUERY_NOT_FOUND, register

TOPIC_NOT_EXIST = 17
FAQ = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."  # FAQUrl.suggestTodo, 5.1+


def no_route(topic: str) -> str:
    return f"No topic route info in name server for the topic: {topic}{FAQ}"
INVALID = ["bad topic", "x/y", "a" * 128, "topic\u00e9", "semi;colon", "dot.ted"]


@pytest.mark.parametrize("serialize", ["JSON", "ROCKETMQ"])
@pytest.mark.parametrize("topic", INVALID, ids=range(len(INVALID)))
async def test_an_invalid_topic_name_is_topic_not_exist(door, serialize, topic):
    c = await door.client()
    await register(c)
    before = sorted(await door.ns.store.redis.keys("*"))
    r = await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, serialize=serialize)
    assert r.code == TOPIC_NOT_EXIST, r.remark
    assert r.remark == no_route(topic) and r.body == b""
    assert sorted(await door.ns.store.redis.keys("*")) == before
    assert (await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA"})).code == 0  # still served


@pytest.mark.parametrize("serialize", ["JSON", "ROCKETMQ"])
async def test_topic_not_exist_ends_with_javas_faq_link(door, serialize):
    """Java's ClientRequestProcessor ends TOPIC_NOT_EXIST's remark with FAQUrl.suggestTodo(APPLY_TOPIC_URL):
    "\nSee <url> for further details.". A Java client's MQClientException runs the remark through
    FAQUrl.attachDefaultURL, which appends "\nFor more information, please visit the url, <url>" only when the
    remark has no "\nSee ": with the suffix, `mqadmin topicRoute -t Missing` prints what it prints against Java.
    Every way to a 17 carries it: a name never registered (twice, the second maybe answered from the route
    cache), a topic deleted after it was read, no topic field at all (Java's `null`)."""
    c = await door.client()
    await register(c, serialize=serialize, topics={"TopicA": 4, "Doomed": 2})
    for _ in range(2):
        r = await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "Missing"}, serialize=serialize)
        assert (r.code, r.remark, r.body) == (TOPIC_NOT_EXIST, no_route("Missing"), b"")
    assert (await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "Doomed"}, serialize=serialize)).code == 0
    assert (await c.request(codes.DELETE_TOPIC_IN_NAMESRV, {"topic": "Doomed"}, serialize=serialize)).code == 0
    r = await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "Doomed"}, serialize=serialize)
    assert (r.code, r.remark) == (TOPIC_NOT_EXIST, no_route("Doomed"))
    r = await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {}, serialize=serialize)
    assert (r.code, r.remark) == (TOPIC_NOT_EXIST, no_route("null"))
    assert r.remark.count("\nSee ") == 1  # so the client adds no "For more information" line of its own


async def test_other_not_found_remarks_carry_no_faq_link(door):
    """Java suffixes no other NameServer reply: KV reads that find nothing answer its bare remark."""
    c = await door.client()
    r = await c.request(codes.GET_KV_CONFIG, {"namespace": "NS1", "key": "k"})
    assert (r.code, r.remark) == (QUERY_NOT_FOUND, "No config item, Namespace: NS1 Key: k")
    r = await c.request(codes.GET_KVLIST_BY_NAMESPACE, {"namespace": "NS1"})
    assert (r.code, r.remark) == (QUERY_NOT_FOUND, "No config item, Namespace: NS1")
