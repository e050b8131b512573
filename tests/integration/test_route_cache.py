"""Route cache across workers: after every write through worker A, worker B stops serving the old route by
itself, also when change events are lost (pub/sub connections killed). How fast is measured by
benchmarks/http_bench.py (visibility p99); the staleness bound itself is pinned with a fake clock in
tests/unit/test_route_cache.py."""

from __future__ import annotations

import asyncio
import re

import aiohttp
import pytest
import redis

from tests.unit.conftest import master

pytestmark = [pytest.mark.redis, pytest.mark.integration]


async def converges(s, url, want_perm, deadline_s=10.0):
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    while True:
        r = await s.get(f"{url}/v1/topics/TopicA/route")
        body = await r.json()
        if r.status == 200 and body["queueDatas"][0]["perm"] == want_perm:
            return
        if loop.time() > end:
            raise AssertionError(f"B still serves perm {body['queueDatas'][0]['perm']} after {deadline_s}s")
        await asyncio.sleep(0.005)


def metric(text: str, name: str) -> float:
    return float(re.search(rf"^{name} (\S+)$", text, re.M).group(1))


async def test_writes_through_a_reach_b_with_and_without_events(namesrv_factory, redis_server):
    a = namesrv_factory(route_cache_staleness_ms=1000)
    b = namesrv_factory(route_cache_staleness_ms=1000)
    async with aiohttp.ClientSession() as s:
        await s.post(f"{a.url}/v1/brokers/register", json=master())
        await converges(s, b.url, 6)
        for i in range(30):
            for _ in range(3):  # warm B's cache with the current route
                await s.get(f"{b.url}/v1/topics/TopicA/route")
            wipe = i % 2 == 0
            r = await s.post(f"{a.url}/v1/brokers/broker-a/{'wipe' if wipe else 'add'}-write-perm")
            assert r.status == 200
            await converges(s, b.url, 4 if wipe else 6)
        text = await (await s.get(f"{b.url}/metrics")).text()
        assert metric(text, "namesrv_route_cache_hits") >= 60  # B really served from its cache

        # lose the events: kill every pub/sub connection, then write; B converges through its version poll
        admin = redis.Redis.from_url(redis_server.url)
        for i in range(4):
            admin.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
            wipe = i % 2 == 0
            await s.post(f"{a.url}/v1/brokers/broker-a/{'wipe' if wipe else 'add'}-write-perm")
            await converges(s, b.url, 4 if wipe else 6)
        admin.close()
