"""`create_app(nameserver)`: the HTTP door of one worker — its routes (each guarded) and the core they call.

It only builds the aiohttp application; connecting Redis, starting the core and the scheduler, signals and
worker processes are service/server.py's job.
"""

from __future__ import annotations

from aiohttp import web

from service.core import NameServer
from service.http.handlers import NS
from service.http.routes import setup_routes


def create_app(ns: NameServer) -> web.Application:
    app = web.Application(client_max_size=ns.base_settings.max_body_bytes)
    app[NS] = ns
    setup_routes(app, ns.metrics.http)
    return app
