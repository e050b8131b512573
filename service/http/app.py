"""`create_app(nameserver)`: the HTTP door of one worker — routes, the middleware, the core it calls.

It only builds the aiohttp application; connecting Redis, starting the core and the scheduler, signals and
worker processes are service/server.py's job.
"""

from __future__ import annotations

from aiohttp import web

from service.core import NameServer
from service.http.handlers import NS
from service.http.middlewares import front_door
from service.http.routes import setup_routes


def create_app(ns: NameServer) -> web.Application:
    app = web.Application(middlewares=[front_door], client_max_size=ns.base_settings.max_body_bytes)
    app[NS] = ns
    setup_routes(app)
    return app
