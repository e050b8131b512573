"""One function per RocketMQ request code: read the header's extFields and body, call the core, build the reply.

Replies follow the Java NameServer 5.3 (reference §1): the same response codes, response headers and fastjson
bodies. Every rule is the core's; a core error becomes its RocketMQ response code with its message as remark.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from service.core import NameServer, Principal
from service.core.bodies import over_body
from service.errors import BrokerNotFound, InvalidArgument, NamesrvError
from service.models import BrokerIdentity, ClusterInfo, RegisterBroker, TopicList, bool_text, int_text
from service.remoting import codes, fastjson
from service.remoting.bodies import (
    V5_0_0,
    BodyError,
    crc32_of,
    decode_cost,
    decode_data_version,
    decode_register_broker_body,
    format_properties,
    parse_properties,
)
from service.remoting.codec import RemotingCommand
from service.remoting.faq import no_route_remark
from service.remoting.register_fast import plain_registration

SUCCESS = 0
SYSTEM_ERROR = 1
QUERY_NOT_FOUND = 22
NOT_SET = "not set any response code"  # RemotingCommand's default remark, which GET_BROKER_MEMBER_GROUP keeps
ROUTE_FASTJSON = ("remoting", "fastjson")  # route cache variants of this door
ROUTE_STANDARD = ("remoting", "standard")


@dataclass(slots=True)
class Reply:
    """What a handler answers: response code, remark, response header fields, body."""

    code: int = SUCCESS
    remark: str | None = None
    ext: dict[str, Any] | None = None
    body: bytes = b""


@dataclass(slots=True)
class Call:
    """One request as a handler sees it."""

    ns: NameServer
    who: Principal
    cmd: RemotingCommand
    connection: Any  # the server's connection object: `id` and the brokers registered on it

    def ext(self, name: str) -> str | None:
        """A header field; an empty value (zero-length in the binary header) counts as absent."""
        return self.cmd.ext_fields.get(name) or None


Handler = Callable[[Call], Awaitable[Reply]]
HANDLERS: dict[int, Handler] = {}


def handles(code: int) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        HANDLERS[code] = fn
        return fn

    return register


def error_reply(err: NamesrvError) -> Reply:
    """The error's RocketMQ code and message. SYSTEM_ERROR stands for many of ours (a bad argument, a conflict, Redis
    unavailable, …), so its remark ends with our code, `… (STORE_UNAVAILABLE)`, as the HTTP API's `code` says it:
    `namesrv admin` then exits as it does over HTTP, and an operator reading a Java client's log sees which."""
    if err.rocketmq_code == SYSTEM_ERROR:
        return Reply(SYSTEM_ERROR, f"{err.message} ({err.code})")
    return Reply(err.rocketmq_code, err.message)


def dumps(obj: Any) -> bytes:
    return fastjson.dumps(obj)


# ------------------------------------------------------------------ routes (the hot path lives in server.py)

def route_variant(call_version: int, ext: dict[str, str], standard_only: bool) -> tuple[str, str]:
    """Standard JSON when the client is 4.9.4+ or asks for it (reference §0.1); fastjson otherwise."""
    if standard_only or call_version >= codes.V4_9_4 or ext.get("acceptStandardJsonOnly") == "true":
        return ROUTE_STANDARD
    return ROUTE_FASTJSON


def encoder(variant: tuple[str, str]) -> Callable[[Any], bytes]:
    if variant == ROUTE_STANDARD:
        return lambda route: fastjson.dumps_standard(route.to_dict())  # a route's keys: str, and int broker ids
    return lambda route: fastjson.dumps(route.to_dict())


def route_reply(ns: NameServer, cmd: RemotingCommand, topic: str, entry: Any) -> Reply:
    """The reply for a route entry: TOPIC_NOT_EXIST, or the encoded route (zone-filtered when asked)."""
    if entry.route is None:
        return Reply(17, no_route_remark(topic))
    ext = cmd.ext_fields
    zone = ns.zone_filter(ext.get("__ZONE_MODE"), ext.get("__ZONE_NAME")) if "__ZONE_MODE" in ext else None
    if zone is not None:  # ZoneRouteRPCHook re-encodes with the default (non-standard) JSON
        return Reply(body=ns.encoded_route(topic, entry, ROUTE_FASTJSON, encoder(ROUTE_FASTJSON), zone))
    variant = route_variant(cmd.version, ext, ns.base_settings.remoting_standard_json)
    return Reply(body=entry.encoded.get(variant) or ns.encoded_route(topic, entry, variant, encoder(variant)))


@handles(codes.GET_ROUTEINFO_BY_TOPIC)
async def get_route(call: Call) -> Reply:
    topic = call.ext("topic") or ""
    if not topic:
        return Reply(17, no_route_remark(None))
    try:
        entry = await call.ns.route(call.who, topic)
    except InvalidArgument:  # Java looks any name up and finds nothing: TOPIC_NOT_EXIST, not SYSTEM_ERROR
        return Reply(17, no_route_remark(topic))
    return route_reply(call.ns, call.cmd, topic, entry)


# ------------------------------------------------------------------ brokers

def _identity(call: Call) -> dict[str, Any]:
    return {"clusterName": call.ext("clusterName"), "brokerName": call.ext("brokerName"),
            "brokerId": int_text(call.ext("brokerId"), "brokerId"), "brokerAddr": call.ext("brokerAddr")}


def registration(header: dict[str, Any], compressed: bool, version: int, raw: bytes) -> dict[str, Any] | RegisterBroker:
    """REGISTER_BROKER's header fields and decoded RegisterBrokerBody as RegisterBroker's JSON shape, or (a plain
    body both layers' rules accept in one pass: register_fast) the RegisterBroker itself.
    Module-level: the core may run it in a parser process for a large body."""
    fast = plain_registration(header, compressed, version, raw)
    if fast is not None:
        return fast
    try:
        payload = decode_register_broker_body(raw, compressed, version)
    except BodyError as exc:
        raise InvalidArgument(f"RegisterBrokerBody: {exc}") from None
    return {**header, "dataVersion": payload["dataVersion"], "topicConfigTable": payload["topicConfigTable"],
            "filterServerList": payload["filterServerList"]}


@handles(codes.REGISTER_BROKER)
async def register_broker(call: Call) -> Reply:
    cmd = call.cmd
    crc = int_text(call.ext("bodyCrc32"), "bodyCrc32") or 0
    memo = call.connection.registration
    if crc and not memo.crc_known(cmd.body, crc):
        async with call.ns.turn():  # a body not seen on this connection: checked in its turn (storms queue there)
            if await over_body(cmd.body, crc32_of, cmd.body) != crc:
                return Reply(SYSTEM_ERROR, "crc32 not match")
            return await _register(call, crc, memo)
    return await _register(call, crc, memo)


async def _register(call: Call, crc: int, memo: Any) -> Reply:
    cmd = call.cmd
    header = {**_identity(call), "haServerAddr": call.ext("haServerAddr"), "zoneName": call.ext("__ZONE_NAME"),
              "enableActingMaster": bool_text(call.ext("enableActingMaster"), "enableActingMaster"),
              "heartbeatTimeoutMillis": int_text(call.ext("heartbeatTimeoutMillis"), "heartbeatTimeoutMillis")}
    compressed = bool_text(call.ext("compressed"), "compressed") or False
    decode = partial(registration, header, compressed, cmd.version)
    # Everything besides the body that the decoded registration depends on: the same key and body bytes again
    # are the same registration (NameServer.registration_digest).
    door_key = b"remoting\0" + fastjson.dumps([header, compressed, cmd.version >= V5_0_0])
    res = await call.ns.register_broker(call.who, cmd.body, decode=decode, door_key=door_key, memo=memo,
                                        single_topic_guard=True, connection=call.connection.id,
                                        decode_cost=decode_cost(cmd.body, compressed))
    if crc and memo.crc != crc and memo.body is not None and (memo.body is cmd.body or memo.body == cmd.body):
        memo.crc = crc  # verified above, for the body the memo keeps now
    if not res.fenced:
        call.connection.registered(header["clusterName"], header["brokerAddr"])
    ext = {"haServerAddr": res.ha_server_addr, "masterAddr": res.master_addr}
    return Reply(ext=ext, body=dumps({"table": res.kv_table}) if res.kv_table is not None else b"")


@handles(codes.UNREGISTER_BROKER)
async def unregister_broker(call: Call) -> Reply:
    if not call.ext("brokerId"):
        return Reply()  # Java queues it, fails on the null id in its unregister thread and removes nothing
    ident = _identity(call)
    await call.ns.unregister_broker(call.who, ident)
    call.connection.unregistered(ident["clusterName"], ident["brokerAddr"])
    return Reply()


def _heartbeat_identity(call: Call) -> dict[str, Any]:
    """QUERY_DATA_VERSION finds the live entry by (clusterName, brokerAddr) only: Java answers it without
    brokerName, so the identity's validation gets a stand-in, which nothing reads (BROKER_HEARTBEAT:
    heartbeat_fields)."""
    ident = _identity(call)
    if ident["brokerName"] is None:
        ident["brokerName"] = "_"
    return ident


@handles(codes.QUERY_DATA_VERSION)
async def query_data_version(call: Call) -> Reply:
    try:
        dv = decode_data_version(call.cmd.body) if call.cmd.body else None
    except BodyError as exc:
        raise InvalidArgument(f"DataVersion: {exc}") from None
    res = await call.ns.heartbeat(call.who, {**_heartbeat_identity(call), "dataVersion": dv})
    body = dumps(res.data_version.to_dict()) if res.data_version is not None else b""
    return Reply(ext={"changed": res.changed}, body=body)


# What brokers put in BROKER_HEARTBEAT's header (BrokerHeartbeatRequestHeader): a header of these fields only, all
# strings, may take the remoting server's hot path; anything else comes here.
HEARTBEAT_FIELDS = frozenset({"clusterName", "brokerAddr", "brokerName", "brokerId", "epoch", "maxOffset",
                              "confirmOffset", "heartbeatTimeoutMills", "electionPriority"})


def heartbeat_fields(ext: dict[str, str]) -> tuple[str, str]:
    """BROKER_HEARTBEAT's (clusterName, brokerAddr), its header validated as this handler validates it: the hot
    path and this handler answer the same header alike."""
    BrokerIdentity.parse({"clusterName": ext.get("clusterName"), "brokerAddr": ext.get("brokerAddr"),
                          "brokerName": "_" if ext.get("brokerName") is None else ext["brokerName"],
                          "brokerId": int_text(ext.get("brokerId"), "brokerId") or 0})
    return ext["clusterName"], ext["brokerAddr"]


@handles(codes.BROKER_HEARTBEAT)
async def broker_heartbeat(call: Call) -> Reply:
    """Java updates the live entry's timestamp whether or not it exists, and answers SUCCESS (the remoting server's
    hot path answers most of them without this handler)."""
    cluster, addr = heartbeat_fields(call.cmd.ext_fields)
    await call.ns.broker_heartbeat(call.who, cluster, addr)
    return Reply()


@handles(codes.GET_BROKER_MEMBER_GROUP)
async def member_group(call: Call) -> Reply:
    # Java's processor never sets the response code: SUCCESS by default, with its "not set" remark
    cluster, name = call.ext("clusterName"), call.ext("brokerName")
    if not name:  # Java echoes the nulls (left out of the JSON) and finds no broker
        group = {"cluster": cluster} if cluster else {}
        return Reply(remark=NOT_SET, body=dumps({"brokerMemberGroup": {"brokerAddrs": {}, **group}}))
    if not cluster:  # the group is found by brokerName alone; the cluster is only echoed (null: left out)
        group = (await call.ns.member_group(call.who, "_", name)).to_dict()
        del group["brokerMemberGroup"]["cluster"]
        return Reply(remark=NOT_SET, body=dumps(group))
    group = await call.ns.member_group(call.who, cluster, name)
    return Reply(remark=NOT_SET, body=dumps(group.to_dict()))


# ------------------------------------------------------------------ reads

@handles(codes.GET_BROKER_CLUSTER_INFO)
async def cluster_info(call: Call) -> Reply:
    return Reply(body=await call.ns.encoded_cluster_info(call.who, "remoting", _cluster_info_body))


def _cluster_info_body(info: ClusterInfo) -> bytes:
    return dumps(info.to_dict())


async def _topic_list(call: Call, kind: str, cluster: str | None = None) -> Reply:
    return Reply(body=_topic_list_body(await call.ns.topic_list(call.who, kind, cluster)))


@handles(codes.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
async def all_topics(call: Call) -> Reply:
    return Reply(body=await call.ns.encoded_all_topics(call.who, "remoting", _topic_list_body))


def _topic_list_body(topics: TopicList) -> bytes:
    return dumps(topics.to_dict())


@handles(codes.GET_TOPICS_BY_CLUSTER)
async def cluster_topics(call: Call) -> Reply:
    if not call.ext("cluster") and call.ns.settings.enable_topic_list:
        return Reply(body=dumps({"topicList": []}))  # Java: an unknown (here null) cluster has no topics
    return await _topic_list(call, "cluster", call.ext("cluster"))


@handles(codes.GET_SYSTEM_TOPIC_LIST_FROM_NS)
async def system_topics(call: Call) -> Reply:
    return await _topic_list(call, "system")


@handles(codes.GET_UNIT_TOPIC_LIST)
async def unit_topics(call: Call) -> Reply:
    return await _topic_list(call, "unit")


@handles(codes.GET_HAS_UNIT_SUB_TOPIC_LIST)
async def unit_sub_topics(call: Call) -> Reply:
    return await _topic_list(call, "unitsub")


@handles(codes.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST)
async def unit_sub_ununit_topics(call: Call) -> Reply:
    return await _topic_list(call, "unitsub-ununit")


# ------------------------------------------------------------------ admin

@handles(codes.WIPE_WRITE_PERM_OF_BROKER)
async def wipe_write_perm(call: Call) -> Reply:
    if not call.ext("brokerName"):
        return Reply(ext={"wipeTopicCount": 0})  # Java: no queue data names a null broker
    return Reply(ext={"wipeTopicCount": await call.ns.wipe_write_perm(call.who, call.ext("brokerName"))})


@handles(codes.ADD_WRITE_PERM_OF_BROKER)
async def add_write_perm(call: Call) -> Reply:
    if not call.ext("brokerName"):
        return Reply(ext={"addTopicCount": 0})
    return Reply(ext={"addTopicCount": await call.ns.add_write_perm(call.who, call.ext("brokerName"))})


@handles(codes.DELETE_TOPIC_IN_NAMESRV)
async def delete_topic(call: Call) -> Reply:
    if not call.ext("topic"):
        return Reply()  # Java: no topic is named null; always SUCCESS
    await call.ns.delete_topic(call.who, call.ext("topic"), call.ext("clusterName"))
    return Reply()


@handles(codes.REGISTER_TOPIC_IN_NAMESRV)
async def register_topic(call: Call) -> Reply:
    if not call.ext("topic"):
        return Reply()  # Java answers SUCCESS and registers nothing
    try:
        body = fastjson.loads(call.cmd.body) if call.cmd.body else {}
    except fastjson.JsonError as exc:
        raise InvalidArgument(f"TopicRouteData: {exc}") from None
    if not isinstance(body, dict):
        raise InvalidArgument("TopicRouteData: a JSON object is required")
    try:
        await call.ns.register_topic(call.who, call.ext("topic"), {"queueDatas": body.get("queueDatas")})
    except BrokerNotFound as exc:  # Java ignores such a registration and answers SUCCESS; we say why
        return Reply(remark=f"ignored: {exc.message}")
    return Reply()


# ------------------------------------------------------------------ KV config

@handles(codes.PUT_KV_CONFIG)
async def kv_put(call: Call) -> Reply:
    if not (call.ext("namespace") and call.ext("key")):
        return Reply(SYSTEM_ERROR, "namespace or key is null")
    await call.ns.kv_put(call.who, call.ext("namespace"), call.ext("key"), call.cmd.ext_fields.get("value"))
    return Reply()


@handles(codes.GET_KV_CONFIG)
async def kv_get(call: Call) -> Reply:
    ns, key = call.ext("namespace"), call.ext("key")
    if not (ns and key):
        return Reply(QUERY_NOT_FOUND, f"No config item, Namespace: {ns or 'null'} Key: {key or 'null'}")
    return Reply(ext={"value": await call.ns.kv_get(call.who, call.ext("namespace"), call.ext("key"))})


@handles(codes.DELETE_KV_CONFIG)
async def kv_delete(call: Call) -> Reply:
    if not (call.ext("namespace") and call.ext("key")):
        return Reply()  # Java: always SUCCESS
    await call.ns.kv_delete(call.who, call.ext("namespace"), call.ext("key"))
    return Reply()


@handles(codes.GET_KVLIST_BY_NAMESPACE)
async def kv_list(call: Call) -> Reply:
    if not call.ext("namespace"):
        return Reply(QUERY_NOT_FOUND, "No config item, Namespace: null")
    return Reply(body=dumps((await call.ns.kv_list(call.who, call.ext("namespace"))).to_dict()))


# ------------------------------------------------------------------ NameServer config

@handles(codes.UPDATE_NAMESRV_CONFIG)
async def update_config(call: Call) -> Reply:
    if not call.cmd.body:
        return Reply()  # Java: a null body changes nothing
    try:
        changes = parse_properties(call.cmd.body.decode("utf-8"))
    except (BodyError, UnicodeDecodeError):
        return Reply(SYSTEM_ERROR, "string2Properties error")
    if changes:
        await call.ns.update_config(call.who, changes)
    return Reply()


@handles(codes.GET_NAMESRV_CONFIG)
async def get_config(call: Call) -> Reply:
    from service.config import BY_NAME

    view = call.ns.config_view(call.who)
    props = {BY_NAME[k].camel: (str(v).lower() if isinstance(v, bool) else v) for k, v in view.items()}
    return Reply(body=format_properties(props).encode("utf-8"))
