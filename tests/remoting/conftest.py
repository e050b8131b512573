"""A worker's two doors in-process over one core on fakeredis: the remoting server on a free loopback port and
the HTTP app (through aiohttp_client), so a test can check that both answer from the same registry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import fakeredis
import pytest

from service.config import load_settings
from service.core import NameServer
from service.http.app import create_app
from service.remoting.server import RemotingServer
from service.server import bind_socket, running
from service.store import RouteStore
from service.store.connect import store_limits
from tests.redis_server import free_port
from tests.remoting.client import Client

ADMIN = "admin-token-123456"
BROKER_C1 = "broker-c1-token-12"
READ = "read-token-1234567"


@dataclass
class Door:
    ns: NameServer
    server: RemotingServer
    port: int
    http: Any
    clients: list[Client]

    async def client(self, **kw: Any) -> Client:
        c = await Client.connect(self.port, **kw)
        self.clients.append(c)
        return c


@pytest.fixture
async def make_door(aiohttp_client):
    started: list[tuple[Door, Any]] = []

    async def make(redis_server: fakeredis.FakeServer | None = None, **env: Any) -> Door:
        """`redis_server`: the fake Redis behind it, for a test to take it away (`connected = False`)."""
        env = {"remoting_port": free_port(), **env}
        settings = load_settings(env={f"NAMESRV_{k.upper()}": str(v) for k, v in env.items()})
        redis = fakeredis.FakeAsyncRedis(server=redis_server or fakeredis.FakeServer(), decode_responses=True)
        ns = NameServer(RouteStore(redis, settings.key_prefix, limits=store_limits(settings)), settings)
        ctx = running(ns, scheduler=False)
        await ctx.__aenter__()
        server = RemotingServer(ns, settings)
        await server.start(bind_socket("127.0.0.1", settings.remoting_port))
        http = await aiohttp_client(create_app(ns))
        door = Door(ns, server, settings.remoting_port, http, [])
        started.append((door, ctx))
        return door

    yield make
    for d, ctx in started:
        for c in d.clients:
            await c.close()
        await d.server.stop(0.5)
        await ctx.__aexit__(None, None, None)


@pytest.fixture
async def door(make_door):
    return await make_door()
