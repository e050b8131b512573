"""The native door of real `namesrv serve` processes (two workers, one real Redis), driven by a real third-party
client (ali-ons, through tests/remoting/js/probe.js) and by our own client: the same registry as HTTP, liveness by
connection across workers, signatures."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from service.remoting import codes, signature
from tests.remoting.client import Client
from tests.remoting.test_alions_probe import node_ready, probe  # noqa: F401 - fixture
from tests.remoting.test_door import register_body, register_ext

pytestmark = [pytest.mark.redis, pytest.mark.integration]
CLUSTER_TOKEN = "cluster-token-1234"


async def eventually(check, timeout=10.0):
    async with asyncio.timeout(timeout):
        while not await check():
            await asyncio.sleep(0.02)


async def test_alions_reads_what_a_connected_broker_registered(namesrv_factory, node_ready):  # noqa: F811
    n = namesrv_factory(workers=2)
    ns = f"127.0.0.1:{n.remoting_port}"
    broker = await Client.connect(n.remoting_port)  # a broker stays connected while it is registered
    r = await broker.request(codes.REGISTER_BROKER, register_ext(), register_body({"T1": 4, "T2": 8}))
    assert r.code == 0
    # ali-ons' own route call, each on a fresh connection (to either worker), parses what we answer
    for _ in range(4):
        route = (await probe("route", "T1", "--namesrv", ns))["route"]
        assert route["brokerDatas"][0]["brokerAddrs"] == {"0": "10.0.0.1:10911"}
        assert route["queueDatas"][0]["writeQueueNums"] == 4
    info = (await probe("cluster-info", "--namesrv", ns))["response"]["body"]
    assert info["clusterAddrTable"] == {"C1": ["broker-a"]}
    assert (await probe("kv-put", "--namespace", "NS", "--key", "k", "--value", "v", "--namesrv", ns)
            )["response"]["code"] == 0
    assert (await probe("kv-get", "--namespace", "NS", "--key", "k", "--namesrv", ns)
            )["response"]["extFields"]["value"] == "v"
    async with aiohttp.ClientSession() as s:  # the HTTP door reads the same registry
        assert (await (await s.get(f"{n.url}/v1/kv/NS/k")).json()) == {"value": "v"}
        http_route = await (await s.get(f"{n.url}/v1/topics/T1/route")).json()
    assert http_route["brokerDatas"] == route["brokerDatas"]
    missing = await probe("route", "Nope", "--namesrv", ns, expect_ok=False)
    assert missing["code"] == 17
    await broker.close()


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "compressed"])
async def test_alions_registers_and_its_exit_unregisters(namesrv_factory, node_ready, compressed):  # noqa: F811
    """ali-ons registers (its own framing, version 121 body, CRC); the probe then exits, its connection closes,
    and the broker is gone at once on every worker — RocketMQ's onChannelDestroy."""
    n = namesrv_factory(workers=2)
    ns = f"127.0.0.1:{n.remoting_port}"
    args = ["--cluster", "DefaultCluster", "--broker-name", "broker-z", "--broker-addr", "127.0.0.1:10999",
            "--broker-id", "0", "--topics", "Z1,Z2", "--queues", "4"]
    res = await probe("register-broker", *args, *(["--compressed"] if compressed else []), "--namesrv", ns)
    assert res["response"]["code"] == 0, res
    async with aiohttp.ClientSession() as s:
        async def gone():
            return (await s.get(f"{n.url}/v1/topics/Z1/route")).status == 404

        await eventually(gone)
    await eventually(lambda: _logged(n, "brokerName=broker-z brokerAddr=127.0.0.1:10999"))
    assert "broker removed, its connection closed: cluster=DefaultCluster" in n.output()


async def _logged(n, text):
    return text in n.output()


async def test_alions_signature_against_broker_tokens(namesrv_factory, node_ready):  # noqa: F811
    n = namesrv_factory(workers=2, broker_tokens=f"DefaultCluster:{CLUSTER_TOKEN}", admin_token="admin-token-98765")
    ns = f"127.0.0.1:{n.remoting_port}"
    broker = ["--cluster", "DefaultCluster", "--broker-name", "broker-a", "--broker-addr", "127.0.0.1:10911",
              "--broker-id", "0", "--topics", "T1,T2"]
    refused = await probe("register-broker", *broker, "--namesrv", ns)
    assert refused["response"]["code"] == 16  # unsigned, auth on
    refused = await probe("register-broker", *broker, "--namesrv", ns, "--access-key", "DefaultCluster",
                          "--secret", "not-the-secret")
    assert refused["response"]["code"] == 16
    ok = await probe("register-broker", *broker, "--namesrv", ns, "--access-key", "DefaultCluster",
                     "--secret", CLUSTER_TOKEN)
    assert ok["response"]["code"] == 0
    wrong_cluster = await probe("register-broker", *broker[:1], "OtherCluster", *broker[2:], "--namesrv", ns,
                                "--access-key", "DefaultCluster", "--secret", CLUSTER_TOKEN)
    assert wrong_cluster["response"]["code"] == 16


async def test_a_closed_connection_unregisters_on_every_worker(namesrv_factory):
    n = namesrv_factory(workers=2)
    async with aiohttp.ClientSession() as s:
        async def status(topic):
            return (await s.get(f"{n.url}/v1/topics/{topic}/route")).status

        a = await Client.connect(n.remoting_port)
        assert (await a.request(codes.REGISTER_BROKER, register_ext(), register_body())).code == 0
        b = await Client.connect(n.remoting_port)
        other = register_ext(brokerName="broker-b", brokerAddr="10.0.0.5:10911")
        assert (await b.request(codes.REGISTER_BROKER, other, register_body({"TopicC": 4, "TopicD": 4}))).code == 0
        # broker-b moves to a new connection (maybe to the other worker) before its old one closes
        b2 = await Client.connect(n.remoting_port)
        assert (await b2.request(codes.REGISTER_BROKER, other, register_body({"TopicC": 4, "TopicD": 4}))).code == 0
        await a.close()
        await b.close()

        async def a_gone():
            return await status("TopicA") == 404

        await eventually(a_gone)
        assert await status("TopicC") == 200  # re-registered since: kept
        await b2.close()

        async def c_gone():
            return await status("TopicC") == 404

        await eventually(c_gone)


async def test_signed_requests_from_our_client_too(namesrv_factory):
    n = namesrv_factory(broker_tokens=f"C1:{CLUSTER_TOKEN}")
    c = await Client.connect(n.remoting_port)
    body = register_body()
    ext = signature.sign({k: str(v) for k, v in register_ext().items()}, body, "C1", CLUSTER_TOKEN)
    assert (await c.request(codes.REGISTER_BROKER, ext, body)).code == 0
    assert (await c.request(codes.REGISTER_BROKER, register_ext(), body)).code == 16
    await c.close()
