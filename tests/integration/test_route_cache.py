"""Route cache across workers: after every write through worker A, worker B never serves the old route for
longer than the staleness bound, even when change events are lost (pub/sub connections killed)."""

from __future__ import annotations

import asyncio
import re
import time

import aiohttp
import pytest
import redis

from tests.unit.conftest import master

pytestmark = [pytest.mark.redis, pytest.mark.integration]
BOUND_S = 1.0


async def time_to_visible(s, url, want_perm, deadline_s=5.0):
    started = time.monotonic()
    while True:
        r = await s.get(f"{url}/v1/topics/TopicA/route")
        body = await r.json()
        if r.status == 200 and body["queueDatas"][0]["perm"] == want_perm:
            return time.monotonic() - started
        if time.monotonic() - started > deadline_s:
            raise AssertionError(f"B still serves perm {body['queueDatas'][0]['perm']} after {deadline_s}s")
        await asyncio.sleep(0.002)


async def test_cross_worker_staleness_bound(namesrv_factory, redis_server):
    a = namesrv_factory(route_cache_staleness_ms=int(BOUND_S * 1000))
    b = namesrv_factory(route_cache_staleness_ms=int(BOUND_S * 1000))
    latencies = []
    async with aiohttp.ClientSession() as s:
        await s.post(f"{a.url}/v1/brokers/register", json=master())
        await time_to_visible(s, b.url, 6)
        for i in range(30):
            for _ in range(3):  # warm B's cache with the current route
                await s.get(f"{b.url}/v1/topics/TopicA/route")
            wipe = i % 2 == 0
            r = await s.post(f"{a.url}/v1/brokers/broker-a/{'wipe' if wipe else 'add'}-write-perm")
            assert r.status == 200
            latencies.append(await time_to_visible(s, b.url, 4 if wipe else 6))
        latencies.sort()
        assert latencies[-1] < BOUND_S, latencies
        hits = await (await s.get(f"{b.url}/metrics")).text()
        ratio = float(re.search(r"^namesrv_route_cache_hit_ratio (\S+)$", hits, re.M).group(1))
        assert ratio > 0.0  # the cache was really used

        # lose the events: kill every pub/sub connection, then write; B must converge within the bound
        admin = redis.Redis.from_url(redis_server.url)
        for i in range(4):
            admin.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
            wipe = i % 2 == 0
            await s.post(f"{a.url}/v1/brokers/broker-a/{'wipe' if wipe else 'add'}-write-perm")
            assert await time_to_visible(s, b.url, 4 if wipe else 6) < BOUND_S
        admin.close()
