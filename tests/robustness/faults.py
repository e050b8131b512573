"""The faults, one per scenario, each recorded in the history on its clock (start, end, what).

Every fault here happens to a real process: a worker SIGKILLed (and started again on the same ports) or SIGSTOPped
past the route cache's staleness bound, Redis SIGSTOPped in bursts (long ones; short stalls while hot topics change
in bursts), its primary SIGKILLed under Sentinel, the
pub/sub connections killed (`CLIENT KILL TYPE pubsub`), a broker paused past its timeout that resumes on the same
connection with the same bytes, a worker SIGKILLed in the middle of a chunked registration and of a large broker's
removal (caught in the act by watching Redis: the registration's mark, the sweep's entry).
"""

from __future__ import annotations

import asyncio
import random
import signal
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import aiohttp
import redis

from tests.robustness.history import History
from tests.robustness.traffic import REQUEST_TIMEOUT_S, Admin, NativeConn

if TYPE_CHECKING:
    from tests.robustness.scenario import Run

FAULTS: dict[str, Callable[[Run], Awaitable[None]]] = {}


def fault(name: str) -> Callable[[Callable[[Run], Awaitable[None]]], Callable[[Run], Awaitable[None]]]:
    def register(fn: Callable[[Run], Awaitable[None]]) -> Callable[[Run], Awaitable[None]]:
        FAULTS[name] = fn
        return fn
    return register


class FaultMissed(AssertionError):
    """The fault could not be made to happen as the scenario means it (the run proves nothing: retried)."""


@fault("none")
async def no_fault(run: Run) -> None:
    run.hist.fault("none", History.now())


@fault("worker-kill")
async def worker_kill(run: Run) -> None:
    w = run.reg.workers[run.rng.randrange(len(run.reg.workers))]
    start = History.now()
    w.kill()
    run.hist.fault("worker-kill", start, f"w{w.index} SIGKILL")
    await asyncio.sleep(0.5)  # its brokers move to the other worker meanwhile
    start = History.now()
    await run.reg.restart(w)
    run.hist.fault("worker-restart", start, f"w{w.index} ready again")


@fault("worker-stop")
async def worker_stop(run: Run) -> None:
    """SIGSTOP for three staleness bounds: its route cache, change feed and heartbeat batch are frozen meanwhile."""
    w = run.reg.workers[run.rng.randrange(len(run.reg.workers))]
    start = History.now()
    w.signal(signal.SIGSTOP)
    await asyncio.sleep(3 * run.reg.settings.staleness_ms / 1000)
    w.signal(signal.SIGCONT)
    run.hist.fault("worker-stop", start, f"w{w.index} SIGSTOP {3 * run.reg.settings.staleness_ms} ms")


@fault("redis-stop")
async def redis_stop(run: Run) -> None:
    """Bursts of SIGSTOP on redis-server: every call in flight waits, deadlines answer 503."""
    assert run.reg.redis is not None and run.reg.redis.proc is not None
    proc = run.reg.redis.proc
    for _ in range(3):
        start = History.now()
        proc.send_signal(signal.SIGSTOP)
        await asyncio.sleep(run.rng.uniform(0.4, 1.5))
        proc.send_signal(signal.SIGCONT)
        run.hist.fault("redis-stop", start, "redis-server SIGSTOP")
        await asyncio.sleep(run.rng.uniform(0.3, 1.0))


STALL_CHANGES = 5  # changes per burst: four stalls in between
STALL_BURSTS = 4


@fault("redis-stalls")
async def redis_stalls(run: Run) -> None:
    """Short Redis stalls (SIGSTOP 150–300 ms: a fork for a snapshot, a slow script, a busy host) while the hot
    topics change in bursts — an operator script wiping and restoring the write permission of their broker, five
    changes in a row — each burst followed by a quiet gap of 2.5 staleness bounds. A stall begins the moment a
    change is acknowledged: the workers' reads of the topics it evicted queue up at Redis; it ends once the next
    change is queued behind them. Redis then runs both in one pass and sends the change's event before the reads'
    replies (a pass's replies go out newest client first), so a worker hears of the change while its fill, read
    before it, is still on its way: the fill must not be cached. A route cache that kept it would serve the route
    from before the burst's last change through the quiet gap, past Δ (the staleness check fails)."""
    assert run.reg.redis is not None and run.reg.redis.proc is not None
    proc = run.reg.redis.proc
    operator = Admin(run.hist, run.reg, [], [], [], run.rng, stream="operator")
    session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S))
    conns = [NativeConn(w, "operator") for w in run.reg.workers]
    wiped = False
    n = 0

    async def toggle() -> None:
        nonlocal wiped, n
        w, door = n % len(conns), ("http", "native")[(n // len(conns)) % 2]
        if door == "native" and conns[w].closed:
            conns[w] = NativeConn(run.reg.workers[w], "operator")
        n += 1
        wiped = not wiped
        await operator.call(session, conns[w] if door == "native" else None, w, door, "wipe" if wiped else "add",
                            broker=run.hot_broker)

    try:
        for _ in range(STALL_BURSTS):
            await toggle()
            for _ in range(STALL_CHANGES - 1):
                stalled = History.now()
                proc.send_signal(signal.SIGSTOP)
                await asyncio.sleep(run.rng.uniform(0.15, 0.3))  # the reads of the topics it evicted queue up
                change = asyncio.create_task(toggle())
                await asyncio.sleep(0.02)  # the next change queued behind them
                proc.send_signal(signal.SIGCONT)
                run.hist.fault("redis-stall", stalled, f"redis-server SIGSTOP, change #{n} queued behind reads")
                await change
            await asyncio.sleep(2.5 * run.reg.settings.staleness_ms / 1000)
        if wiped:
            await toggle()
    finally:
        proc.send_signal(signal.SIGCONT)
        for c in conns:
            c.close()
        await session.close()


@fault("pubsub-kill")
async def pubsub_kill(run: Run) -> None:
    """Every pub/sub connection killed at once (the workers' change feeds, the observer's too)."""
    client = run.reg.redis_client()
    try:
        for _ in range(2):
            start = History.now()
            killed = await client.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
            run.hist.fault("pubsub-kill", start, f"CLIENT KILL TYPE pubsub: {killed}")
            await asyncio.sleep(1.0)
    finally:
        await client.aclose()


@fault("broker-pause")
async def broker_pause(run: Run) -> None:
    """A broker stops sending (its connection kept open) past its timeout, then resumes on the same connection with
    the same bytes: the registry expired it meanwhile and must take it back."""
    b = run.brokers[run.pause_broker]
    timeout_ms = b.spec.timeout_ms or run.reg.settings.broker_timeout_ms
    s = run.reg.settings
    start = History.now()
    b.hold = True  # no changed table on resuming: the same bytes as before the pause
    b.paused.clear()
    gone_by = time.monotonic() + (timeout_ms + s.heartbeat_flush_ms + 2 * s.scan_interval_ms) / 1000 + 3
    member = f"{run.cluster}|{b.spec.addr}"
    while time.monotonic() < gone_by:  # until the registry expired it (the fault is the expiry it causes)
        await asyncio.sleep(0.1)
        if run.live_samples and run.live_samples[-1][1] > start and member not in run.live_samples[-1][2]:
            break
    else:
        b.paused.set()
        raise FaultMissed(f"{b.spec.name} was not expired while paused")
    await asyncio.sleep(0.3)
    b.paused.set()
    run.hist.fault("broker-pause", start, f"{b.spec.name} silent past its {timeout_ms} ms timeout, expired, resumed")


def _watch_and_kill(url: str, key: str, field: str | None, pid_of: Callable[[], int], deadline: float,
                    done: threading.Event) -> bool:
    """In a thread: poll Redis as fast as it answers until `key` (a hash field of it, or any entry but '#') shows
    up, then SIGKILL the worker. True if it was caught in the act."""
    c = redis.Redis.from_url(url, decode_responses=True, socket_timeout=1)
    try:
        while time.monotonic() < deadline and not done.is_set():
            if field is not None:
                hit = c.hget(key, field)
            else:
                hit = [k for k in c.hkeys(key) if k != "#"]
            if hit:
                import os

                os.kill(pid_of(), signal.SIGKILL)
                return True
        return False
    finally:
        c.close()


async def _kill_when(run: Run, key: str, field: str | None, trigger: Callable[[], Awaitable[None]], what: str) -> None:
    big = run.brokers[run.big_broker]
    w = run.reg.workers[big.lb_worker]
    assert w.proc is not None
    done = threading.Event()
    assert run.reg.redis is not None
    watcher = asyncio.create_task(asyncio.to_thread(_watch_and_kill, run.reg.redis.url, key, field,
                                                    lambda: w.proc.pid, time.monotonic() + 20, done))
    start = History.now()
    await asyncio.sleep(0.05)
    await trigger()
    try:
        caught = await asyncio.wait_for(watcher, 25)
    finally:
        done.set()
    if not caught:
        raise FaultMissed(f"{what}: never caught under way")
    w.proc.wait()
    w.stopped = False
    run.hist.fault("worker-kill", start, f"w{w.index} SIGKILL in the middle of {what}")
    await asyncio.sleep(0.3)
    start = History.now()
    await run.reg.restart(w)
    run.hist.fault("worker-restart", start, f"w{w.index} ready again")


@fault("chunked-kill")
async def chunked_kill(run: Run) -> None:
    """The big broker sends a changed registration (every topic's queue count changes, applied in steps); its
    worker is SIGKILLed once the registration's mark is in Redis, half-way through its steps."""
    big = run.brokers[run.big_broker]
    key = "{" + run.reg.prefix + "}:b:" + big.spec.name

    async def trigger() -> None:
        big.force_change = True

    await _kill_when(run, key, "rg", trigger, "a chunked registration")


@fault("removal-kill")
async def removal_kill(run: Run) -> None:
    """The big broker unregisters (its removal goes in sweeps); its worker is SIGKILLed once a sweep is queued."""
    big = run.brokers[run.big_broker]
    key = "{" + run.reg.prefix + "}:sweeps"

    async def trigger() -> None:
        big.force_unregister = True

    await _kill_when(run, key, None, trigger, "a large broker's removal")


@fault("primary-kill")
async def primary_kill(run: Run) -> None:
    """Sentinel: the primary SIGKILLed; the sentinels promote the replica; the workers follow by themselves."""
    topo = run.reg.topology
    assert topo is not None
    start = History.now()
    old = await asyncio.to_thread(topo.master_node)
    new = await asyncio.to_thread(topo.kill_master)
    run.hist.fault("primary-kill", start, f"{old.name} SIGKILL, {new.name} promoted "
                                          f"({old.addr[0]}:{old.addr[1]} -> {new.addr[0]}:{new.addr[1]})")
    await asyncio.to_thread(topo.restart, old)


def pick(rng: random.Random, names: list[str]) -> str:
    return names[rng.randrange(len(names))]
