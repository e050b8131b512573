"""Worker-local cache of routes, kept honest by the change events the Lua scripts publish.

An entry holds the route object and, lazily, its encodings — one per door and variant (HTTP JSON, fastjson,
standard JSON, a zone's view) — so a hot read is a dict lookup returning bytes already encoded for that door.
Topics that do not exist are remembered too (a flood of lookups for them must not reach Redis), in a separate,
smaller FIFO; every entry and every encoded byte counts against fixed bounds, so a flood of random topic names
cannot grow a worker past a fixed memory.

Correctness rules:
- an event (service/store/events.py says the format) evicts the topics it names, and a line `@<brokerName>` every
  cached route that names that broker (a removal too large to name its topics at once: they follow in later
  events); a line `=<brokerName>\\t<queue data>\\t<topic>...` (a registration that changed only that broker's queue
  data of those topics) updates cached routes in place, so their readers stay hits (anything it cannot update is
  evicted: the topic not cached, the broker not in it, or its write bit flipped, which the acting-master view
  depends on); a line `~<brokerName>\t<topic>...` (the broker gone from those topics) or `+<brokerName>\t...`
  (the broker, its queue data and BrokerData, added to those existing topics) takes the broker out of, or puts it
  into, the cached routes of those topics when they are read next (each route object once: the topics of a cluster
  share one), so a rolling restart's readers stay hits; a route with filter servers is evicted instead, and one left
  with no queue data when read is read again; a line
  `!<brokerName>` (`!*`: all) evicts no route but tells `state_listeners` that broker's
  registration changed; `*`, a gap in versions, a format it does not know, or a resubscription flushes everything
  (and tells the listeners: all);
- a fill is stored unless, while it was being fetched, something was flushed, or an event newer than the version
  its read reflects (getRoutes returns it) changed its topic or removed a broker its route names; a fill that does
  not say its version counts as read when it began. So a route read before a change is never cached after that
  change's event, while fills of topics changed again and again (a roll-out) and of others under constant churn
  still are;
- the safety net: a poll of `{P}:ver` every half staleness bound flushes on versions the events missed (a
  version the previous poll read that no event has reached since: under writes events are always in flight, so
  "ahead of the events" alone is no miss), and if neither an event nor a poll has confirmed freshness within the
  bound, the cache is bypassed; an event older than what a poll adopted evicts, never updates in place.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable

from service.core.watch import ChangeFeed
from service.javaorder import hash_order
from service.models import BrokerData, QueueData, ReadAt, TopicRouteData
from service.store.events import parse_event

log = logging.getLogger(__name__)
ENTRY_OVERHEAD = 400  # bytes a cached route costs beyond its encodings (objects, dict slots), roughly


ABSENT_TAG = '"absent"'  # the entity tag of "no such topic" (long-polls and streams wait on it too)


def content_tag(body: bytes) -> str:
    """A strong entity tag from encoded bytes: the same on every worker for the same state."""
    return '"' + hashlib.blake2b(body, digest_size=8).hexdigest() + '"'


class RouteEntry:
    """One topic's route (None: no such topic), its encodings by door and variant, and their entity tags; and what
    change events said of it since the route was built, applied when it is read next (RouteCache.lookup): the queue
    data of its brokers they updated (`pending`, brokerName -> QueueData) or the brokers that left or joined it
    (`moves`). An entry has at most one of the two (each settles the other first)."""

    __slots__ = ("route", "encoded", "tags", "size", "pending", "moves")

    def __init__(self, route: TopicRouteData | None) -> None:
        self.route = route
        self.encoded: dict[Hashable, bytes] = {}
        self.tags: dict[Hashable, str] = {}
        self.size = ENTRY_OVERHEAD
        self.pending: dict[str, QueueData] | None = None
        self.moves: Moves | None = None

    def tag(self, variant: Hashable, body: bytes) -> str:
        """The entity tag of this entry's `variant` encoding `body`, hashed once per entry."""
        tag = self.tags.get(variant)
        if tag is None:
            tag = ABSENT_TAG if self.route is None else content_tag(body)
            if self.route is not None:
                self.tags[variant] = tag
        return tag


MISSING = RouteEntry(None)  # shared by every negative entry; doors encode "no such topic" with the name


def _brokers_of(route: TopicRouteData) -> set[str]:
    """The brokerNames a route names (queue data and broker data): an "@" event for any of them evicts it."""
    return {b.broker_name for b in route.broker_datas} | {q.broker_name for q in route.queue_datas}


# The most joins and leaves an entry keeps for its next read: a route nobody reads under a rolling restart that
# never ends would otherwise keep all of them; past this they are applied at once (O(brokers) per MAX_MOVES events).
MAX_MOVES = 64


class Moves:
    """Brokers that left (queue None) or joined a route, in event order, on top of the route its entries hold; the
    topics that shared that route object when the events came share one Moves, so the route is rebuilt once for all
    of them (`built`), when the first is read. A rebuild costs O(the route's brokers): done at every join of a storm
    in every worker for every cached route it named, it took 2 workers 23 s to route 5 000 brokers in clusters of
    500 instead of 11, and evicting those routes instead sent every reader of them to Redis (a 500-broker read,
    ~2 ms of Redis, at every join); read next, it costs one rebuild per route read."""

    __slots__ = ("ops", "built", "built_from")

    def __init__(self, ops: tuple[tuple[str, QueueData | None, BrokerData | None], ...]) -> None:
        self.ops = ops
        self.built: TopicRouteData | None = None
        self.built_from: TopicRouteData | None = None

    def then(self, broker: str, queue: QueueData | None, data: BrokerData | None) -> Moves:
        return Moves((*self.ops, (broker, queue, data)))

    def joined(self) -> set[str]:
        return {broker for broker, queue, _ in self.ops if queue is not None}

    def apply(self, route: TopicRouteData) -> TopicRouteData | None:
        """`route` with the moves, both lists in Java's hash order as a read from Redis lists them
        (service/store/route_reads.py); None when no queue data are left (a read says what the topic is now)."""
        if self.built is not None and self.built_from is route:
            return self.built
        queues = {q.broker_name: q for q in route.queue_datas}
        brokers = {b.broker_name: b for b in route.broker_datas}
        for broker, queue, data in self.ops:
            if queue is None or data is None:
                queues.pop(broker, None)
                brokers.pop(broker, None)
            else:
                queues[broker] = queue
                brokers[broker] = data
        if not queues:
            return None
        built = TopicRouteData(hash_order(queues.values(), _name), hash_order(brokers.values(), _name, copied=True),
                               {}, route.order_topic_conf)
        self.built, self.built_from = built, route
        return built


def _name(data: QueueData | BrokerData) -> str:
    return data.broker_name


class RouteCache:
    RECENT_ENCODINGS = 64  # encodings kept by route object, beside the entries' own (see _last_encoded)
    RECENT_BYTES = 8 << 20

    def __init__(
        self,
        events: Callable[[Callable[[], None]], AsyncIterator[str]],
        version: Callable[[], Awaitable[int]],
        *,
        staleness_ms: int = 1000,
        enabled: bool = True,
        on_config: Callable[[], Awaitable[None]] | None = None,
        max_entries: int = 100_000,
        max_bytes: int = 256 * 1024 * 1024,
        max_missing: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._events = events
        self._version = version
        self.enabled = enabled
        self.staleness = staleness_ms / 1000
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.max_missing = max_missing
        self._clock = clock
        self._entries: dict[str, RouteEntry] = {}
        self._by_broker: dict[str, set[str]] = {}  # brokerName -> cached topics whose route names it ("@" events)
        self._missing: dict[str, None] = {}
        self._inflight: dict[str, tuple[int, asyncio.Future[RouteEntry]]] = {}
        # (variant, route object) -> (route, bytes), the latest RECENT_ENCODINGS / RECENT_BYTES: route reads give
        # the topics of a cluster one route object (service/store/route_reads.py), encoded once for all of them even
        # when other clusters' topics are read in between (a storm's readers: 2 000 topics of 10 routes)
        self._last_encoded: dict[Hashable, tuple[TopicRouteData, bytes]] = {}
        self._last_encoded_bytes = 0
        self.bytes = 0
        self._seq = 0  # one per eviction, update or flush
        self._flushed_at = 0  # _seq of the latest flush
        self._changed: dict[str, tuple[int, int]] = {}  # topic being filled -> (_seq, event version) of its
        # latest eviction or update
        self._brokers_changed: dict[str, int] = {}  # "@" brokers -> event version, while fills are under way
        self._ver_seen = -1
        self._ahead = -1  # a version a poll read ahead of the events, checked by the next poll
        self.missed_events = 0  # versions the events never delivered, found by the poll
        self._confirmed_at = -1e18
        self._on_config = on_config
        self._tasks: list[asyncio.Task] = []
        self._stopping = False
        self.hits = 0
        self.misses = 0
        self.flushes = 0
        self.evictions = 0
        self.updates = 0  # cached routes updated in place by "=" lines
        self.feed = ChangeFeed()  # long-polls and streams of this worker, woken by the same events
        # told the brokers whose registration state changed ("!" lines), or None for all (a flush)
        self.state_listeners: list[Callable[[list[str] | None], None]] = []

    # ---------------------------------------------------------------- reads
    @property
    def version_seen(self) -> int:
        """The registry version the events (or a poll) brought this cache to."""
        return self._ver_seen

    @property
    def fresh(self) -> bool:
        return self.enabled and (self._clock() - self._confirmed_at) < self.staleness

    def lookup(self, topic: str) -> RouteEntry | None:
        """The synchronous fast path: a fresh entry (MISSING for a known-absent topic), or None."""
        if self.enabled and (self._clock() - self._confirmed_at) < self.staleness:
            hit = self._entries.get(topic)
            if hit is None and topic in self._missing:
                hit = MISSING
            if hit is not None:
                if hit.pending is not None or hit.moves is not None:
                    settled = self._settle(topic, hit)
                    if settled is None:
                        return None
                    hit = settled
                self.hits += 1
                return hit
        return None

    def _settle(self, topic: str, entry: RouteEntry) -> RouteEntry | None:
        """The entry with what events said since it was built (see _update, _rebroker): a new route and entry,
        whose encodings are made when asked for; None (the entry dropped) when brokers left it no queue data."""
        route = entry.route
        assert route is not None
        if entry.moves is not None:
            moved = entry.moves.apply(route)
            if moved is None:
                self._drop(topic)
                return None
            route = moved
        pending = entry.pending
        if pending is not None:
            datas = [pending.get(q.broker_name, q) for q in route.queue_datas]
            route = TopicRouteData(datas, route.broker_datas, route.filter_server_table, route.order_topic_conf)
        fresh = RouteEntry(route)
        self.bytes += fresh.size - entry.size
        self._entries[topic] = fresh
        return fresh

    async def fill(self, topic: str, fetch: Callable[[], Awaitable[TopicRouteData | ReadAt | None]]
                   ) -> RouteEntry:
        """Read through `fetch` and cache the result unless a change newer than the read reached this worker
        while it was under way (a ReadAt says which version the read reflects; a bare route counts as read at the
        version the events had reached when the fill began), or the cache was flushed meanwhile. Concurrent misses
        of one topic share one fetch (a cold cache under load asks Redis once per topic, not once per request),
        but never one that started before the topic's latest change: a watcher woken by a change must read after
        it."""
        self.misses += 1
        shared = self._inflight.get(topic)
        if shared is not None and self._unchanged_since(topic, shared[0]):
            return await asyncio.shield(shared[1])
        fut: asyncio.Future[RouteEntry] = asyncio.get_running_loop().create_future()
        mine = (self._seq, fut)
        self._inflight[topic] = mine
        try:
            entry = await self._fill(topic, fetch, mine[0], self._ver_seen)
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # retrieved: followers re-raise it, nobody logs "never retrieved"
            raise
        else:
            fut.set_result(entry)
            return entry
        finally:
            if self._inflight.get(topic) is mine:
                del self._inflight[topic]
                self._changed.pop(topic, None)
                if not self._inflight:
                    self._brokers_changed.clear()

    def _unchanged_since(self, topic: str, seq: int) -> bool:
        """Nothing flushed and the topic not changed since `seq` (whether a fill may be shared)."""
        return self._flushed_at <= seq and self._changed.get(topic, (-1, -1))[0] <= seq

    def _current_at(self, topic: str, route: TopicRouteData | None, seq: int, ver: int) -> bool:
        """A route read at version `ver` (a fill begun at `seq`) is still current: nothing flushed since it began,
        no event newer than the read changed the topic or removed a broker it names."""
        if self._flushed_at > seq or self._changed.get(topic, (-1, -1))[1] > ver:
            return False
        if route is not None and self._brokers_changed:
            return all(self._brokers_changed.get(b, -1) <= ver for b in _brokers_of(route))
        return True

    async def _fill(self, topic: str, fetch: Callable[[], Awaitable[TopicRouteData | ReadAt | None]], since: int,
                    seen: int) -> RouteEntry:
        got = await fetch()
        route, at = (got.route, got.ver) if isinstance(got, ReadAt) else (got, seen)
        entry = MISSING if route is None else RouteEntry(route)
        if self.fresh and self._current_at(topic, route, since, at):
            if route is None:
                if not self.max_missing:
                    return entry
                self._missing.pop(topic, None)
                while len(self._missing) >= self.max_missing:
                    self._missing.pop(next(iter(self._missing)))
                    self.evictions += 1
                self._missing[topic] = None
            else:
                self._drop(topic)
                self._entries[topic] = entry
                for name in _brokers_of(route):
                    self._by_broker.setdefault(name, set()).add(topic)
                self.bytes += entry.size + len(topic)
                self._shrink(keep=topic)
        return entry

    def encoding(self, topic: str, entry: RouteEntry, variant: Hashable,
                 encode: Callable[[TopicRouteData], bytes]) -> bytes:
        """The entry's bytes for one door/variant, encoded once and counted against the byte bound."""
        body = entry.encoded.get(variant)
        if body is None:
            route = entry.route
            assert route is not None, "MISSING has no encodings"
            key = (variant, id(route))
            last = self._last_encoded.get(key)
            if last is not None and last[0] is route:  # another topic's entry of the same route object
                body = last[1]
            else:
                body = encode(route)
                recent = self._last_encoded
                while recent and (len(recent) >= self.RECENT_ENCODINGS
                                  or self._last_encoded_bytes + len(body) > self.RECENT_BYTES):
                    self._last_encoded_bytes -= len(recent.pop(next(iter(recent)))[1])
                recent[key] = (route, body)
                self._last_encoded_bytes += len(body)
            if self._entries.get(topic) is entry:  # cached: keep the bytes, count them
                entry.encoded[variant] = body
                entry.size += len(body)
                self.bytes += len(body)
                self._shrink(keep=topic)
        return body

    def __len__(self) -> int:
        return len(self._entries) + len(self._missing)

    # ---------------------------------------------------------------- bounds
    def _drop(self, topic: str) -> None:
        old = self._entries.pop(topic, None)
        if old is not None:
            self.bytes -= old.size + len(topic)
            assert old.route is not None
            names = _brokers_of(old.route)
            if old.moves is not None:  # brokers it joined since are in the index too (_move)
                names |= old.moves.joined()
            for name in names:
                topics = self._by_broker.get(name)
                if topics is not None:
                    topics.discard(topic)
                    if not topics:
                        del self._by_broker[name]

    def _shrink(self, keep: str) -> None:
        """Evict the oldest entries until both bounds hold again (never the one just written)."""
        while (len(self._entries) > self.max_entries or self.bytes > self.max_bytes) and len(self._entries) > 1:
            oldest = next(iter(self._entries))
            if oldest == keep:
                self._entries[keep] = self._entries.pop(keep)  # move to the end, evict the next oldest
                continue
            self._drop(oldest)
            self.evictions += 1

    # ---------------------------------------------------------------- invalidation
    def flush(self) -> None:
        for listener in self.state_listeners:
            listener(None)
        self._entries.clear()
        self._by_broker.clear()
        self._missing.clear()
        self.bytes = 0
        self._seq += 1
        self._flushed_at = self._seq
        self._changed.clear()
        self._brokers_changed.clear()
        self.flushes += 1
        self.feed.notify(None)

    def _touch(self, topics: list[str], ver: int) -> None:
        """These topics changed at event version `ver`: a fill of one under way that read an older version is
        not kept."""
        self._seq += 1
        inflight = self._inflight
        if inflight:
            for t in topics:
                if t in inflight:
                    before = self._changed.get(t, (-1, -1))[1]
                    self._changed[t] = (self._seq, max(before, ver))

    def _evict(self, topics: list[str], ver: int) -> None:
        entries, missing = self._entries, self._missing
        for t in topics:  # most of a big event's topics are not cached here: only look them up
            if t in entries:
                self._drop(t)
        if missing:
            for t in topics:
                missing.pop(t, None)
        self._touch(topics, ver)
        self.feed.notify(topics)

    def _update(self, updates: list[tuple[str, str, list[str]]], ver: int) -> list[str]:
        """Apply in-place updates (brokerName, queue data, topics) to the cached routes; the topics to evict instead
        (not cached here, the broker not in the route, its write bit flipped), to be evicted with the others. The
        updated ones are announced to watchers here. An update is checked now but applied when the route is read
        next (the entry's `pending`, RouteEntry): a registration changes a broker's queue data of every topic it
        serves, most of which are not read before its next one (the route of each rebuilt at once cost ~1 µs a
        topic in every worker, for every changed registration)."""
        evict: list[str] = []
        updated: list[str] = []
        entries = self._entries
        for broker, enc, topics in updates:
            hits = self._cached_of(topics, evict)
            if not hits:
                continue
            try:
                new = QueueData.decode(broker, enc)
            except ValueError:
                evict.extend(hits)
                continue
            for topic in hits:
                entry = entries[topic]
                if entry.moves is not None:  # brokers that left or joined first: the update applies to that route
                    settled = self._settle(topic, entry)
                    if settled is None:
                        evict.append(topic)
                        continue
                    entry = settled
                route = entry.route
                old = None
                for q in route.queue_datas if route is not None else ():
                    if q.broker_name == broker:
                        old = q
                        break
                if old is None:
                    evict.append(topic)
                    continue
                pending = entry.pending
                if pending is not None:
                    old = pending.get(broker, old)
                if old == new:  # the route already says so (its read came after the change): keep its encodings
                    updated.append(topic)
                    continue
                if (new.perm & 2) != (old.perm & 2):  # writability: the acting-master view may change with it
                    evict.append(topic)
                    continue
                if pending is None:
                    entry.pending = {broker: new}
                else:
                    pending[broker] = new
                updated.append(topic)
        self._updated_in_place(updated, ver)
        return evict

    def _cached_of(self, topics: list[str], evict: list[str]) -> set[str]:
        """Those of `topics` cached here, in one C-level pass (most of a registration's are not); the others are added
        to `evict` (an in-place line must still evict what it names elsewhere: a negative entry, a fill under way)."""
        hits = self._entries.keys() & topics
        if len(hits) < len(topics):
            evict.extend(topics if not hits else [t for t in topics if t not in hits])
        return hits

    def _updated_in_place(self, topics: list[str], ver: int) -> None:
        """These cached routes were updated in place at event version `ver`: a fill under way that read the old
        route is not cached, and their watchers are told."""
        if topics:
            self._touch(topics, ver)
            self.updates += len(topics)
            self.feed.notify(topics)

    def _rebroker(self, leaves: list[tuple[str, list[str]]], joins: list[tuple[str, str, BrokerData, list[str]]],
                  ver: int) -> list[str]:
        """Take brokers out of (`leaves`) or put them into (`joins`) the cached routes of their topics, in that
        order, when each is read next (Moves); the topics to evict instead (not cached here, or a route with filter
        servers, which are listed by address). Topics that share a route object (a cluster's, read together) share
        one Moves, so they are rebuilt once and keep sharing one route, encoded once per door (RouteCache.encoding)."""
        evict: list[str] = []
        changed: list[str] = []
        entries = self._entries
        ops: list[tuple[str, list[str], QueueData | None, BrokerData | None]] = [(b, ts, None, None)
                                                                                 for b, ts in leaves]
        for broker, enc, data, topics in joins:
            try:
                ops.append((broker, topics, QueueData.decode(broker, enc), data))
            except ValueError:
                evict.extend(topics)
        for broker, topics, queue, data in ops:
            hits = self._cached_of(topics, evict)
            moved: dict[int, tuple[object, Moves | None]] = {}
            for topic in hits:
                entry = entries[topic]
                if entry.pending is not None or (entry.moves is not None and len(entry.moves.ops) >= MAX_MOVES):
                    settled = self._settle(topic, entry)  # the moves apply to the updated route; or, too many
                    if settled is None:  # not read for long, applied now (their topics share the rebuilt route)
                        evict.append(topic)
                        continue
                    entry = settled
                route = entry.route
                assert route is not None
                shared = entry.moves if entry.moves is not None else route
                done = moved.get(id(shared))
                if done is None or done[0] is not shared:
                    nxt = None if route.filter_server_table else (
                        entry.moves.then(broker, queue, data) if entry.moves is not None
                        else Moves(((broker, queue, data),)))
                    done = moved[id(shared)] = (shared, nxt)
                if done[1] is None:
                    evict.append(topic)
                else:
                    self._move(topic, entry, done[1], broker, queue is not None)
                    changed.append(topic)
        self._updated_in_place(changed, ver)
        return evict

    def _move(self, topic: str, entry: RouteEntry, moves: Moves, broker: str, joined: bool) -> None:
        """`topic`'s cached entry now differs from its route by `moves`, the last of which names `broker` (joined or
        not): applied when it is read next; the broker index changes now, for that broker alone (walking every
        broker of the route for every topic cost a storm of 500-broker clusters O(topics × brokers) per
        registration)."""
        entry.moves = moves
        if joined:
            self._by_broker.setdefault(broker, set()).add(topic)
        else:
            topics = self._by_broker.get(broker)
            if topics is not None:
                topics.discard(topic)
                if not topics:
                    del self._by_broker[broker]

    def apply_event(self, payload: str) -> None:
        if "\n=" in payload and not self._inflight and not len(self.feed):
            payload = self._without_unseen_updates(payload)
        try:
            event = parse_event(payload)
        except ValueError:
            self.flush()
            return
        ver = event.ver
        # an event a poll got ahead of (the poll read a later version while this one was in flight): its change is
        # in Redis already, so in what any later fill read; it may still evict, but not update or count as a gap
        late = 0 <= ver <= self._ver_seen
        if event.everything or (not late and self._ver_seen >= 0 and ver != self._ver_seen + 1):
            self.flush()
        else:
            names = event.topics
            if event.updates:
                names.extend(self._update(event.updates, ver) if not late else
                             [t for _, _, topics in event.updates for t in topics])
            if event.leaves or event.joins:
                names.extend(self._rebroker(event.leaves, event.joins, ver) if not late else
                             [t for _, topics in event.leaves for t in topics] +
                             [t for _, _, _, topics in event.joins for t in topics])
            if event.states:
                for listener in self.state_listeners:
                    listener(None if "*" in event.states else event.states)
            for b in event.brokers:
                names.extend(self._by_broker.get(b, ()))
                if self._inflight:  # a route being read may name it and not be cached yet
                    self._brokers_changed[b] = ver
            if names:
                self._evict(names, ver)
        if event.everything:
            self._schedule_config_refresh()
        self._ver_seen = max(self._ver_seen, ver)
        self._confirmed_at = self._clock()

    def _without_unseen_updates(self, payload: str) -> str:
        """The event without its in-place update lines ("=<brokerName>\t...") of brokers no cached route names:
        they can change nothing here, and their topics (every one of a big registration's) need not be split and
        looked up. An update line names topics the broker served before the change, so a cached route of any of
        them names the broker (the event that added the broker to it evicted an older one), and none of them is
        cached as absent (the event that created it evicted that). Only while no fill is under way (a route being
        read may name the broker and not be cached yet) and no long-poll or stream waits (they are told every
        topic that changed): the caller checks."""
        lines = payload.split("\n")
        if not lines[0].endswith(("\t2", "\t3")):  # the format before ("=<topic>\t...") or one it does not know
            return payload
        by_broker = self._by_broker
        kept = [line for line in lines if line[:1] != "=" or "\t" not in line or line[1:line.find("\t")] in by_broker]
        return payload if len(kept) == len(lines) else "\n".join(kept)

    def _schedule_config_refresh(self) -> None:
        if self._on_config is not None:
            self._tasks.append(asyncio.get_running_loop().create_task(self._refresh_config()))
            self._tasks = [t for t in self._tasks if not t.done()]

    async def _refresh_config(self) -> None:
        if self._on_config is not None:
            try:
                await self._on_config()
            except Exception as exc:  # the next poll retries
                log.debug("config refresh failed: %s", exc)

    async def poll_once(self) -> None:
        """Safety net: compare the registry version with what the events told us. A version ahead of the events
        is not yet a miss: under writes, events are always in flight when the poll reads (and a version behind them
        only the ones that arrived while it was out). It is one when the
        events have not reached, by the next poll, the version the previous poll read (a lost event); meanwhile
        only the events confirm freshness, so a silent subscription still ends in a bypass within the bound. A
        version behind the events (a Redis that lost its data) or none seen yet: flush and start from it."""
        before = self._ver_seen  # events arriving while the poll is out may pass the version it reads
        ver = await self._version()
        if before < 0 or ver < before:
            await self._adopt(ver)
        elif ver < self._ver_seen:
            pass  # behind only the events that arrived meanwhile
        elif ver == self._ver_seen:
            self._ahead = -1
            self._confirmed_at = self._clock()
        elif 0 <= self._ahead and self._ver_seen < self._ahead:  # the previous poll's version never arrived
            self.missed_events += 1
            await self._adopt(ver)
        else:
            self._ahead = ver

    async def _adopt(self, ver: int) -> None:
        self.flush()
        self._ver_seen = ver
        self._ahead = -1
        self._confirmed_at = self._clock()
        await self._refresh_config()

    # ---------------------------------------------------------------- background tasks
    async def start(self) -> None:
        self._stopping = False
        self._tasks = [asyncio.create_task(self._listen(), name="route-cache-listen"),
                       asyncio.create_task(self._poll(), name="route-cache-poll")]

    async def stop(self) -> None:
        """Cancel the background tasks until they end: a client library may turn one cancellation into its own
        timeout error (which the loops would retry), so the loops also watch `_stopping`."""
        self._stopping = True
        tasks, self._tasks = self._tasks, []
        while tasks:
            for t in tasks:
                t.cancel()
            done, pending = await asyncio.wait(tasks, timeout=0.5)
            for t in done:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    t.result()
            tasks = list(pending)

    async def _poll(self) -> None:
        interval = max(self.staleness / 2, 0.005)
        while not self._stopping:
            try:
                await self.poll_once()
            except Exception as exc:  # Redis down: entries go stale by themselves after the bound
                log.debug("route cache poll failed: %s", exc)
            await asyncio.sleep(interval)

    async def _listen(self) -> None:
        backoff, lost = 0.05, False

        def subscribed() -> None:  # anything cached before this subscription may have missed events: flush
            nonlocal backoff, lost
            self.flush()
            backoff, lost = 0.05, False

        while not self._stopping:
            try:
                async for payload in self._events(subscribed):
                    self.apply_event(payload)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # said once; while Redis stays down the store's outage log speaks
                if lost:
                    log.debug("change-event subscription still lost (%s); retrying", exc)
                else:
                    log.warning("change-event subscription lost (%s); cache flushed, retrying", exc)
                lost = True
                self.flush()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
