"""HTTP handlers of API v1: thin — parse and validate, call the store, encode the reply."""

from __future__ import annotations

import time
from typing import Any

import orjson
from aiohttp import web

from service.auth import ANY_CLUSTER, Principal
from service.config import BY_NAME, CONFIG_BLACKLIST, ConfigError, _canonical, parse_value
from service.errors import (
    ConfigBlacklisted,
    Disabled,
    Forbidden,
    InvalidArgument,
    NotReady,
    ReportNotFound,
    TopicNotExist,
)
from service.http.context import CACHE, HEARTBEATS, METRICS, RUNTIME, SETTINGS, STORE, Runtime
from service.models import (
    BrokerIdentity,
    DataVersion,
    RegisterBroker,
    entity_name,
    kv_name,
    kv_value,
    obj,
    parse_queue_datas,
    topic_name,
)

PRINCIPAL = web.RequestKey("principal", Principal)
ANONYMOUS = Principal("anonymous")
JSON = "application/json"


def reply(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type=JSON)


async def read_json(request: web.Request) -> Any:
    raw = await request.read()
    if not raw:
        raise InvalidArgument("body: a JSON object is required")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidArgument(f"body: invalid JSON ({exc})") from None


def require_cluster(request: web.Request, cluster: str) -> None:
    """A cluster-bound broker token may only write its own cluster."""
    p: Principal = request.get(PRINCIPAL, ANONYMOUS)
    if p.role == "broker" and p.cluster not in (ANY_CLUSTER, cluster):
        raise Forbidden(f"this broker token may not write cluster {cluster!r}")


# ------------------------------------------------------------------ brokers

async def register_broker(request: web.Request) -> web.Response:
    req = RegisterBroker.parse(await read_json(request))
    require_cluster(request, req.cluster)
    rt = request.app[RUNTIME]
    metrics = request.app[METRICS]
    try:
        res = await request.app[STORE].register_broker(
            req, default_timeout_ms=rt.broker_timeout_ms,
            delete_topic_with_broker_registration=rt.delete_topic_with_broker_registration,
            return_order_topic_config=rt.return_order_topic_config_to_broker)
    except Exception as exc:
        metrics.registrations.labels(result=getattr(exc, "code", "error")).inc()
        raise
    metrics.registrations.labels(result="fenced" if res.fenced else "ok").inc()
    return reply(res.to_json())


async def heartbeat(request: web.Request) -> web.Response:
    body = obj(await read_json(request), "body")
    ident = BrokerIdentity.parse(body)
    require_cluster(request, ident.cluster)
    dv = DataVersion.parse(body["dataVersion"]) if body.get("dataVersion") is not None else None
    res = await request.app[HEARTBEATS].submit((ident.cluster, ident.broker_addr, dv))
    request.app[METRICS].heartbeat(res.data_version is not None)
    return reply(res.to_json())


async def unregister_broker(request: web.Request) -> web.Response:
    ident = BrokerIdentity.parse(await read_json(request))
    require_cluster(request, ident.cluster)
    res = await request.app[STORE].unregister_broker(ident)
    request.app[METRICS].unregistrations.inc()
    return reply({"result": {0: "unknown", 1: "removed", 2: "reduced"}[res]})


# ------------------------------------------------------------------ reads

async def topic_route(request: web.Request) -> web.Response:
    """The hot path: a cache hit costs one dict lookup; the topic is validated before Redis is asked."""
    topic = request.match_info["topic"]
    app = request.app
    rt = app[RUNTIME]
    if rt.need_wait_for_service and rt.started + rt.wait_seconds_for_service > time.monotonic():
        raise NotReady("name server not ready")
    cache = app[CACHE]
    hit = cache.lookup(topic)
    if hit is None:
        hit = await cache.fill(topic, lambda: _read_route(app, rt, topic))
    return web.Response(body=hit[1], status=hit[0], content_type=JSON)


async def _read_route(app: web.Application, rt: Runtime, topic: str) -> tuple[int, bytes]:
    topic_name(topic)
    route = await app[STORE].get_route(topic, support_acting_master=rt.support_acting_master,
                                       order_message_enable=rt.order_message_enable)
    if route is None:
        return 404, orjson.dumps(TopicNotExist(f"No topic route info in name server for the topic: {topic}").to_json())
    return 200, orjson.dumps(route.to_json())


async def cluster_info(request: web.Request) -> web.Response:
    return reply((await request.app[STORE].cluster_info()).to_json())


async def all_topics(request: web.Request) -> web.Response:
    if not request.app[RUNTIME].enable_all_topic_list:
        raise Disabled("disable: the all-topic list is switched off (enableAllTopicList=false)")
    return reply({"topicList": await request.app[STORE].topic_list("all")})


def _topic_list_enabled(request: web.Request) -> None:
    if not request.app[RUNTIME].enable_topic_list:
        raise Disabled("disable: topic lists are switched off (enableTopicList=false)")


async def cluster_topics(request: web.Request) -> web.Response:
    _topic_list_enabled(request)
    cluster = entity_name(request.match_info["cluster"], "cluster")
    return reply({"topicList": await request.app[STORE].cluster_topics(cluster)})


async def system_topics(request: web.Request) -> web.Response:
    names, addr = await request.app[STORE].system_topic_list()
    out: dict[str, Any] = {"topicList": names}
    if addr:
        out["brokerAddr"] = addr
    return reply(out)


def _unit_list(mode: str):
    async def handler(request: web.Request) -> web.Response:
        _topic_list_enabled(request)
        return reply({"topicList": await request.app[STORE].topic_list(mode)})

    handler.__name__ = f"topics_{mode.replace('-', '_')}"
    return handler


unit_topics = _unit_list("unit")
unit_sub_topics = _unit_list("unitsub")
unit_sub_ununit_topics = _unit_list("unitsub-ununit")


async def member_group(request: web.Request) -> web.Response:
    cluster = entity_name(request.match_info["cluster"], "cluster")
    name = entity_name(request.match_info["brokerName"], "brokerName")
    addrs = await request.app[STORE].member_group(cluster, name)
    return reply({"brokerMemberGroup": {"brokerAddrs": {str(k): v for k, v in sorted(addrs.items())},
                                        "brokerName": name, "cluster": cluster}})


# ------------------------------------------------------------------ admin

async def delete_topic(request: web.Request) -> web.Response:
    topic = topic_name(request.match_info["topic"])
    cluster = request.query.get("cluster")
    if cluster is not None:
        entity_name(cluster, "cluster")
    n = await request.app[STORE].delete_topic(topic, cluster)
    return reply({"topic": topic, "cluster": cluster, "removedQueueDatas": n})


async def put_topic_route(request: web.Request) -> web.Response:
    topic = topic_name(request.match_info["topic"])
    qds = parse_queue_datas(await read_json(request))
    n = await request.app[STORE].register_topic(topic, qds)
    return reply({"topic": topic, "queueDatas": n})


async def wipe_write_perm(request: web.Request) -> web.Response:
    name = entity_name(request.match_info["brokerName"], "brokerName")
    return reply({"wipeTopicCount": await request.app[STORE].wipe_write_perm(name)})


async def add_write_perm(request: web.Request) -> web.Response:
    name = entity_name(request.match_info["brokerName"], "brokerName")
    return reply({"addTopicCount": await request.app[STORE].add_write_perm(name)})


def _kv_path(request: web.Request) -> tuple[str, str]:
    return (kv_name(request.match_info["namespace"], "namespace"), kv_name(request.match_info["key"], "key"))


async def kv_put(request: web.Request) -> web.Response:
    ns, key = _kv_path(request)
    value = kv_value(obj(await read_json(request), "body").get("value"))
    await request.app[STORE].kv_put(ns, key, value)
    return reply({"namespace": ns, "key": key, "value": value})


async def kv_get(request: web.Request) -> web.Response:
    ns, key = _kv_path(request)
    return reply({"value": await request.app[STORE].kv_get(ns, key)})


async def kv_delete(request: web.Request) -> web.Response:
    ns, key = _kv_path(request)
    return reply({"deleted": await request.app[STORE].kv_delete(ns, key)})


async def kv_list(request: web.Request) -> web.Response:
    ns = kv_name(request.match_info["namespace"], "namespace")
    return reply({"table": await request.app[STORE].kv_list(ns)})


async def get_config(request: web.Request) -> web.Response:
    settings = request.app[SETTINGS].masked()
    settings.update(request.app[RUNTIME].values)
    return reply({"config": dict(sorted(settings.items())), "runtime": sorted(request.app[RUNTIME].values)})


async def put_config(request: web.Request) -> web.Response:
    body = obj(await read_json(request), "body")
    if not body:
        raise InvalidArgument("body: at least one setting")
    changes: dict[str, str] = {}
    for key, raw in body.items():
        flat = key.replace("_", "").replace("-", "").lower()
        if flat.removeprefix("namesrv") in CONFIG_BLACKLIST or flat in CONFIG_BLACKLIST:
            raise ConfigBlacklisted(f"Can not update config in black list: {key}")
        name = _canonical(key)
        if name is None:
            raise InvalidArgument(f"unknown setting {key!r}", field=key)
        setting = BY_NAME[name]
        if setting.secret or "path" in name:
            raise ConfigBlacklisted(f"Can not update config in black list: {key}")
        if not setting.runtime:
            raise InvalidArgument(f"{key!r} is a start-up setting; change it in the deployment", field=key)
        if isinstance(raw, dict | list) or raw is None:
            raise InvalidArgument(f"{key}: a scalar value", field=key)
        try:
            value = parse_value(setting, raw)
        except ConfigError as exc:
            raise InvalidArgument(str(exc), field=key) from None
        changes[name] = str(value).lower() if isinstance(value, bool) else str(value)
    await request.app[STORE].put_runtime_config(changes)
    request.app[RUNTIME].apply(await request.app[STORE].get_runtime_config())
    request.app[CACHE].flush()
    return reply({"updated": changes})


async def skew_report(request: web.Request) -> web.Response:
    store = request.app[STORE]
    raw = await store.redis.get(store.keys.skew_report)
    if raw is None:
        raise ReportNotFound("no skew report yet: run `namesrv skew-report` (see docs/skew-report.md)")
    return web.Response(text=raw, content_type=JSON)

