"""Long-polls and streams of one worker: who waits for which topics, woken by the route cache's change events.

A `Watch` (a long-poll) is registered before its first read, so a change that lands between a read and the wait
still wakes it. The route cache calls `ChangeFeed.notify` with the topics an event names, or None for everything
(a `*` event, a version gap, a resubscription, the staleness poll): the same events that keep every worker's
cache fresh, whichever worker or door made the change, and expiry and dropped connections too. Nothing here polls
Redis: a woken long-poll reads its topic again through the cache.

A `Stream` is not a task waiting to be woken: a change of a topic starts one fan-out for it, which reads the topic
once (one event, encoded once) and writes it, synchronously, to the transport of every stream of that topic,
each with its own id. A stream whose client does not read (its transport's buffer past a cap) is dropped rather
than awaited, so one slow client never holds up the others; it resumes with Last-Event-ID like any reconnect.
Keep-alives are written by one sweep per worker, in slices, so a round of them never blocks a change's fan-out.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Generic, TypeVar

from service.errors import NamesrvError, TooManyWatchers, Unavailable

T = TypeVar("T")
log = logging.getLogger(__name__)
STREAM_BUFFER_MAX = 2 * 1024 * 1024  # bytes a stream's transport may hold unsent before its client is dropped
FANOUT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)  # seconds (/metrics histogram)
KEEPALIVE_SLICE = 100  # streams given a keep-alive per event-loop turn (a change's fan-out runs in between)


class Watch:
    """One long-poll: its topics, those changed since it last looked, and the event that wakes it."""

    __slots__ = ("topics", "client", "dirty", "everything", "wake")

    def __init__(self, topics: tuple[str, ...], client: str) -> None:
        self.topics = topics
        self.client = client
        self.dirty: set[str] = set()
        self.everything = False
        self.wake = asyncio.Event()

    def take(self) -> list[str]:
        """The topics to read again (in watch order), clearing the wake-up: call it before reading them."""
        self.wake.clear()
        if self.everything:
            self.everything = False
            self.dirty.clear()
            return list(self.topics)
        dirty, self.dirty = self.dirty, set()
        return [t for t in self.topics if t in dirty]


class Stream:
    """One stream: its topics, the tags its client holds, and the connection the feed writes its events to.

    The door subclasses it for its wire format (`render`); the feed calls `offer` from a fan-out or the stream's
    first reads, never awaiting: an event is written to the transport's buffer at once or the stream is dropped.
    `ended` is set when the stream is over (`reason`: "shutdown", "dropped", "gone", "error")."""

    __slots__ = ("topics", "client", "sent", "read_at", "seq", "transport", "chunked", "last_write", "ended",
                 "reason", "feed")

    def __init__(self, topics: Iterable[str], client: str) -> None:
        self.topics = tuple(dict.fromkeys(topics))
        self.client = client
        self.sent: dict[str, str] = {}  # topic -> the tag its client holds (from Last-Event-ID, then each event)
        self.read_at: dict[str, int] = {}  # topic -> ChangeFeed.changes when the read it holds started
        self.seq = 0
        self.transport: asyncio.WriteTransport | None = None  # None until the door's headers went out
        self.chunked = False
        self.last_write = 0.0
        self.ended = asyncio.Event()
        self.reason = ""
        self.feed: ChangeFeed | None = None

    def render(self, topic: str, seen: Seen[bytes]) -> bytes:
        """The event for `topic` in this stream (called after `seq` and `sent` were updated)."""
        raise NotImplementedError

    def render_error(self, err: NamesrvError) -> bytes:
        """The event telling the client why the stream ends."""
        raise NotImplementedError

    def attach(self, transport: asyncio.WriteTransport | None, chunked: bool) -> None:
        """Events may be written now (the response's headers went out): until then a fan-out skips the stream,
        and the stream's first reads, which start after this, see what it skipped."""
        if transport is None:
            self.end("gone")
            return
        self.transport = transport
        self.chunked = chunked
        self.last_write = time.monotonic()

    def offer(self, topic: str, seen: Seen[bytes], at: int) -> None:
        """A read of `topic` that started when the feed had seen `at` changes: sent unless the client holds that
        state already or a read that started later was offered first (a stream's states never go back)."""
        if self.transport is None or self.reason:
            return
        if at < self.read_at.get(topic, -1):
            return
        self.read_at[topic] = at
        if self.sent.get(topic) == seen.tag:
            return
        self.sent[topic] = seen.tag
        self.seq += 1
        if self.feed is not None:
            self.feed.events += 1
        self.write(self.render(topic, seen))

    def write(self, data: bytes) -> None:
        """Into the transport's buffer, framed as an HTTP chunk when the response is chunked. Past the buffer cap
        the client is not reading: drop it (it resumes from its last complete event when it reconnects)."""
        t = self.transport
        if t is None or self.reason:
            return
        if t.is_closing():
            self.end("gone")
            return
        t.write(b"%x\r\n%s\r\n" % (len(data), data) if self.chunked else data)
        self.last_write = time.monotonic()
        if t.get_write_buffer_size() > STREAM_BUFFER_MAX:
            log.info("route stream of %s dropped: %d bytes unsent", self.client, t.get_write_buffer_size())
            if self.feed is not None:
                self.feed.dropped += 1
            t.abort()
            self.end("dropped")

    def fail(self, exc: Exception) -> None:
        """A read for this stream failed (e.g. Redis unreachable): say why and end; the client resumes later."""
        err = exc if isinstance(exc, NamesrvError) else NamesrvError("internal error reading a route")
        self.write(self.render_error(err))
        self.end("error")

    def end(self, reason: str) -> None:
        if self.reason:
            return
        self.reason = reason
        self.ended.set()
        if self.feed is not None:
            self.feed.close(self)


class ChangeFeed:
    """The watches of one worker, by topic; admission within the per-worker and per-client caps."""

    def __init__(self) -> None:
        self._by_topic: dict[str, set[Watch]] = {}  # long-polls
        self._streams_of: dict[str, dict[Stream, None]] = {}  # streams by topic, in the order they opened
        self._streams: dict[Stream, None] = {}
        self._watches: set[Watch | Stream] = set()
        self._per_client: collections.Counter[str] = collections.Counter()
        self._read: Callable[[str], Awaitable[Seen[bytes]]] | None = None
        self._stale: dict[str, float] = {}  # topics whose streams need a fan-out (again): since when
        self._fanouts: dict[str, asyncio.Task[None]] = {}
        self._no_fanouts = asyncio.Event()
        self._sweeper: asyncio.Task[None] | None = None
        self.keepalive: bytes = b""
        self.keepalive_s = 15.0
        self.closing = False
        self.changes = 0  # notifications so far: a read that starts at n has seen every change notified before
        self.opened = 0
        self.refused = 0
        self.dropped = 0  # streams closed because their client did not read (STREAM_BUFFER_MAX)
        self.events = 0  # changes sent to watchers (stream events and long-polls answered with a change)
        # fan-outs, from the change's event reaching this worker to its event written to every stream of the topic
        self.fanout_buckets = FANOUT_BUCKETS
        self.fanout_counts = [0] * (len(FANOUT_BUCKETS) + 1)
        self.fanout_sum = 0.0

    def __len__(self) -> int:
        return len(self._watches)

    def clients(self) -> int:
        return len(self._per_client)

    def _admit(self, client: str, max_per_worker: int, max_per_client: int) -> None:
        if self.closing:
            raise Unavailable("this worker is shutting down; watch through another one")
        if len(self._watches) >= max_per_worker:
            self.refused += 1
            raise TooManyWatchers(f"this worker already serves {max_per_worker} watchers "
                                  "(NAMESRV_WATCH_MAX_PER_WORKER)", limit=max_per_worker)
        if self._per_client[client] >= max_per_client:
            self.refused += 1
            raise TooManyWatchers(f"client {client} already has {max_per_client} watchers on this worker "
                                  "(NAMESRV_WATCH_MAX_PER_CLIENT)", limit=max_per_client)
        self._per_client[client] += 1
        self.opened += 1

    def open(self, topics: Iterable[str], client: str, max_per_worker: int, max_per_client: int) -> Watch:
        """A long-poll's watch (see `long_poll`)."""
        self._admit(client, max_per_worker, max_per_client)
        w = Watch(tuple(dict.fromkeys(topics)), client)
        self._watches.add(w)
        for t in w.topics:
            self._by_topic.setdefault(t, set()).add(w)
        return w

    def open_stream(self, stream: Stream, max_per_worker: int, max_per_client: int,
                    read: Callable[[str], Awaitable[Seen[bytes]]], keepalive: bytes, keepalive_s: float) -> Stream:
        """Register a stream before its first read (so no change is missed). `read(topic)`: the door's event body
        for a topic and its tag, read once per change for all streams; `keepalive`: what an idle stream is sent
        every `keepalive_s`. The door then attaches the stream's transport and offers it its first reads."""
        self._admit(stream.client, max_per_worker, max_per_client)
        self._read, self.keepalive, self.keepalive_s = read, keepalive, keepalive_s
        stream.feed = self
        self._watches.add(stream)
        self._streams[stream] = None
        for t in stream.topics:
            self._streams_of.setdefault(t, {})[stream] = None
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep(), name="route-stream-keepalive")
        return stream

    def close(self, w: Watch | Stream) -> None:
        if w not in self._watches:
            return
        self._watches.discard(w)
        self._per_client[w.client] -= 1
        if self._per_client[w.client] <= 0:
            del self._per_client[w.client]
        if isinstance(w, Stream):
            self._streams.pop(w, None)
            for t in w.topics:
                streams = self._streams_of.get(t)
                if streams is not None:
                    streams.pop(w, None)
                    if not streams:
                        del self._streams_of[t]
            if not self._streams and self._sweeper is not None:
                self._sweeper.cancel()
                self._sweeper = None
            return
        for t in w.topics:
            s = self._by_topic.get(t)
            if s is not None:
                s.discard(w)
                if not s:
                    del self._by_topic[t]

    def notify(self, topics: list[str] | None) -> None:
        """Topics changed (None: possibly any): wake their long-polls, fan the change out to their streams."""
        if not self._watches:
            return
        self.changes += 1
        by_topic, streams_of = self._by_topic, self._streams_of
        if topics is None:
            for w in self._watches:
                if isinstance(w, Watch):
                    w.everything = True
                    w.wake.set()
            self._fan_out(list(streams_of))
            return
        if len(topics) > len(by_topic) + len(streams_of):  # a big broker's event: walk the watched topics
            named = set(topics)
            hit = [t for t in by_topic if t in named]
            fan = [t for t in streams_of if t in named]
        else:
            hit = [t for t in topics if t in by_topic]
            fan = [t for t in topics if t in streams_of]
        for t in hit:
            for w in by_topic[t]:
                w.dirty.add(t)
                w.wake.set()
        if fan:
            self._fan_out(fan)

    def _fan_out(self, topics: list[str]) -> None:
        if not topics:
            return
        now = time.monotonic()
        for t in topics:
            self._stale.setdefault(t, now)
        loop = asyncio.get_running_loop()
        for t in topics:
            if t not in self._fanouts:
                self._fanouts[t] = loop.create_task(self._fan_out_topic(t))
        self._no_fanouts.clear()

    async def _fan_out_topic(self, topic: str) -> None:
        """Read `topic` once and offer the result to each of its streams; again while changes keep coming."""
        try:
            while topic in self._stale and self._read is not None and not self.closing:
                since = self._stale.pop(topic)
                if topic not in self._streams_of:
                    return
                at = self.changes
                try:
                    seen = await self._read(topic)
                except Exception as exc:  # e.g. Redis unreachable: each stream says why and ends
                    if not isinstance(exc, NamesrvError):
                        log.exception("route stream read of %s failed", topic)
                    for s in list(self._streams_of.get(topic, ())):
                        s.fail(exc)
                    continue
                for s in list(self._streams_of.get(topic, ())):  # a copy: a write may end (close) a stream
                    s.offer(topic, seen, at)
                took = time.monotonic() - since
                self.fanout_counts[bisect.bisect_left(FANOUT_BUCKETS, took)] += 1
                self.fanout_sum += took
        finally:
            self._fanouts.pop(topic, None)
            if not self._fanouts:
                self._no_fanouts.set()

    async def _sweep(self) -> None:
        """Keep-alives, to each stream idle for `keepalive_s`. Swept often (a sixteenth of it), so streams that
        went idle together are spread over several sweeps, and in slices, each after any pending fan-out: a
        round of keep-alives never holds up a change."""
        while True:
            await asyncio.sleep(self.keepalive_s / 16)
            due = time.monotonic() - self.keepalive_s
            idle = [s for s in self._streams if s.last_write <= due]
            for i in range(0, len(idle), KEEPALIVE_SLICE):
                if i:
                    await asyncio.sleep(0)
                while self._fanouts:
                    await self._no_fanouts.wait()
                for s in idle[i:i + KEEPALIVE_SLICE]:
                    if s.last_write <= due:  # not written meanwhile (by a change)
                        s.write(self.keepalive)

    def shutdown(self) -> None:
        """SIGTERM: refuse new watches and end every open one now (their clients reconnect elsewhere)."""
        self.closing = True
        for w in list(self._watches):
            if isinstance(w, Stream):
                w.end("shutdown")
            else:
                w.wake.set()


class Seen(Generic[T]):
    """What a read found: the door's payload for it and its entity tag."""

    __slots__ = ("payload", "tag")

    def __init__(self, payload: T, tag: str) -> None:
        self.payload = payload
        self.tag = tag


async def long_poll(feed: ChangeFeed, watch: Watch, read: Callable[[], Awaitable[Seen[T]]],
                    unchanged: Callable[[str], bool], timeout_s: float) -> tuple[Seen[T], bool]:
    """Read until the state is not `unchanged` (True: changed) or `timeout_s` passes (False). On shutdown, the
    current state at once (changed or not)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        watch.take()
        seen = await read()
        if not unchanged(seen.tag):
            feed.events += 1
            return seen, True
        remaining = deadline - loop.time()
        if feed.closing or remaining <= 0:
            return seen, False
        try:
            async with asyncio.timeout(remaining):
                await watch.wake.wait()
        except TimeoutError:
            return seen, False
        if feed.closing:
            return seen, False


__all__ = ["ChangeFeed", "Seen", "Stream", "Watch", "long_poll"]
