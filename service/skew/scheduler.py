"""`namesrv skew-scheduler`: the skew report every `--interval` (NAMESRV_SKEW_INTERVAL_S), once per interval
cluster-wide whatever the number of schedulers.

Intervals are aligned on Redis' clock (tick k = now // interval), so every scheduler agrees on them. At each
tick a scheduler tries the tick's lease (SET NX PX through the store): one wins and runs the job; the others
wait for the next tick. A second lease, held (and renewed) for as long as a run lasts, keeps a run that
outlasts its interval from overlapping the next one: that tick is skipped, not queued. Spark starts in a
scheduler only when it first wins a tick.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import threading
from collections.abc import Callable
from typing import Any

from service.config import ConfigError
from service.errors import StoreUnavailable
from service.skew import job
from service.skew.options import JobOptions, options_of
from service.store.snapshot_reader import SnapshotReader

log = logging.getLogger(__name__)

RUN_LEASE = "skew-report:run"
RUN_LEASE_MS = 60_000  # a dead scheduler's run blocks the others at most this long
WAKE_AFTER_TICK_S = 0.05  # wake just past the boundary, so now // interval is the new tick

RAN, TAKEN, BUSY, NOTHING, FAILED = "ran", "taken", "busy", "nothing", "failed"


def tick_lease(tick: int) -> str:
    return f"skew-report:tick:{tick}"


class SkewScheduler:
    def __init__(
        self,
        reader: SnapshotReader,
        interval_s: float,
        run: Callable[[], Any],
        owner: str | None = None,
        *,
        run_lease_ms: int = RUN_LEASE_MS,
        stop: threading.Event | None = None,
    ) -> None:
        self.reader = reader
        self.interval_ms = max(1, int(interval_s * 1000))
        self.run = run
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{id(self):x}"
        self.run_lease_ms = run_lease_ms
        self.stop = stop or threading.Event()

    def tick(self) -> str:
        """Try this interval: RAN, TAKEN (another scheduler has it), BUSY (a run is still going), NOTHING (no
        snapshot in the window) or FAILED (logged)."""
        now = self.reader.now_ms()
        tick = now // self.interval_ms
        if not self.reader.acquire_lease(tick_lease(tick), 2 * self.interval_ms, self.owner):
            return TAKEN
        if not self.reader.acquire_lease(RUN_LEASE, self.run_lease_ms, self.owner):
            log.warning("skew-scheduler: the previous run is still going; interval %d skipped", tick)
            return BUSY
        renewing = threading.Event()
        renewer = threading.Thread(target=self._renew, args=(renewing,), name="skew-run-lease", daemon=True)
        renewer.start()
        try:
            log.info("skew-scheduler: interval %d is ours (%s)", tick, self.owner)
            self.run()
            return RAN
        except job.NoSnapshots as e:
            log.warning("skew-scheduler: %s", e)
            return NOTHING
        except Exception:
            log.exception("skew-scheduler: run failed; the next interval tries again")
            return FAILED
        finally:
            renewing.set()
            renewer.join()
            self.reader.release_lease(RUN_LEASE, self.owner)

    def _renew(self, done: threading.Event) -> None:
        while not done.wait(self.run_lease_ms / 3000):
            try:
                if not self.reader.renew_lease(RUN_LEASE, self.run_lease_ms, self.owner):
                    log.warning("skew-scheduler: lost the run lease while running")
                    return
            except StoreUnavailable as e:
                log.warning("skew-scheduler: could not renew the run lease: %s", e.message)

    def seconds_to_next_tick(self) -> float:
        now = self.reader.now_ms()
        return (self.interval_ms - now % self.interval_ms) / 1000 + WAKE_AFTER_TICK_S

    def loop(self) -> int:
        """Tick at every interval until stop is set (or Ctrl-C). Redis outages are logged and retried."""
        try:
            while not self.stop.is_set():
                try:
                    self.tick()
                    delay = self.seconds_to_next_tick()
                except StoreUnavailable as e:
                    log.warning("skew-scheduler: Redis unavailable (%s); retrying", e.message)
                    delay = min(self.interval_ms / 1000, 5.0)
                self.stop.wait(delay)
        except KeyboardInterrupt:
            log.info("skew-scheduler stopped")
        return job.EXIT_OK


class LazySpark:
    """The SparkSession, started on the first run this scheduler wins."""

    def __init__(self, opts: JobOptions) -> None:
        self.opts = opts
        self.session: Any = None
        self.owned = False

    def get(self) -> Any:
        if self.session is None:
            from service.skew.session import spark_session

            self.session, self.owned = spark_session(self.opts)
        return self.session

    def stop(self) -> None:
        if self.session is not None and self.owned:
            self.session.stop()


def run(args: argparse.Namespace) -> int:
    """`namesrv skew-scheduler`."""
    try:
        opts = options_of(args)
    except (ConfigError, OSError) as e:
        job._error(f"configuration error: {e}")
        return job.EXIT_USAGE
    if not logging.getLogger().handlers:
        from service.logs import setup_logging

        setup_logging(opts.settings)
    code = job.check(opts) or job.preflight(opts, window=False)
    if code is not None:
        return code
    spark = LazySpark(opts)
    interval = opts.settings.skew_interval_s
    log.info("skew-scheduler: one report every %ss cluster-wide, %d kept", interval, opts.history)
    with job.reader_for(opts) as reader:
        try:
            return SkewScheduler(reader, interval, lambda: job.run_once(spark.get(), opts)).loop()
        finally:
            spark.stop()
