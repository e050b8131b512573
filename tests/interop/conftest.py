"""The interop tier's fixtures: our NameServer (two worker processes on a real redis-server, as `namesrvAddr`
names both), Apache's own NameServer beside it, and stock Java brokers registering with all of them.

Everything here is real: JVMs from RocketMQ's published jars (tests/interop/java, built by `.ci/run`), our
`namesrv serve` processes, a real redis-server. Locally a missing JDK or Maven skips; in CI it fails.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from service.remoting import fastjson
from service.remoting.codec import RemotingCommand
from tests.conftest import IN_CI, need
from tests.integration.conftest import Namesrv
from tests.interop import rocketmq as rmq
from tests.redis_server import RedisServer, free_port
from tests.remoting.client import Client

pytestmark = pytest.mark.interop


def pytest_collection_modifyitems(items):  # noqa: D103 - every test of this directory is in the interop tier
    for item in items:
        if "tests/interop/" in str(item.fspath):
            item.add_marker(pytest.mark.interop)
            item.add_marker(pytest.mark.timeout(600))


@pytest.fixture(scope="session")
def interop_jars() -> None:
    """The harness's jars: built by .ci/run; built here on first use locally when Maven is present."""
    need("java")
    if not rmq.built():
        if IN_CI:
            pytest.fail("tests/interop/java is not built: .ci/run runs mvn package before the tests")
        if shutil.which("mvn") is None:
            pytest.skip("Maven is not installed (the interop harness fetches RocketMQ's jars with it)")
        rmq.build()


@pytest.fixture(scope="session")
def go_client() -> None:
    """The Go client program: built by .ci/run; built here on first use locally when Go is present."""
    need("go")
    if not rmq.GO_BIN.is_file():
        if IN_CI:
            pytest.fail("tests/interop/go is not built: .ci/run builds it before the tests")
        rmq.build_go()


def http_json(url: str, timeout: float = 5) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def native(port: int, code: int, ext: dict[str, Any] | None = None, body: bytes = b"",
           version: int = 493) -> RemotingCommand:
    """One request over the native protocol to any NameServer on loopback (ours or Apache's)."""
    async def go() -> RemotingCommand:
        c = await Client.connect(port)
        try:
            return await c.request(code, ext, body, version=version)
        finally:
            await c.close()

    return asyncio.run(go())


def broker_topics(broker: rmq.Broker) -> set[str]:
    """The topics a broker holds, asked of the broker itself (GET_ALL_TOPIC_CONFIG, code 21)."""
    reply = native(broker.port, 21)
    assert reply.code == 0, (reply.code, reply.remark)
    return set(fastjson.loads(reply.body)["topicConfigTable"])


@dataclass
class OurNameServer:
    """Our NameServer as a deployment: N single-worker `namesrv serve` processes sharing one Redis registry,
    each restartable on its own ports."""

    redis_url: str
    prefix: str
    env: dict[str, object]
    count: int = 2
    procs: list[Namesrv] = field(default_factory=list)

    def start(self) -> OurNameServer:
        for _ in range(self.count):
            self.procs.append(Namesrv(self.redis_url, self.prefix, 1, remoting_port=free_port(), **self.env))
        for p in self.procs:
            p.wait_ready(30)
        return self

    @property
    def addrs(self) -> str:
        """namesrvAddr naming every worker."""
        return ";".join(f"127.0.0.1:{p.remoting_port}" for p in self.procs)

    def addr(self, i: int = 0) -> str:
        return f"127.0.0.1:{self.procs[i].remoting_port}"

    def url(self, i: int = 0) -> str:
        return self.procs[i].url

    def restart(self, i: int, stop: bool = True) -> Namesrv:
        """Start worker i again on the same HTTP and remoting ports (after stopping it, unless it is down)."""
        old = self.procs[i]
        if stop:
            old.stop()
        new = Namesrv(self.redis_url, self.prefix, 1, port=old.port, remoting_port=old.remoting_port, **self.env)
        self.procs[i] = new
        return new.wait_ready(30)

    def stop(self) -> None:
        for p in self.procs:
            p.stop()

    def cluster_info(self, i: int = 0) -> dict[str, Any]:
        return http_json(self.url(i) + "/v1/cluster-info")

    def route(self, topic: str, i: int = 0) -> dict[str, Any] | None:
        try:
            return http_json(f"{self.url(i)}/v1/topics/{topic}/route")
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise

    def brokers(self, i: int = 0) -> list[dict[str, Any]]:
        return http_json(self.url(i) + "/v1/brokers")["brokers"]


def registered(cluster_info: dict[str, Any], broker: rmq.Broker) -> bool:
    entry = cluster_info.get("brokerAddrTable", {}).get(broker.broker_name, {})
    addrs = {str(k): v for k, v in entry.get("brokerAddrs", {}).items()}  # fastjson: integer keys
    return (addrs.get(str(broker.broker_id)) == broker.addr
            and broker.broker_name in cluster_info.get("clusterAddrTable", {}).get(broker.cluster, []))


def apache_cluster_info(ns: rmq.ApacheNameServer) -> dict[str, Any]:
    reply = native(ns.port, 106)
    assert reply.code == 0, reply
    return fastjson.loads(reply.body)  # fastjson: integer map keys


@dataclass
class Deployment:
    """One release line's peers: our two workers, Apache's NameServer, brokers registering with all three."""

    line: rmq.Line
    root: Path
    ours: OurNameServer
    apache: rmq.ApacheNameServer
    brokers: dict[str, rmq.Broker]
    clients: rmq.Clients

    @property
    def namesrv_all(self) -> str:
        return f"{self.ours.addrs};{self.apache.addr}"

    def wait_registered(self, *brokers: rmq.Broker, timeout: float = 60) -> None:
        """Registered in both our workers and in Apache's (5.x may register only ~10 s after boot)."""
        for b in brokers:
            rmq.wait_until(lambda b=b: b.alive and all(registered(self.ours.cluster_info(i), b)
                                                     for i in range(len(self.ours.procs))),
                           timeout, f"{b.name} registered with our NameServer ({b.tail(5) if not b.alive else ''})")
            rmq.wait_until(lambda b=b: registered(apache_cluster_info(self.apache), b), timeout,
                           f"{b.name} registered with Apache's NameServer")

    def create_topic(self, topic: str, *clusters: str, queues: int = 4) -> None:
        """mqadmin updateTopic through our NameServer (it looks the cluster's masters up there)."""
        outs = self.clients.mqadmin([["updateTopic", "-n", self.ours.addr(), "-c", c, "-t", topic,
                                      "-r", str(queues), "-w", str(queues)] for c in clusters])
        for c, out in zip(clusters, outs, strict=True):
            assert "success" in out, f"updateTopic {topic} on {c}: {out}"


@pytest.fixture(scope="session")
def interop_redis() -> Iterator[RedisServer]:
    need("redis-server")
    server = RedisServer().start()
    yield server
    server.cleanup()


def start_deployment(line: rmq.Line, redis: RedisServer, **namesrv_env: object) -> Deployment:
    root = rmq.temp_root(f"interop{line.name}-")
    ours = OurNameServer(redis.url, "io" + uuid.uuid4().hex[:8],
                         {"support_acting_master": "true", **namesrv_env}).start()
    apache = rmq.ApacheNameServer(line, root, free_port(), supportActingMaster="true").start()
    apache.wait_listening()
    ns = f"{ours.addrs};{apache.addr}"
    # broker-a: a master and its slave in one group (SYNC_MASTER: an acknowledged send is on the slave too);
    # broker-b: a second cluster
    brokers = {
        "a0": rmq.Broker(line, root, "ClusterA", "broker-a", 0, ns, brokerRole="SYNC_MASTER"),
        "a1": rmq.Broker(line, root, "ClusterA", "broker-a", 1, ns),
        "b0": rmq.Broker(line, root, "ClusterB", "broker-b", 0, ns),
    }
    for b in brokers.values():
        b.start()
    dep = Deployment(line, root, ours, apache, brokers, rmq.Clients(line, root))
    dep.wait_registered(*brokers.values())
    return dep


def stop_deployment(dep: Deployment, keep: bool = False) -> None:
    """Stop everything; `keep`: leave the processes' logs (under dep.root) for a failure to be read."""
    rmq.stop_all([*dep.brokers.values(), dep.apache])
    dep.ours.stop()
    if keep:
        print(f"interop logs kept in {dep.root}")
    else:
        shutil.rmtree(dep.root, ignore_errors=True)


@pytest.fixture(scope="package", params=[rmq.LINE5, rmq.LINE4], ids=lambda line: f"rocketmq{line.name}")
def deployment(request, interop_jars, interop_redis) -> Iterator[Deployment]:
    dep = start_deployment(request.param, interop_redis)
    failed = request.session.testsfailed
    try:
        yield dep
    finally:
        stop_deployment(dep, keep=request.session.testsfailed > failed)
