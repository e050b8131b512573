"""The console's fixtures: a real `namesrv serve` on the session's real redis-server with the fleet of fleet.py
registered, hostile KV entries, the skew summary stored the way the job stores it; and headless Chromium."""

from __future__ import annotations

import copy
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
import pytest

from tests.conftest import IN_CI, need
from tests.console import fleet
from tests.console.browser import chromium_path, launch
from tests.integration.conftest import Namesrv
from tests.unit.conftest import client, make_client, secured  # noqa: F401 - handler-test clients (test_console_http)

ADMIN = "admin-token-console-0001"
READ = "read-token-console-0001"
SUMMARY = Path(__file__).with_name("skew_summary.json")  # written by the real job: see screenshots.py
HISTORY = Path(__file__).with_name("skew_history.json")  # the job's two kept runs, newest first
# Text that must appear as text wherever the console shows it. KV keys and namespaces are printable ASCII
# without spaces, values free text; the skew summary is whatever the job stored.
XSS_NAMESPACE = "ns<b>bold</b>"
XSS_KEY = "<script>window.__pwned=1</script>"
XSS_VALUE = '<img src=x onerror="window.__pwned=2"> & "quotes" \'single\''
XSS_TOPIC = "<script>window.__pwned=3</script>"
XSS_CLUSTER = "<svg/onload=window.__pwned=4>"


def hostile_summary() -> dict[str, Any]:
    """The real job's summary, plus a topic and a cluster whose names carry markup (the registry refuses such
    names; the console must not trust that)."""
    s = orjson.loads(SUMMARY.read_bytes())
    s = copy.deepcopy(s)
    bad = {**s["topics"][0], "topic": XSS_TOPIC, "cluster": XSS_CLUSTER, "maxShare": 0.99, "flags": ["<i>FLAG</i>"]}
    s["topics"].insert(0, bad)
    s["brokers"].append({**s["brokers"][0], "cluster": XSS_CLUSTER, "brokerName": XSS_KEY})
    s["clusters"].append({**s["clusters"][0], "cluster": XSS_CLUSTER})
    return s


def store_summary(redis_url: str, prefix: str, summary: dict[str, Any], runs: list[dict[str, Any]] | None = None
                  ) -> None:
    """Through the store's own writer, the one the skew job publishes with: the summary, and the kept runs
    (`runs` newest first, as the job's history holds them)."""
    from service.store.snapshot_reader import RedisSpec, SnapshotReader

    with SnapshotReader(RedisSpec(redis_url), prefix) as reader:
        reader.store_summary(summary)
        for run in reversed(runs or []):
            reader.push_history(run, keep=48)


@pytest.fixture(scope="module")
def console_server(redis_server):
    """A real server with auth on (admin and read tokens), the fleet registered, hostile KV entries, a skew
    summary."""
    prefix = "cs" + uuid.uuid4().hex[:8]
    server = Namesrv(redis_server.url, prefix, admin_token=ADMIN, read_token=READ).wait_ready()
    try:
        fleet.register_all(server.url, ADMIN)
        fleet.call(server.url, "PUT", "/v1/kv/ORDER_TOPIC_CONFIG/OrderPaid", {"value": "broker-a:16;broker-b:4"},
                   ADMIN)
        fleet.call(server.url, "PUT", f"/v1/kv/{quote(XSS_NAMESPACE, safe='')}/{quote(XSS_KEY, safe='')}",
                   {"value": XSS_VALUE}, ADMIN)
        store_summary(redis_server.url, prefix, hostile_summary(), orjson.loads(HISTORY.read_bytes()))
        server.prefix = prefix
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium; locally skipped when Chromium or Playwright is missing, a failure in CI."""
    if chromium_path() is None:
        need("chromium")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        if IN_CI:
            pytest.fail("playwright is required in CI (pip install -e '.[dev]')")
        pytest.skip("playwright is not installed")
    with launch() as b:
        yield b


@pytest.fixture
def page(browser):
    """A fresh context (no cookies) and page; console errors and dialogs are collected, none may occur."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    p = context.new_page()
    p.errors = []
    p.on("console", lambda m: p.errors.append(m.text) if m.type == "error" else None)
    p.on("pageerror", lambda e: p.errors.append(str(e)))
    p.on("dialog", lambda d: (p.errors.append(f"dialog: {d.message}"), d.dismiss()))
    yield p
    context.close()


@pytest.fixture
def logged_in(page, console_server):
    page.goto(console_server.url + "/console/")
    page.fill("#token", READ)
    page.click("button[type=submit]")
    page.wait_for_url(console_server.url + "/console/")
    return page
