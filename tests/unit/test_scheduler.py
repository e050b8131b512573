"""The scheduler's contract: a late tick runs once (never silently skipped), a job never overlaps itself,
the expiry job removes what is due and counts it."""

from __future__ import annotations

import fakeredis

from service.config import load_settings
from service.core import NameServer
from service.models import RegisterBroker, TopicConfig
from service.scheduler import build_scheduler, expiry_scan, snapshot_tick
from service.store import RouteStore


def nameserver(**env: str) -> NameServer:
    settings = load_settings(env={f"NAMESRV_{k.upper()}": v for k, v in env.items()})
    return NameServer(RouteStore(fakeredis.FakeAsyncRedis(decode_responses=True)), settings)


async def test_job_defaults_and_first_runs():
    ns = nameserver(scan_interval_ms="2500", snapshot_interval_s="60")
    sched = build_scheduler(ns)
    sched.start(paused=True)  # job defaults are applied when the scheduler starts
    jobs = {j.id: j for j in sched.get_jobs()}
    sched.shutdown(wait=False)
    assert set(jobs) == {"expiry_scan", "snapshot", "gauges"}
    for job in jobs.values():
        assert job.misfire_grace_time is None  # a late tick runs
        assert job.coalesce is True and job.max_instances == 1
    assert jobs["expiry_scan"].trigger.interval.total_seconds() == 2.5
    off = build_scheduler(nameserver(snapshot_interval_s="0"))
    assert "snapshot" not in {j.id for j in off.get_jobs()}


async def test_expiry_scan_removes_due_brokers_and_counts():
    ns = nameserver()
    store = ns.store
    await store.load_scripts()
    now = await store.redis_time_ms()
    await store.register_broker(RegisterBroker("C", "b", 0, "10.0.0.1:1", "", {"T": TopicConfig()},
                                               heartbeat_timeout_ms=1000), now=now - 5000)
    await store.register_broker(RegisterBroker("C", "c", 0, "10.0.0.2:1", "", {"U": TopicConfig()}), now=now)
    assert await expiry_scan(ns) == 1
    assert await store.get_route("T") is None and await store.get_route("U") is not None
    assert ns.metrics.expirations._value.get() == 1


async def test_snapshot_tick_takes_the_lease_once():
    ns = nameserver(snapshot_interval_s="60", snapshot_retention_s="3600")
    await ns.store.load_scripts()
    assert await snapshot_tick(ns) is not None
    assert await snapshot_tick(ns) is None  # another worker in the same tick
    assert await ns.store.redis.zcard(ns.store.keys.snapshots) == 1
