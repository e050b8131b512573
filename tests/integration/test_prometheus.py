"""The alerting rules and the dashboard against Prometheus itself (Debian's `prometheus` package).

promtool checks the rules file and runs its unit tests (prometheus/rules.test.yaml: every alert firing and not
firing). Then a real Prometheus, on loopback with a 1 s scrape and evaluation interval, scrapes two real workers on
a real Redis of this test's own: Redis stopped, NamesrvRedisUnavailable goes pending then firing (the rules file is
the shipped one with that alert's window and `for` shortened); Redis back, it resolves; every recording rule and
every dashboard panel's query returns series, and names only metrics the workers export.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import subprocess
import time
import uuid
from pathlib import Path

import aiohttp
import pytest
import yaml

from service.monitoring import dashboard, rules
from service.remoting import codes
from tests.conftest import need
from tests.integration.conftest import Namesrv
from tests.redis_server import RedisServer, free_port
from tests.remoting.client import Client
from tests.remoting.test_controller_door import FakeBroker, boot
from tests.remoting.test_door import register_body, register_ext

pytestmark = [pytest.mark.redis, pytest.mark.integration]

HERE = Path(__file__).resolve().parent
RULES = HERE.parents[1] / "helm" / "monitoring" / "prometheus-rules.yaml"
RULE_TESTS = HERE / "prometheus" / "rules.test.yaml"
JOB = "rmq-namesrv"
TOKEN = "broker-token-c-123456"
# The Redis alert as shipped but quick: failures counted over 10 s, firing after 5 s of them.
QUICK = {"redisErrorsWindow": "10s", "redisUnavailableFor": "5s"}
BOUND_S = 30.0  # bounds each wait; the lifecycle takes a few seconds at a 1 s evaluation interval


def promtool(*args: str) -> subprocess.CompletedProcess:
    need("promtool")
    return subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=120)


def test_promtool_checks_the_rules_file():
    out = promtool("check", "rules", str(RULES))
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(rules.RECORDING) + len(rules.ALERTS)} rules found" in out.stdout


def test_promtool_rule_unit_tests_pass():
    out = promtool("test", "rules", str(RULE_TESTS))
    assert out.returncode == 0, out.stdout + out.stderr


def test_every_alert_is_unit_tested_firing_and_not_firing():
    cases = [c for t in yaml.safe_load(RULE_TESTS.read_text())["tests"] for c in t["alert_rule_test"]]
    for alert in rules.ALERTS:
        mine = [c for c in cases if c["alertname"] == alert.name]
        assert any(c["exp_alerts"] for c in mine), f"{alert.name} never expected to fire"
        assert any(not c["exp_alerts"] for c in mine), f"{alert.name} never expected to stay quiet"


def test_every_alert_has_its_runbook_and_every_panel_its_description():
    doc = (HERE.parents[1] / "docs" / "operating.md").read_text()
    slugs = {re.sub(r"[^a-z0-9 -]", "", h.strip().lower()).replace(" ", "-")
             for h in re.findall(r"^#+ (.*)$", doc, flags=re.MULTILINE)}
    for alert in rules.ALERTS:
        assert alert.anchor in slugs, f"docs/operating.md has no section #{alert.anchor} ({alert.name})"
    for panel in dashboard.panels():
        assert f"- *{panel.title}*: {panel.description}" in doc, f"panel {panel.title!r} is not described"


class Prometheus:
    """`prometheus` on a free loopback port, its data in `root`, scraping `targets` every second."""

    def __init__(self, root: Path, targets: list[str]) -> None:
        need("prometheus")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        (root / "rules.yaml").write_text(rules.plain(QUICK, up=f'job="{JOB}"'))
        (root / "prometheus.yml").write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "scrape_timeout": "900ms", "evaluation_interval": "1s"},
            "rule_files": [str(root / "rules.yaml")],
            "scrape_configs": [{"job_name": JOB, "static_configs": [{"targets": targets}]}]}))
        self.log = open(root / "prometheus.log", "w+b")  # noqa: SIM115
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={root / 'prometheus.yml'}", f"--storage.tsdb.path={root / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"], stdout=self.log, stderr=subprocess.STDOUT)

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-3000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

    async def query(self, http: aiohttp.ClientSession, promql: str) -> list[dict]:
        async with http.get(self.url + "/api/v1/query", params={"query": promql}) as r:
            body = await r.json()
        assert body["status"] == "success", (promql, body)
        return body["data"]["result"]

    async def alert_state(self, http: aiohttp.ClientSession, name: str) -> str:
        async with http.get(self.url + "/api/v1/alerts") as r:
            alerts = (await r.json())["data"]["alerts"]
        return next((a["state"] for a in alerts if a["labels"]["alertname"] == name), "inactive")


async def until(what, check, bound: float = BOUND_S):
    """`check()` until truthy, at most `bound` s; `what` (text, or a function giving it) says what failed."""
    deadline = time.monotonic() + bound
    while True:
        got = await check()
        if got:
            return got
        assert time.monotonic() < deadline, f"not within {bound} s: {what() if callable(what) else what}"
        await asyncio.sleep(0.2)


def names_in(expr: str) -> set[str]:
    """Metric names a query reads: plain names and the alternatives of a `__name__=~"a_(x|y)_b"` matcher."""
    out = set(re.findall(r"\bnamesrv_[a-z0-9_]+\b(?![:(])", re.sub(r'__name__=~"[^"]*"', "", expr)))
    for pattern in re.findall(r'__name__=~"([^"]*)"', expr):
        m = re.fullmatch(r"([a-z_]*)\(([a-z_|]+)\)([a-z_]*)", pattern)
        assert m, f"cannot expand {pattern!r}"
        out |= {m[1] + alt + m[3] for alt in m[2].split("|")}
    return out


async def workload(http: aiohttp.ClientSession, a: Namesrv, b: Namesrv, fake: FakeBroker, addr: str) -> None:
    """What the panels and recording rules show: registrations (and refused ones on both doors), route reads on
    both doors (hits, misses, a 404), a broker dropped with its connection, a controller election."""
    auth = {"Authorization": f"Bearer {TOKEN}"}
    body = {"clusterName": "C", "brokerName": "broker-a", "brokerId": 0, "brokerAddr": "10.0.0.1:10911",
            "haServerAddr": "10.0.0.1:10912", "dataVersion": {"timestamp": 1, "counter": 1, "stateVersion": 0},
            "topicConfigTable": {"TopicA": {"readQueueNums": 4, "writeQueueNums": 4, "perm": 6}}}
    async with http.post(a.url + "/v1/brokers/register", json=body, headers=auth) as r:
        assert r.status == 200, await r.text()
    async with http.post(a.url + "/v1/brokers/register", json=body,
                         headers={"Authorization": "Bearer not-a-token-anyone-issued"}) as r:
        assert r.status == 401
    for w, topic in itertools.product((a, b), ("TopicA", "TopicA", "TopicA", "NoSuchTopic")):
        async with http.get(f"{w.url}/v1/topics/{topic}/route") as r:
            assert r.status == (200 if topic == "TopicA" else 404)
    c = await Client.connect(b.remoting_port)
    try:
        assert (await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA"})).code == 0
        other = await c.request(codes.REGISTER_BROKER, register_ext(clusterName="Other", brokerName="broker-o"),
                                register_body())
        assert other.code == 16  # the trusted network is bound to cluster C: NO_PERMISSION
        dropped = await c.request(codes.REGISTER_BROKER, register_ext(clusterName="C", brokerName="broker-d",
                                                                      brokerAddr="10.0.0.9:10911"), register_body())
        assert dropped.code == 0
    finally:
        await c.close()  # broker-d goes with its connection
    ctl = await Client.connect(a.remoting_port)
    try:
        await boot(ctl, 1, addr)
        elected = await ctl.request(1002, {"clusterName": "C", "brokerName": "b", "brokerId": 1})  # ELECT_MASTER
        assert elected.code == 0 and elected.ext_fields["masterBrokerId"] == "1"
    finally:
        await ctl.close()


async def test_a_real_prometheus_alerts_on_redis_and_serves_every_rule_and_panel(tmp_path):
    need("redis-server")
    need("prometheus")
    redis = RedisServer().start()
    env = {"scan_interval_ms": 500, "broker_tokens": f"C:{TOKEN}", "remoting_trusted_networks": "127.0.0.0/8=C",
           "controller": "true", "log_level": "WARNING"}
    prefix = "prom" + uuid.uuid4().hex[:8]
    workers = [Namesrv(redis.url, prefix, 1, **env) for _ in range(2)]
    prom: Prometheus | None = None
    fake = FakeBroker()
    try:
        a, b = (w.wait_ready(30) for w in workers)
        prom = Prometheus(tmp_path, [f"127.0.0.1:{w.port}" for w in workers])
        addr = await fake.start()
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
            await workload(http, a, b, fake, addr)

            async def scraped():
                try:
                    ups = await prom.query(http, f'up{{job="{JOB}"}} == 1')
                    drops = await prom.query(http, "sum(namesrv_broker_connection_drops_total) >= 1")
                    elections = await prom.query(http, "namesrv_controller_elections_total")
                except aiohttp.ClientError:
                    return None  # Prometheus still starting
                return len(ups) == 2 and drops and elections

            await until(lambda: f"Prometheus scrapes both workers: {prom.output()}", scraped)
            assert await prom.alert_state(http, "NamesrvRedisUnavailable") == "inactive"

            redis.stop()
            for w in (a, b):  # clients see the outage as 503s (the "Store unavailable replies" panel)
                async with http.get(f"{w.url}/v1/topics/Absent/route") as r:
                    assert r.status == 503
            seen: list[str] = []

            async def fired():
                state = await prom.alert_state(http, "NamesrvRedisUnavailable")
                if not seen or seen[-1] != state:
                    seen.append(state)
                return state == "firing"

            await until(lambda: f"NamesrvRedisUnavailable fires (states seen {seen})", fired)
            assert seen[-2:] == ["pending", "firing"], seen

            redis.start()  # same port, empty: the workers reload their scripts
            for w in (a, b):
                w.wait_ready(BOUND_S)

            async def resolved():
                return await prom.alert_state(http, "NamesrvRedisUnavailable") == "inactive"

            await until("NamesrvRedisUnavailable resolves with Redis back", resolved)

            for record, _ in rules.RECORDING:
                assert await prom.query(http, record), f"recording rule {record} has no series"

            async with http.get(a.url + "/metrics") as r:
                exported = {m for line in (await r.text()).splitlines() if line.startswith("# TYPE ")
                            for m in suffixed(*line.split()[2:4])}
            for expr in [e for _, e in rules.RECORDING] + [a.expr for a in rules.ALERTS]:
                assert names_in(expr) <= exported, f"a rule reads what no worker exports: {names_in(expr) - exported}"
            for panel in dashboard.panels():
                for expr, _ in panel.targets:
                    missing = names_in(expr) - exported
                    assert not missing, f"panel {panel.title!r} reads metrics no worker exports: {missing}"
                    promql = expr.replace("$job", JOB).replace("$__rate_interval", "1m")
                    assert await prom.query(http, promql), f"panel {panel.title!r}: no data for {promql}"
    finally:
        if prom is not None:
            prom.stop()
        for w in workers:
            w.stop()
        await fake.stop()
        redis.cleanup()


def suffixed(name: str, kind: str) -> list[str]:
    """The sample names a `# TYPE name kind` family carries."""
    if kind == "histogram":
        return [name + s for s in ("_bucket", "_sum", "_count")]
    if kind == "counter":
        return [name if name.endswith("_total") else name + "_total"]
    return [name]
