"""The HTTP server's own edges on a real worker: a malformed request gets our JSON error (not aiohttp's plain
text), and idle, slow-header and slow-body connections are closed by the configured timeouts."""

from __future__ import annotations

import asyncio
import json

import pytest

pytestmark = [pytest.mark.redis, pytest.mark.integration]


async def raw(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port)


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict]:
    async with asyncio.timeout(10):
        data = await reader.read()  # the server closes after an error
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    assert b"content-type: application/json" in head.lower(), head
    return status, json.loads(body)


async def test_an_overlong_request_line_gets_a_json_error(namesrv_factory):
    n = namesrv_factory()
    reader, writer = await raw(n.port)
    writer.write(b"GET /v1/topics/" + b"T" * 9000 + b"/route HTTP/1.1\r\nHost: x\r\n\r\n")
    status, body = await read_response(reader)
    assert status == 400 and body["code"] == "INVALID_ARGUMENT" and "malformed HTTP request" in body["message"]
    writer.close()


async def test_a_bad_header_and_a_bad_method_get_json_errors(namesrv_factory):
    n = namesrv_factory()
    for request in (b"GET /livez HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n", b"G\x00T /livez HTTP/1.1\r\n\r\n"):
        reader, writer = await raw(n.port)
        writer.write(request)
        status, body = await read_response(reader)
        assert status == 400 and body["code"] == "INVALID_ARGUMENT", body
        writer.close()


@pytest.mark.parametrize("sent", [b"", b"GET /livez HTT", b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n"],
                         ids=["nothing", "half a request line", "an answered request"])
async def test_idle_and_slow_header_connections_are_closed(namesrv_factory, sent):
    n = namesrv_factory(http_keepalive_s=1)
    reader, writer = await raw(n.port)
    writer.write(sent)
    async with asyncio.timeout(10):  # bound; the server closes after about 1 s
        while await reader.read(65536):
            pass
    assert reader.at_eof()
    writer.close()


async def test_a_slow_body_is_refused_with_408(namesrv_factory):
    n = namesrv_factory(http_read_timeout_s=1, http_keepalive_s=30)
    reader, writer = await raw(n.port)
    writer.write(b"POST /v1/brokers/register HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 1000\r\n\r\n{\"clusterName\":")
    async with asyncio.timeout(10):
        head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), head
    writer.close()
