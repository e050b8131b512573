"""Real `namesrv serve` processes on one real redis-server: shared routes, expiry, outage, drain."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time

import aiohttp
import pytest
import redis

from tests.unit.conftest import master

pytestmark = [pytest.mark.redis, pytest.mark.integration]


async def poll(check, timeout=10.0, interval=0.02):
    deadline = time.monotonic() + timeout
    while True:
        result = await check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError("condition not met before the deadline")
        await asyncio.sleep(interval)


async def test_register_through_one_read_through_other(namesrv_factory):
    a, b = namesrv_factory(), namesrv_factory()
    async with aiohttp.ClientSession() as s:
        assert (await s.get(f"{b.url}/v1/topics/TopicA/route")).status == 404
        r = await s.post(f"{a.url}/v1/brokers/register", json=master())
        assert r.status == 200

        async def visible():
            r = await s.get(f"{b.url}/v1/topics/TopicA/route")
            return r.status == 200 and (await r.json())["brokerDatas"][0]["brokerName"] == "broker-a"

        await poll(visible, timeout=2.0)
        r = await s.post(f"{b.url}/v1/brokers/broker-a/wipe-write-perm")
        assert await r.json() == {"wipeTopicCount": 1}

        async def wiped():
            r = await s.get(f"{a.url}/v1/topics/TopicA/route")
            return (await r.json())["queueDatas"][0]["perm"] == 4

        await poll(wiped, timeout=2.0)


async def test_scheduler_expires_silent_broker(namesrv_factory):
    n = namesrv_factory(scan_interval_ms=200, scan_first_delay_ms=0)
    async with aiohttp.ClientSession() as s:
        await s.post(f"{n.url}/v1/brokers/register", json=master(heartbeatTimeoutMillis=1000))
        await s.post(f"{n.url}/v1/brokers/register",
                     json=master(name="broker-b", addr="10.0.0.5:10911", topics={
                         "TopicB": {"readQueueNums": 1, "writeQueueNums": 1, "perm": 6}}))
        assert (await s.get(f"{n.url}/v1/topics/TopicA/route")).status == 200
        async def gone():
            return (await s.get(f"{n.url}/v1/topics/TopicA/route")).status == 404

        # the scheduler runs the scan by itself; "not before its timeout" is pinned with explicit clocks in
        # tests/lua/test_scenarios.py (expire(now=T0 + 29_999) keeps, T0 + 30_001 removes)
        await poll(gone, timeout=10.0)
        assert (await s.get(f"{n.url}/v1/topics/TopicB/route")).status == 200  # default 120 s timeout
        text = await (await s.get(f"{n.url}/metrics")).text()
        assert "namesrv_broker_expirations_total 1.0" in text
    assert "broker expired" in n.output()


async def test_two_workers_share_one_port(namesrv_factory):
    n = namesrv_factory(workers=2)
    pids = set()
    async with aiohttp.ClientSession() as s:
        await s.post(f"{n.url}/v1/brokers/register", json=master())
    deadline = time.monotonic() + 20  # the second worker may bind its socket a little later
    while len(pids) < 2 and time.monotonic() < deadline:
        async with aiohttp.ClientSession() as fresh:  # a new connection each time: spread by the kernel
            assert (await fresh.get(f"{n.url}/v1/topics/TopicA/route")).status == 200
            pids.add((await (await fresh.get(f"{n.url}/livez")).json())["pid"])
    assert len(pids) == 2 and n.proc.pid not in pids
    assert n.stop() == 0


async def test_redis_outage_gives_fast_503_and_recovers(redis_server, namesrv_factory):
    n = namesrv_factory(route_cache="false")
    async with aiohttp.ClientSession() as s:
        await s.post(f"{n.url}/v1/brokers/register", json=master())
        redis_server.stop()
        try:
            # how fast is measured in benchmarks/faults.py; here: the right answer, and no worker restart
            r = await s.get(f"{n.url}/v1/topics/TopicA/route")
            assert r.status == 503
            assert (await r.json())["code"] == "STORE_UNAVAILABLE"
            r = await s.get(f"{n.url}/readyz")
            # what is wrong, as the runbook promises, but not where Redis is: /readyz is open to anyone
            assert r.status == 503 and (await r.json())["reason"] == "redis: ConnectionError: Error 111 Connection " \
                "refused.", await r.text()
            assert (await s.get(f"{n.url}/livez")).status == 200
            r = await s.post(f"{n.url}/v1/brokers/register", json=master())
            assert r.status == 503
        finally:
            redis_server.start()  # same port, empty data, no scripts loaded

        async def ready():
            return (await s.get(f"{n.url}/readyz")).status == 200

        await poll(ready, timeout=10.0)
        r = await s.post(f"{n.url}/v1/brokers/register", json=master())
        assert r.status == 200, await r.text()
        assert (await s.get(f"{n.url}/v1/topics/TopicA/route")).status == 200


async def test_sigterm_drains_in_flight_requests(redis_server, namesrv_factory):
    n = namesrv_factory(route_cache="false", redis_socket_timeout_ms=5000, redis_deadline_ms=5000, drain_grace_s=10)
    blocker = redis.Redis.from_url(redis_server.url)
    async with aiohttp.ClientSession() as s:
        await s.post(f"{n.url}/v1/brokers/register", json=master())
        loop = asyncio.get_running_loop()
        sleeping = loop.run_in_executor(None, lambda: blocker.execute_command("DEBUG", "SLEEP", "3.0"))
        probe = redis.Redis.from_url(redis_server.url, socket_timeout=0.05)

        def redis_asleep() -> bool:
            try:
                probe.ping()
                return False
            except redis.TimeoutError:
                return True

        async def asleep():  # the requests must reach a Redis that is already sleeping
            return await loop.run_in_executor(None, redis_asleep)

        await poll(asleep, timeout=5.0, interval=0.01)
        probe.close()
        requests = [asyncio.create_task(s.get(f"{n.url}/v1/topics/TopicA/route")) for _ in range(8)]

        async def all_connected():
            """All 8 inside a handler, waiting on the sleeping Redis (/metrics itself is the 9th)."""
            text = await (await s.get(f"{n.url}/metrics")).text()
            return float(re.search(r"^namesrv_http_in_flight (\S+)$", text, re.M).group(1)) >= 9

        await poll(all_connected, timeout=5.0, interval=0.005)
        os.kill(n.proc.pid, signal.SIGTERM)
        responses = await asyncio.gather(*requests)
        await sleeping
        assert [r.status for r in responses] == [200] * 8
        assert n.proc.wait(15) == 0
    blocker.close()


async def test_broker_with_100k_topics_is_admitted(namesrv_factory):
    """The body limit and timeouts admit a real-size broker: 100 000 topics in one registration (~7.5 MB)."""
    n = namesrv_factory()
    topics = {f"Topic{i:06d}": {"readQueueNums": 8, "writeQueueNums": 8, "perm": 6, "topicSysFlag": 0}
              for i in range(100_000)}
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(timeout=timeout) as s:
        r = await s.post(f"{n.url}/v1/brokers/register", json=master(topics=topics))
        assert r.status == 200, await r.text()
        r = await s.get(f"{n.url}/v1/topics/Topic099999/route")
        assert r.status == 200
        info = await (await s.get(f"{n.url}/metrics")).text()
        assert "namesrv_broker_registrations_total{result=\"ok\"} 1.0" in info
        r = await s.post(f"{n.url}/v1/brokers/unregister", json={"clusterName": "C1", "brokerName": "broker-a",
                                                                 "brokerId": 0, "brokerAddr": "10.0.0.1:10911"})
        assert await r.json() == {"result": "removed"}
        assert (await s.get(f"{n.url}/v1/topics/Topic000000/route")).status == 404
