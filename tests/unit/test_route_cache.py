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


def two_brokers(a: str, a_addr: str, b: str, b_addr: str) -> TopicRouteData:
    return TopicRouteData([QueueData(a, 8, 8, 6, 0), QueueData(b, 8, 8, 6, 0)],
                          [BrokerData("C", a, {0: a_addr}), BrokerData("C", b, {0: b_addr})])


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


async def test_an_event_line_it_cannot_read_flushes_instead_of_failing():
    """A `=` line without its queue data (before issue 42, an ORDER_TOPIC_CONFIG key "=x" was published as it is)
    raised IndexError out of the subscription, which then logged "subscription lost" and resubscribed."""
    clock = Clock()
    c = cache(clock)
    await c.poll_once()
    c.apply_event("8\nX")
    await c.fill("T", lambda: fetched(route()))
    c.apply_event("9\t2\n=x\n!*")
    assert c.lookup("T") is None and len(c) == 0


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


async def test_topics_holding_one_route_object_are_encoded_once():
    """Route reads made together give a cluster's topics one route object (route_reads.py): its bytes are made
    once per variant; an equal but distinct route, or one settled with updated queue data, is encoded anew."""
    clock = Clock()
    c = cache(clock)
    await c.poll_once()
    shared = route()
    a = await c.fill("A", lambda: fetched(shared))
    b = await c.fill("B", lambda: fetched(shared))
    other = await c.fill("C", lambda: fetched(route()))
    calls = []

    def enc(r):
        calls.append(r)
        return b"{}"

    assert c.encoding("A", a, "http", enc) is c.encoding("B", b, "http", enc)
    assert calls == [shared]
    c.encoding("C", other, "http", enc)
    c.encoding("A", a, "json", enc)
    assert calls == [shared, other.route, shared]
    held = sum(e.size + len(t) for t, e in c._entries.items())
    assert held == c.bytes  # each entry counts the bytes it holds, shared or not
    # another route's topic read in between (readers of several clusters at once): still encoded once
    d = await c.fill("D", lambda: fetched(shared))
    assert c.encoding("D", d, "http", enc) is c.encoding("A", a, "http", enc) and len(calls) == 3


async def test_encodings_kept_by_route_object_are_bounded_in_count_and_bytes():
    clock = Clock()
    c = cache(clock)
    await c.poll_once()
    routes = [route() for _ in range(c.RECENT_ENCODINGS + 8)]
    for i, r in enumerate(routes):
        c.encoding(f"T{i}", await c.fill(f"T{i}", lambda r=r: fetched(r)), "http", lambda _r: b"x" * 1000)
    assert len(c._last_encoded) == c.RECENT_ENCODINGS and c._last_encoded_bytes == 1000 * c.RECENT_ENCODINGS
    big = await c.fill("Big", lambda: fetched(route()))
    c.encoding("Big", big, "http", lambda _r: b"x" * (c.RECENT_BYTES - 500))
    assert c._last_encoded_bytes <= c.RECENT_BYTES and len(c._last_encoded) == 1

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
    both = two_brokers("big", "10.0.0.9:1", "b", "10.0.0.1:1")
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
    """`=<broker>\\t<queue data>\\t<topics>`: the cached routes get the broker's new queue data (a hit, encodings
    made again), their watchers wake; what cannot be updated is evicted instead."""
    clock = Clock()
    c = cache(clock)
    await c.poll_once()
    both = two_brokers("a", "10.0.0.1:1", "b", "10.0.0.2:1")
    entry = await c.fill("T", lambda: fetched(both))
    c.encoding("T", entry, "json", lambda r: b"old bytes")
    await c.fill("Other", lambda: fetched(route("a")))
    await c.fill("Flip", lambda: fetched(route("b")))
    watch = c.feed.open(("T",), "1.2.3.4", 10, 10)
    c.apply_event("8\t2\n=b\t4,4,6,0\tT\tNotCached\tOther\n=b\t4,4,4,0\tFlip")
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


def versioned(clock: Clock, versions: list[int], **kw) -> RouteCache:
    """A cache whose polls read `versions` in turn (the last one repeats)."""
    async def events(_on_subscribed):
        if False:
            yield ""

    async def version() -> int:
        return versions.pop(0) if len(versions) > 1 else versions[0]

    return RouteCache(events, version, staleness_ms=1000, clock=clock, **kw)


def queue_route(queues: int) -> TopicRouteData:
    return TopicRouteData([QueueData("b", queues, queues, 6, 0)], [BrokerData("C", "b", {0: "10.0.0.1:1"})])


async def test_a_poll_ahead_of_events_in_flight_flushes_nothing():
    """Under writes the poll reads versions whose events are still on their way: that is no miss. (It flushed
    every half second, and each version after the poll's counted as a gap: reads collapsed under churn.)"""
    clock = Clock()
    c = versioned(clock, [7, 9, 11])
    await c.poll_once()  # adopts 7
    await c.fill("T", lambda: fetched(queue_route(8)))
    await c.poll_once()  # reads 9: events 8 and 9 are in flight
    assert c.lookup("T") is not None and c.flushes == 1  # the adopting flush only
    c.apply_event("8\n=T\tb\t4,4,6,0")
    c.apply_event("9\nOther")
    assert c.lookup("T").route.queue_datas[0].read_queue_nums == 4  # updated in place, still cached
    await c.poll_once()  # reads 11; 9 (the previous poll's) arrived: still no miss
    assert c.flushes == 1 and c.missed_events == 0
    c.apply_event("10\nOther")
    c.apply_event("11\nOther")
    assert c.lookup("T") is not None


async def test_a_version_no_event_reaches_by_the_next_poll_flushes():
    """The last event lost (no later one shows a gap): the next-but-one poll finds it, and meanwhile polls do
    not confirm freshness, so the cache is bypassed once the bound passes without an event."""
    clock = Clock()
    c = versioned(clock, [7, 8])
    await c.poll_once()  # adopts 7
    await c.fill("T", lambda: fetched(route()))
    clock.t += 0.5
    await c.poll_once()  # reads 8: maybe in flight
    assert c.lookup("T") is not None
    clock.t += 0.5  # a second after the last confirmation, with no event: not fresh, whatever the poll said
    assert c.lookup("T") is None
    await c.poll_once()  # 8 never came: a miss, flushed, adopted
    assert c.missed_events == 1 and c.flushes == 2 and len(c) == 0
    await c.fill("T", lambda: fetched(route()))
    assert c.lookup("T") is not None  # confirmed again at 8
    c.apply_event("9\nOther")  # the next event follows on without a gap
    assert c.lookup("T") is not None and c.flushes == 2


async def test_an_event_older_than_the_adopted_version_evicts_instead_of_updating():
    """After a poll adopted version 9, event 8 arrives late: the route cached since reflects 8 already, so an
    in-place update from 8 could only write older queue data over it; the topic is evicted instead."""
    clock = Clock()
    c = versioned(clock, [7, 9, 9, 9])
    await c.poll_once()  # adopts 7
    await c.poll_once()  # 9 ahead
    await c.poll_once()  # 8 and 9 never came by now: flush, adopt 9
    assert c.missed_events == 1
    await c.fill("T", lambda: fetched(queue_route(8)))
    c.apply_event("8\t2\n=b\t4,4,6,0\tT")  # late: no gap flush, no update
    assert c.lookup("T") is None and c.flushes == 2 and c.updates == 0
    await c.fill("T", lambda: fetched(queue_route(8)))
    c.apply_event("10\nOther")  # follows 9
    assert c.lookup("T") is not None and c.flushes == 2


async def test_a_fill_is_kept_unless_an_event_newer_than_its_read_changed_the_topic():
    """getRoute returns the version it read at: events up to that version are in the read (whether they reached
    this worker before or after it), only a newer one spoils it. (With one sequence number per event, a topic a
    registration changed every few milliseconds was read from Redis by nearly every reader.)"""
    from service.models import ReadAt

    for during, kept in (([8, 9, 10], True), ([8, 9, 10, 11], False)):  # events while the read (at 10) is out
        clock = Clock()
        c = versioned(clock, [7])
        await c.poll_once()
        gate = asyncio.Event()

        async def slow(gate=gate):
            await gate.wait()
            return ReadAt(queue_route(4), 10)

        filling = asyncio.create_task(c.fill("T", slow))
        await asyncio.sleep(0)
        for v in during:
            c.apply_event(f"{v}\t2\n=b\t4,4,6,0\tT")  # T in flight, not cached: each one recorded as a change
        gate.set()
        await filling
        assert (c.lookup("T") is not None) is kept, during
        assert c.flushes == 1


async def test_a_broker_removed_while_a_route_naming_it_is_read_spoils_the_read():
    """An "@broker" event names no topics: a route read before it, naming that broker, must not be cached after
    it (by version when the read says its version, by the start of the fill when it does not)."""
    from service.models import ReadAt

    clock = Clock()
    c = versioned(clock, [7])
    await c.poll_once()
    for read in (lambda: ReadAt(route("gone"), 7), lambda: route("gone")):
        gate = asyncio.Event()

        async def slow(read=read, gate=gate):
            await gate.wait()
            return read()

        filling = asyncio.create_task(c.fill("T", slow))
        await asyncio.sleep(0)
        c.apply_event(f"{c._ver_seen + 1}\n@gone")
        gate.set()
        await filling
        assert c.lookup("T") is None
    # a broker the route does not name spoils nothing
    gate = asyncio.Event()

    async def other():
        await gate.wait()
        return ReadAt(route("stays"), c._ver_seen)

    filling = asyncio.create_task(c.fill("T", other))
    await asyncio.sleep(0)
    c.apply_event(f"{c._ver_seen + 1}\n@gone")
    gate.set()
    await filling
    assert c.lookup("T") is not None


async def test_a_poll_passed_by_events_while_it_was_out_flushes_nothing():
    """The poll reads version 9; before its reply is handled, events 9 and 10 arrive: the version it returns is
    behind the events, which is no Redis losing its data (that one is behind what the events had reached when the
    poll was sent). It used to adopt 9 and flush; event 11 then counted as a gap and flushed again."""
    clock = Clock()
    c: RouteCache

    async def events(_on_subscribed):
        if False:
            yield ""

    polls = iter([7, 9, 5])

    async def version() -> int:
        ver = next(polls)
        if ver == 9:
            c.apply_event("8\nOther")
            c.apply_event("9\nOther")
            c.apply_event("10\nOther")
        return ver

    c = RouteCache(events, version, staleness_ms=1000, clock=clock)
    await c.poll_once()  # adopts 7
    await c.fill("T", lambda: fetched(route()))
    await c.poll_once()  # 9, behind the 10 that arrived meanwhile
    c.apply_event("11\nOther")
    assert c.lookup("T") is not None and c.flushes == 1
    await c.poll_once()  # 5: behind what the events had reached before it was sent: Redis lost its data
    assert c.flushes == 2 and c._ver_seen == 5 and c.lookup("T") is None


async def test_the_format_before_is_read_and_an_unknown_one_flushes():
    """During a rolling upgrade the scripts of the version before publish one "=<topic>\\t<broker>\\t<queue data>"
    line per topic: read as before. A format this version does not know ("<ver>\\t4") flushes everything (never a
    silent misreading that leaves routes stale), as the release before this one flushes on format 3."""
    clock = Clock()
    c = cache(clock)
    await c.poll_once()
    both = two_brokers("a", "10.0.0.1:1", "b", "10.0.0.2:1")
    await c.fill("T", lambda: fetched(both))
    await c.fill("Other", lambda: fetched(route("a")))
    c.apply_event("8\n=T\tb\t4,4,6,0\n=Other\tb\t4,4,6,0\n!b")
    assert c.lookup("T").route.queue_datas[1].read_queue_nums == 4 and c.lookup("Other") is None
    assert c.updates == 1 and c.flushes == 1
    c.apply_event("9\t4\nwhatever")
    assert c.flushes == 2 and c.lookup("T") is None


async def test_an_update_the_cached_route_already_shows_keeps_its_encodings():
    """A route read after a change, then that change's event: the cached route already has the queue data, so the
    entry and its encoded bytes stay (no re-encoding for every reader); watchers are still told."""
    clock = Clock()
    c = cache(clock)
    await c.poll_once()
    entry = await c.fill("T", lambda: fetched(queue_route(4)))
    c.encoding("T", entry, "json", lambda r: b"bytes")
    watch = c.feed.open(("T",), "1.2.3.4", 10, 10)
    c.apply_event("8\t2\n=b\t4,4,6,0\tT")
    assert c.lookup("T") is entry and entry.encoded == {"json": b"bytes"} and watch.take() == ["T"]
    c.apply_event("9\t2\n=b\t8,8,6,0\tT")
    assert c.lookup("T") is not entry and c.lookup("T").route.queue_datas[0].read_queue_nums == 8
    c.feed.close(watch)


async def test_update_lines_of_brokers_no_cached_route_names_are_skipped_only_when_nothing_else_needs_them():
    """A big registration's update line names every topic it changed, most not cached here: when no cached route
    names its broker, no fill is under way and no watcher waits, it is dropped unread. A fill under way or a watcher
    still sees it."""
    clock = Clock()
    c = cache(clock)
    await c.poll_once()  # adopts 7
    await c.fill("T", lambda: fetched(route("a")))
    c.apply_event("8\t2\n=b\t4,4,6,0\tU\tV\n!b")  # nothing here names b: dropped, T untouched
    assert c.lookup("T").route.queue_datas[0].read_queue_nums == 8 and c.flushes == 1 and c.updates == 0
    gate = asyncio.Event()

    async def slow():
        await gate.wait()
        return route("b")  # read before the change below

    filling = asyncio.create_task(c.fill("U", slow))
    await asyncio.sleep(0)
    c.apply_event("9\t2\n=b\t4,4,6,0\tU\tV")  # a fill of U under way: read, and the fill is not kept
    gate.set()
    await filling
    assert c.lookup("U") is None
    watch = c.feed.open(("V",), "1.2.3.4", 10, 10)
    c.apply_event("10\t2\n=b\t8,8,6,0\tU\tV")  # a watcher of V: told
    assert watch.take() == ["V"]
    c.apply_event("11\t2\n=a\t4,4,6,0\tT")  # a cached route names a: updated in place
    assert c.lookup("T").route.queue_datas[0].read_queue_nums == 4 and c.updates == 1


async def test_updates_are_applied_when_the_route_is_read_next_in_the_order_they_came():
    """An in-place update is checked when its event comes and applied when the route is read next: several updates
    of one route before a read (of one broker again and again, and of another) all show, the latest of each; a
    write bit flipped against the latest one still evicts."""
    clock = Clock()
    c = cache(clock)
    await c.poll_once()  # adopts 7
    entry = await c.fill("T", lambda: fetched(two_brokers("a", "10.0.0.1:1", "b", "10.0.0.2:1")))
    c.encoding("T", entry, "json", lambda r: b"old bytes")
    c.apply_event("8\t2\n=a\t4,4,6,0\tT")
    c.apply_event("9\t2\n=a\t2,2,6,0\tT\n=b\t1,1,6,0\tT")
    assert c._entries["T"] is entry and entry.route.queue_datas[0].read_queue_nums == 8  # not rebuilt yet
    hit = c.lookup("T")
    assert [(q.broker_name, q.read_queue_nums) for q in hit.route.queue_datas] == [("a", 2), ("b", 1)]
    assert hit.encoded == {} and c.lookup("T") is hit and c.updates == 3
    c.apply_event("10\t2\n=b\t1,1,6,0\tT")  # what it already shows: the entry and its bytes stay
    c.encoding("T", hit, "json", lambda r: b"new bytes")
    assert c.lookup("T") is hit and hit.encoded == {"json": b"new bytes"}
    c.apply_event("11\t2\n=a\t3,3,6,0\tT")
    c.apply_event("12\t2\n=a\t3,3,4,0\tT")  # the write bit cleared against the pending 3,3,6,0
    assert c.lookup("T") is None


async def test_a_broker_leaving_or_joining_rebuilds_the_cached_routes_in_place():
    """`~<broker>\\t<topics>` (the broker gone from topics that remain) and `+<broker>\\t<queue data>\\t<its data>\\t
    <topics>` (the broker added to existing topics): the cached routes lose or gain the broker's queue data and
    BrokerData, in Java's hash order, and stay hits; topics that shared one route object share the rebuilt one;
    what cannot be rebuilt alone (filter servers, cached as absent) is evicted, and a route left with no queue data
    is read again."""
    from service.javaorder import hash_order

    clock = Clock()
    c = cache(clock)
    await c.poll_once()
    names = [f"broker-{i}" for i in range(12)]  # past 12 of them Java's table grows: the order changes with it
    shared = TopicRouteData(hash_order([QueueData(n, 8, 8, 6, 0) for n in names[:11]], lambda q: q.broker_name),
                            hash_order([BrokerData("C", n, {0: f"10.0.0.{i}:1"}) for i, n in enumerate(names[:11])],
                                       lambda b: b.broker_name, copied=True))
    for t in ("T1", "T2"):
        await c.fill(t, lambda: fetched(shared))
    await c.fill("Alone", lambda: fetched(route(names[3])))
    await c.fill("Filters", lambda: fetched(TopicRouteData(shared.queue_datas, shared.broker_datas,
                                                           {"10.0.0.1:1": ["f:1"]})))
    await c.fill("Gone", lambda: fetched(None))
    watch = c.feed.open(("T1",), "1.2.3.4", 10, 10)
    c.apply_event(f"8\t3\n~{names[3]}\tT1\tT2\tAlone\tFilters\tNotCached")
    t1, t2 = c.lookup("T1"), c.lookup("T2")
    assert t1 is not None and t1.route is t2.route
    rest = [n for n in names[:11] if n != names[3]]
    assert [q.broker_name for q in t1.route.queue_datas] == hash_order(rest, str)
    assert [b.broker_name for b in t1.route.broker_datas] == hash_order(rest, str, copied=True)
    assert c.lookup("Alone") is None and c.lookup("Filters") is None
    assert watch.take() == ["T1"]
    c.apply_event(f"9\t3\n+{names[11]}\t4,4,6,0\tC2\t1\tzone-a\t0,10.0.1.1:1,2,10.0.1.2:1\tT1\tT2\tGone")
    t1, t2 = c.lookup("T1"), c.lookup("T2")
    assert t1.route is t2.route and c.lookup("Gone") is None
    now = [*rest, names[11]]
    assert [q.broker_name for q in t1.route.queue_datas] == hash_order(now, str)
    assert [b.broker_name for b in t1.route.broker_datas] == hash_order(now, str, copied=True)
    added = next(b for b in t1.route.broker_datas if b.broker_name == names[11])
    assert added == BrokerData("C2", names[11], {0: "10.0.1.1:1", 2: "10.0.1.2:1"}, True, "zone-a")
    assert next(q for q in t1.route.queue_datas if q.broker_name == names[11]) == QueueData(names[11], 4, 4, 6, 0)
    assert c.updates == 5  # T1 and T2 twice, and Alone's leave (taken in place; read, it had nothing left)
    c.apply_event(f"10\t3\n~{names[11]}\tT1")  # "@" events still find the routes that name the broker
    c.apply_event(f"11\n@{names[0]}")
    assert c.lookup("T1") is None and c.lookup("T2") is None
    c.feed.close(watch)


async def test_join_and_leave_lines_of_a_late_event_evict():
    """An event a poll got ahead of only evicts, as its update lines do."""
    clock = Clock()
    c = cache(clock)
    await c.poll_once()  # adopts version 7
    await c.fill("T", lambda: fetched(two_brokers("a", "10.0.0.1:1", "b", "10.0.0.2:1")))
    c.apply_event("7\t3\n~b\tT")
    assert c.lookup("T") is None and c.updates == 0


async def test_joins_and_leaves_are_applied_when_a_route_is_read_once_for_the_topics_sharing_it():
    """Joins and leaves wait for the next read (Moves): a route of 500 brokers is not rebuilt at every join of a
    storm in every worker, nor evicted (its readers would go to Redis); several of them before a read are applied
    together, once for all the topics that shared the route object; past MAX_MOVES they are applied at once."""
    from service.core.route_cache import MAX_MOVES
    from service.javaorder import hash_order

    clock = Clock()
    c = cache(clock)
    await c.poll_once()  # adopts 7
    names = [f"b{i}" for i in range(500)]
    big = TopicRouteData(hash_order([QueueData(n, 8, 8, 6, 0) for n in names], lambda q: q.broker_name),
                         hash_order([BrokerData("C", n, {0: "10.0.0.1:1"}) for n in names], lambda b: b.broker_name,
                                    copied=True))
    for t in ("T1", "T2"):
        await c.fill(t, lambda: fetched(big))
    entry = c._entries["T1"]
    c.apply_event("8\t3\n~b0\tT1\tT2")
    c.apply_event("9\t3\n+new\t4,4,6,0\tC\t0\t\t0,10.0.9.9:1\tT1\tT2")
    c.apply_event("10\t3\n~b1\tT1")  # T1 alone: it no longer shares T2's moves
    assert c._entries["T1"] is entry and entry.route is big and len(entry.moves.ops) == 3  # nothing rebuilt yet
    t2 = c.lookup("T2")
    want2 = [n for n in names if n != "b0"] + ["new"]
    assert [q.broker_name for q in t2.route.queue_datas] == hash_order(want2, str)
    assert [b.broker_name for b in t2.route.broker_datas] == hash_order(want2, str, copied=True)
    t1 = c.lookup("T1")
    assert [q.broker_name for q in t1.route.queue_datas] == hash_order([n for n in want2 if n != "b1"], str)
    assert c.lookup("T1") is t1  # settled once
    assert "T1" in c._by_broker["new"] and "T1" not in c._by_broker.get("b1", ())
    c.apply_event("11\n@new")  # the index found the joined broker's routes
    assert c.lookup("T1") is None and c.lookup("T2") is None

    await c.fill("T3", lambda: fetched(big))
    for i in range(MAX_MOVES + 1):  # one broker leaving and coming back, again and again, nobody reading
        line = "~b7\tT3" if i % 2 == 0 else "+b7\t8,8,6,0\tC\t0\t\t0,10.0.0.1:1\tT3"
        c.apply_event(f"{12 + i}\t3\n{line}")
    entry = c._entries["T3"]
    assert entry.moves is not None and len(entry.moves.ops) == 1 and entry.route is not big  # applied at the cap
    assert [q.broker_name for q in c.lookup("T3").route.queue_datas] == hash_order([n for n in names if n != "b7"],
                                                                                   str)
