"""A Redis written by the first wave (git ea9f8da, before the core and the per-script keys) is served unchanged.

tests/fixtures/first_wave_registry.json holds every key that the old `namesrv serve` wrote through its HTTP API
and what it answered for each read (tests/fixtures/make_first_wave_registry.py made it). Restored into a real
redis-server and served by this version's workers, both doors must answer the same, and the old entries must
heartbeat, re-register, unregister and expire like new ones: an upgrade is a rolling restart, no migration.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import aiohttp
import orjson
import pytest
import redis

from service.remoting import codes
from tests.remoting.client import Client

pytestmark = [pytest.mark.redis, pytest.mark.integration]

FIXTURE = json.loads(Path(__file__).parents[1].joinpath("fixtures", "first_wave_registry.json").read_text())


def restore(url: str, prefix: str, *, silent_ms: dict[str, int]) -> None:
    """Write the old keys under `prefix`, with heartbeats moved to now (time went on while it was stored).

    silent_ms: broker entries ("cluster|addr") whose last heartbeat is that long ago instead.
    """
    r = redis.Redis.from_url(url)
    keys = FIXTURE["keys"]
    now = r.time()
    now_ms = now[0] * 1000 + now[1] // 1000
    old_tag = "{" + FIXTURE["prefix"] + "}"
    written_ms = max(score for _, score in keys[old_tag + ":live"]["value"])
    for name, entry in keys.items():
        key = name.replace(old_tag, "{" + prefix + "}", 1)
        kind, value = entry["type"], entry["value"]
        if kind == "string":
            r.set(key, value)
        elif kind == "hash":
            r.hset(key, mapping=value)
        elif kind == "set":
            r.sadd(key, *value)
        elif kind == "zset":
            shifted = {}
            for member, score in value:
                score += now_ms - written_ms - silent_ms.get(member, 0)
                shifted[member] = score
            r.zadd(key, shifted)


def without_request_id(answer):
    return {k: v for k, v in answer.items() if k != "requestId"} if isinstance(answer, dict) else answer


MASTERS = {"10.0.0.1:10911", "10.0.1.1:10911"}  # the fixture's live masters


def unordered(answer):
    """What Java leaves to hash order, made order-free: the first release listed a route's brokers and queues,
    and picked the system topic list's brokerAddr, by name; this one follows Java's HashMap order
    (service/javaorder.py, lua/topicList-3.lua). What they hold is what must not change."""
    if isinstance(answer, dict) and "brokerDatas" in answer:
        return {**answer, "brokerDatas": sorted(answer["brokerDatas"], key=lambda b: b["brokerName"]),
                "queueDatas": sorted(answer["queueDatas"], key=lambda q: q["brokerName"])}
    if isinstance(answer, dict) and "topicList" in answer and answer.get("brokerAddr") in MASTERS:
        return {**answer, "brokerAddr": "one of the masters"}
    return answer


async def test_old_registry_read_through_both_doors_as_the_old_server_answered(redis_server, namesrv_factory):
    n = namesrv_factory(prefix="fwread")
    restore(redis_server.url, "fwread", silent_ms={})
    async with aiohttp.ClientSession() as s:
        for read in FIXTURE["reads"]:
            r = await s.get(n.url + read["path"])
            got = (r.status, unordered(without_request_id(await r.json())))
            assert got == (read["status"], unordered(read["answer"])), read["path"]
    c = await Client.connect(n.remoting_port)
    try:
        for read in FIXTURE["reads"]:
            topic = read["path"].removeprefix("/v1/topics/").removesuffix("/route")
            if read["path"].endswith("/route"):
                got = await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
                if read["status"] == 200:
                    assert (got.code, unordered(orjson.loads(got.body))) == (0, unordered(read["answer"])), topic
                else:
                    assert got.code == read["answer"]["rocketmqCode"], topic
    finally:
        await c.close()


async def test_old_entries_heartbeat_register_and_unregister(redis_server, namesrv_factory):
    n = namesrv_factory(prefix="fwwrite")
    restore(redis_server.url, "fwwrite", silent_ms={})
    dv = {"timestamp": 1700000000000, "counter": 1, "stateVersion": 0}
    ident = {"clusterName": "ClusterB", "brokerName": "broker-b", "brokerId": 0, "brokerAddr": "10.0.1.1:10911"}
    async with aiohttp.ClientSession() as s:
        r = await s.post(n.url + "/v1/brokers/heartbeat", json={**ident, "dataVersion": dv})
        assert (await r.json())["changed"] is False  # the old entry's data version is understood
        r = await s.post(n.url + "/v1/brokers/heartbeat", json={**ident, "dataVersion": {**dv, "counter": 2}})
        assert (await r.json())["changed"] is True
        slave = {"clusterName": "ClusterA", "brokerName": "broker-a", "brokerId": 1, "brokerAddr": "10.0.0.2:10911"}
        assert (await s.post(n.url + "/v1/brokers/unregister", json=slave)).status == 200
        t = {"readQueueNums": 2, "writeQueueNums": 2, "perm": 6}
        body = {**ident, "haServerAddr": "10.0.1.1:10912", "dataVersion": {**dv, "counter": 2},
                "topicConfigTable": {"TopicTest": t, "NewB": t, "ClusterB": t}}
        assert (await s.post(n.url + "/v1/brokers/register", json=body)).status == 200
        route = await (await s.get(n.url + "/v1/topics/TopicTest/route")).json()
        assert {b["brokerName"]: b["brokerAddrs"] for b in route["brokerDatas"]} == {
            "broker-a": {"0": "10.0.0.1:10911"}, "broker-b": {"0": "10.0.1.1:10911"}}
        assert {q["brokerName"]: q["readQueueNums"] for q in route["queueDatas"]} == {"broker-a": 8, "broker-b": 2}
        # Java's default (deleteTopicWithBrokerRegistration=false) keeps a topic the new table left out
        assert (await s.get(n.url + "/v1/topics/OnlyB/route")).status == 200
        topics = (await (await s.get(n.url + "/v1/clusters/ClusterB/topics")).json())["topicList"]
        assert sorted(topics) == ["ClusterB", "NewB", "OnlyB", "TopicTest"]


def test_old_entries_expire_and_leave_only_kv_and_config(redis_server):
    restore(redis_server.url, "fwexp", silent_ms={"ClusterB|10.0.1.1:10911": 121_000})
    out = subprocess.run([sys.executable, "-m", "service.cli", "expire", "--redis-url", redis_server.url,
                          "--key-prefix", "fwexp"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "10.0.1.1:10911" in out.stdout and "10.0.0.1:10911" not in out.stdout
    r = redis.Redis.from_url(redis_server.url, decode_responses=True)
    assert r.smembers("{fwexp}:topics") == {"ClusterA", "OrderTopic", "TopicTest", "UnitTopic"}
    assert r.hgetall("{fwexp}:t:TopicTest") == {"broker-a": "8,8,6,0"}
    # everyone silent: nothing of the routes is left, the operators' KV and config are
    for zset in ("{fwexp}:live", "{fwexp}:deadlines"):
        r.zadd(zset, {m: score - 121_000 for m, score in r.zrange(zset, 0, -1, withscores=True)})
    out = subprocess.run([sys.executable, "-m", "service.cli", "expire", "--redis-url", redis_server.url,
                          "--key-prefix", "fwexp"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert sorted(r.scan_iter("{fwexp}:*")) == sorted(  # the counters stay: a value must never come back
        ["{fwexp}:ver", "{fwexp}:civer", "{fwexp}:cilog", "{fwexp}:bl", "{fwexp}:tlver", "{fwexp}:config",
         "{fwexp}:kv:NS2", "{fwexp}:kv:ORDER_TOPIC_CONFIG", "{fwexp}:kvns"])
