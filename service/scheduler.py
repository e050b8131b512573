"""Background jobs of every worker: the expiry scan, snapshots (lease: once per tick cluster-wide), gauges, and
the renewal of this worker's announced address (service/core/announce.py).

APScheduler's AsyncIOScheduler with coalesce=True and max_instances=1: a late tick runs once (never silently
skipped: misfire_grace_time=None), and a slow scan never overlaps itself.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from service.core import NameServer
from service.core.announce import Announcer
from service.core.controller import controller_scan
from service.errors import NamesrvError, StoreUnavailable

log = logging.getLogger(__name__)
WORKER_ID = f"{socket.gethostname()}:{os.getpid()}"


async def expiry_scan(ns: NameServer) -> int:
    return len(await ns.expire_due())


async def snapshot_tick(ns: NameServer) -> str | None:
    """Take a snapshot if this worker wins this tick's lease (one per tick cluster-wide)."""
    s = ns.base_settings
    if not await ns.snapshots.acquire_lease("snapshot", int(s.snapshot_interval_s * 1000 * 0.9), WORKER_ID):
        return None
    info = await ns.snapshots.take(s.snapshot_retention_s)
    ns.metrics.snapshots.inc()
    return info.snap_id


async def refresh_gauges(ns: NameServer) -> None:
    stats = await ns.store.stats()
    ns.metrics.live_brokers.set(stats["liveBrokers"])
    ns.metrics.topics.set(stats["topics"])


def _safe(job: Callable[[NameServer], Awaitable[Any]], name: str) -> Callable[[NameServer], Awaitable[Any]]:
    async def run(ns: NameServer) -> Any:
        try:
            return await job(ns)
        except StoreUnavailable as exc:  # the outage is told once, where it was translated: try again next tick
            log.debug("%s failed: %s", name, exc.message)
        except NamesrvError as exc:
            log.warning("%s failed: %s", name, exc.message)
        except Exception:
            log.exception("%s failed", name)
        return None

    run.__name__ = name
    return run


def build_scheduler(ns: NameServer, announcer: Announcer | None = None) -> AsyncIOScheduler:
    s = ns.base_settings
    sched = AsyncIOScheduler(job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None})
    now = datetime.now()
    sched.add_job(_safe(expiry_scan, "expiry_scan"), "interval", args=[ns], seconds=s.scan_interval_ms / 1000,
                  next_run_time=now + timedelta(milliseconds=s.scan_first_delay_ms), id="expiry_scan")
    if s.snapshot_interval_s > 0:
        sched.add_job(_safe(snapshot_tick, "snapshot"), "interval", args=[ns], seconds=s.snapshot_interval_s,
                      next_run_time=now + timedelta(seconds=min(10, s.snapshot_interval_s)), id="snapshot")
    sched.add_job(_safe(refresh_gauges, "gauges"), "interval", args=[ns], seconds=5, next_run_time=now,
                  id="gauges")
    if announcer is not None:  # renew() logs and absorbs its own failures: a lapse is the lease's business
        sched.add_job(announcer.renew, "interval", seconds=announcer.renew_interval_s,
                      next_run_time=now + timedelta(seconds=announcer.renew_interval_s), id="announce")
    if s.controller:
        sched.add_job(_safe(controller_scan, "controller_scan"), "interval", args=[ns],
                      seconds=s.controller_scan_interval_ms / 1000, id="controller_scan")
    return sched
