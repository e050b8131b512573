"""The two ways a model-based test's state machine runs: as a test case on fakeredis (many examples, fast) and
inside a test on a real redis-server (fewer). `make_machine(new_client)` builds the machine class around a factory
of async Redis clients."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import fakeredis
import redis.asyncio as aioredis
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test


class RedisMachine(RuleBasedStateMachine):
    """A machine driving async stores from synchronous rules: `open` (from its @initialize) gives it an event loop
    and a Redis client, closed at teardown."""

    def open(self, connect: Callable[[], Any]) -> None:
        self.loop = asyncio.new_event_loop()
        self.client = connect()

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        if hasattr(self, "loop"):
            self.run(self.client.aclose())
            self.loop.close()


def _settings(examples: int, steps: int) -> settings:
    return settings(max_examples=examples, stateful_step_count=steps, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def on_fakeredis(make_machine: Callable[[Callable[[], Any]], Any], examples: int, steps: int) -> Any:
    """The machine's TestCase on fakeredis, to assign to a `test_…` name."""
    machine = make_machine(lambda: fakeredis.FakeAsyncRedis(decode_responses=True))
    machine.TestCase.settings = _settings(examples, steps)
    return machine.TestCase


def run_on_redis(make_machine: Callable[[Callable[[], Any]], Any], url: str, examples: int, steps: int) -> None:
    """Run the machine against the redis-server at `url`."""
    machine = make_machine(lambda: aioredis.Redis.from_url(url, decode_responses=True))
    run_state_machine_as_test(machine, settings=_settings(examples, steps))
