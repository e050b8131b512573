"""Cluster info across workers: worker B answers GET_BROKER_CLUSTER_INFO from its copy while `{P}:civer` holds, and
the next read after any change made through worker A — a new broker, a changed address, an unregister, an expiry,
a closed connection — shows it, on both of B's doors; a stock broker's same registration again renews nothing.
Two `namesrv serve` processes on the session's real redis-server, brokers on the native door."""

from __future__ import annotations

import asyncio
import re
import uuid

import aiohttp
import orjson
import pytest
import redis

from service.remoting import codes, fastjson
from tests.remoting.client import Client
from tests.remoting.test_door import register_body, register_ext

pytestmark = [pytest.mark.redis, pytest.mark.integration]


def copy_reads(metrics: str) -> tuple[float, float]:
    """namesrv_cluster_info_reads_total: (answered from the copy, reads of the tables in Redis: in steps, caught up
    or whole)."""
    def n(result: str) -> float:
        return float(re.search(rf'^namesrv_cluster_info_reads_total{{result="{result}"}} (\S+)$', metrics,
                               re.M).group(1))
    return n("copy"), n("steps") + n("caught_up") + n("whole")


class Reader:
    """B's two doors: the native one (fastjson body) and HTTP, which must say the same."""

    def __init__(self, client: Client, session: aiohttp.ClientSession, url: str) -> None:
        self.client, self.session, self.url = client, session, url

    async def doors(self) -> tuple[dict, dict]:
        """brokerName -> {brokerId: addr} as each door shows it (clusterAddrTable checked against it)."""
        r = await self.client.request(codes.GET_BROKER_CLUSTER_INFO)
        assert r.code == 0, r.remark
        native = fastjson.loads(r.body)
        async with self.session.get(f"{self.url}/v1/cluster-info") as resp:
            http = orjson.loads(await resp.read())
        shown = []
        for info in (native, http):
            table = {b: {str(i): a for i, a in d["brokerAddrs"].items()} for b, d in info["brokerAddrTable"].items()}
            assert {c: sorted(m) for c, m in info["clusterAddrTable"].items()} == {"C1": sorted(table)}
            shown.append(table)
        return shown[0], shown[1]

    async def brokers(self) -> dict[str, dict[str, str]]:
        """What both doors show (the same)."""
        native, http = await self.doors()
        assert native == http
        return native

    async def metrics(self) -> tuple[float, float]:
        async with self.session.get(f"{self.url}/metrics") as resp:
            return copy_reads(await resp.text())

    async def shows(self, want: dict[str, dict[str, str]], deadline_s: float = 15.0) -> None:
        """Both doors show `want` within the deadline (an expiry, a closed connection: once a worker handled it)."""
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline_s
        while (got := await self.doors()) != (want, want):
            assert loop.time() < end, (got, want)
            await asyncio.sleep(0.02)


async def test_a_workers_copy_shows_every_change_made_through_another(namesrv_factory, redis_server):
    prefix = "ci" + uuid.uuid4().hex[:8]
    a, b = (namesrv_factory(prefix=prefix, scan_interval_ms=100, scan_first_delay_ms=0, heartbeat_flush_ms=0)
            for _ in range(2))
    admin = redis.Redis.from_url(redis_server.url, decode_responses=True)
    civer = "{" + prefix + "}:civer"
    via_a = [await Client.connect(a.remoting_port) for _ in range(3)]
    try:
        async with aiohttp.ClientSession() as s:
            reader = Reader(await Client.connect(b.remoting_port), s, b.url)
            assert (await via_a[0].request(codes.REGISTER_BROKER, register_ext(), register_body())).code == 0
            master = {"broker-a": {"0": "10.0.0.1:10911"}}
            assert await reader.brokers() == master
            copies, calls = await reader.metrics()
            for _ in range(3):
                assert await reader.brokers() == master
            assert await reader.metrics() == (copies + 6, calls)  # six reads on two doors: all from the copy

            # the same registration again (what a stock broker sends every 30 s), and one with a new data
            # version, change nothing the cluster info shows: nothing renewed
            before = admin.get(civer)
            assert (await via_a[0].request(codes.REGISTER_BROKER, register_ext(), register_body())).code == 0
            assert (await via_a[0].request(codes.REGISTER_BROKER, register_ext(), register_body(counter=2))).code == 0
            assert admin.get(civer) == before
            assert await reader.brokers() == master
            assert await reader.metrics() == (copies + 8, calls)

            # every change made through A is in B's next read
            ext_b = register_ext(brokerName="broker-b", brokerAddr="10.0.0.2:10911")  # a new broker
            assert (await via_a[1].request(codes.REGISTER_BROKER, ext_b, register_body())).code == 0
            both = {**master, "broker-b": {"0": "10.0.0.2:10911"}}
            assert await reader.brokers() == both
            slave = register_ext(brokerId=1, brokerAddr="10.0.0.3:10911")  # a slave of broker-a
            assert (await via_a[0].request(codes.REGISTER_BROKER, slave, register_body())).code == 0
            assert await reader.brokers() == {**both, "broker-a": {"0": "10.0.0.1:10911", "1": "10.0.0.3:10911"}}
            moved = register_ext(brokerId=1, brokerAddr="10.0.0.4:10911")  # its address changed
            assert (await via_a[0].request(codes.REGISTER_BROKER, moved, register_body())).code == 0
            assert await reader.brokers() == {**both, "broker-a": {"0": "10.0.0.1:10911", "1": "10.0.0.4:10911"}}
            gone = {"clusterName": "C1", "brokerName": "broker-a", "brokerId": 1, "brokerAddr": "10.0.0.4:10911"}
            assert (await via_a[0].request(codes.UNREGISTER_BROKER, gone)).code == 0  # an unregister
            assert await reader.brokers() == both

            # an expiry: broker-d's 5 s pass without a heartbeat (the expiry scans remove it; 5 s: its first read
            # must come before, on a busy machine too)
            ext_d = register_ext(brokerName="broker-d", brokerAddr="10.0.0.6:10911", heartbeatTimeoutMillis=5000)
            assert (await via_a[1].request(codes.REGISTER_BROKER, ext_d, register_body())).code == 0
            assert await reader.brokers() == {**both, "broker-d": {"0": "10.0.0.6:10911"}}
            await reader.shows(both)
            # a closed connection: broker-c registered on via_a[2], which closes
            ext_c = register_ext(brokerName="broker-c", brokerAddr="10.0.0.5:10911")
            assert (await via_a[2].request(codes.REGISTER_BROKER, ext_c, register_body())).code == 0
            assert await reader.brokers() == {**both, "broker-c": {"0": "10.0.0.5:10911"}}
            await via_a[2].close()
            await reader.shows(both)
            await reader.client.close()
    finally:
        for c in via_a:
            await c.close()
        admin.close()
