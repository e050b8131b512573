"""A worker's bulk Redis work in turns (service/store/admission.py): a few at a time, first come first served,
re-entrant within a task; an outage fails the waiting calls and later arrivals at once, one probe at a time going
through; a call that merely ran out of time only starts a PING, whose failure counts only if this event loop kept
its timers meanwhile."""

from __future__ import annotations

import asyncio
import time

import pytest

from service.errors import StoreUnavailable
from service.store.admission import Gate


async def test_turns_are_bounded_and_handed_out_in_arrival_order():
    gate = Gate(2)
    running, order, peak = [], [], [0]
    release = asyncio.Event()

    async def work(i: int) -> None:
        async with gate.turn():
            running.append(i)
            order.append(i)
            peak[0] = max(peak[0], len(running))
            await release.wait()
            running.remove(i)

    tasks = [asyncio.create_task(work(i)) for i in range(6)]
    async with asyncio.timeout(5):
        while len(order) < 2:
            await asyncio.sleep(0)
    assert order == [0, 1] and gate.queued == 4
    release.set()
    await asyncio.gather(*tasks)
    assert order == list(range(6)) and peak[0] == 2 and gate.busy == 0 and gate.waited == 4


async def test_a_task_holding_a_turn_takes_no_other():
    gate = Gate(1)
    async with asyncio.timeout(2):  # nested turns of one task: no deadlock
        async with gate.turn():
            async with gate.turn():
                assert gate.busy == 1
    assert gate.busy == 0


def holding(gate: Gate, until: asyncio.Event) -> asyncio.Task[None]:
    """A task that takes a turn and keeps it until `until` is set."""
    async def holder() -> None:
        async with gate.turn():
            await until.wait()

    return asyncio.create_task(holder())


async def take(gate: Gate) -> str:
    async with gate.turn():
        return "served"


async def test_a_cancelled_waiter_passes_its_turn_on():
    gate = Gate(1)
    hold = asyncio.Event()
    first = holding(gate, hold)
    await asyncio.sleep(0)
    doomed, later = asyncio.create_task(take(gate)), asyncio.create_task(take(gate))
    await asyncio.sleep(0)
    doomed.cancel()
    hold.set()
    assert await asyncio.wait_for(later, 2) == "served"
    await first
    assert gate.busy == 0 and gate.queued == 0


async def test_an_outage_fails_the_waiters_at_once_and_one_probe_at_a_time_goes_through():
    gate = Gate(1)
    hold = asyncio.Event()
    first = holding(gate, hold)
    await asyncio.sleep(0)
    waiters = [asyncio.create_task(take(gate)) for _ in range(3)]
    await asyncio.sleep(0)
    started = time.monotonic()
    gate.unavailable("the route store (Redis) is unavailable: ConnectionError; retry shortly")
    for w in waiters:
        with pytest.raises(StoreUnavailable, match="ConnectionError"):
            await w
    assert time.monotonic() - started < 0.5 and gate.failed_fast == 3
    hold.set()
    await first

    probe_may_end = asyncio.Event()
    p = holding(gate, probe_may_end)  # down: the first arrival is the probe ...
    await asyncio.sleep(0)
    with pytest.raises(StoreUnavailable):  # ... and the others are answered at once while it runs
        await take(gate)
    gate.available()  # the probe's call succeeded
    probe_may_end.set()
    await p
    async with asyncio.timeout(1):
        async with gate.turn():  # Redis answers again: turns as usual
            pass


async def answers() -> None:
    """A PING Redis answers."""


async def silent() -> None:
    """A PING Redis does not answer within its deadline."""
    raise StoreUnavailable("the route store (Redis) did not answer in time; retry shortly")


async def test_a_call_out_of_time_marks_the_store_down_only_if_a_ping_fails_too():
    gate = Gate(2)

    gate.suspect("the route store (Redis) did not answer in time", answers)
    await asyncio.wait_for(gate.checking, 2)
    assert gate.down is None  # Redis answered the PING: the late reply was this worker's own doing

    gate.suspect("the route store (Redis) did not answer in time", silent)
    await asyncio.wait_for(gate.checking, 2)
    assert gate.down is not None and "PING" in gate.down


async def test_a_failed_ping_while_this_loop_stalled_says_nothing():
    gate = Gate(2)

    async def stalls_then_fails() -> None:
        time.sleep(0.4)  # the event loop blocked (a storm's decoding): the PING's silence may be ours
        raise StoreUnavailable("the route store (Redis) did not answer in time; retry shortly")

    gate.suspect("out of time", stalls_then_fails)
    await asyncio.wait_for(gate.checking, 2)
    assert gate.down is None


async def test_a_bulk_call_out_of_time_waits_on_while_a_ping_finds_redis_there():
    gate = Gate(2)

    assert await gate.alive("out of time", answers) is True and gate.down is None
    assert await gate.alive("out of time", silent) is False and gate.down is not None
    assert await gate.alive("out of time", answers) is False  # already down: fail, no PING (a probe decides)
