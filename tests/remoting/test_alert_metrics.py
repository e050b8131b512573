"""The metrics the alerting rules (service/monitoring/rules.py) stand on count what they say, through both doors:
readiness, Redis failures by kind (deadline hits among them), error replies by code (auth refusals, 503s) and
brokers dropped with their connection."""

from __future__ import annotations

import asyncio
import logging
import re

import fakeredis
from prometheus_client.parser import text_string_to_metric_families

from service.remoting import codes
from service.store.calls import FAILURES, translate
from tests.remoting.conftest import ADMIN, BROKER_C1
from tests.remoting.test_door import BROKER, register_body, register_ext

SECURED = {"admin_token": ADMIN, "broker_tokens": f"C1:{BROKER_C1}"}


async def scrape(door) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    r = await door.http.get("/metrics")
    assert r.status == 200
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(await r.text()) for s in f.samples}


def value(samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def test_ready_gauge_follows_redis_and_failures_are_counted_by_kind(make_door):
    redis = fakeredis.FakeServer()
    door = await make_door(redis_server=redis)
    before = await scrape(door)
    assert value(before, "namesrv_ready") == 1.0
    redis.connected = False
    down = await scrape(door)  # the scrape's readiness check itself fails against the lost Redis
    assert value(down, "namesrv_ready") == 0.0
    assert value(down, "namesrv_redis_errors_total", kind="connection") > value(
        before, "namesrv_redis_errors_total", kind="connection")
    r = await door.http.post("/v1/brokers/register", json={**BROKER, "topicConfigTable": {"TopicA": {}}})
    assert r.status == 503
    after = await scrape(door)
    assert value(after, "namesrv_http_errors_total", code="STORE_UNAVAILABLE") == 1.0
    redis.connected = True
    assert value(await scrape(door), "namesrv_ready") == 1.0


def test_a_deadline_hit_is_counted_apart_from_a_lost_connection():
    before = dict(FAILURES)
    assert translate(TimeoutError()).code == "STORE_UNAVAILABLE"
    assert FAILURES["deadline"] == before.get("deadline", 0) + 1
    assert FAILURES["connection"] == before.get("connection", 0)


async def test_auth_refusals_are_counted_by_code_on_both_doors(make_door):
    door = await make_door(**SECURED)
    c = await door.client()
    r = await c.request(codes.REGISTER_BROKER, register_ext(), register_body())  # unsigned
    assert r.code == 16  # NO_PERMISSION
    r2 = await door.http.post("/v1/brokers/register", json={**BROKER, "topicConfigTable": {"TopicA": {}}},
                              headers={"Authorization": "Bearer not-a-token-anyone-issued"})
    assert r2.status == 401
    s = await scrape(door)
    assert value(s, "namesrv_remoting_errors_total", code="UNAUTHORIZED") == 1.0
    assert value(s, "namesrv_http_errors_total", code="UNAUTHORIZED") == 1.0
    assert value(s, "namesrv_remoting_requests_total", code=str(codes.REGISTER_BROKER), request="REGISTER_BROKER",
                 result="16") == 1.0


async def test_a_refused_request_is_logged_with_its_source_once_per_host_a_minute(make_door, caplog):
    """What the NamesrvRegistrationsRefused runbook sends operators to: the log names where refused requests come
    from (the metrics count them, not their sources), one line per client host per minute however many arrive."""
    door = await make_door(**SECURED)
    c = await door.client()
    caplog.set_level(logging.WARNING, logger="service.remoting.server")
    for _ in range(5):
        assert (await c.request(codes.REGISTER_BROKER, register_ext(), register_body())).code == 16
    lines = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(lines) == 1, lines
    assert re.fullmatch(r"remoting 127\.0\.0\.1:\d+: REGISTER_BROKER refused \(UNAUTHORIZED\): .+ \(one line per host "
                        r"per 60 s\)", lines[0]), lines[0]
    # a request refused for another reason than its credential is not a refusal of this kind
    caplog.clear()
    assert (await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "Nope"})).code == 17
    assert not [r for r in caplog.records if "refused" in r.getMessage()]


async def test_a_broker_dropped_with_its_connection_is_counted(door):
    c = await door.client()
    r = await c.request(codes.REGISTER_BROKER, register_ext(), register_body())
    assert r.code == 0
    assert value(await scrape(door), "namesrv_broker_connection_drops_total") == 0.0
    await c.close()
    async with asyncio.timeout(5):
        while (await door.http.get("/v1/topics/TopicA/route")).status == 200:
            await asyncio.sleep(0.01)
    assert value(await scrape(door), "namesrv_broker_connection_drops_total") == 1.0
