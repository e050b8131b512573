"""The HTTP server around the app: aiohttp's, with JSON errors even where the app never runs, and timeouts.

aiohttp answers a malformed request (a request line over 8 190 bytes, a bad header, a bad method) itself, in
plain text, before any route or guard sees it: a RequestHandler subclass makes those replies the same JSON
errors as everywhere else. `keepalive_timeout` also bounds a connection that opens and never sends a full
request (aiohttp arms it at connection start), so idle and slow-header connections close; a slow body is
bounded by the handlers' read timeout (service/http/handlers.py).
"""

from __future__ import annotations

import orjson
from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest
from aiohttp.web_server import Server

from service.errors import InvalidArgument, NamesrvError, Unavailable
from service.http.hot_path import route_read_shortcut


class JsonErrorHandler(RequestHandler):
    def stop_lingering(self) -> None:
        """This connection closes after its current response without reading the rest of the request's body
        (aiohttp would read it for up to lingering_time to discard it): set when a body is refused unread."""
        self._lingering_time = 0.0

    def handle_error(self, request: BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        if status >= 500:
            self.log_exception("Error handling request from %s", request.remote, exc_info=exc)
        if request.writer.output_size > 0:
            raise ConnectionError("response already started, cannot send the error")
        if status == 504:
            err: NamesrvError = Unavailable("the request took too long")
        elif 400 <= status < 500:
            err = InvalidArgument(f"malformed HTTP request: {message or 'bad request'}".strip())
        else:
            err = NamesrvError("internal error; see the server log")
        resp = web.Response(body=orjson.dumps(err.to_dict()), status=status, content_type="application/json")
        resp.force_close()
        return resp


class JsonErrorServer(Server):
    def __call__(self) -> RequestHandler:
        return JsonErrorHandler(self, loop=self._loop, **self._kwargs)


class Runner(web.AppRunner):
    """web.AppRunner whose connections answer protocol errors in JSON, with the route read's shortcut."""

    async def _make_server(self) -> Server:
        server = await super()._make_server()
        server.__class__ = JsonErrorServer
        server.request_handler = route_read_shortcut(self.app, server.request_handler)
        return server
