"""HTTP view of the RocketMQ 5 controller's state (read role): each broker set's master, epochs, SyncStateSet and
replicas with their liveness, for `namesrv admin controller` and operators (docs/controller-protocol.md)."""

from __future__ import annotations

from aiohttp import web

from service.core.controller import controller_of
from service.http.handlers import NS, reply


async def broker_sets(request: web.Request) -> web.Response:
    ns = request.app[NS]
    names = [n for n in request.query.get("names", "").split(",") if n]
    sets = await controller_of(ns).broker_sets(names)
    return reply({"enabled": ns.settings.controller, "brokerSets": sets})
