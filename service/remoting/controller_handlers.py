"""The RocketMQ 5 controller's request codes on the native door (when the `controller` setting is on): read the
header's extFields and body, call the controller core, encode its answer as the Java controller does, and send
NOTIFY_BROKER_ROLE_CHANGED to a set's live brokers after an election. Codes and rules: docs/controller-protocol.md.

Importing this module registers the handlers (service/remoting/server.py does); BROKER_HEARTBEAT with a brokerId
also refreshes the broker's controller liveness.
"""

from __future__ import annotations

import asyncio
import logging
import os
import weakref
from typing import Any

from service.core.access import Role
from service.core.controller import NOTIFIERS, Answer, connection_closed, controller_of, update_controller_config
from service.errors import NamesrvError
from service.remoting import fastjson
from service.remoting.bodies import BodyError, parse_properties
from service.remoting.codec import RemotingCommand, encode
from service.remoting.handlers import HANDLERS, Call, Reply, handles

log = logging.getLogger(__name__)

BROKER_HEARTBEAT = 904
ALTER_SYNC_STATE_SET = 1001
ELECT_MASTER = 1002
REGISTER_BROKER = 1003
GET_REPLICA_INFO = 1004
GET_METADATA_INFO = 1005
GET_SYNC_STATE_DATA = 1006
NOTIFY_BROKER_ROLE_CHANGED = 1008
UPDATE_CONTROLLER_CONFIG = 1009
GET_CONTROLLER_CONFIG = 1010
CLEAN_BROKER_DATA = 1011
GET_NEXT_BROKER_ID = 1012
APPLY_BROKER_ID = 1013

REQUEST_CODE_NOT_SUPPORTED = 3
NOTIFY_TIMEOUT_S = 3.0  # ControllerManager.doNotifyBrokerRoleChanged's oneway timeout


def _int(call: Call, name: str) -> int | None:
    v = call.ext(name)
    if v is None:
        return None
    try:
        return int(v)
    except ValueError:
        return None


def _text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _reply(a: Answer) -> Reply:
    ext = {k: _text(v) for k, v in a.header.items() if v is not None}
    body = b"" if a.body is None else fastjson.dumps(a.body)
    return Reply(a.code, a.remark, ext or None, body)


def _off(call: Call) -> Reply | None:
    if not call.ns.settings.controller:
        return Reply(REQUEST_CODE_NOT_SUPPORTED, f" request type {call.cmd.code} not supported")
    return None


def _refused(call: Call, cluster: str | None, admin: bool = False) -> Reply | None:
    """Controller writes need a broker credential (of that cluster, when bound) or the admin's; electing a designated
    master and cleaning metadata need the admin's. Open mode allows all, as for the name server's writes."""
    call.ns.access.require(call.who, Role.ADMIN if admin else Role.BROKER, cluster)  # raises Unauthorized/Forbidden
    return None


def controller_handler(code: int, *, write: bool = False):
    def wrap(fn):
        async def run(call: Call) -> Reply:
            off = _off(call)
            if off is not None:
                return off
            if write:
                refused = _refused(call, call.ext("clusterName"))
                if refused is not None:
                    return refused
            return await fn(call)

        return handles(code)(run)

    return wrap


@controller_handler(GET_METADATA_INFO)
async def get_metadata(call: Call) -> Reply:
    """Every worker is "the leader": later requests go to the advertised address, or the one this connection
    reached."""
    addr = _local_address(call)
    me = f"{os.getpid()}"
    return Reply(ext={"group": call.ns.settings.key_prefix, "controllerLeaderId": me,
                      "controllerLeaderAddress": addr, "isLeader": "true", "peers": f"{me}:{addr};"})


def _local_address(call: Call) -> str:
    """The first advertised address when set (behind a Service or load balancer: any worker answers), else the
    local address of this connection."""
    advertised = [a.strip() for a in call.ns.settings.advertised_addrs.split(";") if a.strip()]
    if advertised:
        return advertised[0]
    transport = getattr(call.connection, "transport", None)
    sock = transport.get_extra_info("sockname") if transport is not None else None
    if isinstance(sock, tuple) and len(sock) >= 2:
        host = sock[0]
        return f"[{host}]:{sock[1]}" if ":" in str(host) else f"{host}:{sock[1]}"
    return f"127.0.0.1:{call.ns.settings.remoting_port}"


@controller_handler(GET_NEXT_BROKER_ID)
async def next_broker_id(call: Call) -> Reply:
    c = controller_of(call.ns)
    return _reply(await c.next_broker_id(call.ext("clusterName") or "", call.ext("brokerName") or ""))


@controller_handler(APPLY_BROKER_ID, write=True)
async def apply_broker_id(call: Call) -> Reply:
    bid = _int(call, "appliedBrokerId")
    code = call.ext("registerCheckCode")
    if bid is None or code is None or not call.ext("brokerName"):
        return Reply(2005, "appliedBrokerId, brokerName and registerCheckCode are required")
    c = controller_of(call.ns)
    return _reply(await c.apply_broker_id(call.ext("clusterName") or "", call.ext("brokerName"), bid, code))


@controller_handler(REGISTER_BROKER, write=True)
async def register_broker(call: Call) -> Reply:
    bid = _int(call, "brokerId")
    if bid is None or not call.ext("brokerName"):
        return Reply(2005, "brokerName and brokerId are required")
    c = controller_of(call.ns)
    return _reply(await c.register_broker(call.ext("clusterName") or "", call.ext("brokerName"), bid,
                                          call.ext("brokerAddress") or ""))


@controller_handler(GET_REPLICA_INFO)
async def replica_info(call: Call) -> Reply:
    return _reply(await controller_of(call.ns).replica_info(call.ext("brokerName") or ""))


@controller_handler(GET_SYNC_STATE_DATA)
async def sync_state_data(call: Call) -> Reply:
    names: list[str] = []
    if call.cmd.body:
        try:
            parsed = fastjson.loads(call.cmd.body)
        except ValueError:
            parsed = None
        if isinstance(parsed, list):
            names = [str(n) for n in parsed]
    return _reply(await controller_of(call.ns).sync_state_data(names))


@controller_handler(ALTER_SYNC_STATE_SET, write=True)
async def alter_sync_state_set(call: Call) -> Reply:
    try:
        body = fastjson.loads(call.cmd.body) if call.cmd.body else None
        members = [int(x) for x in body["syncStateSet"]]
        sepoch = int(body["syncStateSetEpoch"])
    except (ValueError, TypeError, KeyError):
        return Reply(2005, "the body must be a SyncStateSet")
    master_epoch = _int(call, "masterEpoch")
    if master_epoch is None or not call.ext("brokerName"):
        return Reply(2005, "brokerName and masterEpoch are required")
    c = controller_of(call.ns)
    return _reply(await c.alter_sync_state_set(call.ext("brokerName"), _int(call, "masterBrokerId"), master_epoch,
                                               members, sepoch))


@controller_handler(ELECT_MASTER)
async def elect_master(call: Call) -> Reply:
    designate = call.ext("designateElect") == "true"
    refused = _refused(call, call.ext("clusterName"), admin=designate)
    if refused is not None:
        return refused
    bid = _int(call, "brokerId")
    c = controller_of(call.ns)
    answer = await c.elect_master(call.ext("clusterName") or "", call.ext("brokerName") or "",
                                  -1 if bid is None else bid, designate)
    notify_role_changed(answer)
    return _reply(answer)


@controller_handler(CLEAN_BROKER_DATA)
async def clean_broker_data(call: Call) -> Reply:
    refused = _refused(call, call.ext("clusterName"), admin=True)
    if refused is not None:
        return refused
    c = controller_of(call.ns)
    return _reply(await c.clean_broker_data(call.ext("clusterName"), call.ext("brokerName") or "",
                                            call.ext("brokerControllerIdsToClean"),
                                            call.ext("isCleanLivingBroker") == "true"))


@controller_handler(GET_CONTROLLER_CONFIG)
async def get_controller_config(call: Call) -> Reply:
    s = call.ns.settings
    props = {"controllerType": "redis", "enableElectUncleanMaster": s.controller_elect_unclean_master,
             "notifyBrokerRoleChanged": s.controller_notify_broker_role_changed}
    text = "".join(f"{k}={_text(v)}\n" for k, v in sorted(props.items()))
    return Reply(body=text.encode())


@controller_handler(UPDATE_CONTROLLER_CONFIG)
async def update_controller_config_handler(call: Call) -> Reply:
    """mqadmin updateControllerConfig: enableElectUncleanMaster and notifyBrokerRoleChanged become runtime switches
    of every worker (admin only); Java's blacklist is refused; other names change nothing."""
    if not call.cmd.body:
        return Reply()
    try:
        props = parse_properties(call.cmd.body.decode("utf-8"))
    except (BodyError, UnicodeDecodeError):
        return Reply(1, "string2Properties error")
    return _reply(await update_controller_config(call.ns, call.who, props))


_namesrv_heartbeat = HANDLERS[BROKER_HEARTBEAT]


@handles(BROKER_HEARTBEAT)
async def broker_heartbeat(call: Call) -> Reply:
    """A name-server heartbeat as before; one with a brokerId (a controller heartbeat) also refreshes the
    broker's controller liveness when the controller is on."""
    bid = _int(call, "brokerId")
    if bid is None or not call.ns.settings.controller:
        return await _namesrv_heartbeat(call)
    cluster = call.ext("clusterName") or ""
    refused = _refused(call, cluster)
    if refused is not None:
        return refused
    name = call.ext("brokerName") or ""
    conn = call.connection
    answer = await controller_of(call.ns).heartbeat(
        cluster, name, call.ext("brokerAddr") or "", bid, connection=getattr(conn, "id", ""),
        timeout_ms=_int(call, "heartbeatTimeoutMills"), epoch=_int(call, "epoch"), max_offset=_int(call, "maxOffset"),
        confirm_offset=_int(call, "confirmOffset"), election_priority=_int(call, "electionPriority"))
    if answer.code == 0 and conn is not None:
        _on_connection.setdefault(conn, set()).add((cluster, name, bid))
    return _reply(answer)


# ---------------------------------------------------------------- a broker's connection closes

_on_connection: weakref.WeakKeyDictionary[Any, set[tuple[str, str, int]]] = weakref.WeakKeyDictionary()


def connection_lost(server: Any, conn: Any) -> None:
    """Called by the server when a connection closes (not when the worker stops on purpose): the brokers that
    heartbeated on it lose their liveness now, and a master among them is re-elected (BrokerHousekeepingService)."""
    members = _on_connection.pop(conn, None)
    if members and server.ns.settings.controller:
        server._track(asyncio.get_running_loop().create_task(_dropped(server.ns, conn, sorted(members))))


async def _dropped(ns: Any, conn: Any, members: list[tuple[str, str, int]]) -> None:
    try:
        answers = await connection_closed(ns, conn.id, members)
        log.info("controller: connection %s closed; re-elected %s", conn.id,
                 [a.header.get("masterBrokerId") for a in answers if a.code == 0] or "none")
    except NamesrvError as exc:  # Redis still down: the heartbeat timeout does it later
        log.warning("controller: connection %s closed; %s not dropped or not re-elected now (the expiry and "
                    "inactive-master scans and the brokers' own polls take over): %s", conn.id, members, exc.message)


# ---------------------------------------------------------------- NOTIFY_BROKER_ROLE_CHANGED

_tasks: set[asyncio.Task[None]] = set()


def notify_role_changed(answer: Answer) -> None:
    """After a new master: oneway NOTIFY_BROKER_ROLE_CHANGED to each live broker of the set, in the background."""
    if answer.code != 0 or not answer.notify:
        return
    h = answer.header
    cmd = RemotingCommand(code=NOTIFY_BROKER_ROLE_CHANGED, flag=2, ext_fields={
        k: str(h[k]) for k in ("masterAddress", "masterEpoch", "syncStateSetEpoch", "masterBrokerId")
        if h.get(k) is not None},
        body=fastjson.dumps({"syncStateSet": answer.body["syncStateSet"],
                             "syncStateSetEpoch": h["syncStateSetEpoch"]}))
    frame = encode(cmd)
    for addr in answer.notify:
        task = asyncio.get_running_loop().create_task(_send_oneway(addr, frame))
        _tasks.add(task)
        task.add_done_callback(_tasks.discard)


NOTIFIERS.append(notify_role_changed)  # elections the workers make on master loss are announced too


async def _send_oneway(addr: str, frame: bytes) -> None:
    host, _, port = addr.rpartition(":")
    try:
        async with asyncio.timeout(NOTIFY_TIMEOUT_S):
            _, writer = await asyncio.open_connection(host.strip("[]"), int(port))
            writer.write(frame)
            await writer.drain()
            writer.close()
            await writer.wait_closed()
    except (OSError, TimeoutError, ValueError) as exc:
        log.warning("controller: NOTIFY_BROKER_ROLE_CHANGED to %s failed: %s", addr, exc)
