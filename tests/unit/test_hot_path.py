"""The route read's shortcut past the router (service/http/hot_path.py) answers exactly what the router would.

Two servers over one fakeredis: one with the production Runner (shortcut on), one with aiohttp's plain
AppRunner (router only). The same requests go to both; status, body, content type, request-id echo and the
request metrics must match, and the router must have been skipped for exactly the plain route reads.
"""

from __future__ import annotations

import asyncio

import fakeredis
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from aiohttp.web_urldispatcher import UrlDispatcher
from yarl import URL

from service.config import load_settings
from service.core import NameServer
from service.http.app import create_app
from service.http.hot_path import route_read_shortcut
from service.store import RouteStore
from tests.unit.conftest import NamesrvTestServer, _core_started, master

RETRY = "%RETRY%group-1"
TOPICS = {name: {"readQueueNums": 4, "writeQueueNums": 4, "perm": 6, "topicSysFlag": 0}
          for name in ("TopicA", "Topic|B", "topic_c-1", RETRY)}

# (raw request target, extra headers, method, whether the shortcut may take it)
REQUESTS = [
    ("/v1/topics/TopicA/route", {}, "GET", True),
    ("/v1/topics/Topic|B/route", {}, "GET", True),
    ("/v1/topics/topic_c-1/route", {"X-Request-Id": "given-id-1"}, "GET", True),
    ("/v1/topics/Missing/route", {}, "GET", True),  # 404 TOPIC_NOT_EXIST from the handler
    ("/v1/topics/Missing/route", {"X-Request-Id": "given-id-2"}, "GET", True),
    ("/v1/topics/" + "x" * 127 + "/route", {}, "GET", True),
    ("/v1/topics/" + "x" * 128 + "/route", {}, "GET", False),  # too long: the router, then 400
    ("/v1/topics/TopicA/route?zoneName=z1&zoneMode=true", {}, "GET", False),
    ("/v1/topics/TopicA/route?", {}, "GET", False),
    ("/v1/topics/Topic%41/route", {}, "GET", False),  # percent-decoded by yarl: TopicA
    ("/v1/topics/%25RETRY%25group-1/route", {}, "GET", False),
    ("/v1/topics/bad.name/route", {}, "GET", False),
    ("/v1/topics/./route", {}, "GET", False),
    ("/v1/topics/../route", {}, "GET", False),
    ("/v1/topics//route", {}, "GET", False),
    ("/v1/topics/TopicA/route/", {}, "GET", False),
    ("/v1/topics/TopicA/routes", {}, "GET", False),
    ("//v1/topics/TopicA/route", {}, "GET", False),
    ("/v1/topics/TopicA/route", {}, "HEAD", False),
    ("/v1/topics/TopicA/route", {}, "POST", False),  # 405 from the catch-all
    ("/v1/topics/TopicA/route", {"Expect": "100-continue"}, "GET", False),
    # conditional reads: TAG is TopicA's current entity tag (filled in by the test)
    ("/v1/topics/TopicA/route", {"If-None-Match": "TAG"}, "GET", True),  # 304, no body
    ("/v1/topics/TopicA/route", {"If-None-Match": 'W/TAG, "other"'}, "GET", True),
    ("/v1/topics/TopicA/route", {"If-None-Match": '"other"'}, "GET", True),  # 200 with the body
    ("/v1/topics/TopicA/route", {"If-None-Match": "*"}, "GET", True),
    ("/v1/topics/Missing/route", {"If-None-Match": '"absent"'}, "GET", True),  # still 404
    ("/v1/topics/TopicA/route?wait=1s", {"If-None-Match": '"other"'}, "GET", False),  # changed: at once
    ("/v1/topics/TopicA/route?wait=1s", {}, "GET", False),  # no tag: an ordinary read
    ("/v1/topics/TopicA/route?wait=forever", {"If-None-Match": "TAG"}, "GET", False),  # 400
]


@pytest.fixture
async def both(aiohttp_client, monkeypatch):
    """(shortcut client, router-only client, router resolutions by app) over one fakeredis server."""
    settings = load_settings(env={})
    server = fakeredis.FakeServer()
    clients, apps = [], []
    for make_server in (NamesrvTestServer, TestServer):
        redis = fakeredis.FakeAsyncRedis(server=server, decode_responses=True)
        app = create_app(NameServer(RouteStore(redis, settings.key_prefix), settings))
        app.cleanup_ctx.append(_core_started)
        apps.append(app)
        clients.append(await aiohttp_client(make_server(app)))
    resolved = {id(app.router): 0 for app in apps}
    original = UrlDispatcher.resolve

    async def counting(self, request):
        resolved[id(self)] += 1
        return await original(self, request)

    monkeypatch.setattr(UrlDispatcher, "resolve", counting)
    fast, plain = clients
    assert (await fast.post("/v1/brokers/register", json=master(topics=TOPICS))).status == 200
    return fast, plain, lambda i: resolved[id(apps[i].router)]


async def _answer(client, target, headers, method):
    """One request with exactly this request line (an HTTP client library would normalise some of them)."""
    reader, writer = await asyncio.open_connection(client.server.host, client.server.port)
    extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    writer.write(f"{method} {target} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n{extra}\r\n".encode())
    raw = await reader.read()
    writer.close()
    while raw.startswith(b"HTTP/1.1 1"):  # an interim 100 Continue
        raw = raw.split(b"\r\n\r\n", 1)[1]
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    fields = {k.title(): v for k, v in (line.split(": ", 1) for line in lines[1:])}
    return (int(lines[0].split()[1]), fields.get("Content-Type"), fields.get("X-Request-Id"), body,
            fields.get("Etag"), fields.get("Cache-Control"))


def _comparable(answer):
    """Generated request ids differ between servers (in the header and error bodies); a given one must be echoed
    by both."""
    status, ctype, request_id, body, etag, cache_control = answer
    if request_id and not request_id.startswith("given-"):
        body = body.replace(request_id.encode(), b"<generated>")
        request_id = "<generated>"
    return status, ctype, request_id, body, etag, cache_control


@pytest.mark.parametrize(("target", "headers", "method", "shortcut"), REQUESTS,
                         ids=[f"{m} {t[:40]} {'+'.join(h)}" for t, h, m, _ in REQUESTS])
async def test_same_answer_with_and_without_the_shortcut(both, target, headers, method, shortcut):
    fast, plain, resolutions = both
    if "TAG" in "".join(headers.values()):
        tag = (await plain.get("/v1/topics/TopicA/route")).headers["ETag"]
        headers = {k: v.replace("TAG", tag) for k, v in headers.items()}
    for _ in range(2):  # a cache miss, then a hit
        before = (resolutions(0), resolutions(1))
        a, b = await _answer(fast, target, headers, method), await _answer(plain, target, headers, method)
        assert _comparable(a) == _comparable(b)
        assert resolutions(1) == before[1] + 1  # the router-only server always resolves
        assert resolutions(0) == before[0] + (0 if shortcut else 1), "shortcut taken" if not shortcut else ""


async def test_answers_are_what_the_route_says(both):
    """Not two equal wrongs: the shortcut's answers are the real route, the real 404 and the zone filter."""
    fast, _, _ = both
    ok = await fast.get("/v1/topics/TopicA/route")
    route = await ok.json()
    assert ok.status == 200 and route["brokerDatas"][0]["brokerName"] == "broker-a"
    assert route["queueDatas"][0]["readQueueNums"] == 4
    missing = await fast.get("/v1/topics/Missing/route")
    assert missing.status == 404 and (await missing.json())["code"] == "TOPIC_NOT_EXIST"
    retry = await fast.get(URL("/v1/topics/%25RETRY%25group-1/route", encoded=True))
    assert retry.status == 200 and (await retry.json())["queueDatas"] == route["queueDatas"]


async def test_conditional_answers_on_the_shortcut(both):
    """The tag is the content's (the same from both servers), a 304 has no body, another tag gets the route."""
    fast, plain, _ = both
    ok = await fast.get("/v1/topics/TopicA/route")
    tag = ok.headers["ETag"]
    assert tag == (await plain.get("/v1/topics/TopicA/route")).headers["ETag"]
    assert ok.headers["Cache-Control"] == "no-cache" and tag.startswith('"') and tag != '"absent"'
    same = await _answer(fast, "/v1/topics/TopicA/route", {"If-None-Match": tag}, "GET")
    assert same[0] == 304 and same[3] == b"" and same[4] == tag
    other = await _answer(fast, "/v1/topics/TopicA/route", {"If-None-Match": '"0"'}, "GET")
    assert other[0] == 200 and other[3] == await ok.read() and other[4] == tag


async def test_request_metrics_count_the_shortcut_like_the_router(both):
    fast, plain, _ = both
    for client in (fast, plain):
        for _ in range(3):
            await client.get("/v1/topics/TopicA/route")
        await client.get("/v1/topics/Missing/route")
    texts = [await (await c.get("/metrics")).text() for c in (fast, plain)]

    def route_lines(text):
        return sorted(line for line in text.splitlines()
                      if line.startswith("namesrv_http_requests_total{") and "/v1/topics/{topic}/route" in line)

    assert route_lines(texts[0]) == route_lines(texts[1])
    assert any('status="200"' in line and line.endswith(" 3.0") for line in route_lines(texts[0]))
    assert any('status="404"' in line and line.endswith(" 1.0") for line in route_lines(texts[0]))


async def test_read_protection_applies_on_the_shortcut(make_client):
    secured = await make_client(read_token="read-token-1234567")
    assert (await secured.get("/v1/topics/TopicA/route")).status == 401
    ok = await secured.get("/v1/topics/TopicA/route", headers={"Authorization": "Bearer read-token-1234567"})
    assert ok.status == 404  # authorised; no such topic registered


def test_no_shortcut_without_the_route_or_with_middlewares():
    async def fallback(request):
        raise AssertionError("not called")

    assert route_read_shortcut(web.Application(), fallback) is fallback

    async def handler(request):
        return web.Response()

    @web.middleware
    async def mw(request, h):
        return await h(request)

    with_mw = web.Application(middlewares=[mw])
    with_mw.router.add_get("/v1/topics/{topic}/route", handler)
    assert route_read_shortcut(with_mw, fallback) is fallback
    bare = web.Application()
    bare.router.add_get("/v1/topics/{topic}/route", handler)
    assert route_read_shortcut(bare, fallback) is not fallback
