"""Stock Java brokers, producer and push consumer through our NameServer only (two workers on a real Redis,
`namesrvAddr` naming both), for RocketMQ 5.x and 4.x; then the failures users meet: a worker killed mid-run,
the master broker killed, every worker restarted.

The module's deployment (conftest.py) is shared by its tests in order: broker-a (ClusterA, SYNC_MASTER + slave)
and broker-b (ClusterB), registered with our two workers and with Apache's NameServer.
"""

from __future__ import annotations

import signal
import time
import urllib.request

from service.remoting import fastjson
from tests.interop import rocketmq as rmq
from tests.interop.conftest import Deployment, apache_cluster_info, broker_topics, native, registered

SEND = {"timeout-s": 240}


def metric_sum(url: str, name: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
        text = r.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name) and not line.startswith("#"))


def addrs_of(route: dict, broker_name: str) -> dict[str, str]:
    for bd in route["brokerDatas"]:
        if bd["brokerName"] == broker_name:
            return {str(k): v for k, v in bd["brokerAddrs"].items()}
    return {}


def test_brokers_of_both_clusters_are_registered_on_every_worker(deployment: Deployment):
    ours = deployment.ours
    for i in range(len(ours.procs)):
        info = ours.cluster_info(i)
        assert info["clusterAddrTable"] == {"ClusterA": ["broker-a"], "ClusterB": ["broker-b"]}
        assert all(registered(info, b) for b in deployment.brokers.values())
        assert info["brokerAddrTable"]["broker-a"]["enableActingMaster"] is deployment.line.is5
    # the same table Apache's NameServer holds, fed by the same brokers
    apache = apache_cluster_info(deployment.apache)
    assert {k: sorted(v) for k, v in apache["clusterAddrTable"].items()} == info["clusterAddrTable"]
    assert {n: addrs_of({"brokerDatas": [bd]}, n) for n, bd in apache["brokerAddrTable"].items()} == \
           {n: addrs_of({"brokerDatas": [bd]}, n) for n, bd in info["brokerAddrTable"].items()}


def test_a_thousand_sync_sends_all_received_by_a_push_consumer(deployment: Deployment):
    topic = f"E2E{deployment.line.name}"
    deployment.create_topic(topic, "ClusterA", "ClusterB")
    ns = deployment.ours.addrs
    consumer = deployment.clients.consumer(ns, topic, f"g_e2e{deployment.line.name}", expect=1000, **SEND)
    producer = deployment.clients.producer(ns, topic, 1000, **SEND)
    acked = producer.wait_done(300).acked()
    assert len(acked) == 1000, producer.failures()[:5]
    assert {broker for broker, _ in acked.values()} == {"broker-a", "broker-b"}  # both clusters' queues
    received = consumer.wait_done(300).received()
    assert set(received) == set(acked)  # none missing, none invented


def test_the_go_client_produces_and_consumes(deployment: Deployment, go_client):
    """The official Go client (it sends version 317, so it gets fastjson route bodies, and splits brokerAddrs
    on `,` and `:`): a producer and a push consumer through both workers."""
    topic = f"GO{deployment.line.name}"
    deployment.create_topic(topic, "ClusterA", "ClusterB")
    ns = deployment.ours.addrs
    consumer = deployment.clients.go("consume", ns, topic, group=f"g_go{deployment.line.name}", expect=300,
                                     timeout="240s")
    producer = deployment.clients.go("produce", ns, topic, count=300, prefix="go", timeout="240s")
    acked = producer.wait_done(300).acked()
    assert len(acked) == 300, producer.failures()[:5]
    assert {broker for broker, _ in acked.values()} == {"broker-a", "broker-b"}
    assert set(consumer.wait_done(300).received()) == set(acked)


def test_a_worker_killed_mid_run_loses_no_acknowledged_message(deployment: Deployment):
    """SIGKILL one of the two workers while a producer sends and a consumer reads (both polling routes every
    second, so the dead address is met mid-run): both carry on through the other address."""
    topic = f"KILLW{deployment.line.name}"
    deployment.create_topic(topic, "ClusterA", "ClusterB")
    ours = deployment.ours
    fast_poll = {"poll-ms": 1000, **SEND}
    consumer = deployment.clients.consumer(ours.addrs, topic, f"g_killw{deployment.line.name}", **fast_poll)
    producer = deployment.clients.producer(ours.addrs, topic, 600, **{"interval-ms": 15, **fast_poll})
    rmq.wait_until(lambda: len(producer.acked()) >= 150, 120, "150 messages acknowledged before the kill")
    reads_on_b = metric_sum(ours.url(1), 'namesrv_remoting_requests_total{code="105"')
    ours.procs[0].stop(signal.SIGKILL)
    acked = producer.wait_done(300).acked()
    assert len(acked) == 600, producer.failures()[:5]
    rmq.wait_until(lambda: set(consumer.received()) >= set(acked), 120, "every acknowledged message received")
    received = consumer.stop().received()
    assert set(received) == set(acked)
    # the clients' route reads went on at the surviving worker
    assert metric_sum(ours.url(1), 'namesrv_remoting_requests_total{code="105"') > reads_on_b
    ours.restart(0, stop=False)
    deployment.wait_registered(*deployment.brokers.values(), timeout=60)


def test_master_killed_slave_serves_then_master_rejoins(deployment: Deployment):
    """kill -9 the master of broker-a: its address leaves the route within seconds (connection drop), the route
    matches Apache's NameServer (5.x: the slave as acting master), a new consumer reads every acknowledged
    message from the slave; the master restarts and registers again."""
    line = deployment.line
    topic = f"FAILM{line.name}"
    deployment.create_topic(topic, "ClusterA")
    ours = deployment.ours
    master, slave = deployment.brokers["a0"], deployment.brokers["a1"]
    acked = deployment.clients.producer(ours.addrs, topic, 300, **SEND).wait_done(300).acked()
    assert len(acked) == 300  # SYNC_MASTER: each is on the slave too
    # the slave copies the master's topic table every few seconds: until then it answers "topic not exist" to a
    # consumer, whatever the NameServer says (asked of the slave itself: GET_ALL_TOPIC_CONFIG)
    rmq.wait_until(lambda: topic in broker_topics(slave), 90, f"the slave copied {topic} from its master")
    try:
        _master_killed(deployment, topic, acked)
    finally:
        if not master.alive:  # leave the deployment whole for the tests after this one
            master.restart()
            deployment.wait_registered(master, timeout=90)


def _master_killed(deployment: Deployment, topic: str, acked: dict) -> None:
    line, ours = deployment.line, deployment.ours
    master, slave = deployment.brokers["a0"], deployment.brokers["a1"]
    killed = time.monotonic()
    master.kill()
    expected = {"0": slave.addr} if line.is5 else {"1": slave.addr}  # 5.x: the slave acts as master
    for i in range(len(ours.procs)):
        rmq.wait_until(lambda i=i: addrs_of(ours.route(topic, i), "broker-a") == expected, 15,
                       f"worker {i}: route of {topic} without the dead master")
    gone_after = time.monotonic() - killed
    rmq.wait_until(lambda: addrs_of(_apache_route(deployment, topic), "broker-a") == expected, 15,
                   "Apache's NameServer drops the master too")
    assert _standard(ours.route(topic), line) == _standard(_apache_route(deployment, topic), line)
    print(f"master's address left our routes {gone_after:.2f} s after the kill")

    consumer = deployment.clients.consumer(ours.addrs, topic, f"g_failm{line.name}", expect=300, **SEND)
    received = consumer.wait_done(300).received()
    assert set(received) == set(acked)

    master.restart()
    deployment.wait_registered(master, timeout=90)
    for i in range(len(ours.procs)):
        rmq.wait_until(lambda i=i: addrs_of(ours.route(topic, i), "broker-a") == {"0": master.addr, "1": slave.addr},
                       60, f"worker {i}: master back in the route of {topic}")


def test_rolling_restart_of_every_worker_keeps_every_route(deployment: Deployment):
    """SIGTERM each worker in turn and start it again: the brokers register with the new processes within their
    30 s period and every route is as before."""
    ours = deployment.ours
    topics = sorted(_topics(deployment))
    before = {t: _standard(ours.route(t)) for t in topics}
    assert any(t.startswith("E2E") for t in topics)
    for i in range(len(ours.procs)):
        ours.restart(i)
    for i in range(len(ours.procs)):
        rmq.wait_until(lambda i=i: metric_sum(ours.url(i), "namesrv_broker_registrations_total")
                       >= len(deployment.brokers), 45, f"every broker registered with restarted worker {i}")
    ages = {(b["brokerName"], b["brokerId"]): b["ageMillis"] for b in ours.brokers()}
    assert set(ages) == {(b.broker_name, b.broker_id) for b in deployment.brokers.values()}
    for i in range(len(ours.procs)):
        assert {t: _standard(ours.route(t, i)) for t in topics} == before


def _topics(deployment: Deployment) -> list[str]:
    from tests.interop.conftest import http_json

    return http_json(deployment.ours.url() + "/v1/topics")["topicList"]


def _apache_route(deployment: Deployment, topic: str) -> dict | None:
    reply = native(deployment.apache.port, 105, {"topic": topic})
    if reply.code == 17:
        return None
    assert reply.code == 0, (reply.code, reply.remark)
    return fastjson.loads(reply.body)


def _standard(route: dict | None, line: rmq.Line = rmq.LINE5) -> dict | None:
    """A route with string map keys and broker entries in name order: the shape both NameServers agree on.
    Against a 4.x NameServer, without `enableActingMaster` (a 5.x field its BrokerData lacks: we answer as 5.x)."""
    if route is None:
        return None
    out = dict(route)
    drop = () if line.is5 else ("enableActingMaster",)
    out["brokerDatas"] = sorted(({**{k: v for k, v in bd.items() if k not in drop},
                                  "brokerAddrs": {str(k): v for k, v in bd["brokerAddrs"].items()}}
                                 for bd in route["brokerDatas"]), key=lambda bd: bd["brokerName"])
    out["queueDatas"] = sorted(route["queueDatas"], key=lambda q: q["brokerName"])
    out.setdefault("filterServerTable", {})
    return out
