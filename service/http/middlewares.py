"""One middleware for every request: errors as JSON, request ids, request metrics.

Errors never leak tracebacks: a NamesrvError gets its status and code (service/http/errors.py); the router's
404/405 and the body limit's 413 become the same JSON; anything else is 500 SYSTEM_ERROR, logged with the
request id. Who the caller is and what it may do is decided by the core (handlers pass the Principal).
"""

from __future__ import annotations

import itertools
import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable

from aiohttp import web

from service.errors import NamesrvError, PayloadTooLarge
from service.http.errors import MethodNotAllowed, NotFound, error_response
from service.http.handlers import NS
from service.http.routes import ROUTE_NAMES

log = logging.getLogger("service.http")
_ids = itertools.count(1)
_ID_PREFIX = f"{os.getpid():x}-{uuid.uuid4().hex[:6]}-"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def next_request_id() -> str:
    """Unique per process start and cheap: uuid4 on every request cost ~9% of a cached route read."""
    return _ID_PREFIX + format(next(_ids), "x")


def _from_http(request: web.Request, exc: web.HTTPException) -> NamesrvError:
    if exc.status == 404:
        return NotFound(f"no route for {request.method} {request.path}")
    if exc.status == 405:
        return MethodNotAllowed(f"{request.method} is not allowed on {request.path}")
    if exc.status == 413:
        return PayloadTooLarge(f"body larger than {request.app[NS].base_settings.max_body_bytes} bytes")
    return NamesrvError(exc.reason or "HTTP error")


@web.middleware
async def front_door(request: web.Request, handler: Handler) -> web.StreamResponse:
    started = time.perf_counter()
    try:
        resp = await handler(request)
    except NamesrvError as err:
        resp = error_response(err, request.headers.get("X-Request-Id") or next_request_id())
    except web.HTTPException as exc:
        resp = error_response(_from_http(request, exc), request.headers.get("X-Request-Id") or next_request_id())
    except Exception:
        request_id = request.headers.get("X-Request-Id") or next_request_id()
        log.exception("unhandled error (request %s)", request_id)
        resp = error_response(NamesrvError("internal error; see the server log"), request_id)
    else:
        given = request.headers.get("X-Request-Id")
        if given:
            resp.headers["X-Request-Id"] = given
    route = ROUTE_NAMES.get(request.match_info.handler, "unmatched")
    request.app[NS].metrics.observe_request(route, request.method, resp.status, time.perf_counter() - started)
    return resp
