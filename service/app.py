"""`create_app(settings)`: the aiohttp application of one stateless worker.

Setup and teardown are paired in cleanup_ctx: the Redis client and script loading, the route cache with its
change-event listener, and the scheduler (expiry scan, snapshots, gauges).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

import redis.asyncio as aioredis
from aiohttp import web

from service.auth import Authenticator
from service.coalesce import Coalescer
from service.config import Settings
from service.http.context import AUTH, CACHE, HEARTBEATS, METRICS, RUNTIME, SETTINGS, STORE, Runtime
from service.http.middlewares import front_door
from service.http.routes import setup_routes
from service.metrics import Metrics
from service.redis_client import EMBEDDED_WARNING, make_redis
from service.route_cache import RouteCache
from service.scheduler import build_scheduler
from service.store import RouteStore

log = logging.getLogger(__name__)


def create_app(settings: Settings, *, redis: aioredis.Redis | None = None, scheduler: bool = True) -> web.Application:
    app = web.Application(middlewares=[front_door], client_max_size=settings.max_body_bytes)
    client = redis if redis is not None else make_redis(settings)
    bulk = None if redis is not None or settings.embedded else make_redis(settings, bulk=True)
    store = RouteStore(client, settings.key_prefix, bulk_redis=bulk)
    runtime = Runtime(settings)
    app[SETTINGS] = settings
    app[STORE] = store
    app[METRICS] = Metrics()
    app[AUTH] = Authenticator(settings.broker_tokens, settings.admin_token, settings.read_token)
    app[RUNTIME] = runtime
    app[HEARTBEATS] = Coalescer(store.heartbeat_many)
    app[CACHE] = RouteCache(store, settings.route_cache_staleness_ms, settings.route_cache, on_config=runtime.apply)
    setup_routes(app)
    app.cleanup_ctx.append(_store_ctx)
    app.cleanup_ctx.append(_cache_ctx)
    if scheduler:
        app.cleanup_ctx.append(_scheduler_ctx)
    return app


async def _store_ctx(app: web.Application) -> AsyncIterator[None]:
    settings, store = app[SETTINGS], app[STORE]
    if settings.embedded:
        log.warning(EMBEDDED_WARNING)
    if app[AUTH].open_mode:
        log.warning("OPEN MODE: no NAMESRV_BROKER_TOKENS / NAMESRV_ADMIN_TOKEN / NAMESRV_READ_TOKEN is set; "
                    "anyone who reaches this port can register brokers, delete topics and change config")
    try:
        await store.load_scripts()
        app[RUNTIME].apply(await store.get_runtime_config())
    except Exception as exc:  # Redis down at start: serve 503s and recover when it returns
        log.warning("Redis is not reachable at start (%s); /readyz fails until it is", exc)
    yield
    with contextlib.suppress(Exception):
        await store.redis.aclose()
        if store.bulk_redis is not store.redis:
            await store.bulk_redis.aclose()


async def _cache_ctx(app: web.Application) -> AsyncIterator[None]:
    cache = app[CACHE]
    await cache.start()
    yield
    await cache.stop()


async def _scheduler_ctx(app: web.Application) -> AsyncIterator[None]:
    sched = build_scheduler(app[SETTINGS], app[STORE], app[METRICS])
    sched.start()
    yield
    sched.shutdown(wait=False)
