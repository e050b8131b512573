"""Issue 23 with stock RocketMQ 5.5.0 brokers: a group of three in controller mode whose `controllerAddr` and
`namesrvAddr` name two of our workers (NAMESRV_CONTROLLER=true, one Redis). The brokers get their ids from us,
one elects itself master and the others follow it; mqadmin reads the controller's view from us; kill -9 of the
master hands the group to a replica of the SyncStateSet, the routes show it, the producer carries on and no
acknowledged message is missing at the consumer; the old master, restarted, rejoins as a slave under a newer
epoch. Apache's controller in the same scenario: benchmarks/controller_failover.py.
"""

from __future__ import annotations

import signal
import time

import pytest

from service.remoting import fastjson
from tests.interop import controller
from tests.interop import rocketmq as rmq
from tests.interop.conftest import native
from tests.interop.controller import (
    in_sync,
    kill_master,
    nothing_lost,
    our_controller_group,
    registered_addrs,
    route_master,
    store_host,
)
from tests.redis_server import RedisServer

pytestmark = [pytest.mark.interop, pytest.mark.integration]

GROUP, CLUSTER, TOPIC = "broker-ctl", "CtlCluster", "CtlTopic"


@pytest.fixture(scope="module")
def group():
    server = RedisServer().start()
    try:
        with our_controller_group(server.url, "ctl", CLUSTER, GROUP, {}, "interop-controller-") as g:
            yield g.ours, g.brokers, g.ports, g.clients
    finally:
        server.cleanup()


def replica_info(ports: list[int]) -> dict:
    return controller.replica_info(ports, GROUP)


def test_brokers_boot_through_our_controller_and_mqadmin_reads_it(group):
    ours, brokers, ports, clients = group
    addrs = registered_addrs(ports[1], GROUP)  # the other worker sees the same
    assert sorted(addrs.values()) == sorted(b.addr for b in brokers)
    info = replica_info(ports)
    assert info["masterAddress"] == addrs[0] and int(info["masterEpoch"]) >= 1
    rmq.wait_until(lambda: len(in_sync(ports, GROUP)) == 3, 60, "every replica in the SyncStateSet")
    out = clients.mqadmin([["getControllerMetaData", "-a", ours.addr(0)],
                           ["getSyncStateSet", "-a", ours.addr(1), "-b", GROUP],
                           ["getBrokerEpoch", "-n", ours.addrs, "-b", GROUP]])
    assert ours.addr(0) in out[0], out[0]  # every worker answers as the leader at the address it was reached
    for b in brokers:
        assert b.addr in out[1], out[1]
    assert f"masterAddress: {addrs[0]}" in out[1] or addrs[0] in out[1], out[1]
    assert "epoch" in out[2].lower(), out[2]


def test_kill_9_of_the_master_fails_over_to_an_in_sync_replica_and_loses_nothing(group):
    ours, brokers, ports, clients = group
    out = clients.mqadmin([["updateTopic", "-n", ours.addrs, "-c", CLUSTER, "-t", TOPIC, "-r", "4", "-w", "4"]])
    assert "success" in out[0], out[0]
    producer = clients.producer(ours.addrs, TOPIC, 100_000, **{"interval-ms": 20, "timeout-s": 300,
                                                               "poll-ms": 1000, "retry-ms": 50}).wait_started()
    consumer = clients.consumer(ours.addrs, TOPIC, "ctl_consumer").wait_started()
    try:
        rmq.wait_until(lambda: len(in_sync(ports, GROUP)) == 3, 60, "every replica in the SyncStateSet")
        epoch_before = int(replica_info(ports)["masterEpoch"])
        synced = in_sync(ports, GROUP)
        time.sleep(2)
        try:
            f = kill_master(brokers, ports[0], TOPIC, producer, timeout=90)
        except TimeoutError:
            fails = producer.failures()
            print(f"diagnostics: {len(fails)} failed sends, last {fails[-3:]}; in sync {in_sync(ports, GROUP)}; "
                  f"replica info {replica_info(ports)}; route master {route_master(ports[0], TOPIC)}; "
                  f"registered {registered_addrs(ports[0], GROUP)}")
            for b in brokers:
                print(f"--- {b.addr} alive={b.alive}\n{b.tail(15)}")
            raise
        assert f.new_master in synced and f.new_master != f.killed
        assert route_master(ports[1], TOPIC) == f.new_master  # both workers route to it
        info = replica_info(ports)
        assert info["masterAddress"] == f.new_master and int(info["masterEpoch"]) > epoch_before
        victim = next(b for b in brokers if b.addr == f.killed)
        victim.restart()
        rmq.wait_until(lambda: f.killed in registered_addrs(ports[0], GROUP).values(), 120,
                       "the old master registered again")
        addrs = registered_addrs(ports[0], GROUP)
        assert addrs[0] == f.new_master and f.killed in {a for i, a in addrs.items() if i != 0}
        assert int(replica_info(ports)["masterEpoch"]) == int(info["masterEpoch"])  # it did not take over
        time.sleep(2)
    finally:
        producer.proc.signal_stop()
        producer.proc.wait_stopped(30)
    nothing_lost(producer, consumer)
    print(f"failover through our controller: {f}")


def _master_and_others(ports: list[int]) -> tuple[str, dict[int, str]]:
    addrs = registered_addrs(ports[0], GROUP)
    return addrs[0], {i: a for i, a in addrs.items() if i != 0}


def test_a_worker_killed_with_the_master_still_hands_the_group_over(group):
    """SIGKILL the master and, at the same moment, a worker: if that worker held the master's controller
    connection, nobody sees it close, and the master's heartbeats expiring (the broker's 10 s timeout, then a
    worker's scan) elects instead; brokers move to the surviving worker's address. Then the worker comes back."""
    ours, brokers, ports, clients = group
    rmq.wait_until(lambda: len(in_sync(ports, GROUP)) == 3, 90, "every replica in the SyncStateSet")
    producer = clients.producer(ours.addrs, TOPIC, 100_000, prefix="w", **{
        "interval-ms": 20, "timeout-s": 300, "poll-ms": 1000, "retry-ms": 50}).wait_started()
    consumer = clients.consumer(ours.addrs, TOPIC, "ctl_consumer_w").wait_started()
    try:
        master, _ = _master_and_others(ports)
        synced = in_sync(ports, GROUP)
        epoch = int(replica_info(ports)["masterEpoch"])
        victim = next(b for b in brokers if b.addr == master)
        time.sleep(2)
        ours.procs[0].stop(signal.SIGKILL)
        victim.kill()
        survivor = [ports[1]]
        new = rmq.wait_until(lambda: (m := route_master(ports[1], TOPIC)) and m != master and m, 60,
                             "another master in the route")
        assert new in synced
        assert int(replica_info(survivor)["masterEpoch"]) > epoch
        ours.restart(0, stop=False)
        victim.restart()
        rmq.wait_until(lambda: master in registered_addrs(ports[0], GROUP).values(), 120,
                       "the old master registered again, with the restarted worker too")
        assert registered_addrs(ports[0], GROUP)[0] == new
    finally:
        producer.proc.signal_stop()
        producer.proc.wait_stopped(30)
    acked = producer.acked()
    assert len(acked) > 100 and any(
        p[6:] and int(p[5]) > 0 and store_host(p[6]) == new for p in producer.lines("OK"))
    rmq.wait_until(lambda: set(acked) <= set(consumer.received()), 120, "every acknowledged message consumed")
    consumer.stop()


def test_mqadmin_moves_the_master_changes_the_config_and_cleans_a_dead_replica(group):
    ours, brokers, ports, clients = group
    # a designated master must be alive and in the SyncStateSet (unclean elections are off)
    rmq.wait_until(lambda: len(in_sync(ports, GROUP)) >= 2, 90, "a replica in the SyncStateSet besides the master")
    master, others = _master_and_others(ports)
    synced = in_sync(ports, GROUP)
    target_id, target = next((i, a) for i, a in sorted(others.items()) if a in synced)
    out = clients.mqadmin([["electMaster", "-a", ours.addr(1), "-c", CLUSTER, "-bn", GROUP, "-b", str(target_id)],
                           ["getControllerConfig", "-a", ours.addr(0)],
                           ["updateControllerConfig", "-a", ours.addr(0), "-k", "enableElectUncleanMaster",
                            "-v", "true"],
                           ["getControllerConfig", "-a", ours.addr(1)]])
    assert target in out[0], out[0]
    # the brokers were told (NOTIFY_BROKER_ROLE_CHANGED): the target registers as master, the old one as a slave
    rmq.wait_until(lambda: registered_addrs(ports[1], GROUP).get(0) == target, 60, "the designated master routed")
    rmq.wait_until(lambda: master in registered_addrs(ports[1], GROUP).values(), 60, "the old master a slave")
    assert "enableElectUncleanMaster" in out[1] and "false" in out[1].split("enableElectUncleanMaster", 1)[1][:40]
    assert "true" in out[3].split("enableElectUncleanMaster", 1)[1][:40], out[3]  # the other worker agrees
    # a replica that died is cleaned from the set's metadata by id (not a living one: -l is not given)
    _, others = _master_and_others(ports)
    dead_id, dead = sorted(others.items())[0]
    next(b for b in brokers if b.addr == dead).kill()
    rmq.wait_until(lambda: dead not in in_sync(ports, GROUP), 60, "the dead replica out of the SyncStateSet")
    rmq.wait_until(lambda: dead not in registered_addrs(ports[0], GROUP).values(), 60, "the dead replica gone")
    out = clients.mqadmin([["cleanBrokerMetadata", "-a", ours.addr(0), "-c", CLUSTER, "-bn", GROUP,
                            "-b", str(dead_id)]])
    reply = native(ports[1], 1006, body=fastjson.dumps([GROUP], standard=True))
    info = fastjson.loads(reply.body)["replicasInfoTable"][GROUP]
    listed = {r["brokerAddress"] for r in info.get("inSyncReplicas", []) + info.get("notInSyncReplicas", [])}
    assert dead not in listed, (out[0], info)
