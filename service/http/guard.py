"""What every HTTP request goes through: errors as JSON, request ids, request metrics.

A wrapper applied to each route's handler when the router is built, rather than an aiohttp middleware: a
middleware costs two extra coroutine frames per request (aiohttp adds its own alongside), about 5% of a cached
route read. Unmatched paths and methods reach a catch-all route, so the router's 404/405 are JSON too.
Errors never leak tracebacks: a NamesrvError gets its status and code (service/http/errors.py), the body
limit's 413 the same JSON, anything else 500 SYSTEM_ERROR logged with the request id.
"""

from __future__ import annotations

import itertools
import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from functools import wraps

from aiohttp import web

from service.errors import NamesrvError, PayloadTooLarge
from service.http.errors import MethodNotAllowed, NotFound, error_response
from service.http.handlers import NS
from service.metrics import RequestStats

log = logging.getLogger("service.http")
_ids = itertools.count(1)
_ID_PREFIX = f"{os.getpid():x}-{uuid.uuid4().hex[:6]}-"
CATCH_ALL = "/{tail}"  # the canonical path aiohttp gives the catch-all route "/{tail:.*}"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def next_request_id() -> str:
    """Unique per process start and cheap: uuid4 on every request cost ~9% of a cached route read."""
    return _ID_PREFIX + format(next(_ids), "x")


def _from_http(request: web.Request, exc: web.HTTPException) -> NamesrvError:
    if exc.status == 413:
        return PayloadTooLarge(f"body larger than {request.app[NS].base_settings.max_body_bytes} bytes")
    if exc.status == 404:
        return NotFound(f"no route for {request.method} {request.path}")
    if exc.status == 405:
        return MethodNotAllowed(f"{request.method} is not allowed on {request.path}")
    return NamesrvError(exc.reason or "HTTP error")


def _body_unread(request: web.Request) -> bool:
    return request.body_exists and not request.content.is_eof()


def close_unread(request: web.Request, resp: web.StreamResponse) -> None:
    """After refusing a request whose body was not (all) read: close the connection rather than read the rest of
    the body to discard it, which aiohttp otherwise does for up to 10 s per connection."""
    resp.force_close()
    stop_lingering = getattr(request.protocol, "stop_lingering", None)  # service/http/runner.py's connections
    if stop_lingering is not None:
        stop_lingering()


def guarded(handler: Handler, route: str, stats: RequestStats) -> Handler:
    """`handler` with errors as JSON, the request id echoed, and its latency counted under `route`."""
    observe = stats.observe

    @wraps(handler)
    async def run(request: web.Request) -> web.StreamResponse:
        started = time.perf_counter()
        stats.in_flight += 1
        try:
            resp = await handler(request)
        except NamesrvError as err:
            stats.errors[err.code] += 1
            resp = error_response(err, request.headers.get("X-Request-Id") or next_request_id())
            if _body_unread(request):
                close_unread(request, resp)
        except web.HTTPException as exc:
            err = _from_http(request, exc)
            stats.errors[err.code] += 1
            resp = error_response(err, request.headers.get("X-Request-Id") or next_request_id())
            if _body_unread(request):
                close_unread(request, resp)
        except Exception:
            request_id = request.headers.get("X-Request-Id") or next_request_id()
            log.exception("unhandled error (request %s)", request_id)
            stats.errors[NamesrvError.code] += 1
            resp = error_response(NamesrvError("internal error; see the server log"), request_id)
        else:
            given = request.headers.get("X-Request-Id")
            if given:
                resp.headers["X-Request-Id"] = given
        finally:
            stats.in_flight -= 1
        observe(route, request.method, resp.status, time.perf_counter() - started)
        return resp

    return run


async def unmatched(request: web.Request) -> web.Response:
    """The catch-all route: 405 when the path exists with other methods, else 404, as JSON."""
    allowed = set()
    for resource in request.app.router.resources():
        if resource.canonical == CATCH_ALL:
            continue
        if resource._match(request.rel_url.path_safe) is not None:  # noqa: SLF001 - aiohttp's own matcher
            allowed |= {route.method for route in resource}
    if allowed:
        raise web.HTTPMethodNotAllowed(request.method, allowed)
    raise web.HTTPNotFound()
