"""A worker's bulk Redis work in turns: registrations, removals, expiry and sweeps, a few at a time, in arrival order.

A fleet registering at once (a data centre restarting, a new Redis, a NameServer rollout) used to start hundreds of
script calls per worker together, each under a deadline that also counted the time it spent behind the others — in
the connection pool, and behind the others' decoding on the event loop. Most timed out while Redis never took more
than a few ms per call (benchmarks/README.md, "A fleet's cold start"). Now at most `slots` of them are under way per
worker; the others wait their turn, first come first served, and a call's deadline starts when its turn comes, so
the deadline measures Redis, not this queue. A registration keeps its turn for its decoding and all of its steps
(`turn()` is re-entrant within a task), so each one, once begun, goes to the end.

An outage still answers fast. A store call that finds Redis unreachable (the connection refused, reset or closed,
Redis loading or failing over) marks the store down: every call waiting for a turn fails at once with that error,
and until some call succeeds again each new arrival fails at once too, but one at a time goes through as a probe
(bounded by its own deadline), so the worker notices by itself when Redis is back. A call that merely ran out of
time says less: Redis may hang, be busy or starved of CPU, or this worker's event loop may have been too busy to
read the reply in time (a storm's decoding). That starts a check — one PING under the normal deadline — and the
store is marked down only if the PING fails too while this loop kept its timers on time (a PING unanswered while
the loop itself stalled says nothing). A bulk call that ran out of time waits on for its reply, up to the bulk
deadline's ceiling, as long as that check does not find Redis down: a slow Redis delays a storm, a hung one fails
it (within the deadline and a PING's).
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from service.errors import StoreUnavailable

# A PING that fails while this worker's event loop ran its timers on time says Redis does not answer; one that
# fails while the loop stalled longer than LOOP_STALL_S (measured every TICK_S) says nothing.
TICK_S = 0.02
LOOP_STALL_S = 0.2


class _Turn:
    """A task's turn: calls it makes while the turn is open take no other (re-entrance)."""

    __slots__ = ("gate", "open")

    def __init__(self, gate: Gate) -> None:
        self.gate = gate
        self.open = True


_TURN: contextvars.ContextVar[_Turn | None] = contextvars.ContextVar("bulk_turn", default=None)


class Gate:
    """`slots` turns, handed out in arrival order; fails every waiter fast while Redis is known to be down."""

    def __init__(self, slots: int) -> None:
        self.slots = max(1, slots)
        self.busy = 0
        self.waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self.down: str | None = None  # why Redis is unavailable, from the last call that failed for want of it
        self.probing = False
        self.checking: asyncio.Task[bool | None] | None = None  # a PING after a call ran out of time
        # for /metrics: turns waited for (and how long in all), waiters and arrivals failed fast by an outage
        self.waited = 0
        self.wait_seconds = 0.0
        self.failed_fast = 0

    @property
    def queued(self) -> int:
        return len(self.waiters)

    def holds(self) -> bool:
        turn = _TURN.get()
        return turn is not None and turn.open and turn.gate is self

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Wait for a turn (none if this task holds one already) and keep it for the block."""
        if self.holds():
            yield
            return
        probe = await self._acquire()
        turn = _Turn(self)
        token = _TURN.set(turn)
        try:
            yield
        finally:
            turn.open = False
            _TURN.reset(token)
            if probe:
                self.probing = False
            self._release()

    async def _acquire(self) -> bool:
        """A turn; True when it is the probe of a store marked down. Raises StoreUnavailable at once while down
        and another call is probing."""
        probe = False
        if self.down is not None:
            if self.probing:
                self.failed_fast += 1
                raise StoreUnavailable(self.down)
            self.probing = probe = True
        if self.busy < self.slots and not self.waiters:
            self.busy += 1
            return probe
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiters.append(fut)
        started = time.perf_counter()
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                self._release()  # the turn was handed over as the waiter was cancelled: pass it on
            else:
                self._forget(fut)
            if probe:
                self.probing = False
            raise
        except StoreUnavailable:
            if probe:
                self.probing = False
            raise
        finally:
            self.waited += 1
            self.wait_seconds += time.perf_counter() - started
        return probe

    def _forget(self, fut: asyncio.Future[None]) -> None:
        try:
            self.waiters.remove(fut)
        except ValueError:
            pass

    def _release(self) -> None:
        """Hand the turn to the next waiter, or give it back."""
        while self.waiters:
            fut = self.waiters.popleft()
            if not fut.done():
                fut.set_result(None)  # the turn passes: busy stays as it is
                return
        self.busy -= 1

    def unavailable(self, reason: str) -> None:
        """A store call found Redis unavailable: fail the waiters now, and arrivals until a call succeeds."""
        self.down = reason
        waiters, self.waiters = self.waiters, collections.deque()
        for fut in waiters:
            if not fut.done():
                self.failed_fast += 1
                fut.set_exception(StoreUnavailable(reason))

    def available(self) -> None:
        """A store call succeeded: Redis answers."""
        self.down = None

    def suspect(self, reason: str, ping: Callable[[], Awaitable[object]]) -> None:
        """A store call ran out of time: check with `ping` (which raises StoreUnavailable if Redis does not answer
        within its own deadline), in the background, and mark the store down if it fails. One check at a time."""
        if self.down is None:
            self._check(reason, ping)

    async def alive(self, reason: str, ping: Callable[[], Awaitable[object]]) -> bool:
        """A bulk call ran out of time: is Redis there? False (and the store marked down) only if a PING failed too
        while this loop kept time; a PING answered, or one whose silence may be this loop's own, is True: the call
        may wait on (Redis is slow or busy, not gone)."""
        if self.down is not None:
            return False
        return await asyncio.shield(self._check(reason, ping)) is not False

    def _check(self, reason: str, ping: Callable[[], Awaitable[object]]) -> asyncio.Task[bool | None]:
        """The PING under way, or a new one: True if Redis answered, False if it did not while this loop kept its
        timers on time (the store is then marked down), None if the loop stalled meanwhile (inconclusive)."""
        if self.checking is not None and not self.checking.done():
            return self.checking
        loop = asyncio.get_running_loop()
        last, stalled = [loop.time()], [0.0]  # the longest this loop did not run its timers during the PING

        def gap() -> None:
            now = loop.time()
            stalled[0] = max(stalled[0], now - last[0] - TICK_S)
            last[0] = now

        async def tick() -> None:
            while True:
                await asyncio.sleep(TICK_S)
                gap()

        async def check() -> bool | None:
            ticker = loop.create_task(tick())
            try:
                await ping()
                return True
            except StoreUnavailable as exc:
                gap()
                if stalled[0] >= LOOP_STALL_S:  # the PING's silence may be this loop's own
                    return None
                self.unavailable(f"{reason} (and a PING: {exc.message})")
                return False
            finally:
                ticker.cancel()

        self.checking = loop.create_task(check())
        return self.checking
