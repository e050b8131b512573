"""BROKER_HEARTBEAT on the native door: the hot path (a worker that acknowledges from memory) answers byte for byte
what the handler answers (a worker that writes each one first), refuses what it refuses, and the acknowledged
heartbeat reaches Redis with the next write (service/core/liveness.py)."""

from __future__ import annotations

import pytest

from service.models import RegisterBroker, TopicConfig
from service.remoting import codes
from service.remoting.codec import encode


def heartbeat_ext(**over):
    return {"clusterName": "C1", "brokerAddr": "10.0.0.1:10911", "brokerName": "b1", "brokerId": "0", "epoch": "0",
            "maxOffset": "0", "confirmOffset": "0", "heartbeatTimeoutMills": "120000", "electionPriority": "0",
            **over}


async def raw_reply(client, ext) -> bytes:
    """The reply frame's bytes as sent (opaque 5)."""
    before = len(client.received)
    await client.request(codes.BROKER_HEARTBEAT, ext, opaque=5)
    return encode(client.received[before])


@pytest.mark.parametrize("ext", [heartbeat_ext(), heartbeat_ext(brokerName="bad name"), heartbeat_ext(brokerId="x"),
                                 heartbeat_ext(brokerAddr="nohost"), {"clusterName": "C1", "brokerAddr": "h:1"}],
                         ids=["stock", "bad-name", "bad-id", "bad-addr", "minimal"])
async def test_the_hot_path_answers_what_the_handler_answers(make_door, ext):
    """The same header on a worker that acknowledges from memory (hot path) and on one that writes first
    (heartbeat_flush_ms 0: the handler): the same reply, and a refused header is refused by both."""
    fast = await make_door(heartbeat_flush_ms=1000)
    slow = await make_door(heartbeat_flush_ms=0)
    a, b = await fast.client(), await slow.client()
    taken = fast.server.stats.fast_heartbeats
    assert await raw_reply(a, ext) == await raw_reply(b, ext)
    refused = "bad" in repr(ext.get("brokerName")) or ext.get("brokerId") == "x" or ext.get("brokerAddr") == "nohost"
    assert fast.server.stats.fast_heartbeats == taken + (0 if refused else 1)
    assert slow.server.stats.fast_heartbeats == 0


async def test_an_acknowledged_heartbeat_reaches_redis_with_the_next_write(make_door):
    door = await make_door(heartbeat_flush_ms=10_000)
    c = await door.client()
    store = door.ns.store
    await store.register_broker(RegisterBroker("C1", "b1", 0, "10.0.0.1:10911", "", {"T": TopicConfig()}),
                                now=1_000)
    assert (await c.request(codes.BROKER_HEARTBEAT, heartbeat_ext())).code == 0
    assert await store.redis.zscore(store.keys.live, "C1|10.0.0.1:10911") == 1_000  # not yet written
    assert len(door.ns.liveness) == 1
    await door.ns.liveness.flush()
    assert await store.redis.zscore(store.keys.live, "C1|10.0.0.1:10911") > 1_000
