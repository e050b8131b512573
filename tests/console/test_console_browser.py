"""The console in a real browser (headless Chromium) against a real server with real brokers registered: login,
the pages show the registry, links lead where they say, and markup in data is shown as text, never run."""

from __future__ import annotations

import re
from urllib.parse import quote

import orjson
import pytest

from service import display
from tests.console import fleet
from tests.console.conftest import (
    ADMIN,
    READ,
    SUMMARY,
    XSS_CLUSTER,
    XSS_KEY,
    XSS_NAMESPACE,
    XSS_TOPIC,
    XSS_VALUE,
)

pytestmark = [pytest.mark.integration, pytest.mark.redis]
AGE = re.compile(r"^\d+ (ms|s)$|^\d+ min( \d+ s)?$")


def no_errors(page) -> None:
    assert page.errors == [], page.errors  # no script error, no CSP violation, no dialog
    assert page.evaluate("window.__pwned") is None


def test_login_gives_an_httponly_strict_session_that_is_not_the_token(page, console_server):
    url = console_server.url
    page.goto(url + "/console/topics?q=Order")
    assert page.url == url + "/console/login?next=" + quote("/console/topics?q=Order", safe="")
    page.fill("#token", "not-the-token")
    page.click("button[type=submit]")
    assert page.locator(".error").inner_text() == "That token is not valid."
    assert page.context.cookies() == []
    assert page.errors == ["Failed to load resource: the server responded with a status of 401 (Unauthorized)"]
    page.errors.clear()
    page.fill("#token", READ)
    page.click("button[type=submit]")
    page.wait_for_url(url + "/console/topics?q=Order")  # back where it was going
    (cookie,) = page.context.cookies()
    assert (cookie["name"], cookie["httpOnly"], cookie["sameSite"], cookie["path"]) == (
        "namesrv_console", True, "Strict", "/console/")
    assert READ not in cookie["value"]
    assert page.evaluate("document.cookie") == ""  # HttpOnly: scripts cannot read it
    assert READ not in console_server.output()  # nor is it logged
    page.click("text=Log out")
    page.wait_for_url(url + "/console/login")
    assert page.context.cookies() == []
    page.goto(url + "/console/")
    assert "/console/login" in page.url
    no_errors(page)


def test_overview_shows_every_registered_broker(logged_in):
    page = logged_in
    for cluster in ("ClusterA", "ClusterB"):
        assert page.locator("section.cluster h2 a", has_text=cluster).count() == 1
    rows = page.locator("section.cluster tbody tr")
    expected = [(name, addr) for name, (_, m, s) in fleet.BROKERS.items() for addr in (m, s) if addr]
    assert rows.count() == len(expected)
    for name, addr in expected:
        row = page.locator("section.cluster tbody tr", has_text=addr)
        cells = row.locator("td").all_inner_texts()
        assert cells[0] == name
        assert cells[2] == ("master" if addr == fleet.BROKERS[name][1] else "slave")
        assert AGE.match(cells[5]), cells[5]  # last heartbeat age, e.g. "3 s"
        assert cells[6] == "2 min"  # RocketMQ's default timeout
        assert cells[7].startswith("counter 1 · ")
        assert int(cells[8]) == sum(1 for q in fleet.TOPICS.values() if name in q)
    # the ages keep ticking in the page without a reload
    first = page.locator("td[data-age-ms]").first
    before = first.inner_text()
    page.wait_for_function("([el, t]) => el.textContent !== t", arg=[first.element_handle(), before], timeout=5000)
    no_errors(page)


def test_links_lead_from_cluster_to_topic_to_route_and_back(logged_in, console_server):
    page = logged_in
    page.click("section.cluster h2 a:text-is('ClusterA')")
    page.wait_for_url(console_server.url + "/console/clusters/ClusterA")
    groups = page.locator("#groups tbody tr")
    assert groups.count() == 3
    assert "10.0.1.12:10911 (slave)" in page.locator("#groups tr", has_text="broker-a").inner_text()
    page.click("ul.taglist a:text-is('OrderPaid')")
    page.wait_for_url(console_server.url + "/console/topics/OrderPaid")
    assert page.locator("#topic-name").inner_text() == "OrderPaid"
    route = {r.locator("td").first.inner_text(): r.locator("td").all_inner_texts() for r in
             page.locator("#route tbody tr").all()}
    assert set(route) == {"broker-a", "broker-b", "broker-c"}
    assert route["broker-a"][4:7] == ["16", "16", "RW"]  # write, read, perm
    assert route["broker-b"][4] == "4"
    page.click("#route tr:has-text('broker-a') a:text-is('ClusterA')")
    page.wait_for_url(console_server.url + "/console/clusters/ClusterA")
    no_errors(page)


def test_topic_search_and_names_with_percent_signs(logged_in, console_server):
    page = logged_in
    page.click("header nav a:text-is('Topics')")
    page.fill("input[name=q]", "retry")
    page.click("form.search button")
    page.wait_for_url(re.compile(r".*/console/topics\?q=retry.*"))
    names = page.locator("#topics tbody td.name").all_inner_texts()
    assert names == ["%RETRY%analytics", "%RETRY%order-service"]
    queues = page.locator("#topics tr", has_text="%RETRY%order-service").locator("td").all_inner_texts()
    assert queues[2] == "3" and queues[3].split() == ["broker-a", "1", "RW", "broker-b", "1", "RW", "broker-c", "1",
                                                      "RW"]
    page.click("#topics a:text-is('%RETRY%order-service')")
    page.wait_for_url(console_server.url + "/console/topics/%25RETRY%25order-service")
    assert page.locator("#topic-name").inner_text() == "%RETRY%order-service"
    assert page.locator("#route tbody tr").count() == 3
    # one cluster's topics, and the live filter of the page (JavaScript)
    page.goto(console_server.url + "/console/topics?cluster=ClusterB")
    assert page.locator("#topics tbody td.name").all_inner_texts() == [
        "%RETRY%analytics", "ClickStream", "RMQ_SYS_TRACE_TOPIC", "TBW102", "UserSignup"]
    page.fill("input[name=q]", "click")
    assert page.locator("#topics tbody tr:visible").count() == 1
    assert page.locator("#shown").inner_text() == "1"
    # an unknown topic is a 404 page, not a stack trace
    resp = page.goto(console_server.url + "/console/topics/NoSuchTopic")
    assert resp.status == 404 and "TOPIC_NOT_EXIST" in page.locator(".error-box").inner_text()
    page.errors.clear()  # the 404 itself is logged by the browser
    no_errors(page)


def test_markup_in_kv_namespaces_keys_and_values_is_shown_as_text(logged_in, console_server):
    page = logged_in
    page.click("header nav a:text-is('KV config')")
    names = page.locator("#namespaces td.name").all_inner_texts()
    assert names == ["ORDER_TOPIC_CONFIG", XSS_NAMESPACE]
    assert page.locator("#namespaces b").count() == 0  # not parsed as a tag
    page.click(f"#namespaces a:text-is('{XSS_NAMESPACE}')")
    page.wait_for_url(console_server.url + "/console/kv/" + quote(XSS_NAMESPACE, safe=""))
    assert page.locator("#namespace-name").inner_text() == XSS_NAMESPACE
    assert page.locator("#kv td.name").inner_text() == XSS_KEY
    assert page.locator("#kv td.value").inner_text() == XSS_VALUE
    assert page.locator("main script, main img, main b").count() == 0
    assert page.title() == f"KV {XSS_NAMESPACE} · rmq-namesrv console"
    no_errors(page)


def test_markup_in_the_skew_report_is_shown_as_text(logged_in):
    page = logged_in
    page.click("header nav a:text-is('Skew report')")
    row = page.locator("#skew-topics tbody tr").first
    cells = row.locator("td").all_inner_texts()
    assert cells[:2] == [XSS_CLUSTER, XSS_TOPIC]
    assert "<i>FLAG</i>" in cells[6]
    assert page.locator("#skew-clusters td.name", has_text=XSS_CLUSTER).count() == 1
    bar = page.locator("figure.chart").first.locator("g.bar").first  # SVG: text content, not innerText
    assert bar.locator("title").text_content() == f"{XSS_CLUSTER} / {XSS_TOPIC}: 99.0 %"
    assert bar.locator("text.label").text_content() == f"{XSS_CLUSTER} / <…"  # labels are cut at 34
    assert page.locator("main svg svg, main script, main i").count() == 0
    no_errors(page)


def test_skew_page_charts_history_and_links(logged_in, console_server):
    page = logged_in
    page.goto(console_server.url + "/console/skew")
    figures = page.locator("figure.chart figcaption").all_inner_texts()
    assert figures[0].startswith("Most skewed topics")
    assert any(f.startswith("Broker load in ClusterA") for f in figures)
    assert any("report by report (history)" in f for f in figures)
    bars = page.locator("figure.chart").first.locator("g.bar")
    assert 1 < bars.count() <= 15
    history = page.locator("figure.chart", has_text="(history)")
    assert history.locator("g.series").count() == 2  # ClusterA and ClusterB
    assert history.locator("g.series").first.locator("circle").count() == 2  # two runs of the job
    assert page.locator("#skew-clusters tbody tr").count() == 3  # two real clusters, one hostile
    runs = page.locator("#skew-runs tbody tr")
    assert runs.count() == 2  # the job's kept runs, newest first
    latest = {c["cluster"]: c["gini"] for c in orjson.loads(SUMMARY.read_bytes())["clusters"]}
    newest = runs.first.locator("td").all_inner_texts()[5]
    assert newest.split() == ["ClusterA", display.number(latest["ClusterA"]), "ClusterB",
                              display.number(latest["ClusterB"])]
    page.click("#skew-topics a:text-is('OrderPaid')")
    page.wait_for_url(console_server.url + "/console/topics/OrderPaid")
    no_errors(page)


def test_names_are_not_broken_in_the_middle_while_the_page_has_room(logged_in, console_server):
    """At 1280 px a broker `broker-with-a-long-name-1` showed as `broker-with-a-long-nam` / `e-1` (names could
    break between any two letters, so the table squeezed their column first): a name cut at a letter reads as
    two names (issue 39, second round)."""
    page = logged_in
    name = "broker-with-a-rather-long-name-for-orders-1"
    broker = {"clusterName": "ClusterLongNames", "brokerName": name, "brokerId": 0, "brokerAddr": "10.0.9.1:10911",
              "haServerAddr": "10.0.9.1:10912"}
    fleet.call(console_server.url, "POST", "/v1/brokers/register", {
        **broker, "dataVersion": {"timestamp": 1_763_700_000_000, "counter": 1, "stateVersion": 0},
        "topicConfigTable": {"LongNamedTopicForTheConsoleLayout": {"readQueueNums": 8, "writeQueueNums": 8,
                                                                     "perm": 6}}}, ADMIN)
    try:
        page.goto(console_server.url + "/console/")
        cell = page.locator("section.cluster td.name", has_text=name)
        lines = cell.evaluate("el => { const r = document.createRange(); r.selectNodeContents(el); "
                              "return new Set([...r.getClientRects()].map(b => Math.round(b.top))).size; }")
        assert cell.inner_text() == name and lines == 1, lines
        no_errors(page)
    finally:
        fleet.call(console_server.url, "POST", "/v1/brokers/unregister", broker, ADMIN)
