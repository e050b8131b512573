"""Background jobs of every worker: the expiry scan, snapshots (lease: once per tick cluster-wide), gauges.

APScheduler's AsyncIOScheduler with coalesce=True and max_instances=1: a late tick runs once (never silently
skipped: misfire_grace_time=None), and a slow scan never overlaps itself.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from datetime import datetime, timedelta

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from service.config import Settings
from service.metrics import Metrics
from service.snapshot import acquire_lease, take_snapshot
from service.store import RouteStore

log = logging.getLogger(__name__)
WORKER_ID = f"{socket.gethostname()}:{os.getpid()}"


async def expiry_scan(store: RouteStore, metrics: Metrics, batch: int) -> int:
    """Expire every broker past its timeout, one bounded script call after another."""
    started = time.perf_counter()
    res = await store.expire_all(batch=batch)
    metrics.scan_seconds.observe(time.perf_counter() - started)
    for cluster, addr, name in res.expired:
        log.warning("broker expired: cluster=%s brokerName=%s brokerAddr=%s", cluster, name, addr)
    metrics.expirations.inc(len(res.expired))
    return len(res.expired)


async def snapshot_tick(store: RouteStore, metrics: Metrics, interval_s: int, retention_s: int) -> str | None:
    if not await acquire_lease(store, "snapshot", int(interval_s * 1000 * 0.9), WORKER_ID):
        return None
    snap_id = await take_snapshot(store, retention_s)
    metrics.snapshots.inc()
    return snap_id


async def refresh_gauges(store: RouteStore, metrics: Metrics) -> None:
    stats = await store.stats()
    metrics.live_brokers.set(stats["liveBrokers"])
    metrics.topics.set(stats["topics"])


def _safe(job, name: str, metrics: Metrics):
    async def run(*args):
        try:
            return await job(*args)
        except Exception as exc:  # Redis outage: log, count, try again next tick
            metrics.redis_errors.labels(kind=type(exc).__name__).inc()
            log.warning("%s failed: %s", name, exc)
            return None

    run.__name__ = name
    return run


def build_scheduler(settings: Settings, store: RouteStore, metrics: Metrics) -> AsyncIOScheduler:
    sched = AsyncIOScheduler(job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None})
    now = datetime.now()
    sched.add_job(_safe(expiry_scan, "expiry_scan", metrics), "interval",
                  args=[store, metrics, settings.expire_batch],
                  seconds=settings.scan_interval_ms / 1000,
                  next_run_time=now + timedelta(milliseconds=settings.scan_first_delay_ms), id="expiry_scan")
    if settings.snapshot_interval_s > 0:
        sched.add_job(_safe(snapshot_tick, "snapshot", metrics), "interval",
                      args=[store, metrics, settings.snapshot_interval_s, settings.snapshot_retention_s],
                      seconds=settings.snapshot_interval_s,
                      next_run_time=now + timedelta(seconds=min(10, settings.snapshot_interval_s)), id="snapshot")
    sched.add_job(_safe(refresh_gauges, "gauges", metrics), "interval", args=[store, metrics], seconds=5,
                  next_run_time=now, id="gauges")
    return sched
