"""The all-topics list across workers: worker B answers GET_ALL_TOPIC_LIST_FROM_NAMESERVER and GET /v1/topics from
its copy while `{P}:tlver` holds, and a topic added or removed through worker A — by a registration, a topic
registration (217), a delete (216), an unregister — is in B's next list on both doors; a stock broker's same
registration again, or a new data version of the same topics, renews nothing. Two `namesrv serve` processes on the
session's real redis-server, brokers on the native door."""

from __future__ import annotations

import uuid

import aiohttp
import orjson
import pytest
import redis

from service.remoting import codes, fastjson
from tests.remoting.client import Client
from tests.remoting.test_door import register_body, register_ext

pytestmark = [pytest.mark.redis, pytest.mark.integration]


async def listed(client: Client, session: aiohttp.ClientSession, url: str) -> list[str]:
    """All topics as B's two doors show them (the same, sorted)."""
    r = await client.request(codes.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    assert r.code == 0, r.remark
    native = sorted(fastjson.loads(r.body)["topicList"])
    async with session.get(f"{url}/v1/topics") as resp:
        assert resp.status == 200
        http = sorted(orjson.loads(await resp.read())["topicList"])
    assert native == http
    return native


async def test_a_workers_topic_list_copy_shows_every_topic_added_or_removed_through_another(namesrv_factory,
                                                                                          redis_server):
    prefix = "tl" + uuid.uuid4().hex[:8]
    a, b = (namesrv_factory(prefix=prefix) for _ in range(2))
    admin = redis.Redis.from_url(redis_server.url, decode_responses=True)
    tlver = "{" + prefix + "}:tlver"
    via_a = await Client.connect(a.remoting_port)
    try:
        async with aiohttp.ClientSession() as s:
            b_client = await Client.connect(b.remoting_port)
            read = lambda: listed(b_client, s, b.url)  # noqa: E731
            assert await read() == []
            assert (await via_a.request(codes.REGISTER_BROKER, register_ext(), register_body())).code == 0
            assert await read() == ["TopicA", "TopicB"]
            assert await read() == ["TopicA", "TopicB"]  # again: B's copy, still the registry's

            # the same registration again (what a stock broker sends every 30 s), and a new data version of the
            # same topics with other queue counts: the set is the same, nothing renewed
            before = admin.get(tlver)
            assert before is not None
            assert (await via_a.request(codes.REGISTER_BROKER, register_ext(), register_body())).code == 0
            more_queues = register_body({"TopicA": 16, "TopicB": 4}, counter=2)
            assert (await via_a.request(codes.REGISTER_BROKER, register_ext(), more_queues)).code == 0
            assert admin.get(tlver) == before
            assert await read() == ["TopicA", "TopicB"]

            # every topic added or removed through A is in B's next list
            added = register_body({"TopicA": 16, "TopicB": 4, "TopicC": 2}, counter=3)
            assert (await via_a.request(codes.REGISTER_BROKER, register_ext(), added)).code == 0
            assert await read() == ["TopicA", "TopicB", "TopicC"]
            other = register_ext(brokerName="broker-b", brokerAddr="10.0.0.2:10911")
            two = register_body({"TopicD": 1, "TopicE": 1})  # one topic would be a single-topic registration
            assert (await via_a.request(codes.REGISTER_BROKER, other, two)).code == 0
            assert await read() == ["TopicA", "TopicB", "TopicC", "TopicD", "TopicE"]
            r = await via_a.request(codes.DELETE_TOPIC_IN_NAMESRV, {"topic": "TopicC"})
            assert r.code == 0, r.remark
            assert await read() == ["TopicA", "TopicB", "TopicD", "TopicE"]
            gone = {"clusterName": "C1", "brokerName": "broker-b", "brokerId": 0, "brokerAddr": "10.0.0.2:10911"}
            assert (await via_a.request(codes.UNREGISTER_BROKER, gone)).code == 0
            assert await read() == ["TopicA", "TopicB"]
            await b_client.close()
    finally:
        await via_a.close()
        admin.close()
