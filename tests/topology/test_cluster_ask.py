"""service/store/cluster_ask.py: without it redis-py 8.1's asyncio RedisCluster cannot follow an ASK redirection
once the target node's pool holds two idle connections (finding C4); with it, sequential and concurrent
ASK-redirected calls succeed. The same client objects are used both ways."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ClusterError

from service.store import cluster_ask
from tests.redis_topology import HOST, ClusterTopology

pytestmark = pytest.mark.redis


async def test_ask_redirection_needs_the_lifo_workaround(cluster_topology):
    c: ClusterTopology = cluster_topology
    slot = c.slot_of("{nsrv}:ver")
    source = c.node_for_slot(slot)
    target = next(p for p in c.primaries() if p is not source)
    on_target = next(k for k in (f"probe{i}" for i in range(10_000))
                     if c.slot_of(k) != slot and c.node_for_slot(c.slot_of(k)) is target)
    m = None
    try:
        for fixed in (False, True):
            (cluster_ask.apply if fixed else cluster_ask.revert)()
            rc = RedisCluster(host=HOST, port=c.nodes[0].port, decode_responses=True)
            try:
                if m is None:
                    await rc.set("{nsrv}:moved", "v")
                    m = await asyncio.to_thread(c.begin_migration, slot, target)
                    m.move(keys=["{nsrv}:moved"])  # the key is on the target, its slot still MIGRATING
                await rc.get(on_target)  # the client knows the target node now
                node = rc.get_node(*target.addr)
                # a second idle connection, deterministically (two concurrent calls may or may not overlap)
                held = [node.acquire_connection(), node.acquire_connection()]
                for conn in held:
                    await conn.connect()
                    node.release(conn)
                assert len(node._free) == 2
                if not fixed:
                    with pytest.raises(ClusterError, match="TTL exhausted"):
                        await rc.get("{nsrv}:moved")
                else:
                    assert await rc.get("{nsrv}:moved") == "v"
                    assert await asyncio.gather(*(rc.get("{nsrv}:moved") for _ in range(50))) == ["v"] * 50
            finally:
                await rc.aclose()
    finally:
        cluster_ask.revert()
        if m is not None:
            await asyncio.to_thread(m.finish)
