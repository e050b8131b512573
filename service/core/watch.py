"""Long-polls and streams of one worker: who waits for which topics, woken by the route cache's change events.

A `Watch` is registered before its first read, so a change that lands between a read and the wait still wakes
it. The route cache calls `ChangeFeed.notify` with the topics an event names, or None for everything (a `*`
event, a version gap, a resubscription, the staleness poll): the same events that keep every worker's cache
fresh, whichever worker or door made the change, and expiry and dropped connections too. Nothing here polls
Redis: a woken watch reads its topics again through the cache, where the watchers of one topic share one fetch.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Generic, TypeVar

from service.errors import TooManyWatchers, Unavailable

T = TypeVar("T")


class Watch:
    """One long-poll or stream: its topics, those changed since it last looked, and the event that wakes it."""

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


class ChangeFeed:
    """The watches of one worker, by topic; admission within the per-worker and per-client caps."""

    def __init__(self) -> None:
        self._by_topic: dict[str, set[Watch]] = {}
        self._watches: set[Watch] = set()
        self._per_client: collections.Counter[str] = collections.Counter()
        self.closing = False
        self.opened = 0
        self.refused = 0
        self.events = 0  # changes sent to watchers (stream events and long-polls answered with a change)

    def __len__(self) -> int:
        return len(self._watches)

    def clients(self) -> int:
        return len(self._per_client)

    def open(self, topics: Iterable[str], client: str, max_per_worker: int, max_per_client: int) -> Watch:
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
        w = Watch(tuple(dict.fromkeys(topics)), client)
        self._watches.add(w)
        self._per_client[client] += 1
        for t in w.topics:
            self._by_topic.setdefault(t, set()).add(w)
        self.opened += 1
        return w

    def close(self, w: Watch) -> None:
        if w not in self._watches:
            return
        self._watches.discard(w)
        self._per_client[w.client] -= 1
        if self._per_client[w.client] <= 0:
            del self._per_client[w.client]
        for t in w.topics:
            s = self._by_topic.get(t)
            if s is not None:
                s.discard(w)
                if not s:
                    del self._by_topic[t]

    def notify(self, topics: list[str] | None) -> None:
        """Topics changed (None: possibly any): wake their watches."""
        if not self._watches:
            return
        if topics is None:
            for w in self._watches:
                w.everything = True
                w.wake.set()
            return
        by_topic = self._by_topic
        if len(topics) > len(by_topic):  # a big broker's event: walk the (fewer) watched topics instead
            named = set(topics)
            hit = [t for t in by_topic if t in named]
        else:
            hit = [t for t in topics if t in by_topic]
        for t in hit:
            for w in by_topic[t]:
                w.dirty.add(t)
                w.wake.set()

    def shutdown(self) -> None:
        """SIGTERM: refuse new watches and end every open one now (their clients reconnect elsewhere)."""
        self.closing = True
        for w in self._watches:
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


async def stream(feed: ChangeFeed, watch: Watch, read: Callable[[str], Awaitable[Seen[T]]],
                 sent: dict[str, str], keepalive_s: float) -> AsyncIterator[tuple[str, Seen[T]] | None]:
    """(topic, state) for every watched topic whose tag differs from `sent` (the tags the client holds, updated
    here), then for each change as it happens; None when nothing happened for `keepalive_s` (send a keep-alive).
    Ends when the worker shuts down. A change during a read or a send wakes the watch again, so none is lost;
    changes that land together are read once (the client gets the latest state, never an older one)."""
    pending = list(watch.topics)
    watch.take()
    while True:
        for topic in pending:
            seen = await read(topic)
            if sent.get(topic) != seen.tag:
                sent[topic] = seen.tag
                feed.events += 1
                yield topic, seen
        while not watch.wake.is_set():
            if feed.closing:
                return
            try:
                async with asyncio.timeout(keepalive_s):
                    await watch.wake.wait()
            except TimeoutError:
                yield None
        if feed.closing:
            return
        pending = watch.take()


__all__ = ["ChangeFeed", "Seen", "Watch", "long_poll", "stream"]
