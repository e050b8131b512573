"""BROKER_HEARTBEATs acknowledged from memory and written in batches (service/core/liveness.py, lua/touchLive-1.lua):
what a write does to Redis (time = now - age, never back, never a revival), what a failed write keeps, what a stop
writes (the native door's hot path for them: tests/remoting/test_heartbeat_door.py)."""

from __future__ import annotations

import fakeredis
import pytest

from service.core.liveness import LivenessBatch
from service.errors import StoreUnavailable
from service.models import BrokerIdentity, RegisterBroker, TopicConfig
from service.store import RouteStore


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
async def store():
    s = RouteStore(fakeredis.FakeAsyncRedis(decode_responses=True), prefix="lv")
    await s.load_scripts()
    yield s
    await s.redis.aclose()


async def register(store: RouteStore, addr: str = "10.0.0.1:1", now: int = 1_000_000) -> None:
    await store.register_broker(RegisterBroker("C", "b", 0, addr, "", {"T": TopicConfig()}), now=now)


async def score(store: RouteStore, addr: str = "10.0.0.1:1") -> float | None:
    return await store.redis.zscore(store.keys.live, f"C|{addr}")


async def test_a_write_dates_each_heartbeat_by_its_age_and_never_moves_a_time_back(store):
    await register(store)
    assert await store.touch_live([("C", "10.0.0.1:1", 250)], now=1_010_000) == 1
    assert await score(store) == 1_009_750
    # the expiry index is not written per heartbeat: the registration's deadline stays, a candidate (expireBrokers)
    assert await store.redis.zscore(store.keys.deadlines, "C|10.0.0.1:1") == 1_000_000 + 120_000
    await register(store, now=1_020_000)  # a registration later than the heartbeat below
    assert await store.touch_live([("C", "10.0.0.1:1", 15_000)], now=1_030_000) == 0
    assert await score(store) == 1_020_000


async def test_a_late_write_never_brings_back_a_broker_that_left(store):
    await register(store)
    await register(store, "10.0.0.2:1")
    await store.unregister_broker(BrokerIdentity("C", "b", 0, "10.0.0.1:1"))
    await store.expire_all(now=1_000_000 + 120_001)  # the other one expires
    assert await store.touch_live([("C", "10.0.0.1:1", 0), ("C", "10.0.0.2:1", 0), ("C", "10.9.9.9:1", 0)],
                                  now=1_200_000) == 0
    assert await store.redis.zcard(store.keys.live) == 0 and await store.redis.zcard(store.keys.deadlines) == 0
    assert await store.cluster_info() == await store.cluster_info()  # readable, nothing half-written
    assert not await store.redis.keys(store.keys.base + "l:*")


async def test_expiry_waits_the_flush_period_past_the_timeout(store):
    await register(store)
    deadline = 1_000_000 + 120_000
    assert not (await store.expire_all(now=deadline + 1, grace_ms=1000)).expired  # a heartbeat may be on its way
    assert (await store.expire_all(now=deadline + 1001, grace_ms=1000)).expired


async def test_the_batch_keeps_the_latest_per_broker_and_what_a_failed_write_did_not_write():
    clock = Clock()
    written: list[list[tuple[str, str, int]]] = []
    fail = [True]

    async def write(beats):
        if fail[0]:
            raise StoreUnavailable("Redis is down")
        written.append(list(beats))
        return len(beats)

    batch = LivenessBatch(write, 1000, clock)
    batch.record("C", "a:1")
    clock.t += 0.2
    batch.record("C", "b:1")
    clock.t += 0.3
    batch.record("C", "a:1")  # the latest of a:1 wins
    clock.t += 0.1
    with pytest.raises(StoreUnavailable):
        await batch.flush()
    assert len(batch) == 2  # kept for the next write
    clock.t += 0.4
    batch.record("C", "b:1")  # newer than the kept one
    fail[0] = False
    assert await batch.flush() == 2
    assert sorted(written[0]) == [("C", "a:1", 500), ("C", "b:1", 0)]
    assert len(batch) == 0 and await batch.flush() == 0


async def test_a_stop_writes_what_is_pending(store):
    await register(store)
    clock = Clock()
    batch = LivenessBatch(store.touch_live, 10_000, clock)
    await batch.start()
    batch.record("C", "10.0.0.1:1")
    before = await score(store)
    await batch.stop()
    assert await score(store) > before


async def test_a_flush_goes_in_calls_of_the_size_the_writer_asks_and_keeps_what_it_did_not_write():
    clock = Clock()
    written: list[list[tuple[str, str, int]]] = []
    failed: list[bool] = []
    sizes = iter([2, 3, 1, 5])

    async def write(beats):
        if len(written) == 2 and not failed:
            failed.append(True)
            raise StoreUnavailable("Redis is down")
        written.append(list(beats))
        return len(beats)

    batch = LivenessBatch(write, 1000, clock, step=lambda: next(sizes))
    for i in range(7):
        batch.record("C", f"{i}:1")
    with pytest.raises(StoreUnavailable):
        await batch.flush()
    assert [len(w) for w in written] == [2, 3]
    assert len(batch) == 2  # the third call's and the one after it
    assert await batch.flush() == 2
    assert sorted(a for _, a, _ in written[2]) == ["5:1", "6:1"]


async def test_the_store_sizes_its_heartbeat_calls_by_their_redis_time(store):
    """touch_live reports each call's Redis time to the touch sizer (steps.py): a slow call shrinks the next."""
    from service.store.calls import StoreLimits

    store.limits = StoreLimits(adaptive_steps=True)
    assert store.touch_live_step() == 2_000  # before anything was measured
    await register(store)
    await store.touch_live([("C", "10.0.0.1:1", 0)] * 10, now=1_010_000)
    assert store.steps.touch.us_per_topic is not None
    store.steps.touch.took(2_000, 40_000)  # 20 µs a heartbeat: 5 ms is 250
    assert store.touch_live_step() == 250
