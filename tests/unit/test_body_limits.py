"""Request bodies on the HTTP door (service/http/limits.py): credentials are checked from the headers before a
byte of the body is read — 401/403 at once, connection closed — and each endpoint refuses a body over its own
limit with 413, declared or streamed. Driven over raw sockets against the production Runner, so what a client
sees (an answer while its body is still unsent, then the close) is what is checked."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from service.http import limits
from service.http.routes import ROUTES
from tests.unit.conftest import ADMIN, BROKER_A, READ, master

HUGE = 60_000_000  # the 60 MB bodies: declared, never sent


async def exchange(client, head: bytes, body: bytes = b"") -> tuple[int, dict, bytes, bool]:
    """Send `head` (and `body`), then read the reply: (status, JSON body, raw head, connection closed after)."""
    reader, writer = await asyncio.open_connection(client.server.host, client.server.port)
    try:
        writer.write(head + body)
        await writer.drain()
        async with asyncio.timeout(10):  # a bound, not a measurement: before the fix no answer ever came
            raw_head = await reader.readuntil(b"\r\n\r\n")
            length = int(next(line.split(b":", 1)[1] for line in raw_head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:")))
            payload = await reader.readexactly(length)
            closed = await reader.read(1) == b""
        return int(raw_head.split(b" ", 2)[1]), orjson.loads(payload), raw_head, closed
    finally:
        writer.close()


def request(method: str, path: str, length: int, token: str | None = None, *extra: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: x", "Content-Type: application/json", f"Content-Length: {length}",
             *([f"Authorization: Bearer {token}"] if token else []), *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@pytest.mark.parametrize(("method", "path"), [
    ("PUT", "/v1/kv/ns/k"), ("PUT", "/v1/config"), ("PUT", "/v1/topics/T/route"), ("POST", "/v1/brokers/register"),
    ("POST", "/v1/brokers/heartbeat"), ("POST", "/v1/brokers/unregister"),
])
@pytest.mark.parametrize(("token", "status"), [(None, 401), ("not-a-token-at-all", 401), (READ, 403)])
async def test_credentials_are_checked_before_the_body_is_read(secured, method, path, token, status):
    if path.startswith("/v1/brokers/") and token == READ:
        token, status = READ, 403  # a read token may not act as a broker either
    status_got, body, _, closed = await exchange(secured, request(method, path, HUGE, token), b'{"valu')
    assert (status_got, body["code"]) == (status, {401: "UNAUTHORIZED", 403: "FORBIDDEN"}[status])
    assert closed  # the rest of the body is not read to be discarded: the connection is closed
    assert (await (await secured.get("/v1/kv", headers={"Authorization": f"Bearer {ADMIN}"})).json()) == {
        "namespaces": []}


async def test_a_broker_token_may_not_send_an_admin_body(secured):
    status, body, _, closed = await exchange(secured, request("PUT", "/v1/kv/ns/k", HUGE, BROKER_A))
    assert (status, body["code"], closed) == (403, "FORBIDDEN", True)


@pytest.mark.parametrize(("method", "path", "limit"), [
    ("PUT", "/v1/kv/ns/k", limits.KV_BYTES), ("PUT", "/v1/config", limits.CONFIG_BYTES),
    ("PUT", "/v1/topics/T/route", limits.TOPIC_ROUTE_BYTES), ("POST", "/v1/brokers/heartbeat",
                                                              limits.BROKER_CALL_BYTES),
    ("POST", "/v1/brokers/unregister", limits.BROKER_CALL_BYTES),
])
async def test_each_endpoint_refuses_a_declared_length_over_its_limit_before_reading(secured, method, path, limit):
    status, body, _, closed = await exchange(secured, request(method, path, limit + 1, ADMIN))
    assert (status, body["code"], closed) == (413, "PAYLOAD_TOO_LARGE", True)
    assert str(limit) in body["message"]


async def test_a_chunked_body_is_cut_off_at_the_endpoint_limit(secured):
    chunk = b"x" * 65536
    head = ("PUT /v1/kv/ns/k HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
            f"Authorization: Bearer {ADMIN}\r\n\r\n").encode()
    body = (f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n") * (limits.KV_BYTES // len(chunk) + 2)
    status, reply, _, closed = await exchange(secured, head, body)
    assert (status, reply["code"]) == (413, "PAYLOAD_TOO_LARGE") and str(limits.KV_BYTES) in reply["message"]


async def test_bodies_within_the_limits_are_served(secured):
    value = "v" * 60_000  # near models.MAX_KV_VALUE, within KV_BYTES
    r = await secured.put("/v1/kv/ns/k", json={"value": value}, headers={"Authorization": f"Bearer {ADMIN}"})
    assert r.status == 200, await r.text()
    many = {f"Topic{i:05d}": {"readQueueNums": 8, "writeQueueNums": 8, "perm": 6} for i in range(5000)}
    body = master(topics=many)  # about 400 kB: above every limit but the registration's
    assert len(orjson.dumps(body)) > limits.TOPIC_ROUTE_BYTES
    r = await secured.post("/v1/brokers/register", json=body, headers={"Authorization": f"Bearer {BROKER_A}"})
    assert r.status == 200, await r.text()


async def test_the_registration_limit_is_the_setting(make_client):
    c = await make_client(admin_token=ADMIN, max_body_bytes=1 << 20)
    status, body, _, closed = await exchange(c, request("POST", "/v1/brokers/register", (1 << 20) + 1, ADMIN))
    assert (status, body["code"], closed) == (413, "PAYLOAD_TOO_LARGE", True)


async def test_expect_100_continue_is_refused_before_the_body_is_sent(secured):
    head = request("PUT", "/v1/kv/ns/k", HUGE, None, "Expect: 100-continue")
    status, body, raw_head, closed = await exchange(secured, head)
    assert (status, body["code"], closed) == (401, "UNAUTHORIZED", True) and b"100 Continue" not in raw_head
    ok = request("PUT", "/v1/kv/ns/k", 14, ADMIN, "Expect: 100-continue")
    reader, writer = await asyncio.open_connection(secured.server.host, secured.server.port)
    try:
        writer.write(ok)
        async with asyncio.timeout(10):
            assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 100 Continue")
            writer.write(b'{"value": "v"}')
            assert (await reader.readuntil(b"\r\n")).startswith(b"HTTP/1.1 200")
    finally:
        writer.close()


async def test_the_console_login_form_is_small(make_client):
    c = await make_client(read_token=READ)
    status, body, _, closed = await exchange(c, request("POST", "/console/login", HUGE, None,
                                                        "Origin: http://x"))
    assert (status, closed) == (413, True)


def test_no_json_of_megabytes_is_parsed_on_the_event_loop():
    """Every body limit but the registration's and the KV import's is at most 256 KiB; registrations and imports
    from 256 KiB on are decoded in a parser process (service/core/bodies.py OFFLOAD_BYTES;
    tests/unit/test_registration_offload.py, tests/unit/test_kv_config_api.py)."""
    from service.core.bodies import OFFLOAD_BYTES

    gated = {r.path: r.max_body for r in ROUTES if r.max_body is not None}
    offloaded = ("/v1/brokers/register", "/v1/kv-config/import")
    assert all(gated[path] == limits.REGISTRATION for path in offloaded)
    assert all(0 < size <= OFFLOAD_BYTES for path, size in gated.items() if path not in offloaded)
    assert {r.path for r in ROUTES if r.method in ("POST", "PUT") and r.body} <= set(gated)
