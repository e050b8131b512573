"""The frames a native-door worker takes on are bounded: per worker (remoting_max_partial_bytes, counted at each
frame's declared length as soon as its length prefix arrives, then by its request until answered) — a frame past it
is not refused but waits, unread, until there is room (TCP backpressure) —, in time (remoting_frame_timeout_s from
being taken on, however slowly its bytes trickle in; and, while others wait, a frame that stops arriving), and a
frame over the frame limit is refused on its prefix."""

from __future__ import annotations

import asyncio
import re
import struct

from service.remoting import codes
from service.remoting.codec import RemotingCommand, encode
from tests.remoting.test_door import register

KIB = 1024


def big_frame(size: int) -> bytes:
    """A valid GET_ROUTEINFO_BY_TOPIC request carrying a body, `size` bytes on the wire."""
    head = encode(RemotingCommand(code=codes.GET_ROUTEINFO_BY_TOPIC, opaque=99, ext_fields={"topic": "TopicA"}))
    body = b"x" * (size - len(head))
    return encode(RemotingCommand(code=codes.GET_ROUTEINFO_BY_TOPIC, opaque=99, ext_fields={"topic": "TopicA"},
                                  body=body))


def expect_reply(conn, opaque=99):
    """Register the reply future our client resolves by opaque, for a frame written raw."""
    conn.pending[opaque] = asyncio.get_running_loop().create_future()


async def until(what, pred, timeout=10.0):
    async with asyncio.timeout(timeout):
        while not pred():
            await asyncio.sleep(0.01)
    return what


async def test_a_frame_past_the_workers_room_waits_unread_and_is_taken_on_when_room_frees(make_door):
    door = await make_door(remoting_max_frame_bytes=1024 * KIB, remoting_max_partial_bytes=2048 * KIB)
    server = door.server
    frame = big_frame(900 * KIB)
    a, b, c = await door.client(), await door.client(), await door.client()
    for conn in (a, b):
        conn.writer.write(frame[:64 * KIB])  # the prefix declares 900 KiB: reserved in the worker's room
    await until("two reserved", lambda: server.partial_bytes == 2 * len(frame))
    c.writer.write(frame[:8])  # a third would pass 2 MiB: its connection is not read until there is room
    await until("c waits", lambda: len(server.waiting) == 1)
    expect_reply(c)
    c.writer.write(frame[8:])  # the rest stays in its socket meanwhile
    await asyncio.sleep(0.2)
    assert server.partial_bytes == 2 * len(frame) and len(server.waiting) == 1 and not c.closed.is_set()
    assert server.stats.waits == 1 and not server.stats.closes

    expect_reply(a)
    a.writer.write(frame[64 * KIB:])  # complete: served, and once answered its room goes to c, which completes
    assert (await a.reply_to(99)).code == 17  # TopicA is not registered in this door
    assert (await c.reply_to(99)).code == 17
    assert not server.waiting and server.partial_bytes == len(frame) and server.handling_bytes == 0
    await b.close()  # a closed connection releases its frame's reservation too
    await until("all released", lambda: server.partial_bytes == 0)
    assert not server.stats.closes.get("frame-stalled") and not server.stats.closes.get("frame-timeout")
    metrics = door.ns.metrics.render().decode()
    assert re.search(r"^namesrv_remoting_partial_frame_bytes 0\.0$", metrics, re.M)
    assert re.search(r"^namesrv_remoting_waits_total 1\.0$", metrics, re.M)


async def test_while_others_wait_a_frame_that_stops_arriving_is_closed(make_door, monkeypatch):
    from service.remoting import server as remoting_server

    monkeypatch.setattr(remoting_server, "STALL_S", 0.3)
    door = await make_door(remoting_max_frame_bytes=1024 * KIB, remoting_max_partial_bytes=1024 * KIB,
                           remoting_idle_s=1)  # the sweep every 0.25 s
    frame = big_frame(900 * KIB)
    stuck, fleet = await door.client(), await door.client()
    stuck.writer.write(frame[:64 * KIB])  # takes the worker's room, then sends nothing more
    await until("held", lambda: door.server.partial_bytes == len(frame))
    expect_reply(fleet)
    fleet.writer.write(frame)  # waits for room; the stalled frame is closed so that it gets it
    assert (await fleet.reply_to(99)).code == 17
    async with asyncio.timeout(10):
        await stuck.closed.wait()
    assert door.server.stats.closes["frame-stalled"] == 1 and not fleet.closed.is_set()


async def test_a_frame_has_a_deadline_that_trickling_bytes_do_not_extend(make_door):
    door = await make_door(remoting_frame_timeout_s=1, remoting_idle_s=3600)
    ok = await door.client()
    await register(ok)
    slow = await door.client()
    frame = big_frame(4 * KIB)
    slow.writer.write(frame[:16])
    sent = 16
    async with asyncio.timeout(15):  # bound only: the deadline is 1 s from the first byte
        while not slow.closed.is_set():
            slow.writer.write(frame[sent:sent + 1])  # one byte at a time: the connection is never idle
            sent += 1
            if sent >= len(frame) - 1:
                raise AssertionError("the frame was never cut off")
            try:
                await asyncio.wait_for(slow.closed.wait(), 0.05)
            except TimeoutError:
                pass
    assert door.server.stats.closes["frame-timeout"] == 1 and door.server.partial_bytes == 0
    assert (await ok.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA"})).code == 0  # others unaffected


async def test_a_completed_frame_releases_its_hold_and_the_next_is_counted_alone(make_door):
    door = await make_door(remoting_frame_timeout_s=2, remoting_idle_s=3600)
    c = await door.client()
    await register(c)
    first, second = big_frame(4 * KIB), big_frame(4 * KIB)
    expect_reply(c)
    c.writer.write(first[:100])
    await until("held", lambda: door.server.partial_bytes == len(first))
    c.writer.write(first[100:] + second[:100])  # the first completes, the second begins
    assert (await c.reply_to(99)).code == 0
    expect_reply(c)
    await until("second held", lambda: door.server.partial_bytes == len(second))
    c.writer.write(second[100:])
    assert (await c.reply_to(99)).code == 0 and door.server.partial_bytes == 0
    assert not c.closed.is_set()


async def test_a_frame_over_the_limit_is_refused_on_its_length_prefix(make_door):
    door = await make_door(remoting_max_frame_bytes=64 * KIB)
    c = await door.client()
    c.writer.write(struct.pack(">i", 64 * KIB))  # 4 + 64 KiB: one byte over; nothing after the prefix
    async with asyncio.timeout(10):
        await c.closed.wait()
    assert door.server.stats.frame_errors == 1 and door.server.partial_bytes == 0


def test_the_budget_holds_a_largest_frame():
    import pytest

    from service.config import ConfigError, load_settings

    with pytest.raises(ConfigError, match="remoting_max_partial_bytes"):
        load_settings(env={"NAMESRV_REMOTING_MAX_PARTIAL_BYTES": str(1024 * KIB)})  # frames may be 16 MiB
