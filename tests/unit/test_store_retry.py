"""retry_while_store_unavailable: what a worker owes once (a closed connection's unregistration and election)
waits out a short Redis outage, gives up after its window, and never repeats a call for any other error."""

from __future__ import annotations

import asyncio

import pytest

from service.errors import InvalidArgument, StoreUnavailable, retry_while_store_unavailable


class Flaky:
    def __init__(self, failures: int, error: Exception | None = None) -> None:
        self.failures, self.calls, self.error = failures, 0, error or StoreUnavailable("Redis is down")

    async def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return "done"


async def test_repeats_while_redis_is_unavailable_then_answers():
    call = Flaky(3)
    assert await retry_while_store_unavailable(call, within_s=5, pause_s=0.01) == "done"
    assert call.calls == 4


async def test_gives_up_after_its_window_with_the_last_error():
    call = Flaky(10**6)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(StoreUnavailable):
        await retry_while_store_unavailable(call, within_s=0.3, pause_s=0.05)
    assert 0.1 <= loop.time() - started < 1.0 and 2 <= call.calls <= 6


async def test_other_errors_are_not_repeated():
    call = Flaky(1, InvalidArgument("bad"))
    with pytest.raises(InvalidArgument):
        await retry_while_store_unavailable(call, within_s=5, pause_s=0.01)
    assert call.calls == 1
