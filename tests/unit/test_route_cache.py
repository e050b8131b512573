"""The route cache on its own, with a hand-driven clock and event stream: the staleness bound, the fill/evict
race, version gaps, and the entry/byte/absent-topic bounds (a flood of unknown topics stays bounded)."""

from __future__ import annotations

import asyncio

from service.core.route_cache import MISSING, RouteCache
from service.models import BrokerData, QueueData, TopicRouteData


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def route(name: str = "b") -> TopicRouteData:
    return TopicRouteData([QueueData(name, 8, 8, 6, 0)], [BrokerData("C", name, {0: "10.0.0.1:1"})])


def cache(clock: Clock, **kw) -> RouteCache:
    async def events(_on_subscribed):
        if False:
            yield ""

    async def version() -> int:
        return 7

    return RouteCache(events, version, staleness_ms=1000, clock=clock, **kw)


async def fetched(value):
    return value


async def test_entries_serve_only_within_the_staleness_bound():
    clock = Clock()
    c = cache(clock)
    assert c.lookup("T") is None  # never confirmed: bypass
    await c.poll_once()  # confirmed at t=1000
    entry = await c.fill("T", lambda: fetched(route()))
    assert c.lookup("T") is entry
    clock.t += 0.999
    assert c.lookup("T") is entry
    clock.t += 0.001  # exactly the bound: no longer fresh
    assert c.lookup("T") is None
    c.apply_event("8\nOther")  # an event confirms freshness again
    assert c.lookup("T") is entry


async def test_a_fill_racing_an_eviction_is_not_cached():
    clock = Clock()
    c = cache(clock)
    await c.poll_once()
    c.apply_event("8\nX")
    gate = asyncio.Event()

    async def slow():
        await gate.wait()
        return route()

    filling = asyncio.create_task(c.fill("T", slow))
    await asyncio.sleep(0)
    c.apply_event("9\nT")  # the route changed while it was being read
    gate.set()
    await filling
    assert c.lookup("T") is None


async def test_a_version_gap_or_star_flushes_everything():
    clock = Clock()
    c = cache(clock)
    await c.poll_once()
    c.apply_event("8\nX")
    await c.fill("T", lambda: fetched(route()))
    c.apply_event("9\nOther")
    assert c.lookup("T") is not None
    c.apply_event("11\nOther")  # 10 was missed
    assert c.lookup("T") is None
    await c.fill("T", lambda: fetched(route()))
    c.apply_event("12\n*")
    assert c.lookup("T") is None


async def test_absent_topics_are_remembered_within_a_fixed_count():
    clock = Clock()
    c = cache(clock, max_missing=100)
    await c.poll_once()
    for i in range(10_000):  # a flood of random unknown topics
        assert await c.fill(f"nope-{i}", lambda: fetched(None)) is MISSING
    assert len(c) == 100 and c.bytes == 0
    assert c.lookup("nope-9999") is MISSING and c.lookup("nope-0") is None  # oldest forgotten first
    c.apply_event("8\nnope-9999")  # created meanwhile: the event evicts the negative entry too
    assert c.lookup("nope-9999") is None


async def test_entries_and_encoded_bytes_stay_within_their_bounds():
    clock = Clock()
    c = cache(clock, max_entries=50, max_bytes=60_000)
    await c.poll_once()
    body = b"x" * 1000
    for i in range(200):
        entry = await c.fill(f"T{i}", lambda: fetched(route()))
        assert c.encoding(f"T{i}", entry, "http", lambda r: body) == body
        assert len(c._entries) <= 50 and c.bytes <= 60_000
    assert c.evictions >= 150
    # the accounting is exact: what is counted is what is held
    held = sum(e.size + len(t) for t, e in c._entries.items())
    assert held == c.bytes
    c.flush()
    assert c.bytes == 0 and len(c) == 0


async def test_an_encoding_is_made_once_per_variant():
    clock = Clock()
    c = cache(clock)
    await c.poll_once()
    entry = await c.fill("T", lambda: fetched(route()))
    calls = []

    def enc(r):
        calls.append(r)
        return b"{}"

    c.encoding("T", entry, "http", enc)
    c.encoding("T", entry, "http", enc)
    c.encoding("T", entry, ("native", "zone-a"), enc)
    assert len(calls) == 2 and set(entry.encoded) == {"http", ("native", "zone-a")}


async def test_concurrent_misses_of_one_topic_share_one_fetch():
    clock = Clock()
    c = cache(clock)
    await c.poll_once()
    gate = asyncio.Event()
    calls = []

    async def slow():
        calls.append(1)
        await gate.wait()
        return route()

    fills = [asyncio.create_task(c.fill("T", slow)) for _ in range(50)]
    await asyncio.sleep(0)
    gate.set()
    entries = await asyncio.gather(*fills)
    assert len(calls) == 1 and all(e is entries[0] for e in entries)

    async def broken():
        calls.append(2)
        await asyncio.sleep(0)
        raise ConnectionError("redis down")

    results = await asyncio.gather(*(c.fill("U", broken) for _ in range(5)), return_exceptions=True)
    assert calls.count(2) == 1 and all(isinstance(r, ConnectionError) for r in results)


async def test_a_miss_after_an_eviction_never_shares_a_fetch_started_before_it():
    """A watcher woken by a change reads again: it must not join a read that began before the change."""
    clock = Clock()
    c = cache(clock)
    await c.poll_once()
    gates = [asyncio.Event(), asyncio.Event()]
    answers = iter([route("old"), route("new")])
    calls = []

    async def slow():
        i = len(calls)
        calls.append(i)
        await gates[i].wait()
        return next(answers)

    before = asyncio.create_task(c.fill("T", slow))
    await asyncio.sleep(0)
    c.apply_event("8\nT")
    after = asyncio.create_task(c.fill("T", slow))
    await asyncio.sleep(0)
    assert calls == [0, 1]
    gates[0].set()
    gates[1].set()
    assert (await before).route.queue_datas[0].broker_name == "old"
    assert (await after).route.queue_datas[0].broker_name == "new"


async def test_events_wake_the_watches_of_the_topics_they_name():
    clock = Clock()
    c = cache(clock)
    feed = c.feed
    a = feed.open(("A", "B"), "1.2.3.4", 10, 10)
    b = feed.open(("C",), "1.2.3.4", 10, 10)
    c.apply_event("1\nB\nX")
    assert a.wake.is_set() and not b.wake.is_set() and a.take() == ["B"] and not a.wake.is_set()
    c.apply_event("2\n*")  # everything
    assert a.take() == ["A", "B"] and b.take() == ["C"]
    c.apply_event("9\nC")  # a version gap flushes: everything again
    assert a.take() == ["A", "B"]
    feed.close(a)
    feed.close(b)
    assert len(feed) == 0 and feed.clients() == 0


async def test_a_broker_event_evicts_the_cached_routes_naming_that_broker_and_wakes_their_watches():
    """`@<brokerName>` (a removal too large to name its topics at once): every cached route that names the broker
    goes, others stay; the index follows entries replaced or evicted meanwhile."""
    clock = Clock()
    c = cache(clock)
    await c.poll_once()
    both = TopicRouteData([QueueData("big", 8, 8, 6, 0), QueueData("b", 8, 8, 6, 0)],
                          [BrokerData("C", "big", {0: "10.0.0.9:1"}), BrokerData("C", "b", {0: "10.0.0.1:1"})])
    await c.fill("Shared", lambda: fetched(both))
    await c.fill("Own", lambda: fetched(route("big")))
    await c.fill("Other", lambda: fetched(route("b")))
    await c.fill("Moved", lambda: fetched(route("big")))
    c.apply_event("8\nMoved")
    await c.fill("Moved", lambda: fetched(route("b")))  # no longer names big
    watch = c.feed.open(("Own", "Other"), "1.2.3.4", 10, 10)
    c.apply_event("9\n@big")
    assert c.lookup("Shared") is None and c.lookup("Own") is None
    assert c.lookup("Other") is not None and c.lookup("Moved") is not None
    assert watch.take() == ["Own"]
    c.apply_event("10\nX\n@nobody")  # a broker no cached route names: only the topics named
    assert c.lookup("Other") is not None
    c.flush()
    await c.fill("Own", lambda: fetched(route("big")))
    c.apply_event("11\n@big")  # after a flush the index starts over
    assert c.lookup("Own") is None
    c.feed.close(watch)


async def test_a_queue_data_change_updates_the_cached_route_in_place():
    """`=<topic>\\t<broker>\\t<queue data>`: the cached route gets the broker's new queue data (a hit, encodings
    made again), its watchers wake; what cannot be updated is evicted instead."""
    clock = Clock()
    c = cache(clock)
    await c.poll_once()
    both = TopicRouteData([QueueData("a", 8, 8, 6, 0), QueueData("b", 8, 8, 6, 0)],
                          [BrokerData("C", "a", {0: "10.0.0.1:1"}), BrokerData("C", "b", {0: "10.0.0.2:1"})])
    entry = await c.fill("T", lambda: fetched(both))
    c.encoding("T", entry, "json", lambda r: b"old bytes")
    await c.fill("Other", lambda: fetched(route("a")))
    await c.fill("Flip", lambda: fetched(route("b")))
    watch = c.feed.open(("T",), "1.2.3.4", 10, 10)
    c.apply_event("8\n=T\tb\t4,4,6,0\n=NotCached\tb\t4,4,6,0\n=Other\tb\t4,4,6,0\n=Flip\tb\t4,4,4,0")
    hit = c.lookup("T")
    assert hit is not None and hit is not entry and hit.encoded == {}
    assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums) for q in hit.route.queue_datas] == \
        [("a", 8, 8), ("b", 4, 4)]
    assert hit.route.broker_datas == both.broker_datas
    assert c.lookup("Other") is None  # broker b is not in its route: read again
    assert c.lookup("Flip") is None  # the write bit changed: the acting-master view may change with it
    assert c.lookup("NotCached") is None and c.updates == 1
    assert watch.take() == ["T"]
    c.feed.close(watch)


async def test_a_fill_is_dropped_only_when_its_own_topic_changed_meanwhile():
    """Under constant churn (a change every few ms, fills taking longer) fills of other topics must still be kept:
    only a change of the topic being filled (eviction or in-place update), or a flush, drops its fill."""
    clock = Clock()
    c = cache(clock)
    await c.poll_once()
    await c.fill("U", lambda: fetched(route("b")))
    gates = {t: asyncio.Event() for t in ("T", "U", "V")}

    def slow(topic, qn):
        async def read():
            await gates[topic].wait()
            return route("b") if qn is None else TopicRouteData([QueueData("b", qn, qn, 6, 0)],
                                                               [BrokerData("C", "b", {0: "10.0.0.1:1"})])
        return read

    c.apply_event("8\nU")  # evicted: the next read fills
    t = asyncio.create_task(c.fill("T", slow("T", None)))
    u = asyncio.create_task(c.fill("U", slow("U", 8)))
    await asyncio.sleep(0)
    c.apply_event("9\nU\nOther")  # U changes while both fills are under way
    gates["T"].set()
    gates["U"].set()
    await asyncio.gather(t, u)
    assert c.lookup("T") is not None  # another topic's change: kept
    assert c.lookup("U") is None  # read before its own change: not kept
    v = asyncio.create_task(c.fill("V", slow("V", None)))
    await asyncio.sleep(0)
    c.flush()
    gates["V"].set()
    await v
    assert c.lookup("V") is None  # a flush drops every fill under way
