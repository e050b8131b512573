"""The route read's shortcut past aiohttp's router: `GET /v1/topics/<topic>/route` goes straight to its handler.

Resolving a request in aiohttp (walk the path's prefixes through the resource index, run the resource's regex,
unquote the match, check middlewares and `Expect`) costs about as much as the rest of a cached route read: under
callgrind, a bare aiohttp handler takes ~167 000 instructions per request and ~140 000 without the router. The
route read is the one request clients send all day, so the server hands it to the same guarded handler the
router would have chosen, with the same match info, and sends everything else through the router.

Only a request the router is certain to resolve the same way takes the shortcut: method GET, a raw path of
exactly `/v1/topics/<name>/route` where the name uses the topic alphabet without `%` (so nothing is
percent-decoded or normalised), no query string, no `Expect` header, and an app without middlewares.
tests/unit/test_hot_path.py sends the same requests both ways and compares status, headers, body and metrics.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from aiohttp import hdrs, web
from aiohttp.web_urldispatcher import AbstractRoute, UrlMappingMatchInfo

HOT_PATH = "/v1/topics/{topic}/route"
_HOT = re.compile(r"/v1/topics/([A-Za-z0-9_|-]{1,127})/route")  # RocketMQ's topic alphabet, less `%`
Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]


def _get_route(app: web.Application) -> AbstractRoute | None:
    for resource in app.router.resources():
        if resource.canonical == HOT_PATH:
            for route in resource:
                if route.method == hdrs.METH_GET:
                    return route
    return None


def route_read_shortcut(app: web.Application, through_router: Handler) -> Handler:
    """A request handler for aiohttp's Server: route reads directly, the rest `through_router` (app._handle)."""
    route = _get_route(app)
    if route is None or app.middlewares:  # nothing to shortcut, or middlewares the shortcut would skip
        return through_router
    handler = route.handler
    fullmatch = _HOT.fullmatch

    async def dispatch(request: web.BaseRequest) -> web.StreamResponse:
        if request.method == hdrs.METH_GET:
            m = fullmatch(request.raw_path)
            if m is not None and hdrs.EXPECT not in request.headers:
                match_info = UrlMappingMatchInfo({"topic": m.group(1)}, route)
                match_info.add_app(app)
                match_info.freeze()
                request._match_info = match_info  # noqa: SLF001 - what Application._handle sets
                return await handler(request)
        return await through_router(request)

    return dispatch
