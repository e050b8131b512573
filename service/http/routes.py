"""The route table of API v1: method, path, handler, role, RocketMQ code and summary, plus the OpenAPI
document built from it (tests/unit/test_openapi.py keeps both in step with the router)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from service import __version__
from service.http import controller as ctl
from service.http import handlers as h
from service.http import limits, ops
from service.http import watch as w
from service.http.guard import guarded, unmatched
from service.metrics import RequestStats


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    handler: Any
    role: str  # "open" | "read" | "broker" | "admin"
    summary: str
    rocketmq_code: str = ""
    body: str | None = None  # name of the request schema in components
    max_body: int | None = None  # a route that reads a body: its limit (service/http/limits.py), role checked first


ROUTES: tuple[Route, ...] = (
    Route("POST", "/v1/brokers/register", h.register_broker, "broker", "Register a broker and its topics", "103",
          "RegisterBroker", limits.REGISTRATION),
    Route("POST", "/v1/brokers/heartbeat", h.heartbeat, "broker",
          "Heartbeat / query data version (changed=true: re-register)", "322 / 904", "Heartbeat",
          limits.BROKER_CALL_BYTES),
    Route("POST", "/v1/brokers/unregister", h.unregister_broker, "broker", "Unregister a broker address", "104",
          "BrokerIdentity", limits.BROKER_CALL_BYTES),
    Route("GET", "/v1/brokers", h.live_brokers, "read",
          "Live brokers with last heartbeat, data version and topic count (?cluster=C)"),
    Route("GET", "/v1/topics/{topic}/route", h.topic_route, "read",
          "Topic route (TopicRouteData); ?zoneName=Z&zoneMode=true filters like ZoneRouteRPCHook", "105"),
    Route("GET", "/v1/watch", w.watch_routes, "read",
          "Routes of ?topics=a,b as Server-Sent Events: the current ones, then each change (Last-Event-ID resumes)"),
    Route("GET", "/v1/cluster-info", h.cluster_info, "read", "brokerAddrTable and clusterAddrTable", "106"),
    Route("GET", "/v1/controller/broker-sets", ctl.broker_sets, "read",
          "RocketMQ 5 controller: each broker set's master, epochs, SyncStateSet and replicas (?names=a,b)", "1006"),
    Route("GET", "/v1/topics", h.all_topics, "read", "All topics", "206"),
    Route("GET", "/v1/clusters/{cluster}/topics", h.cluster_topics, "read", "Topics of a cluster", "224"),
    Route("GET", "/v1/system-topics", h.system_topics, "read", "Cluster and broker names (system topics)", "304"),
    Route("GET", "/v1/unit-topics", h.unit_topics, "read", "Unit topics", "311"),
    Route("GET", "/v1/unit-sub-topics", h.unit_sub_topics, "read", "Topics with unit subscriptions", "312"),
    Route("GET", "/v1/unit-sub-ununit-topics", h.unit_sub_ununit_topics, "read",
          "Non-unit topics with unit subscriptions", "313"),
    Route("GET", "/v1/clusters/{cluster}/brokers/{brokerName}", h.member_group, "read", "Broker member group",
          "901"),
    Route("DELETE", "/v1/topics/{topic}", h.delete_topic, "admin", "Delete a topic (?cluster=C for one cluster)",
          "216"),
    Route("PUT", "/v1/topics/{topic}/route", h.put_topic_route, "admin", "Register a topic's queue data", "217",
          "QueueDatas", limits.TOPIC_ROUTE_BYTES),
    Route("POST", "/v1/brokers/{brokerName}/wipe-write-perm", h.wipe_write_perm, "admin",
          "Wipe the write permission of a broker's queues", "205"),
    Route("POST", "/v1/brokers/{brokerName}/add-write-perm", h.add_write_perm, "admin",
          "Restore the write permission of a broker's queues", "327"),
    Route("PUT", "/v1/kv/{namespace}/{key}", h.kv_put, "admin", "Put a KV config item", "100", "KvValue",
          limits.KV_BYTES),
    Route("GET", "/v1/kv/{namespace}/{key}", h.kv_get, "read", "Get a KV config item", "101"),
    Route("DELETE", "/v1/kv/{namespace}/{key}", h.kv_delete, "admin", "Delete a KV config item", "102"),
    Route("GET", "/v1/kv/{namespace}", h.kv_list, "read", "List a KV namespace", "219"),
    Route("GET", "/v1/kv", h.kv_namespaces, "read", "KV namespaces ({namespaces}, sorted)"),
    Route("GET", "/v1/kv-config", h.kv_config, "read",
          "The whole KV config at one instant, as Java's kvConfig.json ({configTable}; ?namespace=N repeatable)"),
    Route("POST", "/v1/kv-config/import", h.kv_import, "read",
          "Import a whole KV config in one step ({configTable, replace?, dryRun?}; admin unless dryRun): what "
          "changed per namespace and key", "", "KvImport", limits.KV_IMPORT),
    Route("GET", "/v1/config", h.get_config, "admin", "Effective configuration (secrets masked)", "319"),
    Route("PUT", "/v1/config", h.put_config, "admin", "Change runtime switches (shared by all workers)", "318",
          "ConfigChange", limits.CONFIG_BYTES),
    Route("GET", "/v1/reports/skew", h.skew_report, "read", "Latest topic load skew summary"),
    Route("GET", "/v1/reports/skew/history", h.skew_history, "read",
          "Kept skew report runs, newest first (?limit=N): totals and cluster metrics of each"),
    Route("GET", "/v1/reports/skew/trend", h.skew_trend, "read",
          "Latest skew report against earlier runs: skew and broker shares that grew, Gini per run"),
    Route("GET", "/v1/capacity", h.capacity, "read",
          "Where the registry stands against the sizing model: brokers, topics, Redis memory, the headroom left"),
    Route("GET", "/rocketmq/nsaddr", ops.nsaddr, "open", "Name-server addresses host:port;host:port"),
    Route("GET", "/livez", ops.livez, "open", "Liveness"),
    Route("GET", "/readyz", ops.readyz, "open", "Readiness: Redis reachable, scripts loaded"),
    Route("GET", "/metrics", ops.metrics, "open", "Prometheus metrics"),
)


QUERY_PARAMS: dict[Any, tuple[str, ...]] = {h.delete_topic: ("cluster",), h.live_brokers: ("cluster",),
                                            h.topic_route: ("zoneName", "zoneMode", "wait"), h.skew_history: ("limit",),
                                            w.watch_routes: ("topics",)}
_TOPIC_CONFIG = {"type": "object", "properties": {
    "readQueueNums": {"type": "integer", "minimum": 0, "maximum": 65535},
    "writeQueueNums": {"type": "integer", "minimum": 0, "maximum": 65535},
    "perm": {"type": "integer", "minimum": 0, "maximum": 15},
    "topicSysFlag": {"type": "integer", "minimum": 0}, "order": {"type": "boolean"}}}
_DATA_VERSION = {"type": "object", "properties": {"timestamp": {"type": "integer"}, "counter": {"type": "integer"},
                                                  "stateVersion": {"type": "integer"}}}
_IDENTITY = {"clusterName": {"type": "string"}, "brokerName": {"type": "string"},
             "brokerId": {"type": "integer", "minimum": 0},
             "brokerAddr": {"type": "string", "example": "10.0.0.1:10911"}}
SCHEMAS: dict[str, Any] = {
    "BrokerIdentity": {"type": "object", "required": ["clusterName", "brokerName", "brokerAddr"],
                       "properties": _IDENTITY},
    "Heartbeat": {"type": "object", "required": ["clusterName", "brokerName", "brokerAddr"],
                  "properties": {**_IDENTITY, "dataVersion": _DATA_VERSION}},
    "RegisterBroker": {"type": "object", "required": ["clusterName", "brokerName", "brokerId", "brokerAddr"],
                       "properties": {**_IDENTITY, "haServerAddr": {"type": "string"},
                                      "zoneName": {"type": "string"}, "enableActingMaster": {"type": "boolean"},
                                      "heartbeatTimeoutMillis": {"type": "integer", "minimum": 1000},
                                      "dataVersion": _DATA_VERSION,
                                      "topicConfigTable": {"type": "object", "additionalProperties": _TOPIC_CONFIG},
                                      "filterServerList": {"type": "array", "items": {"type": "string"}}}},
    "QueueDatas": {"type": "object", "required": ["queueDatas"], "properties": {"queueDatas": {
        "type": "array", "items": {"type": "object", "required": ["brokerName", "readQueueNums", "writeQueueNums",
                                                                  "perm"],
                                   "properties": {"brokerName": {"type": "string"}, **_TOPIC_CONFIG["properties"]}}}}},
    "KvValue": {"type": "object", "required": ["value"], "properties": {"value": {"type": "string"}}},
    "KvImport": {"type": "object", "required": ["configTable"],
                 "properties": {"configTable": {"type": "object", "additionalProperties": {
                     "type": "object", "additionalProperties": {"type": "string"}}},
                     "replace": {"type": "boolean"}, "dryRun": {"type": "boolean"}}},
    "ConfigChange": {"type": "object", "additionalProperties": {"type": ["string", "boolean", "integer"]}},
    "Error": {"type": "object", "required": ["code", "rocketmqCode", "message"],
              "properties": {"code": {"type": "string"}, "rocketmqCode": {"type": "integer"},
                             "message": {"type": "string"}}},
}


def openapi() -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for r in ROUTES:
        op: dict[str, Any] = {
            "summary": r.summary,
            "operationId": r.handler.__name__,
            "responses": {"200": {"description": "OK"},
                          "4XX": {"description": "Bad request, auth, not found, conflict",
                                  "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
                          "503": {"description": "Redis unavailable"}},
            "x-role": r.role,
        }
        if r.rocketmq_code:
            op["x-rocketmq-code"] = r.rocketmq_code
        if r.role != "open":
            op["security"] = [{"bearer": []}]
        params = [{"name": p.strip("{}"), "in": "path", "required": True, "schema": {"type": "string"}}
                  for p in r.path.split("/") if p.startswith("{")]
        for name in QUERY_PARAMS.get(r.handler, ()):
            params.append({"name": name, "in": "query", "required": False, "schema": {"type": "string"}})
        if params:
            op["parameters"] = params
        if r.body:
            op["requestBody"] = {"required": True, "content": {"application/json": {
                "schema": {"$ref": f"#/components/schemas/{r.body}"}}}}
        paths.setdefault(r.path, {})[r.method.lower()] = op
    paths["/openapi.json"] = {"get": {"summary": "This document", "operationId": "openapi_json",
                                      "responses": {"200": {"description": "OK"}}, "x-role": "open"}}
    return {
        "openapi": "3.0.3",
        "info": {"title": "rmq-namesrv", "version": __version__,
                 "description": "RocketMQ NameServer over HTTP: stateless workers, routes in Redis."},
        "paths": paths,
        "components": {"schemas": SCHEMAS,
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    }


async def openapi_json(request: web.Request) -> web.Response:
    return web.json_response(openapi())


def setup_routes(app: web.Application, stats: RequestStats) -> None:
    """Every route, its handler guarded (service/http/guard.py), then the JSON catch-all for the rest."""
    for r in ROUTES:
        if r.max_body is None:
            app.router.add_route(r.method, r.path, guarded(r.handler, r.path, stats))
            continue
        app.router.add_route(r.method, r.path, guarded(limits.gated(r.handler, r.role, r.max_body), r.path, stats),
                             expect_handler=limits.expect_handler(r.role, r.max_body))
    app.router.add_get("/openapi.json", guarded(openapi_json, "/openapi.json", stats))
    if app[h.NS].base_settings.console:  # HTML pages under /console/: not API, so not in /openapi.json
        from service.http.console import setup_console

        setup_console(app, stats)
    app.router.add_route("*", "/{tail:.*}", guarded(unmatched, "unmatched", stats))
