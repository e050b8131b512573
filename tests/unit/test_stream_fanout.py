"""Route streams' fan-out (service/core/watch.py), without HTTP: one read and one encoded event per change for
all the streams of a topic, written without awaiting any of them; a stream whose client does not read is dropped
while the others go on; a failed read ends the streams with an error; a stream's states never go back."""

from __future__ import annotations

import asyncio
import time

from service.core.watch import ChangeFeed, Seen, Stream
from service.errors import NamesrvError, StoreUnavailable


class Transport:
    """A transport that records what is written; `stuck`: nothing leaves its buffer (a client that never reads)."""

    def __init__(self, stuck: bool = False) -> None:
        self.writes: list[bytes] = []
        self.stuck = stuck
        self.buffered = 0
        self.aborted = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)
        if self.stuck:
            self.buffered += len(data)

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def is_closing(self) -> bool:
        return self.aborted

    def abort(self) -> None:
        self.aborted = True


class Plain(Stream):
    __slots__ = ()

    def render(self, topic: str, seen: Seen[bytes]) -> bytes:
        return b"%d|" % self.seq + seen.payload

    def render_error(self, err: NamesrvError) -> bytes:
        return b"error|" + err.code.encode()


class Routes:
    """The door's read: the current state of each topic, and how many times each was read."""

    def __init__(self) -> None:
        self.state: dict[str, int] = {}
        self.reads: dict[str, int] = {}
        self.fail: Exception | None = None
        self.gate: asyncio.Event | None = None

    async def read(self, topic: str) -> Seen[bytes]:
        self.reads[topic] = self.reads.get(topic, 0) + 1
        state = self.state.get(topic, 0)
        if self.gate is not None:
            await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        return Seen(b"%s=%d" % (topic.encode(), state), f'"{state}"')


async def until(predicate, what: str, deadline_s: float = 5.0) -> None:
    end = time.monotonic() + deadline_s
    while not predicate():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        await asyncio.sleep(0.001)


async def opened(feed: ChangeFeed, routes: Routes, topics: tuple[str, ...], transport: Transport) -> Plain:
    """A stream as the door opens it: registered, attached, its first reads offered."""
    s = feed.open_stream(Plain(topics, "10.0.0.1"), 100, 100, routes.read, b"ka|", 60.0)
    s.attach(transport, chunked=False)  # type: ignore[arg-type]
    for t in s.topics:
        at = feed.changes
        s.offer(t, await routes.read(t), at)
    return s


def change(feed: ChangeFeed, routes: Routes, *topics: str) -> None:
    for t in topics:
        routes.state[t] = routes.state.get(t, 0) + 1
    feed.notify(list(topics))


async def test_all_streams_of_a_topic_get_the_same_event_from_one_read():
    feed, routes = ChangeFeed(), Routes()
    transports = [Transport() for _ in range(3)]
    streams = [await opened(feed, routes, ("A",), tr) for tr in transports]
    other = await opened(feed, routes, ("B",), Transport())
    reads = dict(routes.reads)
    change(feed, routes, "A")
    await until(lambda: all(len(tr.writes) == 2 for tr in transports), "the change at every stream")
    assert routes.reads["A"] == reads["A"] + 1 and routes.reads["B"] == reads["B"]  # one read for all
    assert {tr.writes[1] for tr in transports} == {b"2|A=1"}  # the identical event (same id: same history)
    assert all(s.sent["A"] == '"1"' for s in streams) and len(other.transport.writes) == 1  # type: ignore[union-attr]
    assert feed.events == 3 + 1 + 3
    assert sum(feed.fanout_counts) == 1 and feed.fanout_sum > 0  # one fan-out timed (/metrics histogram)
    for s in (*streams, other):
        s.end("gone")
    assert len(feed) == 0


async def test_a_stream_whose_client_does_not_read_is_dropped_and_the_others_go_on(monkeypatch):
    monkeypatch.setattr("service.core.watch.STREAM_BUFFER_MAX", 10)
    feed, routes = ChangeFeed(), Routes()
    fast, stuck = Transport(), Transport(stuck=True)
    s_fast = await opened(feed, routes, ("A",), fast)
    s_stuck = await opened(feed, routes, ("A",), stuck)  # "A=0" and its id: 5 bytes buffered
    change(feed, routes, "A")  # 10 bytes: at the cap
    await until(lambda: len(fast.writes) == 2, "the first change")
    assert not s_stuck.reason and len(stuck.writes) == 2
    change(feed, routes, "A")  # past the cap: dropped at this write, not awaited
    await until(lambda: len(fast.writes) == 3, "the second change")
    assert stuck.aborted and s_stuck.reason == "dropped" and s_stuck.ended.is_set() and feed.dropped == 1
    assert len(feed) == 1
    for n in range(3, 6):  # the others go on; the dropped one is written no more
        change(feed, routes, "A")
        await until(lambda n=n: len(fast.writes) == n + 1, "the next change")
    assert fast.writes[-1] == b"6|A=5" and len(stuck.writes) == 3 and not s_fast.reason
    s_fast.end("gone")


async def test_changes_during_a_read_are_read_again_and_never_go_back():
    feed, routes = ChangeFeed(), Routes()
    tr = Transport()
    s = await opened(feed, routes, ("A",), tr)
    routes.gate = asyncio.Event()
    change(feed, routes, "A")  # the fan-out's read waits at the gate...
    await until(lambda: routes.reads["A"] == 2, "the fan-out's read")
    change(feed, routes, "A")  # ... a second change meanwhile: no second concurrent read
    change(feed, routes, "A")
    await asyncio.sleep(0.01)
    assert routes.reads["A"] == 2
    routes.gate.set()
    await until(lambda: tr.writes[-1] == b"3|A=3", "the latest state")
    assert routes.reads["A"] == 3  # read once more for the changes that came during the first read
    # an offer of a read that started before the one the stream holds is ignored (its states never go back)
    s.offer("A", Seen(b"A=1", '"1"'), at=0)
    assert tr.writes[-1] == b"3|A=3" and s.sent["A"] == '"3"'
    s.end("gone")


async def test_a_failed_read_ends_the_streams_of_its_topic_with_an_error():
    feed, routes = ChangeFeed(), Routes()
    a, b = Transport(), Transport()
    s_a = await opened(feed, routes, ("A",), a)
    s_b = await opened(feed, routes, ("B",), b)
    routes.fail = StoreUnavailable("redis down")
    change(feed, routes, "A")
    await until(lambda: s_a.reason == "error", "the stream to end")
    assert a.writes[-1] == b"error|" + StoreUnavailable.code.encode() and s_a.ended.is_set()
    assert not s_b.reason and len(feed) == 1
    s_b.end("gone")


async def test_a_stream_not_yet_attached_is_skipped_and_reads_after():
    feed, routes = ChangeFeed(), Routes()
    s = feed.open_stream(Plain(("A",), "10.0.0.1"), 100, 100, routes.read, b"ka|", 60.0)
    change(feed, routes, "A")  # before its headers went out: nothing may be written to it
    await until(lambda: not feed._fanouts, "the fan-out")
    tr = Transport()
    s.attach(tr, chunked=True)  # type: ignore[arg-type]
    at = feed.changes
    s.offer("A", await routes.read("A"), at)
    assert tr.writes == [b"5\r\n1|A=1\r\n"]  # an HTTP chunk
    s.end("gone")


async def test_idle_streams_get_keep_alives_and_shutdown_ends_every_stream():
    feed, routes = ChangeFeed(), Routes()
    tr = Transport()
    s = feed.open_stream(Plain(("A",), "10.0.0.1"), 100, 100, routes.read, b"ka|", 0.02)
    s.attach(tr, chunked=False)  # type: ignore[arg-type]
    await until(lambda: tr.writes.count(b"ka|") >= 2, "two keep-alives")
    feed.shutdown()
    assert s.reason == "shutdown" and s.ended.is_set() and len(feed) == 0 and feed._sweeper is None
