"""Operational endpoints: liveness, readiness, metrics, the RocketMQ name-server address lookup."""

from __future__ import annotations

import os
from collections.abc import Callable

from aiohttp import web

from service.core.announce import live_addresses
from service.http.handlers import NS


async def livez(request: web.Request) -> web.Response:
    """The process answers: never depends on Redis (a Redis outage must not restart workers)."""
    return web.json_response({"status": "ok", "pid": os.getpid()})


# Other parts of the worker that must be up for it to be ready (the remoting listener): each returns None when
# fine, or why not. Filled by service/server.py.
READINESS: web.AppKey[list[Callable[[], str | None]]] = web.AppKey("readiness", list)


async def not_ready(app: web.Application) -> str | None:
    """Why this worker is not ready, or None: Redis reachable and scripts loaded (loads them again after a Redis
    restart), and every door listening. Recorded as the namesrv_ready gauge."""
    ns = app[NS]
    reason = next((r for r in (check() for check in app.get(READINESS, ())) if r is not None), None)
    if reason is None:
        reason = await ns.unready(timeout_s=1.0)
    ns.metrics.ready.set(reason is None)
    return reason


async def readyz(request: web.Request) -> web.Response:
    reason = await not_ready(request.app)
    if reason is not None:
        return web.json_response({"status": "unavailable", "reason": reason}, status=503)
    return web.json_response({"status": "ok"})


async def metrics(request: web.Request) -> web.Response:
    """Prometheus exposition; readiness is checked first, so namesrv_ready says what /readyz would answer now
    (one Redis round trip per scrape, bounded at 1 s)."""
    ns = request.app[NS]
    await not_ready(request.app)
    return web.Response(body=ns.metrics.render(ns.routes, ns),
                        headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})


def advertised(request: web.Request) -> str:
    """This worker's own address: `announce_addr` when set, else this host as the client reached it, at the native
    remoting port (what RocketMQ clients and brokers connect to), or at the HTTP port when remoting is off."""
    settings = request.app[NS].base_settings
    if settings.announce_addr:
        return settings.announce_addr
    host = request.host.rsplit(":", 1)[0] if request.host else "127.0.0.1"
    if host.startswith("[") and not host.endswith("]"):  # an IPv6 literal without a port
        host = request.host
    return f"{host}:{settings.remoting_port or settings.port}"


async def nsaddr(request: web.Request) -> web.Response:
    """RocketMQ's address-server lookup (`/rocketmq/nsaddr`): `host:port;host:port` as plain text.

    `advertised_addrs` when configured; else every worker whose announcement's lease is live (sorted, so every
    worker answers the same text and clients see a change only when the set changes); else (embedded mode, or a
    registry that lost its entries until the next renewal) this worker itself. Redis unreachable: 503 within the
    store's deadline; RocketMQ clients and brokers keep the list they have on any answer but 200."""
    ns = request.app[NS]
    if ns.base_settings.advertised_addrs:
        return web.Response(text=ns.base_settings.advertised_addrs, content_type="text/plain")
    addrs = await live_addresses(ns.store)
    return web.Response(text=";".join(addrs) if addrs else advertised(request), content_type="text/plain")
