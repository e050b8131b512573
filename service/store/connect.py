"""Redis connections: bounded timeouts and retries for a real server, in-process fakeredis for embedded mode."""

from __future__ import annotations

import logging

import fakeredis
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import BusyLoadingError, ConnectionError, TimeoutError

from service.config import Settings
from service.store.routes import RouteStore

log = logging.getLogger(__name__)

# One fake server per process, so the app, its pub/sub listener and the scheduler see the same data.
_EMBEDDED_SERVER: fakeredis.FakeServer | None = None

EMBEDDED_WARNING = (
    "EMBEDDED MODE: NAMESRV_REDIS_URL is not set, so routes live in this process only (in-process fakeredis): "
    "not shared with other workers, not durable across restarts. Set NAMESRV_REDIS_URL for production."
)

BULK_SOCKET_TIMEOUT_S = 15.0


def make_redis(settings: Settings, bulk: bool = False) -> aioredis.Redis:
    """A client with decode_responses=True; fails fast (bounded timeouts, a few backed-off retries).

    `bulk=True`: the client for registrations, whose script can legitimately run for hundreds of ms (a broker
    with 100 000 topics): same connect timeout, a long command timeout, no retries (a timed-out register may
    still have been applied; the broker re-registers anyway)."""
    if settings.embedded:
        global _EMBEDDED_SERVER
        if _EMBEDDED_SERVER is None:
            _EMBEDDED_SERVER = fakeredis.FakeServer()
        return fakeredis.FakeAsyncRedis(server=_EMBEDDED_SERVER, decode_responses=True)
    kwargs = {}
    if settings.redis_password:
        kwargs["password"] = settings.redis_password
    # A burst beyond the pool waits for a free connection (bounded) instead of failing at once.
    pool = aioredis.BlockingConnectionPool.from_url(
        settings.redis_url,
        decode_responses=True,
        socket_connect_timeout=settings.redis_connect_timeout_ms / 1000,
        socket_timeout=BULK_SOCKET_TIMEOUT_S if bulk else settings.redis_socket_timeout_ms / 1000,
        retry=Retry(ExponentialBackoff(cap=0.1, base=0.01), 0 if bulk else settings.redis_retries),
        retry_on_error=[ConnectionError, TimeoutError, BusyLoadingError],
        max_connections=32 if bulk else 256,
        timeout=settings.redis_socket_timeout_ms / 1000 + settings.redis_connect_timeout_ms / 1000,
        **kwargs,
    )
    return aioredis.Redis(connection_pool=pool)


def connect_store(settings: Settings) -> RouteStore:
    """The RouteStore for these settings: a fast-failing client, and a bulk one for long scripts."""
    if settings.embedded:
        log.warning(EMBEDDED_WARNING)
        return RouteStore(make_redis(settings), settings.key_prefix, default_timeout_ms=settings.broker_timeout_ms)
    return RouteStore(make_redis(settings), settings.key_prefix, bulk_redis=make_redis(settings, bulk=True),
                      default_timeout_ms=settings.broker_timeout_ms)
