"""The coalescer: calls of one event-loop turn become one batch; each caller gets its own result or error."""

from __future__ import annotations

import asyncio

import pytest

from service.core.coalesce import Coalescer


async def test_same_turn_calls_share_one_batch():
    seen = []

    async def run(items):
        seen.append(list(items))
        return [i * 10 for i in items]

    c = Coalescer(run)
    results = await asyncio.gather(*(c.submit(i) for i in range(5)))
    assert results == [0, 10, 20, 30, 40]
    assert seen == [[0, 1, 2, 3, 4]]
    assert await c.submit(7) == 70
    assert seen[-1] == [7] and c.batches == 2 and c.items == 6


async def test_max_batch_splits():
    sizes = []

    async def run(items):
        sizes.append(len(items))
        return list(items)

    c = Coalescer(run, max_batch=3)
    assert await asyncio.gather(*(c.submit(i) for i in range(7))) == list(range(7))
    assert sizes == [3, 3, 1]


async def test_batch_failure_reaches_every_caller():
    async def run(items):
        raise ConnectionError("redis down")

    c = Coalescer(run)
    results = await asyncio.gather(c.submit(1), c.submit(2), return_exceptions=True)
    assert all(isinstance(r, ConnectionError) for r in results)
    with pytest.raises(ConnectionError):
        await c.submit(3)


async def test_heartbeats_through_http_are_batched(client):
    from service.http.handlers import NS
    from tests.unit.conftest import master

    await client.post("/v1/brokers/register", json=master())
    ident = {"clusterName": "C1", "brokerName": "broker-a", "brokerId": 0, "brokerAddr": "10.0.0.1:10911"}
    unknown = {**ident, "brokerAddr": "10.0.0.9:10911"}
    replies = await asyncio.gather(*(client.post("/v1/brokers/heartbeat", json=b) for b in [ident, unknown] * 10))
    bodies = [await r.json() for r in replies]
    assert [b["changed"] for b in bodies] == [False, True] * 10
    assert client.app[NS]._heartbeats.items == 20
