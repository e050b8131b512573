"""Shared fixtures: a session-wide real redis-server, and a RouteStore on fakeredis or real Redis."""

from __future__ import annotations

import os
import shutil
import signal
import uuid

import fakeredis
import pytest
import redis.asyncio as aioredis

from service.store import RouteStore
from tests.redis_server import RedisServer

IN_CI = bool(os.environ.get("CI"))

# A suite started with SIGINT ignored (`bash .ci/run > log &` in a script: background jobs of a shell without job
# control ignore it) hands that on to every process it starts, so the Ctrl-C that the doc checker and the interop
# tier send, as a reader would, reached nothing. A handled signal is reset to its default by exec: children get it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def need(binary: str) -> None:
    """Skip locally when a tool is missing; in CI a missing tool is a failure, never a skip."""
    if shutil.which(binary) is None:
        if IN_CI:
            pytest.fail(f"{binary} is required in CI (.ci/run installs it)")
        pytest.skip(f"{binary} is not installed")


@pytest.fixture(scope="session")
def redis_server():
    need("redis-server")
    server = RedisServer().start()
    yield server
    server.cleanup()


@pytest.fixture(params=["fakeredis", pytest.param("redis", marks=pytest.mark.redis)])
async def store(request):
    """A RouteStore with its own key prefix, on fakeredis and on a real redis-server."""
    if request.param == "fakeredis":
        client = fakeredis.FakeAsyncRedis(decode_responses=True)
    else:
        server = request.getfixturevalue("redis_server")
        client = aioredis.Redis.from_url(server.url, decode_responses=True)
    s = RouteStore(client, prefix="t" + uuid.uuid4().hex[:10])
    await s.load_scripts()
    yield s
    await client.aclose()
