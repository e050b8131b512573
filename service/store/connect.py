"""Redis connections for the three deployments — one URL, Sentinel, Cluster — and embedded mode.

redis-py's own clients throughout (BlockingConnectionPool, Sentinel.master_for, RedisCluster): bounded socket
timeouts and a few backed-off retries; the store adds a per-call deadline on top (script_runner.py `_run`), so how long
a request can wait on Redis never depends on the retry arithmetic below. See docs/redis-topologies.md for the
findings each choice rests on (S1–S4, C1–C6).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import fakeredis
import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.exceptions import BusyLoadingError, ConnectionError, TimeoutError

from service.config import Settings
from service.store.outage import OUTAGE, refused
from service.store.routes import RouteStore, StoreLimits
from service.store.scripts import load_all

log = logging.getLogger(__name__)

# One fake server per process, so the app, its pub/sub listener and the scheduler see the same data.
_EMBEDDED_SERVER: fakeredis.FakeServer | None = None

EMBEDDED_WARNING = (
    "EMBEDDED MODE: NAMESRV_REDIS_URL is not set, so routes live in this process only (in-process fakeredis): "
    "not shared with other workers, not durable across restarts. Set NAMESRV_REDIS_URL for production."
)
POOL_SIZE = 256  # per worker (and per cluster node): a burst beyond it waits (single) or gets 503 (cluster)
BULK_POOL_SIZE = 64  # registrations: under read load a reply waits for the loop, and the connection with it

Client = aioredis.Redis | RedisCluster


def _retry(settings: Settings, bulk: bool) -> Retry:
    # Bulk scripts are not retried: a timed-out registration may still have been applied (the broker repeats
    # it in 30 s anyway), and re-sending 100 000 topics to a struggling Redis helps nobody.
    return Retry(ExponentialBackoff(cap=0.1, base=0.01), 0 if bulk else settings.redis_retries)


def _socket_timeout(settings: Settings, bulk: bool) -> float:
    # The bulk client's socket timeout is the ceiling of the per-call deadline; the deadline itself (scaled by
    # the topics a call carries) is what answers 503 against a hung Redis. Either outlasts a WAIT for replicas
    # (Settings.redis_command_timeout_ms), so a WAIT that times out answers REPLICATION_UNCONFIRMED.
    command_ms = settings.redis_command_timeout_ms
    return max(settings.redis_bulk_deadline_ms, command_ms) / 1000 if bulk else command_ms / 1000


def make_sentinel(settings: Settings) -> Sentinel:
    """The sentinel manager: its own password and a fast-failing retry for the sentinels (S1: with redis-py's
    default Retry a dead or refusing sentinel listed first costs 3–4 s before the next one is asked)."""
    connect_s = settings.redis_connect_timeout_ms / 1000
    sentinel_kwargs: dict[str, Any] = {
        "socket_timeout": settings.redis_socket_timeout_ms / 1000,
        "socket_connect_timeout": connect_s,
        "retry": Retry(NoBackoff(), 0),
        "decode_responses": True,
    }
    if settings.redis_sentinel_password:
        sentinel_kwargs["password"] = settings.redis_sentinel_password
    tls = settings.sentinel_tls_options  # the sentinels and the data nodes alike
    data: dict[str, Any] = {"decode_responses": True, "socket_connect_timeout": connect_s, **tls}
    if settings.redis_password:
        data["password"] = settings.redis_password
    return Sentinel(settings.sentinel_addresses, sentinel_kwargs={**sentinel_kwargs, **tls}, **data)


def make_redis(settings: Settings, bulk: bool = False, sentinel: Sentinel | None = None) -> Client:
    """A client with decode_responses=True for the configured deployment; fails fast (bounded timeouts, a few
    backed-off retries). `bulk=True`: the client for scripts that may legitimately run for hundreds of ms (a
    broker with 100 000 topics): a socket timeout as long as the bulk deadline's ceiling, no retries."""
    if settings.embedded:
        global _EMBEDDED_SERVER
        if _EMBEDDED_SERVER is None:
            _EMBEDDED_SERVER = fakeredis.FakeServer()
        return fakeredis.FakeAsyncRedis(server=_EMBEDDED_SERVER, decode_responses=True)
    common: dict[str, Any] = {
        "decode_responses": True,
        "socket_connect_timeout": settings.redis_connect_timeout_ms / 1000,
        "socket_timeout": _socket_timeout(settings, bulk),
        "retry": _retry(settings, bulk),
    }
    if settings.redis_password:
        common["password"] = settings.redis_password
    mode = settings.redis_mode
    if mode == "sentinel":
        # The pool asks the sentinels for the master on every new connection; pooled connections are dropped
        # when a sentinel announces +switch-master (RouteStore watches it: S3).
        sentinel = sentinel or make_sentinel(settings)
        # TLS options (if any) are already in the Sentinel's connection kwargs (make_sentinel).
        return sentinel.master_for(settings.redis_master_name, retry_on_error=[BusyLoadingError],
                                   max_connections=BULK_POOL_SIZE if bulk else POOL_SIZE, **common)
    if mode == "cluster":
        from service.store import cluster_ask

        cluster_ask.apply()  # C4: redis-py 8.1's ASK redirection needs LIFO connection reuse (see the module)
        # Every key of a registry hashes to one slot, so every script runs on the slot's primary (C1);
        # MOVED/ASK are followed by the client, connection errors refresh its slot map.
        # More seeds than the URL's: any one answering at start is enough (then the clients know every node).
        seeds = [ClusterNode(host, port) for host, port in settings.cluster_seed_addresses]
        return RedisCluster.from_url(settings.redis_url, max_connections=BULK_POOL_SIZE if bulk else POOL_SIZE,
                                     retry_on_error=[BusyLoadingError], startup_nodes=seeds or None, **common)
    # A burst beyond the pool waits for a free connection (bounded) instead of failing at once.
    pool = aioredis.BlockingConnectionPool.from_url(
        settings.redis_url,
        retry_on_error=[ConnectionError, TimeoutError, BusyLoadingError],
        max_connections=BULK_POOL_SIZE if bulk else POOL_SIZE,
        timeout=settings.redis_socket_timeout_ms / 1000 + settings.redis_connect_timeout_ms / 1000,
        **common,
    )
    return aioredis.Redis(connection_pool=pool)


def store_limits(settings: Settings) -> StoreLimits:
    return StoreLimits(
        deadline_s=settings.redis_deadline_ms / 1000,
        bulk_deadline_s=settings.redis_bulk_deadline_ms / 1000,
        wait_replicas=0 if settings.embedded else settings.redis_wait_replicas,  # fakeredis has no replicas
        wait_timeout_ms=settings.redis_wait_timeout_ms,
        wait_registrations=settings.redis_wait_registrations,
        chunk_topics=settings.chunk_topics,
        # with Redis and no configured size, steps are sized by what they cost there (service/store/steps.py)
        adaptive_steps=not settings.registration_chunk_topics and not settings.embedded,
        bulk_turns=settings.redis_bulk_concurrency,
    )


def redis_target(settings: Settings) -> str:
    """Redis as the log names it: the URL (password masked), the Sentinel service and sentinels, the seeds."""
    url = settings.masked()["redis_url"]
    if settings.redis_mode == "sentinel":
        return f"Redis (Sentinel service {settings.redis_master_name} via {settings.redis_sentinels})"
    if settings.redis_mode == "cluster":
        seeds = ", ".join([url, *filter(None, settings.redis_cluster_nodes.split(","))])
        return f"Redis Cluster (seeds {seeds})"
    return f"Redis {url}"


async def configuration_refused(settings: Settings, within_s: float = 5.0) -> str | None:
    """At start, before any worker: what Redis answered if it is reachable but refuses this configuration (a wrong
    password or ACL user, a database it does not have, an ACL without the scripting or key rights the store
    needs), else None. An unreachable Redis is an outage the workers wait out, not a reason not to start."""
    store = connect_store(settings)
    try:
        async with asyncio.timeout(within_s):
            await store.redis.ping()  # AUTH and SELECT happen as the connection opens
            for script in load_all().values():
                await store.redis.script_load(script.source)
            await store.redis.get(store.keys.version)
    except Exception as exc:  # noqa: BLE001 (whatever it is, only a refusal stops the start)
        refusal = refused(exc)
        return None if refusal is None else f"{redis_target(settings)} refuses this configuration: {refusal}"
    finally:
        await store.close()
    return None


def connect_store(settings: Settings) -> RouteStore:
    """The RouteStore for these settings: a fast-failing client, and a bulk one for long scripts."""
    if settings.embedded:
        log.warning(EMBEDDED_WARNING)
        return RouteStore(make_redis(settings), settings.key_prefix, default_timeout_ms=settings.broker_timeout_ms,
                          limits=store_limits(settings))
    OUTAGE.target = redis_target(settings)
    sentinel = make_sentinel(settings) if settings.redis_mode == "sentinel" else None
    return RouteStore(make_redis(settings, sentinel=sentinel), settings.key_prefix,
                      bulk_redis=make_redis(settings, bulk=True, sentinel=sentinel),
                      default_timeout_ms=settings.broker_timeout_ms, limits=store_limits(settings),
                      sentinel=sentinel, master_name=settings.redis_master_name)
