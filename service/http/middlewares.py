"""One middleware for the hot path: request id, auth by route role, errors as JSON, metrics.

Errors never leak tracebacks: NamesrvError -> its status and code; Redis trouble -> 503 STORE_UNAVAILABLE;
router 404/405/413 -> JSON; anything else -> 500 SYSTEM_ERROR, logged with the request id.
"""

from __future__ import annotations

import itertools
import logging
import os
import time
import uuid

import orjson
from aiohttp import web
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from service.errors import (
    Forbidden,
    MethodNotAllowed,
    NamesrvError,
    NotFound,
    PayloadTooLarge,
    StoreUnavailable,
    Unauthorized,
)
from service.http.context import AUTH, METRICS, SETTINGS
from service.http.handlers import PRINCIPAL
from service.http.routes import ROUTE_INFO

log = logging.getLogger("service.http")
_ids = itertools.count(1)
_ID_PREFIX = f"{os.getpid():x}-{uuid.uuid4().hex[:6]}-"


def next_request_id() -> str:
    """Unique per process start and cheap: uuid4 on every request cost ~9% of a cached route read."""
    return _ID_PREFIX + format(next(_ids), "x")

ALLOWED = {"admin": {"admin"}, "broker": {"broker", "admin"}, "read": {"read", "broker", "admin"}}


def _json_error(err: NamesrvError, request_id: str) -> web.Response:
    body = err.to_json()
    body["requestId"] = request_id
    return web.Response(body=orjson.dumps(body), status=err.http_status, content_type="application/json",
                        headers={"X-Request-Id": request_id})


def authorize(request: web.Request, role: str) -> None:
    auth = request.app[AUTH]
    header = request.headers.get("Authorization")
    token = None
    if header is not None:
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            raise Unauthorized("Authorization must be 'Bearer <token>'")
        token = value.strip()
    principal = auth.identify(token)
    if principal is None:
        raise Unauthorized("unknown token")
    request[PRINCIPAL] = principal
    if role == "read" and not auth.reads_protected:
        return
    if role == "broker" and auth.writes_open:
        return
    if principal.role == "anonymous":
        raise Unauthorized(f"this endpoint needs a {role} token: Authorization: Bearer <token>")
    if principal.role not in ALLOWED[role]:
        raise Forbidden(f"a {principal.role} token may not call this endpoint (needs {role})")


@web.middleware
async def front_door(request: web.Request, handler) -> web.StreamResponse:
    given_id = request.headers.get("X-Request-Id")
    started = time.perf_counter()
    match = request.match_info
    role, route_name = ROUTE_INFO.get(match.handler, ("open", "unmatched"))
    app = request.app
    metrics = app[METRICS]
    try:
        if role != "open" and not app[AUTH].open_mode:
            authorize(request, role)
        resp = await handler(request)
    except NamesrvError as err:
        request_id = given_id or next_request_id()
        resp = _json_error(err, request_id)
    except web.HTTPException as exc:
        request_id = given_id or next_request_id()
        if exc.status == 404:
            err: NamesrvError = NotFound(f"no route for {request.method} {request.path}")
        elif exc.status == 405:
            err = MethodNotAllowed(f"{request.method} is not allowed on {request.path}")
        elif exc.status == 413:
            err = PayloadTooLarge(f"body larger than {request.app[SETTINGS].max_body_bytes} bytes")
        else:
            err = NamesrvError(exc.reason or "HTTP error")
            err.http_status = exc.status
        resp = _json_error(err, request_id)
    except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
        request_id = given_id or next_request_id()
        metrics.redis_errors.labels(kind=type(exc).__name__).inc()
        log.warning("store unavailable (request %s): %s", request_id, exc)
        resp = _json_error(StoreUnavailable("the route store (Redis) is unavailable; retry shortly"), request_id)
    except RedisError as exc:
        request_id = given_id or next_request_id()
        metrics.redis_errors.labels(kind=type(exc).__name__).inc()
        if "NOSCRIPT" in str(exc) or "LOADING" in str(exc) or "BUSY" in str(exc):
            resp = _json_error(StoreUnavailable(f"the route store is not ready: {type(exc).__name__}"), request_id)
        else:
            log.exception("redis error (request %s)", request_id)
            resp = _json_error(NamesrvError("internal error; see the server log"), request_id)
    except Exception:
        request_id = given_id or next_request_id()
        log.exception("unhandled error (request %s)", request_id)
        resp = _json_error(NamesrvError("internal error; see the server log"), request_id)
    else:
        if given_id:
            resp.headers["X-Request-Id"] = given_id
    metrics.observe_request(route_name, request.method, resp.status, time.perf_counter() - started)
    return resp
