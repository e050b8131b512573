"""Request bodies on the HTTP door: who may send one is decided from the headers before a byte of it is read,
and each endpoint has its own size limit.

An unauthenticated 60 MB `PUT /v1/kv/…` used to be read and parsed before its token was checked: twelve of them
stalled a worker's event loop for seconds and took 500 MB. Now a route that reads a body is gated: its role is
checked from `Authorization` first (401/403 at once), a declared `Content-Length` over the endpoint's limit is
413 at once, and the body is then read with that limit (a chunked body is cut off at it). A refusal sent before
the body was read closes the connection instead of reading the rest to discard it. Every limit but the
registration's and the KV import's is at most 256 KiB, so no JSON of megabytes is parsed on the event loop (large
registrations and imports are parsed in a separate process: service/core/bodies.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import wraps

from aiohttp import web

from service.core import Role
from service.errors import NamesrvError, PayloadTooLarge
from service.http.errors import error_response
from service.http.guard import close_unread, next_request_id
from service.http.handlers import NS, principal

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

KIB = 1024
REGISTRATION = -1  # the registration's limit is a setting: NAMESRV_MAX_BODY_BYTES (64 MiB, 100 000 topics)
BROKER_CALL_BYTES = 16 * KIB  # heartbeat, unregister: four identity fields and a data version
TOPIC_ROUTE_BYTES = 256 * KIB  # PUT /v1/topics/{t}/route: queue data of some 2 500 brokers
KV_BYTES = 256 * KIB  # PUT /v1/kv/…: a value of up to 64 Ki characters (models.MAX_KV_VALUE), JSON-escaped
KV_IMPORT = REGISTRATION  # POST /v1/kv-config/import: a whole kvConfig.json (parsed apart from 256 KiB on)
CONFIG_BYTES = 16 * KIB  # PUT /v1/config: a handful of runtime switches
CONSOLE_LOGIN_BYTES = 4 * KIB  # the console's login form: a token and a path


def limit_of(app: web.Application, limit: int) -> int:
    return app[NS].base_settings.max_body_bytes if limit == REGISTRATION else limit


def check(request: web.Request, role: str, limit: int) -> None:
    """Raise Unauthorized/Forbidden for credentials that may not `role`, PayloadTooLarge for a declared length
    over `limit`. Headers only: nothing of the body has been read."""
    if role != "open":
        ns = request.app[NS]
        ns.access.require(principal(request), Role(role))
    declared = request.content_length
    if declared is not None and declared > limit:
        raise PayloadTooLarge(f"body of {declared} bytes is larger than this endpoint's {limit} bytes")


def gated(handler: Handler, role: str, limit: int) -> Handler:
    """`handler` behind check(): it reads its body (request.read(), request.post()) within `limit` bytes."""

    @wraps(handler)
    async def run(request: web.Request) -> web.StreamResponse:
        size = limit_of(request.app, limit)
        check(request, role, size)
        try:
            return await handler(request.clone(client_max_size=size))
        except web.HTTPRequestEntityTooLarge:  # a body without Content-Length (chunked) cut off at the limit
            raise PayloadTooLarge(f"body larger than this endpoint's {size} bytes") from None

    return run


def expect_handler(role: str, limit: int) -> Callable[[web.Request], Awaitable[web.StreamResponse | None]]:
    """`Expect: 100-continue` (curl sends it for bodies over 1 MiB): refuse before the client sends the body,
    rather than answering 100 Continue and refusing after."""

    async def expect(request: web.Request) -> web.StreamResponse | None:
        if request.headers.get("Expect", "").lower() != "100-continue":
            raise web.HTTPExpectationFailed(text=f"Unknown Expect: {request.headers['Expect']}")
        try:
            check(request, role, limit_of(request.app, limit))
        except NamesrvError as err:
            resp = error_response(err, request.headers.get("X-Request-Id") or next_request_id())
            close_unread(request, resp)
            return resp
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        return None

    return expect
