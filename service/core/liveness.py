"""Broker heartbeats (BROKER_HEARTBEAT, 904) acknowledged from memory and written to Redis in batches.

Java's NameServer answers a heartbeat by updating one timestamp in a map; a Redis round trip per heartbeat cost
us several times Java's CPU (benchmarks/README.md). A heartbeat changes nothing but the broker's liveness, and its
reply carries nothing, so the worker records it (the latest per broker, on its monotonic clock) and writes every
broker it heard from per `heartbeat_flush_ms` (lua/touchLive-1.lua: one `ZADD live XX GT` per 2 000 brokers),
each with its age, so the time written is the time it was acknowledged, whatever the workers' clocks. A batch goes
in calls sized by their Redis time (service/store/steps.py: about 5 ms each, against DESIGN §9's 20 ms bound),
not by a fixed count.

What an acknowledgement means (docs/deviations.md): the heartbeat reaches Redis within `heartbeat_flush_ms` while
the worker lives and Redis answers (a failed write is kept and retried with the next one); a worker SIGKILLed
before its write loses at most that interval's heartbeats, which costs a broker one of its periods of liveness, far
inside its timeout (120 s against a 30 s registration period; a 5.x broker with enableSlaveActingMaster heartbeats
every second). The expiry scan waits `heartbeat_flush_ms` past each timeout, so a heartbeat acknowledged but not
yet written never lets a broker expire. A write never brings back a broker that was unregistered, expired or
dropped meanwhile, and never moves a later registration's time back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from service.errors import StoreUnavailable

log = logging.getLogger(__name__)
FIXED_STEP = 2000  # heartbeats per script call when the writer sizes no steps (tests, a bare write callable)


class LivenessBatch:
    """The heartbeats one worker acknowledged and has not written yet."""

    def __init__(self, write: Callable[[Sequence[tuple[str, str, int]]], Awaitable[int]], interval_ms: int,
                 clock: Callable[[], float] = time.monotonic, step: Callable[[], int] | None = None) -> None:
        self._write = write
        self._step = step or (lambda: FIXED_STEP)  # heartbeats in the next call (the store's, sized by time)
        self.interval = interval_ms / 1000
        self._clock = clock
        self._pending: dict[tuple[str, str], float] = {}  # (cluster, brokerAddr) -> when acknowledged
        self._task: asyncio.Task | None = None
        self.written = 0
        self.failures = 0

    def record(self, cluster: str, addr: str) -> None:
        """An acknowledged heartbeat: the latest of each broker is written with the next batch."""
        self._pending[(cluster, addr)] = self._clock()

    def __len__(self) -> int:
        return len(self._pending)

    async def flush(self) -> int:
        """Write what is pending now; on failure it stays pending (a newer heartbeat of a broker wins)."""
        if not self._pending:
            return 0
        taken, self._pending = self._pending, {}
        now = self._clock()
        beats = [(c, a, int((now - at) * 1000)) for (c, a), at in taken.items()]
        done = 0
        try:
            while done < len(beats):
                n = max(1, self._step())
                await self._write(beats[done:done + n])
                done += n
        except BaseException:
            for key, at in list(taken.items())[done:]:
                if self._pending.get(key, -1.0) < at:
                    self._pending[key] = at
            raise
        self.written += len(beats)
        return len(beats)

    async def start(self) -> None:
        if self.interval > 0 and self._task is None:
            self._task = asyncio.create_task(self._run(), name="liveness-flush")

    async def stop(self) -> None:
        """Stop the timer and write what is pending (a worker stopped on purpose loses no heartbeat)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        try:
            await self.flush()
        except Exception as exc:
            log.warning("could not write %d acknowledged heartbeats at stop: %s", len(self._pending), exc)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.flush()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis down: kept, written with the next batch (the outage is told once)
                self.failures += 1
                if isinstance(exc, StoreUnavailable):
                    log.debug("writing %d acknowledged heartbeats failed (%s)", len(self._pending), exc)
                else:
                    log.warning("writing %d acknowledged heartbeats failed (%s); retrying in %.1f s",
                                len(self._pending), exc, self.interval)
