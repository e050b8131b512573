"""Workaround for redis-py's asyncio RedisCluster ASK redirection (finding C4, docs/redis-topologies.md).

On ASK, `RedisCluster._execute_command` sends `ASKING` and then the command as two separate pooled calls on the
target node; `ClusterNode.acquire_connection` hands idle connections out FIFO, so once the target holds two idle
connections the command never lands on the connection that got ASKING: the target answers MOVED, the source ASK
again, until `ClusterError("TTL exhausted.")` — while the registry's slot migrates, every redirected call fails,
and the MOVED ping-pong makes the client close itself every 5 MOVEDs under concurrent callers.

The fix: take idle connections LIFO. `ASKING` returns its connection to the pool and the command acquires one
with no await in between, so it gets that same connection. Verified with redis-py 8.1.0 against redis-server
7.0.15 (tests/topology/test_cluster_ask.py fails without it). `apply()` is idempotent and touches one method;
remove this module once redis-py sends ASKING and the command on one connection.
"""

from __future__ import annotations

from redis.asyncio.cluster import ClusterNode
from redis.asyncio.connection import Connection

_original = ClusterNode.acquire_connection


def _acquire_lifo(self: ClusterNode) -> Connection:
    free = self._free
    if free:
        return free.pop()  # the connection released last: the one ASKING just used
    return _original(self)  # none idle: redis-py's own path (new connection, or MaxConnectionsError)


def apply() -> None:
    """Make ClusterNode reuse the most recently released connection (process-wide)."""
    ClusterNode.acquire_connection = _acquire_lifo  # type: ignore[method-assign]


def revert() -> None:
    """redis-py's own FIFO behaviour (tests show the bug with it)."""
    ClusterNode.acquire_connection = _original  # type: ignore[method-assign]


def applied() -> bool:
    return ClusterNode.acquire_connection is _acquire_lifo
