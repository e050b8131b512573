"""Handler-test fixtures: a real aiohttp server (aiohttp_client) over fakeredis, settings overridable, served
by the production Runner (JSON protocol errors, the route read's shortcut past the router)."""

from __future__ import annotations

import fakeredis
import pytest
from aiohttp.test_utils import TestServer

from service.config import load_settings
from service.core import NameServer
from service.http.app import create_app
from service.http.handlers import NS
from service.http.runner import Runner
from service.server import running
from service.store import RouteStore

ADMIN = "admin-token-123456"
BROKER_A = "broker-a-token-123"
BROKER_ANY = "broker-any-token-1"
READ = "read-token-1234567"


def master(cluster="C1", name="broker-a", bid=0, addr="10.0.0.1:10911", topics=None, **extra):
    body = {"clusterName": cluster, "brokerName": name, "brokerId": bid, "brokerAddr": addr,
            "haServerAddr": "10.0.0.1:10912", "dataVersion": {"timestamp": 1, "counter": 1, "stateVersion": 0},
            "topicConfigTable": topics if topics is not None else {
                "TopicA": {"readQueueNums": 8, "writeQueueNums": 8, "perm": 6, "topicSysFlag": 0}}}
    body.update(extra)
    return body


class NamesrvTestServer(TestServer):
    """aiohttp's TestServer with the Runner `namesrv serve` uses, so tests see what clients see."""

    async def _make_runner(self, **kwargs):
        return Runner(self.app, **kwargs)


async def _core_started(app):
    async with running(app[NS], scheduler=False):
        yield


@pytest.fixture
def make_client(aiohttp_client):
    async def make(**env):
        settings = load_settings(env={f"NAMESRV_{k.upper()}": str(v) for k, v in env.items()})
        server = fakeredis.FakeServer()  # client.fake_server: other clients (e.g. the skew job's) reach the same data
        redis = fakeredis.FakeAsyncRedis(server=server, decode_responses=True)
        app = create_app(NameServer(RouteStore(redis, settings.key_prefix), settings))
        app.cleanup_ctx.append(_core_started)
        client = await aiohttp_client(NamesrvTestServer(app))
        client.redis, client.fake_server, client.settings = redis, server, settings
        return client

    return make


@pytest.fixture
async def client(make_client):
    return await make_client()


@pytest.fixture
async def secured(make_client):
    return await make_client(admin_token=ADMIN, broker_tokens=f"C1:{BROKER_A},*:{BROKER_ANY}", read_token=READ)
