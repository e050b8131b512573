"""The HTTP door's statuses for the core's errors, and the JSON error reply every failure becomes."""

from __future__ import annotations

import orjson
from aiohttp import web

from service.errors import (
    BrokerNotFound,
    Conflict,
    Disabled,
    Forbidden,
    InvalidArgument,
    NamesrvError,
    PayloadTooLarge,
    QueryNotFound,
    TooManyWatchers,
    TopicNotExist,
    Unauthorized,
    Unavailable,
    Unsupported,
)


class NotFound(Unsupported):
    """No route for this path (HTTP only)."""

    code = "NOT_FOUND"


class MethodNotAllowed(Unsupported):
    """The path exists, the method does not (HTTP only)."""

    code = "METHOD_NOT_ALLOWED"


class BodyTimeout(InvalidArgument):
    """The request body did not arrive in time (HTTP only)."""

    code = "REQUEST_TIMEOUT"


# The most specific class in an error's MRO decides its status.
STATUS: dict[type[NamesrvError], int] = {
    NamesrvError: 500, InvalidArgument: 400, PayloadTooLarge: 413, BodyTimeout: 408, Unsupported: 404,
    MethodNotAllowed: 405, Unauthorized: 401, Forbidden: 403, Disabled: 403, TopicNotExist: 404, QueryNotFound: 404,
    BrokerNotFound: 404, Conflict: 409, Unavailable: 503, TooManyWatchers: 429,
}


def http_status(err: NamesrvError) -> int:
    for cls in type(err).__mro__:
        status = STATUS.get(cls)  # type: ignore[call-overload]
        if status is not None:
            return status
    return 500


def error_response(err: NamesrvError, request_id: str | None = None) -> web.Response:
    body = err.to_dict()
    headers = None
    if request_id is not None:
        body["requestId"] = request_id
        headers = {"X-Request-Id": request_id}
    return web.Response(body=orjson.dumps(body), status=http_status(err), content_type="application/json",
                        headers=headers)
