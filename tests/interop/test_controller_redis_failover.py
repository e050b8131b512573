"""Issue 23, item 3's Redis leg: Redis fails over (Sentinel) while our controller elects, with stock 5.5.0
brokers. Two workers with NAMESRV_CONTROLLER=true run on a Sentinel topology (a primary, two replicas, three
sentinels) with NAMESRV_REDIS_WAIT_REPLICAS=1, so an election is acknowledged (and told to brokers) only once a
replica holds it. A producer sends with allAckInSyncStateSet; at one instant the broker master and the Redis
primary are SIGKILLed. A replica of the SyncStateSet becomes master under a newer epoch, no broker is ahead of
the controller's epoch (nothing rolled back), the routes follow, nothing acknowledged is lost, and the old master
rejoins as a slave.
"""

from __future__ import annotations

import time
import uuid

import pytest

from service.store.controller import ControllerKeys
from tests.interop import controller
from tests.interop import rocketmq as rmq
from tests.namesrv_load import topology_env, topology_url
from tests.redis_topology import SentinelTopology

pytestmark = [pytest.mark.interop, pytest.mark.integration]

GROUP, CLUSTER, TOPIC = "broker-ctl", "CtlSentinelCluster", "CtlSentinelTopic"


@pytest.fixture(scope="module")
def deployment():
    topo = SentinelTopology(replicas=2, timeout=60).__enter__()
    prefix = "cs" + uuid.uuid4().hex[:6]
    try:
        with controller.our_controller_group(topology_url(topo), prefix, CLUSTER, GROUP,
                                  {**topology_env(topo), "redis_wait_replicas": 1},
                                  "interop-controller-sentinel-") as g:
            yield topo, prefix, g.ours, g.brokers, g.ports, g.clients
    finally:
        topo.cleanup()


def replica_info(ports: list[int]) -> dict:
    return controller.replica_info(ports, GROUP)


def epochs_ahead_of_the_controller(topo: SentinelTopology, prefix: str) -> list[str]:
    """Brokers whose own last epoch (sent in their controller heartbeats) is newer than the controller's master
    epoch: what an election lost in the failover, after a broker acted on it, would leave."""
    k = ControllerKeys(prefix)
    with topo.master_client() as r:
        epoch = int(r.hget(k.group(GROUP), "mepoch") or 0)
        ahead = []
        for bid in r.hkeys(k.replicas(GROUP)):
            told = r.hget(k.heartbeat(CLUSTER, GROUP, int(bid)), "epoch")
            if told is not None and int(told) > epoch:
                ahead.append(f"broker {bid} at epoch {told}, controller at {epoch}")
        return ahead


def test_redis_primary_killed_with_the_broker_master_elects_once_and_loses_nothing(deployment):
    topo, prefix, ours, brokers, ports, clients = deployment
    out = clients.mqadmin([["updateTopic", "-n", ours.addrs, "-c", CLUSTER, "-t", TOPIC, "-r", "4", "-w", "4"]])
    assert "success" in out[0], out[0]
    producer = clients.producer(ours.addrs, TOPIC, 100_000, prefix="s", **{
        "interval-ms": 20, "timeout-s": 300, "poll-ms": 1000, "retry-ms": 50}).wait_started()
    consumer = clients.consumer(ours.addrs, TOPIC, "ctl_sentinel_consumer").wait_started()
    try:
        rmq.wait_until(lambda: len(controller.in_sync(ports, GROUP)) == 3, 90, "every replica in the SyncStateSet")
        synced = controller.in_sync(ports, GROUP)
        epoch = int(replica_info(ports)["masterEpoch"])
        old_redis = topo.master_node()
        time.sleep(2)
        # the Redis primary dies at the instant the broker master does: the connection-close election and the
        # sentinels' failover race; whatever the primary had not replicated is gone with it
        f = controller.kill_master(brokers, ports[0], TOPIC, producer, timeout=120, at_kill=old_redis.kill)
        assert f.new_master in synced and f.new_master != f.killed
        assert controller.route_master(ports[1], TOPIC) == f.new_master
        info = replica_info(ports)
        assert info["masterAddress"] == f.new_master and int(info["masterEpoch"]) > epoch
        assert topo.master_node() is not old_redis
        assert not epochs_ahead_of_the_controller(topo, prefix)
        topo.restart(old_redis)  # back as a replica of the new primary
        victim = next(b for b in brokers if b.addr == f.killed)
        victim.restart()
        rmq.wait_until(lambda: f.killed in controller.registered_addrs(ports[1], GROUP).values(), 120,
                       "the old master registered again")
        addrs = controller.registered_addrs(ports[1], GROUP)
        assert addrs[0] == f.new_master and f.killed in {a for i, a in addrs.items() if i != 0}
        assert int(replica_info(ports)["masterEpoch"]) == int(info["masterEpoch"])  # it did not take over
        assert not epochs_ahead_of_the_controller(topo, prefix)
        time.sleep(2)
    finally:
        producer.proc.signal_stop()
        producer.proc.wait_stopped(30)
    controller.nothing_lost(producer, consumer)
    print(f"failover through our controller while Redis failed over: {f}")
