"""Operational endpoints: liveness, readiness, metrics, the RocketMQ name-server address lookup."""

from __future__ import annotations

import asyncio
import os

from aiohttp import web

from service.http.context import CACHE, METRICS, SETTINGS, STORE


async def livez(request: web.Request) -> web.Response:
    """The process answers: never depends on Redis (a Redis outage must not restart workers)."""
    return web.json_response({"status": "ok", "pid": os.getpid()})


async def readyz(request: web.Request) -> web.Response:
    """Redis reachable and scripts loaded (loads them again after a Redis restart)."""
    store = request.app[STORE]
    try:
        await asyncio.wait_for(store.load_scripts_if_missing(), timeout=1.0)
    except Exception as exc:
        return web.json_response({"status": "unavailable", "reason": f"redis: {type(exc).__name__}"},
                                 status=503)
    return web.json_response({"status": "ok"})


async def metrics(request: web.Request) -> web.Response:
    m, cache = request.app[METRICS], request.app[CACHE]
    m.cache_hits.set(cache.hits)
    m.cache_misses.set(cache.misses)
    total = cache.hits + cache.misses
    m.cache_hit_ratio.set(cache.hits / total if total else 0.0)
    m.cache_entries.set(len(cache))
    return web.Response(body=m.render(), headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})


def advertised(request: web.Request) -> str:
    configured = request.app[SETTINGS].advertised_addrs
    if configured:
        return configured
    host = request.host.rsplit(":", 1)[0] if request.host else "127.0.0.1"
    return f"{host}:{request.app[SETTINGS].port}"


async def nsaddr(request: web.Request) -> web.Response:
    """RocketMQ's address-server lookup (`/rocketmq/nsaddr`): `host:port;host:port` as plain text."""
    return web.Response(text=advertised(request), content_type="text/plain")
