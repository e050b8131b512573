"""The console's HTTP contract through a real aiohttp server on fakeredis: the setting, the security headers,
the session rules, escaping on every page, and the KV-namespace listing it relies on."""

from __future__ import annotations

import re
import time
from urllib.parse import quote

import orjson
import pytest

from service.http import console
from tests.console.conftest import XSS_KEY, XSS_NAMESPACE, XSS_VALUE, hostile_summary
from tests.unit.conftest import ADMIN, BROKER_A, READ, master

PAGES = ["/console/", "/console/clusters/C1", "/console/topics", "/console/topics?q=Topic", "/console/topics/TopicA",
         "/console/kv", "/console/kv/" + quote(XSS_NAMESPACE, safe=""), "/console/skew"]


async def seed(client, token: str | None = None) -> None:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    assert (await client.post("/v1/brokers/register", json=master(), headers=headers)).status == 200
    path = f"/v1/kv/{quote(XSS_NAMESPACE, safe='')}/{quote(XSS_KEY, safe='')}"
    assert (await client.put(path, json={"value": XSS_VALUE}, headers=headers)).status == 200
    await client.redis.set(client.app[console.NS].store.keys.skew_report, orjson.dumps(hostile_summary()))


async def test_every_page_renders_and_escapes_what_it_shows(client):
    await seed(client)
    for path in PAGES:
        r = await client.get(path)
        html = await r.text()
        assert r.status == 200, (path, html[:300])
        assert r.headers["Content-Type"] == "text/html; charset=utf-8"
        assert r.headers["Content-Security-Policy"].startswith("default-src 'none'; script-src 'self'")
        assert r.headers["X-Frame-Options"] == "DENY" and r.headers["Cache-Control"] == "no-store"
        # the only tags named script are the page's own; data never opens a tag
        assert re.findall(r"<script[^>]*>", html) == [f'<script src="{console.static_url("console.js")}" defer>']
        for raw in ("<b>bold</b>", "<img src=x", "<svg/onload", "<i>FLAG</i>"):
            assert raw not in html, (path, raw)
    html = await (await client.get("/console/kv/" + quote(XSS_NAMESPACE, safe=""))).text()
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=&#34;window.__pwned=2&#34;&gt; &amp; &#34;quotes&#34; &#39;single&#39;" in html


async def test_names_are_quoted_as_one_path_segment(client):
    await client.post("/v1/brokers/register", json=master(topics={
        "%RETRY%g": {"readQueueNums": 1, "writeQueueNums": 1, "perm": 6}}))
    html = await (await client.get("/console/topics")).text()
    assert 'href="/console/topics/%25RETRY%25g"' in html
    assert (await client.get("/console/topics/%25RETRY%25g")).status == 200
    await client.put("/v1/kv/a%2Fb/k", json={"value": "v"})
    html = await (await client.get("/console/kv")).text()
    assert 'href="/console/kv/a%2Fb"' in html
    assert "k" in await (await client.get("/console/kv/a%2Fb")).text()


async def test_not_found_pages_are_html_with_the_api_status(client):
    for path, status, code in [("/console/topics/Nope", 404, "TOPIC_NOT_EXIST"),
                               ("/console/kv/none", 404, "QUERY_NOT_FOUND"),
                               ("/console/clusters/Nope", 404, "CLUSTER_NOT_FOUND"),
                               ("/console/topics/bad%20name", 400, "INVALID_ARGUMENT")]:
        r = await client.get(path)
        assert r.status == status and r.content_type == "text/html", path
        assert code in await r.text()
    r = await client.get("/console/static/../routes.py")
    assert r.status == 404 and (await r.json())["code"] == "NOT_FOUND"


async def test_the_skew_page_before_any_report_says_how_to_make_one(client):
    """Before the skew job's first run the page was a 404 with a red error box; it is an ordinary page saying that
    no report exists yet and the three ways to make one."""
    r = await client.get("/console/skew")
    html = await r.text()
    assert r.status == 200 and r.content_type == "text/html", html[:300]
    assert "error-box" not in html and "REPORT_NOT_FOUND" not in html
    assert "No skew report exists yet" in html
    for how in ("namesrv skew-report --redis-url", "namesrv skew-scheduler --interval", "skew.cronJob.enabled"):
        assert how in html
    assert '/skew" class="on">Skew report</a>' in html  # the navigation still marks the section
    assert (await client.get("/v1/reports/skew")).status == 404  # the API still says "not found" to scripts


async def test_console_off(make_client):
    client = await make_client(console="false")
    r = await client.get("/console/")
    assert r.status == 404 and (await r.json())["code"] == "NOT_FOUND"
    assert (await client.get("/console/static/console.css")).status == 404


async def test_reads_protected_means_login_then_a_session(secured):
    await seed(secured, ADMIN)
    r = await secured.get("/console/kv", allow_redirects=False)
    assert r.status == 303 and r.headers["Location"] == "/console/login?next=%2Fconsole%2Fkv"
    assert (await secured.get("/console/static/console.css")).status == 200  # assets are not secret
    r = await secured.post("/console/login", data={"token": "wrong-token-123456", "next": "/console/kv"},
                           allow_redirects=False)
    assert r.status == 401 and "not valid" in await r.text() and "Set-Cookie" not in r.headers
    for token in (READ, ADMIN, BROKER_A):  # any token that may read
        r = await secured.post("/console/login", data={"token": token, "next": "/console/kv"},
                               allow_redirects=False)
        assert r.status == 303 and r.headers["Location"] == "/console/kv"
        cookie = r.cookies[console.COOKIE]
        assert cookie["httponly"] and cookie["samesite"] == "Strict" and cookie["path"] == "/console/"
        assert token not in cookie.value and token not in r.headers["Location"]
    r = await secured.get("/console/kv", allow_redirects=False)  # the client keeps the last cookie
    assert r.status == 200 and "ns&lt;b&gt;bold&lt;/b&gt;" in await r.text()
    # the API token works on the console too (scripts), and a session is not an API credential
    headers = {"Authorization": f"Bearer {READ}"}
    assert (await secured.get("/console/kv", headers=headers, allow_redirects=False)).status == 200
    assert (await secured.get("/v1/kv")).status == 401


async def test_a_session_is_checked_expiry_signature_and_token_rotation(make_client):
    client = await make_client(read_token=READ)
    ns = client.app[console.NS]
    good = console.new_session(ns)
    assert console.session_valid(ns, good)
    expires, _, mac = good.partition(".")
    assert not console.session_valid(ns, f"{int(expires) + 1}.{mac}")  # the expiry is signed
    assert not console.session_valid(ns, console.new_session(ns, now=time.time() - console.SESSION_S - 1))
    assert not console.session_valid(ns, "garbage")
    rotated = await make_client(read_token=READ + "-new")
    assert not console.session_valid(rotated.app[console.NS], good)
    client.session.cookie_jar.update_cookies({console.COOKIE: f"{int(expires) + 1}.{mac}"})
    r = await client.get("/console/", allow_redirects=False)
    assert r.status == 303 and r.headers["Location"].startswith("/console/login")


@pytest.mark.parametrize("target", ["//evil.example/x", "https://evil.example/", "/v1/config", "/console\\x"])
async def test_login_never_redirects_off_the_console(secured, target):
    r = await secured.post("/console/login", data={"token": READ, "next": target}, allow_redirects=False)
    assert r.headers["Location"] == "/console/"


async def test_cross_site_posts_are_refused(secured):
    r = await secured.post("/console/login", data={"token": READ}, headers={"Origin": "https://evil.example"},
                           allow_redirects=False)
    assert r.status == 403 and "Set-Cookie" not in r.headers
    r = await secured.post("/console/login", data={"token": READ}, headers={"Origin": "null"},
                           allow_redirects=False)
    assert r.status == 403


async def test_login_page_reflects_next_escaped(secured):
    html = await (await secured.get('/console/login?next=/console/"><script>x</script>')).text()
    assert 'value="/console/&#34;&gt;&lt;script&gt;x&lt;/script&gt;"' in html


async def test_open_mode_needs_no_login(client):
    assert (await client.get("/console/login", allow_redirects=False)).headers["Location"] == "/console/"


async def test_kv_namespaces_route(client, secured):
    assert await (await client.get("/v1/kv")).json() == {"namespaces": []}
    await client.put("/v1/kv/zeta/k", json={"value": "1"})
    await client.put("/v1/kv/ORDER_TOPIC_CONFIG/T", json={"value": "b:1"})
    await client.delete("/v1/kv/zeta/k")
    # zeta's last key is gone: not listed (issue 25 item 12), though it still reads as an empty table by name
    assert await (await client.get("/v1/kv")).json() == {"namespaces": ["ORDER_TOPIC_CONFIG"]}
    assert await (await client.get("/v1/kv/zeta")).json() == {"table": {}}
    assert (await secured.get("/v1/kv")).status == 401  # a read: the read token is set there
    r = await secured.get("/v1/kv", headers={"Authorization": f"Bearer {READ}"})
    assert r.status == 200


async def test_console_routes_are_counted_in_metrics(client):
    await client.get("/console/")
    text = await (await client.get("/metrics")).text()
    assert 'namesrv_http_requests_total{method="GET",route="/console/",status="200"} 1.0' in text


async def test_store_lists_kv_namespaces(store):
    assert await store.kv_namespaces() == []
    await store.kv_put("b", "k", "v")
    await store.kv_put("A", "k", "v")
    await store.kv_delete("b", "k")
    assert await store.kv_namespaces() == ["A"]  # an emptied namespace is not listed (issue 25 item 12)
    assert await store.kv_list("b") == {}  # by name it still reads as Java's empty table
    await store.kv_put("b", "k2", "v")
    assert await store.kv_namespaces() == ["A", "b"]  # sorted


async def test_a_topic_page_follows_its_route_stream(secured):
    """The page names its stream and the tag of the route it shows; the stream takes the console's session and
    sends that tag first, then the next state when the route changes (console.js reloads on a different tag)."""
    await seed(secured, ADMIN)
    r = await secured.post("/console/login", data={"token": READ, "next": "/console/topics/TopicA"},
                           allow_redirects=False)
    assert r.status == 303
    r = await secured.get("/console/topics/TopicA")
    assert "connect-src 'self'" in r.headers["Content-Security-Policy"]
    m = re.search(r'data-events="([^"]+)" data-etag="([^"]+)"', await r.text())
    assert m and m.group(1) == "/console/topics/TopicA/events"
    etag = m.group(2).replace("&#34;", '"')
    api = await secured.get("/v1/topics/TopicA/route", headers={"Authorization": f"Bearer {READ}"})
    assert api.headers["ETag"] == etag
    from tests.unit.test_watch import read_events

    stream = await secured.get(m.group(1))
    assert stream.status == 200 and stream.headers["Content-Type"] == "text/event-stream"
    assert (await read_events(stream, 1))[0]["data"]["etag"] == etag
    assert (await secured.delete("/v1/topics/TopicA", headers={"Authorization": f"Bearer {ADMIN}"})).status == 200
    assert (await read_events(stream, 1))[0]["data"] == {"topic": "TopicA", "etag": '"absent"', "route": None}
    stream.close()
    secured.session.cookie_jar.clear()
    assert (await secured.get(m.group(1))).status == 401  # no session, no stream
