"""RocketMQ 5 brokers in controller mode (automatic master failover) and the controllers they talk to.

Apache's side, the comparison issue 23 asks for: three NameServers each with a controller embedded
(`enableControllerInNamesrv`, a DLedger group of three), brokers naming all three in `controllerAddr`. Ours: our
workers with NAMESRV_CONTROLLER=true answer the controller protocol on their native door, so `controllerAddr` and
`namesrvAddr` name the same addresses. A broker group here is N brokers of one brokerName, all started with
brokerId -1 (the controller gives out ids and picks the master) and allAckInSyncStateSet=true (a message is
acknowledged only once every replica in the SyncStateSet has it: what makes "nothing acknowledged is lost" hold
across a failover).

Measured facts (benchmarks/controller_failover.py, docs/controller-protocol.md §8): Apache's controller elects on
the dead master's channel closing, well before any heartbeat timeout.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from service.remoting import fastjson
from tests.interop import rocketmq as rmq
from tests.interop.conftest import OurNameServer, broker_topics, native
from tests.redis_server import free_port


@dataclass
class ApacheControllers:
    """Three Apache NameServers, each with a DLedger controller embedded: `namesrv` and `controller` are the
    `;`-lists a broker's namesrvAddr and controllerAddr take."""

    line: rmq.Line
    root: Path
    count: int = 3
    procs: list[rmq.ApacheNameServer] = field(default_factory=list)
    ns_ports: list[int] = field(default_factory=list)
    ctl_ports: list[int] = field(default_factory=list)

    def start(self) -> ApacheControllers:
        self.ns_ports = [free_port() for _ in range(self.count)]
        self.ctl_ports = [free_port() for _ in range(self.count)]
        peers = ";".join(f"n{i}-127.0.0.1:{p}" for i, p in enumerate(self.ctl_ports))
        for i, port in enumerate(self.ns_ports):
            self.procs.append(rmq.ApacheNameServer(
                self.line, self.root, port, enableControllerInNamesrv="true", controllerDLegerGroup="interop",
                controllerDLegerPeers=peers, controllerDLegerSelfId=f"n{i}",
                controllerStorePath=self.root / f"controller-n{i}").start())
        for p in self.procs:
            p.wait_listening()
        return self

    @property
    def namesrv(self) -> str:
        return ";".join(f"127.0.0.1:{p}" for p in self.ns_ports)

    @property
    def controller(self) -> str:
        return ";".join(f"127.0.0.1:{p}" for p in self.ctl_ports)

    @property
    def route_port(self) -> int:
        return self.ns_ports[0]


def start_group(line: rmq.Line, root: Path, cluster: str, name: str, namesrv: str, controller: str, size: int = 3,
                **extra: object) -> list[rmq.Broker]:
    """`size` brokers of one brokerName in controller mode (brokerId -1: the controller assigns ids)."""
    conf: dict[str, object] = {"brokerRole": "SLAVE", "enableControllerMode": "true", "controllerAddr": controller,
                               "allAckInSyncStateSet": "true", "enableSlaveActingMaster": "false", **extra}
    return [rmq.Broker(line, root, cluster, name, -1, namesrv, **conf).start() for _ in range(size)]


@dataclass
class OurGroup:
    """Our two workers as controllers and name servers, a booted broker set of three using them, and clients."""

    ours: OurNameServer
    brokers: list[rmq.Broker]
    ports: list[int]  # the workers' native ports
    clients: rmq.Clients


@contextmanager
def our_controller_group(redis_url: str, prefix: str, cluster: str, name: str, env: dict[str, object],
                         root_prefix: str) -> Iterator[OurGroup]:
    """Workers with NAMESRV_CONTROLLER=true (plus `env`) on `redis_url`, three brokers of `name` naming them as
    namesrvAddr and controllerAddr, until all three are registered and one is master; stopped on exit."""
    if not rmq.built():
        rmq.build()
    ours = OurNameServer(redis_url, prefix, {"controller": "true", **env}).start()
    root = rmq.temp_root(root_prefix)
    brokers = start_group(rmq.LINE5, root, cluster, name, ours.addrs, ours.addrs)
    ports = [p.remoting_port for p in ours.procs]
    try:
        rmq.wait_until(lambda: len(registered_addrs(ports[0], name)) == 3 and 0 in registered_addrs(ports[0], name),
                       120, "three brokers registered, one of them master")
        yield OurGroup(ours, brokers, ports, rmq.Clients(rmq.LINE5, root))
    finally:
        rmq.stop_all(brokers)
        ours.stop()


def registered_addrs(ns_port: int, name: str) -> dict[int, str]:
    """brokerId -> address of `name` in a NameServer's cluster info (106)."""
    reply = native(ns_port, 106)
    if reply.code != 0 or not reply.body:
        return {}
    entry = fastjson.loads(reply.body).get("brokerAddrTable", {}).get(name) or {}
    return {int(k): v for k, v in (entry.get("brokerAddrs") or {}).items()}


def route_master(ns_port: int, topic: str) -> str | None:
    """The id-0 address of the topic's route (105), as producers see it."""
    reply = native(ns_port, 105, {"topic": topic})
    if reply.code != 0 or not reply.body:
        return None
    for bd in fastjson.loads(reply.body).get("brokerDatas", []):
        addrs = {int(k): v for k, v in (bd.get("brokerAddrs") or {}).items()}
        if 0 in addrs:
            return addrs[0]
    return None


def in_sync(ctl_ports: list[int], name: str) -> list[str]:
    """The addresses in the group's SyncStateSet (1006 CONTROLLER_GET_SYNC_STATE_DATA, asked of each controller
    until the leader answers)."""
    for port in ctl_ports:
        try:
            reply = native(port, 1006, body=fastjson.dumps([name], standard=True))
        except OSError:
            continue
        if reply.code == 0 and reply.body:
            info = (fastjson.loads(reply.body).get("replicasInfoTable") or {}).get(name) or {}
            return sorted(r["brokerAddress"] for r in info.get("inSyncReplicas") or [])
    return []


def replica_info(ctl_ports: list[int], name: str) -> dict:
    """CONTROLLER_GET_REPLICA_INFO (1004) of a set, asked of the last controller: masterAddress, masterEpoch..."""
    reply = native(ctl_ports[-1], 1004, {"brokerName": name})
    assert reply.code == 0, reply.remark
    return reply.ext_fields


def store_host(offset_msg_id: str) -> str:
    """The broker address an offset message id names (IPv4: 4 bytes address, 4 bytes port, 8 bytes offset)."""
    raw = bytes.fromhex(offset_msg_id)
    return f"{'.'.join(str(b) for b in raw[:4])}:{int.from_bytes(raw[4:8], 'big')}"


@dataclass
class Failover:
    """What one kill -9 of a group's master did, in ms from the kill."""

    killed: str
    new_master: str
    route_ms: float  # until the topic's route names another master
    first_send_ms: float | None  # until the first message acknowledged by the new master (None: none yet)
    failed_sends: int  # attempts that failed between the kill and that first acknowledgement


def kill_master(brokers: list[rmq.Broker], ns_port: int, topic: str, producer: rmq.ClientRun,
                timeout: float = 90, at_kill: Callable[[], object] | None = None) -> Failover:
    """SIGKILL the group's master while `producer` sends; time the route change and the first send the new master
    acknowledged (producer lines carry the time and the storing broker's address). Waits first until every live
    broker of the group holds the topic: a slave copies topic configs from its master every few seconds, and a new
    master without the topic refuses its messages (autoCreateTopicEnable is off), whichever controller elected it."""
    master = rmq.wait_until(lambda: route_master(ns_port, topic), 60, "a master in the route")
    rmq.wait_until(lambda: all(topic in broker_topics(b) for b in brokers if b.alive), 60,
                   f"every broker of the group holding {topic}")
    victim = next(b for b in brokers if b.addr == master)
    fails_before = len(producer.failures())
    killed_at = time.time() * 1000
    other = threading.Thread(target=at_kill) if at_kill else None
    if other:
        other.start()
    victim.kill()
    if other:
        other.join()
    new = rmq.wait_until(lambda: (m := route_master(ns_port, topic)) and m != master and m, timeout,
                         "another master in the route")
    route_ms = time.time() * 1000 - killed_at

    def first_on_new() -> float | None:
        for p in producer.lines("OK"):
            if len(p) >= 7 and int(p[5]) > killed_at and store_host(p[6]) == new:
                return int(p[5]) - killed_at
        return None

    first = rmq.wait_until(first_on_new, timeout, "a send acknowledged by the new master")
    return Failover(master, new, route_ms, first, len(producer.failures()) - fails_before)


def nothing_lost(producer: rmq.ClientRun, consumer: rmq.ClientRun, at_least: int = 100) -> None:
    """After the producer stopped: every message it had acknowledged (more than `at_least`) reaches the consumer."""
    acked = producer.acked()
    assert len(acked) > at_least
    rmq.wait_until(lambda: set(acked) <= set(consumer.received()), 120, "every acknowledged message consumed")
    consumer.stop()
