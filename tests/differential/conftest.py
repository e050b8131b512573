"""The differential tier's peers: Apache's own NameServer 5.5.0 (the oracle) and ours (two `namesrv serve`
workers on one real redis-server), each reached over long-lived native connections.

`--long` runs many more generated sequences than CI's fixed budget.
"""

from __future__ import annotations

import asyncio
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from service.remoting.codec import RemotingCommand
from tests.interop import rocketmq as rmq
from tests.interop.conftest import OurNameServer, interop_jars, interop_redis  # noqa: F401 - fixtures
from tests.redis_server import free_port
from tests.remoting.client import Client

# The same switches on both sides (everything else is each side's default, which are the same).
JAVA_CONFIG = {"supportActingMaster": "true"}
OUR_ENV = {"support_acting_master": "true"}


def pytest_addoption(parser):
    parser.addoption("--long", action="store_true", default=False,
                     help="differential tier: run many more generated sequences (default: CI's fixed budget)")


def pytest_collection_modifyitems(items):  # noqa: D103 - every test here is in the interop and differential tiers
    for item in items:
        if "tests/differential/" in str(item.fspath):
            item.add_marker(pytest.mark.interop)
            item.add_marker(pytest.mark.differential)


@dataclass
class Peers:
    """Apache's NameServer and our two workers, with one connection each, driven from a private event loop."""

    apache: rmq.ApacheNameServer
    ours: OurNameServer
    loop: asyncio.AbstractEventLoop
    java: Client | None = None
    workers: list[Client] | None = None

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    def connect(self) -> None:
        async def go():
            self.java = await Client.connect(self.apache.port)
            self.workers = [await Client.connect(p.remoting_port) for p in self.ours.procs]

        self.run(go())

    def reconnect(self) -> None:
        """New connections (after a test closed some on purpose)."""
        self.close()
        self.connect()

    def close(self) -> None:
        for c in [self.java, *(self.workers or [])]:
            if c is not None:
                self.run(c.close())
        self.java, self.workers = None, None

    def java_request(self, code: int, ext=None, body: bytes = b"", **kw) -> RemotingCommand:
        return self.run(self.java.request(code, ext, body, **kw))

    def our_request(self, worker: int, code: int, ext=None, body: bytes = b"", **kw) -> RemotingCommand:
        return self.run(self.workers[worker].request(code, ext, body, **kw))


@pytest.fixture(scope="session")
def peers(interop_jars, interop_redis) -> Iterator[Peers]:  # noqa: F811 - fixtures imported above
    root = rmq.temp_root("differential-")
    apache = rmq.ApacheNameServer(rmq.LINE5, root, free_port(), **JAVA_CONFIG).start()
    ours = OurNameServer(interop_redis.url, "df" + uuid.uuid4().hex[:8], dict(OUR_ENV)).start()
    loop = asyncio.new_event_loop()
    p = Peers(apache, ours, loop)
    try:
        apache.wait_listening()
        p.connect()
        yield p
    finally:
        p.close()
        loop.close()
        rmq.stop_all([apache])
        ours.stop()
        shutil.rmtree(root, ignore_errors=True)
