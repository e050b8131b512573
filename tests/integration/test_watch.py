"""Watches across real `namesrv serve` processes on one real Redis: a stream on worker B sees every change made
through worker A (HTTP and the native door), a dropped native connection and an expiry, in order; a long-poll
on B answers a change made on A; the watcher cap's 429; SIGTERM ends streams."""

from __future__ import annotations

import asyncio
import signal

import aiohttp
import pytest

from service.remoting import codes
from tests.remoting.client import Client
from tests.remoting.test_door import register_body, register_ext
from tests.unit.test_watch import read_events

pytestmark = [pytest.mark.redis, pytest.mark.integration]
_versions = iter(range(1, 1_000_000))


def broker(name: str, addr: str, queues: int, **extra) -> dict:
    return {"clusterName": "C1", "brokerName": name, "brokerId": 0, "brokerAddr": addr,
            "haServerAddr": addr, "dataVersion": {"timestamp": 1, "counter": next(_versions), "stateVersion": 0},
            "topicConfigTable": {"W1": {"readQueueNums": queues, "writeQueueNums": queues, "perm": 6}}, **extra}


def brief(event: dict) -> dict | None:
    """An event's route as {brokerName: writeQueueNums}, None when absent."""
    route = event["data"]["route"]
    if route is None:
        return None
    return {q["brokerName"]: q["writeQueueNums"] for q in route["queueDatas"]}


async def test_a_stream_on_one_worker_sees_every_change_made_anywhere_in_order(namesrv_factory):
    a = namesrv_factory(scan_interval_ms=100, scan_first_delay_ms=0)
    b = namesrv_factory(scan_interval_ms=100, scan_first_delay_ms=0)
    async with aiohttp.ClientSession() as s:
        stream = await s.get(f"{b.url}/v1/watch?topics=W1")
        assert stream.status == 200
        seen = [brief(e) for e in await read_events(stream, 1)]

        async def step(expected):
            """The next event is exactly this state: nothing missed, nothing extra."""
            seen.append(brief((await read_events(stream, 1, deadline_s=15))[0]))
            assert seen[-1] == expected, seen

        async def http(path, body):
            resp = await s.post(f"{a.url}{path}", json=body)
            assert resp.status == 200, await resp.text()

        await http("/v1/brokers/register", broker("broker-a", "10.0.0.1:10911", 1))
        await step({"broker-a": 1})
        await http("/v1/brokers/register", broker("broker-a", "10.0.0.1:10911", 2))
        await step({"broker-a": 2})
        native = await Client.connect(a.remoting_port)  # a broker on worker A's native door (two topics: Java's guard)
        ext = register_ext(brokerName="broker-n", brokerAddr="10.0.0.7:10911", clusterName="C1")
        assert (await native.request(codes.REGISTER_BROKER, ext, register_body({"W1": 4, "W2": 4}))).code == 0
        await step({"broker-a": 2, "broker-n": 4})
        await native.close()  # its connection drops: unregistered
        await step({"broker-a": 2})
        await http("/v1/brokers/unregister", {k: broker("broker-a", "10.0.0.1:10911", 0)[k]
                                              for k in ("clusterName", "brokerName", "brokerId", "brokerAddr")})
        await step(None)
        await http("/v1/brokers/register", broker("broker-x", "10.0.0.9:10911", 3, heartbeatTimeoutMillis=1000))
        await step({"broker-x": 3})
        await step(None)  # no heartbeat: the expiry scan (on either worker) removes it
        assert seen == [None, {"broker-a": 1}, {"broker-a": 2}, {"broker-a": 2, "broker-n": 4}, {"broker-a": 2},
                        None, {"broker-x": 3}, None]
        stream.close()


async def test_a_long_poll_on_one_worker_answers_a_change_made_on_another(namesrv_factory):
    a = namesrv_factory()
    b = namesrv_factory()
    async with aiohttp.ClientSession() as s:
        assert (await s.post(f"{a.url}/v1/brokers/register", json=broker("broker-a", "10.0.0.1:10911", 8))).status \
            == 200

        async def tag_on_b():
            async with asyncio.timeout(10):
                while True:
                    r = await s.get(f"{b.url}/v1/topics/W1/route")
                    if r.status == 200:
                        return r.headers["ETag"]
                    await asyncio.sleep(0.01)

        tag = await tag_on_b()
        poll = asyncio.create_task(s.get(f"{b.url}/v1/topics/W1/route?wait=60s", headers={"If-None-Match": tag}))

        async def waiting():
            text = await (await s.get(f"{b.url}/metrics")).text()
            return "namesrv_watchers 1.0" in text

        async with asyncio.timeout(10):
            while not await waiting():
                await asyncio.sleep(0.01)
        assert not poll.done()
        assert (await s.post(f"{a.url}/v1/brokers/register", json=broker("broker-a", "10.0.0.1:10911", 2))).status \
            == 200
        resp = await poll
        assert resp.status == 200 and resp.headers["ETag"] != tag
        assert (await resp.json())["queueDatas"][0]["writeQueueNums"] == 2


async def test_watchers_past_the_cap_get_429(namesrv_factory):
    b = namesrv_factory(watch_max_per_client=1)
    async with aiohttp.ClientSession() as s:
        first = await s.get(f"{b.url}/v1/watch?topics=W1")
        await read_events(first, 1)
        refused = await s.get(f"{b.url}/v1/watch?topics=W1")
        assert refused.status == 429
        assert (await refused.json())["code"] == "TOO_MANY_WATCHERS"
        first.close()


async def test_sigterm_ends_streams_so_clients_reconnect_elsewhere(namesrv_factory):
    b = namesrv_factory()
    async with aiohttp.ClientSession() as s:
        stream = await s.get(f"{b.url}/v1/watch?topics=W1")
        last = (await read_events(stream, 1))[0]["id"]
        b.proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(15):
            rest = await stream.content.read()  # the stream ends: EOF
        assert b"shutting down; reconnect with Last-Event-ID" in rest
        assert await asyncio.to_thread(b.proc.wait, 30) == 0  # (stop() would signal again while it exits)
        other = namesrv_factory()  # "elsewhere": resumes where it left off, nothing changed, nothing sent again
        again = await s.get(f"{other.url}/v1/watch?topics=W1", headers={"Last-Event-ID": last})
        assert again.status == 200
        again.close()
