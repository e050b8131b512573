"""A Redis outage told once in a worker's log (service/store/outage.py): where and why, then reminders with the
count at growing intervals, then its end; a configuration Redis refuses said as such."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid

import pytest
import redis.asyncio as aioredis
from redis.exceptions import AuthenticationError, InvalidResponse, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError

from service.errors import StoreUnavailable
from service.store import RouteStore
from service.store import calls as store_calls
from service.store import events as store_events
from service.store.outage import REMINDERS_S, Outage, reminder_due

REFUSED = RedisConnectionError("Error 111 connecting to 10.0.0.5:6379. Connection refused.")


@pytest.fixture
def outage():
    now = [1000.0]
    o = Outage(clock=lambda: now[0])
    o.target = "Redis redis://10.0.0.5:6379/0"
    o.now = now
    return o


def lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "service.store.outage"]


def test_an_outage_is_named_once_then_summed_up_at_growing_intervals_then_ended(outage, caplog):
    """`ConnectionError; retry shortly` came 40 times in 40 s from several components, never saying where Redis
    was or why (issue 39): now one line says both, reminders come at 10 s, 30 s, 1 min, … with the count."""
    caplog.set_level(logging.INFO)
    for _ in range(130):  # ~3 failed calls a second for 43 s
        outage.failed(REFUSED, at_once=True)
        outage.now[0] += 1 / 3
    said = lines(caplog)
    assert len(said) == 3, said
    assert said[0].startswith("Redis redis://10.0.0.5:6379/0 is unavailable (ConnectionError: Error 111 connecting "
                              "to 10.0.0.5:6379. Connection refused.)")
    assert said[1].startswith("Redis redis://10.0.0.5:6379/0 still unavailable after 10 s: 31 failed calls (last: ")
    assert said[2].startswith("Redis redis://10.0.0.5:6379/0 still unavailable after 30 s: 91 failed calls")
    outage.answered()
    assert lines(caplog)[-1] == "Redis redis://10.0.0.5:6379/0 answers again after 43 s (130 failed calls)"
    outage.answered()
    assert len(lines(caplog)) == 4  # answering while well says nothing


def test_reminders_grow_then_settle_at_ten_minutes():
    assert [reminder_due(n) for n in range(8)] == [*REMINDERS_S, 1200, 1800]


def test_a_deadline_hit_alone_is_no_outage_until_it_lasts(outage, caplog):
    caplog.set_level(logging.INFO)
    outage.failed(TimeoutError(), at_once=False)
    outage.answered()
    assert lines(caplog) == []  # a slow call: the NamesrvRedisSlow alert's business, not a log line
    for _ in range(7):
        outage.failed(TimeoutError(), at_once=False)
        outage.now[0] += 1
    assert lines(caplog) == ["Redis redis://10.0.0.5:6379/0 is unavailable (no answer within the call's deadline "
                             "(NAMESRV_REDIS_DEADLINE_MS)); requests answer 503 until it answers again"]


@pytest.mark.parametrize("exc,said", [
    (ResponseError("DB index is out of range"), "DB index is out of range (the database number at the end of the URL"),
    (AuthenticationError("invalid username-password pair or user is disabled."), "invalid username-password pair"),
    (AuthenticationError("NOAUTH Authentication required."), "it requires a password and none was given (NOAUTH)"),
    (InvalidResponse('Protocol error, got "H" as reply type byte'), "it does not answer in Redis's protocol"),
])
def test_a_configuration_redis_refuses_is_said_to_be_one(outage, caplog, exc, said):
    outage.failed(exc, at_once=True)
    (record,) = [r for r in caplog.records if r.name == "service.store.outage"]
    assert record.levelno == logging.ERROR
    assert said in record.getMessage() and "an error to fix, not an outage to wait out" in record.getMessage()


async def _redis_dying_at_subscribe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A Redis that answers +OK to what a connection sends on opening, and dies as SUBSCRIBE arrives: what a
    worker's pooled connection meets when Redis is killed (its close not yet seen) or shutting down."""
    try:
        while (line := await reader.readline()).startswith(b"*"):
            words = []
            for _ in range(int(line[1:])):
                size = int((await reader.readline())[1:])
                words.append((await reader.readexactly(size + 2))[:-2].upper())
            if words[0] == b"SUBSCRIBE":
                break
            writer.write(b"+OK\r\n")
            await writer.drain()
    finally:
        writer.close()


@pytest.mark.redis
async def test_only_a_confirmed_subscription_ends_an_outage(monkeypatch, caplog, redis_server):
    """Redis killed: the change-event listener subscribed again and the SUBSCRIBE was written to a connection
    whose Redis was gone; the write succeeding was taken for an answer, and the log said `answers again after
    589 ms` while no Redis ran, then `is unavailable` 200 ms later (issue 39, second round). Only Redis's
    confirmation of the subscription is an answer."""
    outage = Outage()
    outage.target = "Redis under test"
    monkeypatch.setattr(store_calls, "OUTAGE", outage)
    monkeypatch.setattr(store_events, "OUTAGE", outage)
    caplog.set_level(logging.INFO)
    outage.failed(REFUSED, at_once=True)  # the outage under way
    dying = await asyncio.start_server(_redis_dying_at_subscribe, "127.0.0.1", 0)
    port = dying.sockets[0].getsockname()[1]
    for url in (f"redis://127.0.0.1:{port}/0", redis_server.url):
        store = RouteStore(aioredis.Redis.from_url(url, decode_responses=True), prefix="t" + uuid.uuid4().hex[:10])
        subscribed = asyncio.Event()
        stream = store.change_events(subscribed.set)
        try:
            if url == redis_server.url:  # a real Redis confirms it: that is the end of the outage
                first = asyncio.ensure_future(stream.__anext__())
                await asyncio.wait_for(subscribed.wait(), 5)
                first.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await first
            else:
                with pytest.raises(StoreUnavailable):
                    await asyncio.wait_for(stream.__anext__(), 5)
                assert not subscribed.is_set()
                assert [line for line in lines(caplog) if " answers again after " in line] == []
        finally:
            await stream.aclose()
            await store.redis.aclose()
    dying.close()
    assert lines(caplog)[-1].startswith("Redis under test answers again after ")
