"""RocketMQ 5's controller rules over the Redis controller store: what each request answers (code, remark, header,
body as plain data), Java's remarks, and which brokers an election must notify. Transport-neutral: the native
door encodes the answers (service/remoting/controller_handlers.py). Protocol: docs/controller-protocol.md.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from service.core.access import Role
from service.errors import retry_while_store_unavailable
from service.store.controller import (
    ALTER_SYNC_STATE_SET_FAILED,
    BROKER_ID_INVALID,
    BROKER_NEED_TO_BE_REGISTERED,
    CONTROLLER_TRIGGER,
    DEFAULT_HEARTBEAT_TIMEOUT_MS,
    ELECT_MASTER_FAILED,
    FENCED_MASTER_EPOCH,
    FENCED_SYNC_STATE_SET_EPOCH,
    INVALID_CLEAN_BROKER_METADATA,
    INVALID_MASTER,
    MASTER_NOT_AVAILABLE,
    MASTER_STILL_EXIST,
    SUCCESS,
    ControllerStore,
    GroupView,
    Reply,
)

if TYPE_CHECKING:
    from service.core.nameserver import NameServer

METADATA_NOT_EXIST = 2008
INVALID_REQUEST = 2005


@dataclass
class Answer:
    """One controller reply: RocketMQ code, remark, response header fields, body (plain data, or None)."""

    code: int = SUCCESS
    remark: str | None = None
    header: dict[str, Any] = field(default_factory=dict)
    body: Any = None
    notify: list[str] = field(default_factory=list)  # broker addresses to send NOTIFY_BROKER_ROLE_CHANGED


def _java(v: Any) -> str:
    """A value as Java's String.format prints it (null for None)."""
    return "null" if v is None else str(v)


def sync_state_set_body(g: GroupView | None) -> dict[str, Any]:
    if g is None:
        return {"syncStateSet": [], "syncStateSetEpoch": 0}
    return {"syncStateSet": sorted(g.sync_state_set), "syncStateSetEpoch": g.sync_state_set_epoch}


def member_group(g: GroupView) -> dict[str, Any]:
    return {"brokerAddrs": dict(sorted(g.replicas.items())), "brokerName": g.name, "cluster": g.cluster}


ELECTION_RESULTS = {SUCCESS: "new_master_elected", MASTER_STILL_EXIST: "keep_current_master",
                    MASTER_NOT_AVAILABLE: "no_master_elected", ELECT_MASTER_FAILED: "no_master_elected",
                    -1: "already_elected"}  # Java's election_result labels, and ours for a based-on epoch passed


class ControllerMetrics:
    """Elections counted by result (as the Java controller's election_total) and timed, on the worker's registry."""

    def __init__(self, registry: Any) -> None:
        from prometheus_client import Counter, Histogram

        self.elections = Counter("namesrv_controller_elections_total", "controller master elections by result",
                                 ["trigger", "result"], registry=registry)
        self.election_seconds = Histogram("namesrv_controller_election_seconds", "controller election duration",
                                          registry=registry)


class Controller:
    """The controller of one registry; every worker has one and any of them answers any request."""

    def __init__(self, store: ControllerStore, *, unclean: bool = False, notify: bool = True,
                 switches: Callable[[], tuple[bool, bool]] | None = None) -> None:
        self.store = store
        self._fixed = (unclean, notify)
        self._switches = switches  # (unclean, notify) read per request: runtime switches shared through Redis
        self.metrics: ControllerMetrics | None = None

    @property
    def unclean(self) -> bool:
        return (self._switches or (lambda: self._fixed))()[0]

    @property
    def notify(self) -> bool:
        return (self._switches or (lambda: self._fixed))()[1]

    async def heartbeat(self, cluster: str, name: str, addr: str, broker_id: int | None, *, timeout_ms=None,
                        epoch=None, max_offset=None, confirm_offset=None, election_priority=None,
                        connection: str = "") -> Answer:
        if broker_id is None:
            return Answer(INVALID_REQUEST, "Heart beat with empty brokerId")
        await self.store.heartbeat(cluster, name, broker_id, addr, timeout_ms=timeout_ms, epoch=epoch,
                                   max_offset=max_offset, confirm_offset=confirm_offset,
                                   election_priority=election_priority, connection=connection)
        return Answer(SUCCESS, "Heart beat success")

    async def next_broker_id(self, cluster: str, name: str) -> Answer:
        nid = await self.store.next_broker_id(name)
        return Answer(header={"clusterName": cluster, "brokerName": name, "nextBrokerId": nid})

    async def apply_broker_id(self, cluster: str, name: str, broker_id: int, check_code: str) -> Answer:
        r = await self.store.apply_broker_id(cluster, name, broker_id, check_code)
        header = {"clusterName": cluster, "brokerName": name}
        if r.code == BROKER_ID_INVALID:
            if r.group is None:
                return Answer(r.code, f"Broker-set: {name} hasn't been registered in controller, but broker try to "
                                      f"apply brokerId: {broker_id}", header)
            return Answer(r.code, f"Fail to apply brokerId: {broker_id} in broker-set: {name}", header)
        return Answer(header=header)

    async def register_broker(self, cluster: str, name: str, broker_id: int, addr: str) -> Answer:
        r = await self.store.register_broker(cluster, name, broker_id, addr)
        header: dict[str, Any] = {"clusterName": cluster, "brokerName": name}  # Java sets it before any check
        if r.code == BROKER_NEED_TO_BE_REGISTERED:
            if r.group is None:
                return Answer(r.code, f"Broker-set: {name} hasn't been registered in controller", header)
            return Answer(r.code, f"BrokerId: {broker_id} hasn't been registered in broker-set: {name}", header)
        g = r.group
        if r.extra and g is not None:  # a master exists and is alive
            header.update(masterBrokerId=g.master, masterAddress=g.master_address, masterEpoch=g.master_epoch,
                          syncStateSetEpoch=g.sync_state_set_epoch)
        return Answer(header=header, body=sync_state_set_body(g))

    async def replica_info(self, name: str) -> Answer:
        g = await self.store.group(name)
        if g is None:
            return Answer(METADATA_NOT_EXIST, "Broker metadata is not existed")
        return Answer(header={"masterBrokerId": g.master, "masterAddress": g.master_address,
                              "masterEpoch": g.master_epoch}, body=sync_state_set_body(g))

    async def sync_state_data(self, names: list[str]) -> Answer:
        if not names:
            return Answer()
        table = {}
        for name, g in (await self.store.groups(names)).items():
            if g is None:
                continue

            def replica(bid: int, g: GroupView = g) -> dict[str, Any]:
                return {"alive": bid in g.alive, "brokerAddress": g.replicas[bid], "brokerId": bid,
                        "brokerName": g.name}

            info = {
                "inSyncReplicas": [replica(b) for b in sorted(g.replicas) if b in g.sync_state_set],
                "masterAddress": g.master_address, "masterBrokerId": g.master, "masterEpoch": g.master_epoch,
                "notInSyncReplicas": [replica(b) for b in sorted(g.replicas) if b not in g.sync_state_set],
                "syncStateSetEpoch": g.sync_state_set_epoch}
            table[name] = {k: v for k, v in info.items() if v is not None}  # fastjson leaves null fields out
        return Answer(body={"replicasInfoTable": table})

    async def broker_sets(self, names: list[str]) -> list[dict[str, Any]]:
        """Every known set (or the named ones that exist), for operators: master, epochs, SyncStateSet, replicas."""
        out = []
        for name, g in sorted((await self.store.groups(names)).items()):
            if g is None:
                continue
            out.append({"brokerName": name, "clusterName": g.cluster, "masterBrokerId": g.master,
                        "masterAddress": g.master_address, "masterEpoch": g.master_epoch,
                        "syncStateSet": sorted(g.sync_state_set), "syncStateSetEpoch": g.sync_state_set_epoch,
                        "nextBrokerId": g.next_id,
                        "replicas": [{"brokerId": b, "brokerAddress": a, "alive": b in g.alive,
                                      "inSync": b in g.sync_state_set} for b, a in sorted(g.replicas.items())]})
        return out

    async def alter_sync_state_set(self, name: str, master_id: int | None, master_epoch: int,
                                   new_set: list[int], sync_state_set_epoch: int) -> Answer:
        r = await self.store.alter_sync_state_set(name, master_id, master_epoch, new_set, sync_state_set_epoch)
        g = r.group
        if r.code == SUCCESS:
            return Answer(header={"newSyncStateSetEpoch": r.extra}, body=sync_state_set_body(g))
        remark = {
            INVALID_MASTER: f"Rejecting alter syncStateSet request because the current leader is:"
                            f"{{{_java(g.master if g else None)}}}, not {{{_java(master_id)}}}",
            FENCED_MASTER_EPOCH: f"Rejecting alter syncStateSet request because the current master epoch is:"
                                 f"{{{g.master_epoch if g else 0}}}, not {{{master_epoch}}}",
            FENCED_SYNC_STATE_SET_EPOCH: f"Rejecting alter syncStateSet request because the current syncStateSet "
                                         f"epoch is:{{{g.sync_state_set_epoch if g else 0}}}, "
                                         f"not {{{sync_state_set_epoch}}}",
        }.get(r.code)
        if r.code == ALTER_SYNC_STATE_SET_FAILED:
            if g is None:
                remark = "Broker metadata is not existed"
            elif g.sync_state_set == frozenset(new_set):
                remark = "The newSyncStateSet is equal with oldSyncStateSet, no needed to update syncStateSet"
            else:
                remark = (f"Rejecting alter syncStateSet request because the newSyncStateSet don't contains origin "
                          f"leader {{{g.master}}}")
        elif remark is None:
            remark = f"Rejecting alter syncStateSet request because the replicas {{{r.extra}}} " + (
                "don't exist" if r.code == 2003 else "don't alive")
        return Answer(r.code, remark, header={"newSyncStateSetEpoch": 0})

    async def elect_master(self, cluster: str, name: str, broker_id: int | None, designate: bool = False,
                           based_on_epoch: int | None = None) -> Answer:
        started = time.perf_counter()
        r = await self.store.elect_master(name, broker_id, designate=designate, unclean=self.unclean,
                                          based_on_epoch=based_on_epoch)
        if self.metrics is not None and r.code in ELECTION_RESULTS:
            trigger = "admin" if designate else "controller" if broker_id in (None, CONTROLLER_TRIGGER) else "broker"
            self.metrics.elections.labels(trigger=trigger, result=ELECTION_RESULTS[r.code]).inc()
            self.metrics.election_seconds.observe(time.perf_counter() - started)
        return self.election_answer(name, r)

    def election_answer(self, name: str, r: Reply) -> Answer:
        g = r.group
        if r.code == BROKER_NEED_TO_BE_REGISTERED or g is None:
            return Answer(BROKER_NEED_TO_BE_REGISTERED, "Broker hasn't been registered")
        header = {"masterBrokerId": g.master, "masterAddress": g.master_address, "masterEpoch": g.master_epoch,
                  "syncStateSetEpoch": g.sync_state_set_epoch}
        if r.code == SUCCESS:
            notify = [g.replicas[b] for b in sorted(g.alive)] if self.notify else []
            return Answer(header=header, body={"brokerMemberGroup": member_group(g),
                                               "syncStateSet": sorted(g.sync_state_set)}, notify=notify)
        if r.code == MASTER_STILL_EXIST:
            return Answer(r.code, f"The old master {g.master} is still alive, not need to elect new master for "
                                  f"broker {name}", header, {"syncStateSet": sorted(g.sync_state_set)})
        if r.code == MASTER_NOT_AVAILABLE:
            return Answer(r.code, "Old master has down and failed to elect a new broker master")
        if r.code == ELECT_MASTER_FAILED:
            return Answer(r.code, "Failed to elect a new master")
        return Answer(r.code, f"Broker set {name} moved past the master epoch this election was based on")

    async def clean_broker_data(self, cluster: str | None, name: str, ids: str | None, living: bool) -> Answer:
        r = await self.store.clean_broker_data(cluster, name, ids, living)
        if r.code == SUCCESS:
            return Answer()
        remark = {
            0: f"Broker {name} is not existed,clean broker data failure.",
            1: f"Broker {name} is still alive, clean up failure",
            2: "Please set the option <brokerControllerIdsToClean> according to the format, exception: "
               f"java.lang.NumberFormatException: For input string: \"{ids}\"",
            3: f"Broker [{name},  {ids}] is still alive, clean up failure",
        }[r.extra]
        return Answer(INVALID_CLEAN_BROKER_METADATA, remark)


_controllers: weakref.WeakKeyDictionary[Any, Controller] = weakref.WeakKeyDictionary()

# Who tells brokers about a new master (the native door installs its NOTIFY_BROKER_ROLE_CHANGED sender on import);
# the core calls them after the elections it makes itself.
NOTIFIERS: list[Callable[[Answer], None]] = []


async def controller_scan(ns: NameServer, *, batch: int = 200, scan_inactive: bool = True) -> list[Answer]:
    """A worker's controller tick: expire heartbeats and re-elect each set whose master expired (only the worker
    whose expiry removed the master's entry gets that set, and its election is based on the master epoch it saw,
    so one election per loss however many workers tick), then the inactive-master safety net (a worker that
    died between the two). New masters are announced through NOTIFIERS."""
    c = controller_of(ns)
    answers: list[Answer] = []
    while True:
        more, _, elect = await c.store.expire(batch=batch)
        for name, epoch in elect:
            answers.append(await c.elect_master("", name, CONTROLLER_TRIGGER, based_on_epoch=epoch))
        if not more:
            break
    if scan_inactive:
        for name, epoch in await c.store.inactive_masters():
            answers.append(await c.elect_master("", name, CONTROLLER_TRIGGER, based_on_epoch=epoch))
    _announce(answers)
    return answers


async def connection_closed(ns: NameServer, connection: str, members: list[tuple[str, str, int]]) -> list[Answer]:
    """A broker's connection closed (Java's BrokerHousekeepingService): the brokers whose latest heartbeat came on
    it are no longer alive, and a master among them is re-elected now, based on the epoch it had."""
    c = controller_of(ns)

    async def drop_and_elect() -> list[Answer]:
        _, elect = await c.store.drop_connection(connection, members)
        return [await c.elect_master("", name, CONTROLLER_TRIGGER, based_on_epoch=epoch) for name, epoch in elect]

    # Redis failing over as the broker dies: keep trying for as long as the broker's heartbeat timeout (then the
    # expiry scan elects anyway), so the election waits for the failover, not for the timeout. Repeating is safe:
    # the drop only removes entries whose latest heartbeat came on this connection, and the election is based on
    # the epoch the drop saw (a drop done by a failed try leaves its election to the inactive-master scan).
    answers = await retry_while_store_unavailable(drop_and_elect, within_s=DEFAULT_HEARTBEAT_TIMEOUT_MS / 1000)
    _announce(answers)
    return answers


def _announce(answers: list[Answer]) -> None:
    for a in answers:
        if a.code == SUCCESS:
            for notify in NOTIFIERS:
                notify(a)


# UPDATE_CONTROLLER_CONFIG: the Java controller's names of the switches we have; other known names are accepted
# and ignored (Java's Configuration.update sets fields it has), the blacklist is refused.
CONTROLLER_CONFIG_NAMES = {"enableElectUncleanMaster": "controllerElectUncleanMaster",
                           "notifyBrokerRoleChanged": "controllerNotifyBrokerRoleChanged"}
CONTROLLER_CONFIG_BLACKLIST = {"configBlackList", "configStorePath", "rocketmqHome"}


async def update_controller_config(ns: NameServer, who: Any, props: dict[str, str]) -> Answer:
    if CONTROLLER_CONFIG_BLACKLIST & set(props):
        return Answer(16, "Can not update config in black list.")
    changes = {CONTROLLER_CONFIG_NAMES[k]: v for k, v in props.items() if k in CONTROLLER_CONFIG_NAMES}
    if changes:
        await ns.update_config(who, changes)
    else:
        ns.access.require(who, Role.ADMIN)
    return Answer()


def controller_of(ns: NameServer) -> Controller:
    """The worker's controller, on the NameServer's Redis and key prefix (built on first use)."""
    c = _controllers.get(ns)
    if c is None:
        store = ControllerStore.beside(ns.store)
        c = _controllers[ns] = Controller(store, switches=lambda: (ns.settings.controller_elect_unclean_master,
                                                                  ns.settings.controller_notify_broker_role_changed))
        c.metrics = ControllerMetrics(ns.metrics.registry)
    return c
