"""Incomplete frames on the native door are bounded: per worker (remoting_max_partial_bytes, counted at each
frame's declared length as soon as its length prefix arrives), in time (remoting_frame_timeout_s from a frame's
first byte, however slowly its bytes trickle in), and a frame over the frame limit is refused on its prefix."""

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


async def test_incomplete_frames_are_bounded_per_worker(make_door):
    door = await make_door(remoting_max_frame_bytes=1024 * KIB, remoting_max_partial_bytes=2048 * KIB)
    frame = big_frame(900 * KIB)
    a, b, c = await door.client(), await door.client(), await door.client()
    for conn in (a, b):
        conn.writer.write(frame[:64 * KIB])  # the prefix declares 900 KiB: reserved in the worker's budget
    await until("two reserved", lambda: door.server.partial_bytes == 2 * len(frame))
    c.writer.write(frame[:8])  # a third would pass 2 MiB: refused on its prefix, before it is buffered
    async with asyncio.timeout(10):
        await c.closed.wait()
    assert door.server.stats.closes["partial-limit"] == 1 and not a.closed.is_set() and not b.closed.is_set()
    assert door.server.partial_bytes == 2 * len(frame)

    expect_reply(a)
    a.writer.write(frame[64 * KIB:])  # complete: its reservation is released, and the frame is served
    assert (await a.reply_to(99)).code == 17  # TopicA is not registered in this door
    await until("released", lambda: door.server.partial_bytes == len(frame))
    await b.close()  # a closed connection releases its frame's reservation too
    await until("all released", lambda: door.server.partial_bytes == 0)
    d = await door.client()
    expect_reply(d)
    d.writer.write(frame)  # room again
    assert (await d.reply_to(99)).code == 17
    metrics = door.ns.metrics.render().decode()
    assert re.search(r"^namesrv_remoting_partial_frame_bytes 0\.0$", metrics, re.M)


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
