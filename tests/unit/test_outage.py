"""A Redis outage told once in a worker's log (service/store/outage.py): where and why, then reminders with the
count at growing intervals, then its end; a configuration Redis refuses said as such."""

from __future__ import annotations

import logging

import pytest
from redis.exceptions import AuthenticationError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError

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
])
def test_a_configuration_redis_refuses_is_said_to_be_one(outage, caplog, exc, said):
    outage.failed(exc, at_once=True)
    (record,) = [r for r in caplog.records if r.name == "service.store.outage"]
    assert record.levelno == logging.ERROR
    assert said in record.getMessage() and "an error to fix, not an outage to wait out" in record.getMessage()
