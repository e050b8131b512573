"""How a store call reaches Redis: deadlines scaled by the work a call carries, what a write waits for (WAIT), and
redis-py's exceptions as the project's errors (transient trouble is StoreUnavailable: 503 / retry). Shared by the
route store (routes.py), the controller store and the snapshots."""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import wraps
from typing import Any, ParamSpec, TypeVar

import hiredis
from redis.exceptions import (
    AskError,
    BusyLoadingError,
    ClusterDownError,
    ClusterError,
    MovedError,
    RedisClusterException,
    RedisError,
    ResponseError,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.exceptions import (
    ConnectionError as RedisConnectionError,
)
from redis.exceptions import (
    TimeoutError as RedisTimeoutError,
)

from service.errors import NamesrvError, StoreUnavailable
from service.store.outage import OUTAGE, refused

log = logging.getLogger(__name__)
# Replies Redis gives while it cannot serve (restart, failover, cluster reconfiguration): retry later.
_TRANSIENT = ("LOADING", "BUSY", "MASTERDOWN", "READONLY", "TRYAGAIN", "CLUSTERDOWN", "NOREPLICAS")
# Cluster trouble redis-py reports in words (C3): a slot migrating under a script, or no node reachable.
_TRANSIENT_TEXT = ("non local key", "TTL exhausted", "cannot be connected", "No targets were found")
# Redis-side cost of a bulk call per topic it carries, with a 4x margin (benchmarks/README.md: a registration of
# 100 000 changed topics takes ~0.5 s of Redis time here); a call's deadline grows by this per topic.
PER_TOPIC_S = 20e-6

# What a redis-py call can raise: RedisClusterException is not a RedisError (e.g. SlotNotCoveredError).
REDIS_ERRORS = (RedisError, RedisClusterException, OSError)

# Failed Redis calls of this process by kind, counted where they are translated (service/metrics.py exports them
# as namesrv_redis_errors_total): plain ints, one event loop per process.
FAILURES: collections.Counter[str] = collections.Counter()

P = ParamSpec("P")
R = TypeVar("R")


def translate(exc: BaseException) -> NamesrvError:
    """A redis-py exception as the project's error: transient trouble is StoreUnavailable (503 / retry). Counted in
    FAILURES by kind, and told to the log once per outage (service/store/outage.py), where Redis and the cause
    are named; the reply says only that the store is unavailable (clients are not told where Redis is)."""
    if type(exc) is TimeoutError:  # the store's own deadline (asyncio.timeout), not a socket timeout
        FAILURES["deadline"] += 1
        OUTAGE.failed(exc, at_once=False)
        return StoreUnavailable("the route store (Redis) did not answer in time; retry shortly")
    if isinstance(exc, RedisConnectionError | RedisTimeoutError | BusyLoadingError | OSError):
        FAILURES["not_ready" if isinstance(exc, BusyLoadingError) else "connection"] += 1
        OUTAGE.failed(exc, at_once=True)
        return StoreUnavailable(f"the route store (Redis) is unavailable: {type(exc).__name__}; retry shortly")
    text = str(exc)
    if isinstance(exc, ResponseError) and text.split(" ", 1)[0] in _TRANSIENT:
        FAILURES["not_ready"] += 1
        OUTAGE.failed(exc, at_once=True)
        return StoreUnavailable(f"the route store is not ready: {text.split(' ', 1)[0]}; retry shortly")
    if isinstance(exc, TryAgainError | MovedError | AskError | ClusterDownError | SlotNotCoveredError) or (
            isinstance(exc, ResponseError | ClusterError | RedisClusterException)
            and any(t in text for t in _TRANSIENT_TEXT)):
        FAILURES["resharding"] += 1
        OUTAGE.failed(exc, at_once=False)
        return StoreUnavailable("the route store is being resharded or failed over; retry shortly")
    FAILURES["error"] += 1
    if refused(exc) is not None:  # NOPERM, a database number Redis lacks: the server's log says which
        OUTAGE.failed(exc, at_once=True)
        return StoreUnavailable("the route store (Redis) refuses this server's configuration; see its log")
    log.error("unexpected Redis error: %s", text)
    return NamesrvError(f"route store error: {type(exc).__name__}")


def report(gate: Any, exc: BaseException, err: NamesrvError, ping: Callable[[], Awaitable[Any]]) -> None:
    """Tell the route store's gate (admission.py) what a failed call says of Redis: unreachable (down at once), or
    out of time (suspect: a PING decides), or nothing (a script error, a refused WAIT)."""
    if not isinstance(err, StoreUnavailable) or isinstance(err, ReplicationUnconfirmed):
        return
    if type(exc) is TimeoutError or isinstance(exc, RedisTimeoutError):
        gate.suspect(err.message, ping)
    else:
        gate.unavailable(err.message)


def store_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Decorate a store method that talks to Redis directly (not through `_run`)."""

    @wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            result = await fn(*args, **kwargs)
        except REDIS_ERRORS as exc:
            raise translate(exc) from exc
        OUTAGE.answered()
        return result

    return wrapper


def leanable(client: Any) -> bool:
    """Whether `client` can take LeanScripts: a plain redis-py client (also Sentinel's) whose connections are its
    own stream connections; not a Cluster client, not fakeredis (embedded mode, unit tests)."""
    pool = getattr(client, "connection_pool", None)
    cls = getattr(pool, "connection_class", None)
    return (cls is not None and cls.__module__.startswith("redis.") and hasattr(cls, "pack_command")
            and not hasattr(client, "get_node_from_key"))


class LeanScripts:
    """EVALSHA on connections of a client's pool, without what redis-py's execute_command puts around every call —
    its retry wrapper, its observability hooks, a task per socket write (asyncio.wait_for), a timeout per read, and
    the pool's own locking and health check per call — which cost a changed registration ~45 µs of worker CPU, more
    than packing and parsing (benchmarks/README.md). The store's own deadline around the call (RouteStore._run)
    bounds it, and the clients it is used with retry nothing on their own.

    A few connections stay with it between calls (KEEP); one is checked as the pool checks it before it is used
    again — still connected, nothing unread nor the server's close pending, not marked for reconnection (a
    Sentinel failover marks them all) — and otherwise goes back to the pool, which reconnects it. Any failure
    mid-call drops the connection, as redis-py does, so no reply is ever left unread for another call; a Redis
    error reply is raised as redis-py raises it (NOSCRIPT as NoScriptError). Only for clients `leanable` says yes
    to."""

    KEEP = 4

    def __init__(self, client: Any) -> None:
        self.pool = client.connection_pool
        self.idle: list[Any] = []
        # marks for reconnection are how redis-py tells a kept connection to go (redis-py 5 has none: keep none)
        self.keep = self.KEEP if hasattr(self.pool.connection_class, "should_reconnect") else 0

    async def call(self, sha: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        conn = await self._take()
        try:
            writer = conn._writer
            writer.write(hiredis.pack_command(("EVALSHA", sha, len(keys), *keys, *args)))
            await writer.drain()  # returns at once unless the socket's buffer is full (a 100 000-topic payload)
            res = await conn._parser.read_response()
        except BaseException:
            await conn.disconnect(nowait=True)
            await self.pool.release(conn)
            raise
        if len(self.idle) < self.keep:
            self.idle.append(conn)
        else:
            await self.pool.release(conn)
        if isinstance(res, ResponseError):
            raise res
        return res

    async def _take(self) -> Any:
        while self.idle:
            conn = self.idle.pop()
            if conn.is_connected and not conn.should_reconnect() and not await conn.can_read():
                return conn
            await conn.disconnect()
            await self.pool.release(conn)  # the pool connects it again when it lends it next
        return await self.pool.get_connection()

    async def close(self) -> None:
        idle, self.idle = self.idle, []
        for conn in idle:
            await self.pool.release(conn)


class ReplicationUnconfirmed(StoreUnavailable):
    """A write was applied on the primary but fewer replicas than required confirmed it (WAIT): it may be lost
    on a failover, so it is not acknowledged as a success."""

    code = "REPLICATION_UNCONFIRMED"


def _unconfirmed(acked: Any, replicas: int, timeout_ms: int) -> str:
    """REPLICATION_UNCONFIRMED's message, one sentence whatever WAIT answered."""
    wanted = f"{replicas} Redis replica{'s' if replicas != 1 else ''}"
    if isinstance(acked, Exception):
        told = f"waiting for {wanted} to confirm it failed ({type(acked).__name__}: {acked})"
    else:
        told = f"{int(acked)} of {wanted} confirmed it within {timeout_ms} ms"
    return f"The change was written, but {told}, so a failover may lose it: check it, then retry."


@dataclass(frozen=True)
class StoreLimits:
    """How long calls may take and what a write waits for (settings redis_deadline_ms, redis_bulk_deadline_ms,
    redis_wait_*)."""

    deadline_s: float = 1.0
    bulk_deadline_s: float = 10.0
    wait_replicas: int = 0
    wait_timeout_ms: int = 1000
    wait_registrations: bool = False
    chunk_topics: int = 0  # registrations with more topics go in steps of this many (0 = always whole) ...
    adaptive_steps: bool = False  # ... or in steps sized by what they cost on this Redis, from this many (steps.py)
    # Bulk calls (registrations, removals, expiry) under way at once per worker (admission.py; setting
    # redis_bulk_concurrency): enough to keep Redis busy while the worker decodes the next registrations, and to
    # ride out scheduling delays on a busy host (4 took about twice as long as 8 to take 1 000 registrations of
    # 1 000 topics on a loaded 2-core host, benchmarks.storm), few enough that a read behind them in Redis's queue
    # waits tens of ms at most (steps of about 5 ms, steps.py).
    bulk_turns: int = 8

    def bulk(self, topics: int) -> float:
        """The deadline of a call carrying `topics` topics (or heartbeats): scaled, with a ceiling."""
        return min(self.bulk_deadline_s, self.deadline_s + topics * PER_TOPIC_S)


def bounded(bulk: bool = False) -> Callable[[Callable[..., Awaitable[R]]], Callable[..., Awaitable[R]]]:
    """Decorate a store method (its object has `limits`) that talks to Redis directly (not through `_run`): the
    call's deadline, redis-py errors as the project's, and (the route store's) whether Redis answered."""

    def deco(fn: Callable[..., Awaitable[R]]) -> Callable[..., Awaitable[R]]:
        @wraps(fn)
        async def wrapper(self: Any, *args: Any, **kwargs: Any) -> R:
            limits = self.limits
            gate = getattr(self, "gate", None)  # the route store's: told whether Redis answered (admission.py)
            try:
                async with asyncio.timeout(limits.bulk_deadline_s if bulk else limits.deadline_s):
                    result = await fn(self, *args, **kwargs)
            except REDIS_ERRORS as exc:
                err = translate(exc)
                if gate is not None:
                    report(gate, exc, err, self.ping)
                raise err from exc
            OUTAGE.answered()
            if gate is not None:
                gate.available()
            return result

        return wrapper

    return deco
