"""API v1 through a real aiohttp server on fakeredis: every row of DESIGN §5."""

from __future__ import annotations

import pytest

from service.http.routes import ROUTES, openapi
from tests.unit.conftest import master


async def test_register_then_route(client):
    r = await client.post("/v1/brokers/register", json=master())
    assert r.status == 200
    assert await r.json() == {"haServerAddr": None, "masterAddr": None, "kvTable": None}
    r = await client.get("/v1/topics/TopicA/route")
    assert r.status == 200
    assert await r.json() == {
        "brokerDatas": [{"brokerAddrs": {"0": "10.0.0.1:10911"}, "brokerName": "broker-a", "cluster": "C1",
                         "enableActingMaster": False}],
        "filterServerTable": {},
        "queueDatas": [{"brokerName": "broker-a", "perm": 6, "readQueueNums": 8, "topicSysFlag": 0,
                        "writeQueueNums": 8}]}


async def test_unknown_topic_is_404_with_rocketmq_code(client):
    r = await client.get("/v1/topics/Nope/route")
    assert r.status == 404
    body = await r.json()
    assert body["code"] == "TOPIC_NOT_EXIST" and body["rocketmqCode"] == 17
    assert "Nope" in body["message"]


async def test_slave_learns_master_and_kv_table(client):
    await client.put("/v1/kv/ORDER_TOPIC_CONFIG/TopicA", json={"value": "broker-a:8"})
    await client.post("/v1/brokers/register", json=master())
    r = await client.post("/v1/brokers/register", json=master(bid=1, addr="10.0.0.2:10911"))
    assert await r.json() == {"haServerAddr": "10.0.0.1:10912", "masterAddr": "10.0.0.1:10911",
                              "kvTable": {"table": {"TopicA": "broker-a:8"}}}


async def test_heartbeat_changed_flag(client):
    ident = {"clusterName": "C1", "brokerName": "broker-a", "brokerId": 0, "brokerAddr": "10.0.0.1:10911"}
    r = await client.post("/v1/brokers/heartbeat", json=ident)
    assert (await r.json())["changed"] is True
    await client.post("/v1/brokers/register", json=master())
    r = await client.post("/v1/brokers/heartbeat",
                          json={**ident, "dataVersion": {"timestamp": 1, "counter": 1, "stateVersion": 0}})
    assert await r.json() == {"changed": False,
                              "dataVersion": {"counter": 1, "stateVersion": 0, "timestamp": 1}}
    r = await client.post("/v1/brokers/heartbeat",
                          json={**ident, "dataVersion": {"timestamp": 1, "counter": 2, "stateVersion": 0}})
    assert (await r.json())["changed"] is True


async def test_unregister_removes_routes(client):
    await client.post("/v1/brokers/register", json=master())
    r = await client.post("/v1/brokers/unregister", json={"clusterName": "C1", "brokerName": "broker-a",
                                                         "brokerId": 0, "brokerAddr": "10.0.0.1:10911"})
    assert await r.json() == {"result": "removed"}
    assert (await client.get("/v1/topics/TopicA/route")).status == 404
    assert await (await client.get("/v1/cluster-info")).json() == {"brokerAddrTable": {}, "clusterAddrTable": {}}


async def test_broker_name_conflict_is_409(client):
    await client.post("/v1/brokers/register", json=master())
    r = await client.post("/v1/brokers/register", json=master(cluster="C2", addr="10.0.0.9:10911"))
    assert r.status == 409
    assert (await r.json())["code"] == "BROKER_NAME_CONFLICT"


async def test_lists_cluster_info_member_group(client):
    await client.post("/v1/brokers/register", json=master(topics={
        "T1": {"readQueueNums": 1, "writeQueueNums": 1, "perm": 6, "topicSysFlag": 1},
        "T2": {"readQueueNums": 1, "writeQueueNums": 1, "perm": 6, "topicSysFlag": 2},
        "T3": {"readQueueNums": 1, "writeQueueNums": 1, "perm": 6, "topicSysFlag": 3}}))
    assert await (await client.get("/v1/topics")).json() == {"topicList": ["T1", "T2", "T3"]}
    assert await (await client.get("/v1/clusters/C1/topics")).json() == {"topicList": ["T1", "T2", "T3"]}
    assert await (await client.get("/v1/clusters/Other/topics")).json() == {"topicList": []}
    assert await (await client.get("/v1/unit-topics")).json() == {"topicList": ["T1", "T3"]}
    assert await (await client.get("/v1/unit-sub-topics")).json() == {"topicList": ["T2", "T3"]}
    assert await (await client.get("/v1/unit-sub-ununit-topics")).json() == {"topicList": ["T2"]}
    assert await (await client.get("/v1/system-topics")).json() == {"topicList": ["C1", "broker-a"],
                                                                     "brokerAddr": "10.0.0.1:10911"}
    info = await (await client.get("/v1/cluster-info")).json()
    assert info["clusterAddrTable"] == {"C1": ["broker-a"]}
    assert info["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {"0": "10.0.0.1:10911"}
    r = await client.get("/v1/clusters/C1/brokers/broker-a")
    assert await r.json() == {"brokerMemberGroup": {"brokerAddrs": {"0": "10.0.0.1:10911"},
                                                    "brokerName": "broker-a", "cluster": "C1"}}


async def test_admin_topic_operations(client):
    await client.post("/v1/brokers/register", json=master())
    r = await client.post("/v1/brokers/broker-a/wipe-write-perm")
    assert await r.json() == {"wipeTopicCount": 1}
    route = await (await client.get("/v1/topics/TopicA/route")).json()
    assert route["queueDatas"][0]["perm"] == 4
    assert await (await client.post("/v1/brokers/broker-a/add-write-perm")).json() == {"addTopicCount": 1}
    r = await client.put("/v1/topics/NewTopic/route", json={"queueDatas": [
        {"brokerName": "broker-a", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}]})
    assert r.status == 200
    assert (await client.get("/v1/topics/NewTopic/route")).status == 200
    r = await client.put("/v1/topics/NewTopic/route", json={"queueDatas": [
        {"brokerName": "ghost", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}]})
    assert r.status == 404 and (await r.json())["code"] == "BROKER_NOT_FOUND"
    r = await client.delete("/v1/topics/NewTopic", params={"cluster": "C1"})
    assert (await r.json())["removedQueueDatas"] == 1
    assert (await client.get("/v1/topics/NewTopic/route")).status == 404


async def test_kv(client):
    assert (await client.get("/v1/kv/ns/k")).status == 404
    r = await client.get("/v1/kv/ns")
    assert r.status == 404 and (await r.json())["code"] == "QUERY_NOT_FOUND"
    assert (await client.put("/v1/kv/ns/k", json={"value": "v"})).status == 200
    assert await (await client.get("/v1/kv/ns/k")).json() == {"value": "v"}
    assert await (await client.get("/v1/kv/ns")).json() == {"table": {"k": "v"}}
    assert await (await client.delete("/v1/kv/ns/k")).json() == {"deleted": True}
    assert await (await client.get("/v1/kv/ns")).json() == {"table": {}}


async def test_runtime_config_switches(client):
    r = await client.put("/v1/config", json={"enableAllTopicList": False})
    assert r.status == 200
    r = await client.get("/v1/topics")
    assert r.status == 403 and (await r.json())["code"] == "DISABLED"
    cfg = await (await client.get("/v1/config")).json()
    assert cfg["config"]["enable_all_topic_list"] is False
    assert cfg["config"]["admin_token"] == ""


async def test_config_put_answers_what_get_answers(client):
    r = await client.put("/v1/config", json={"supportActingMaster": True, "waitSecondsForService": 5,
                                             "enable_topic_list": "false"})
    assert r.status == 200
    put = await r.json()
    get = await (await client.get("/v1/config")).json()
    assert {k: put[k] for k in get} == get  # the same shape and values as GET, after the change
    assert put["updated"] == {"support_acting_master": True, "wait_seconds_for_service": 5,
                              "enable_topic_list": False}  # GET's names and JSON types, not strings


@pytest.mark.parametrize("key", ["configStorePath", "kvConfigPath", "configBlackList", "rocketmqHome",
                                 "NAMESRV_ADMIN_TOKEN", "redis_password", "broker_tokens"])
async def test_config_refuses_paths_and_secrets(client, key):
    r = await client.put("/v1/config", json={key: "x"})
    assert r.status == 403
    assert (await r.json())["code"] == "CONFIG_BLACKLISTED"


async def test_config_refuses_startup_and_unknown_settings(client):
    assert (await client.put("/v1/config", json={"port": 1})).status == 400
    assert (await client.put("/v1/config", json={"noSuchThing": 1})).status == 400
    assert (await client.put("/v1/config", json={"waitSecondsForService": "abc"})).status == 400


async def test_need_wait_for_service(make_client):
    c = await make_client(need_wait_for_service="true", wait_seconds_for_service=60)
    r = await c.get("/v1/topics/TopicA/route")
    assert r.status == 503 and (await r.json())["message"] == "name server not ready"


async def test_acting_master_route(client):
    await client.put("/v1/config", json={"supportActingMaster": True})
    await client.post("/v1/brokers/register", json=master(enableActingMaster=True))
    await client.post("/v1/brokers/register", json=master(bid=1, addr="10.0.0.2:10911", enableActingMaster=True))
    await client.post("/v1/brokers/unregister", json={"clusterName": "C1", "brokerName": "broker-a", "brokerId": 0,
                                                      "brokerAddr": "10.0.0.1:10911"})
    route = await (await client.get("/v1/topics/TopicA/route")).json()
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": "10.0.0.2:10911"}
    assert route["queueDatas"][0]["perm"] == 4


async def test_nsaddr_and_health(make_client):
    c = await make_client(advertised_addrs="10.1.1.1:8080;10.1.1.2:8080")
    r = await c.get("/rocketmq/nsaddr")
    assert await r.text() == "10.1.1.1:8080;10.1.1.2:8080"
    assert (await c.get("/livez")).status == 200
    assert (await c.get("/readyz")).status == 200


async def test_metrics_count_requests(client):
    await client.post("/v1/brokers/register", json=master())
    for _ in range(3):
        await client.get("/v1/topics/TopicA/route")
    text = await (await client.get("/metrics")).text()
    assert 'namesrv_http_requests_total{method="GET",route="/v1/topics/{topic}/route",status="200"} 3.0' in text
    assert 'namesrv_broker_registrations_total{result="ok"} 1.0' in text
    assert "namesrv_route_cache_hit_ratio" in text


async def test_openapi_matches_router(client):
    doc = await (await client.get("/openapi.json")).json()
    assert doc == openapi() | {}
    served = {(r.method, r.resource.canonical) for r in client.app.router.routes()
              if r.method != "HEAD" and r.resource.canonical != "/{tail}"  # the JSON 404/405 catch-all
              and not r.resource.canonical.startswith("/console")}  # HTML pages (service/http/console.py)
    documented = {(m.upper(), p) for p, ops in doc["paths"].items() for m in ops}
    assert served == documented
    assert {r.path for r in ROUTES} <= set(doc["paths"])
    for path, ops in doc["paths"].items():
        for op in ops.values():
            if "requestBody" in op:
                ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
                assert ref in doc["components"]["schemas"], (path, ref)


async def test_unknown_path_and_method_are_json(client):
    r = await client.get("/v2/nothing")
    assert r.status == 404 and (await r.json())["code"] == "NOT_FOUND"
    r = await client.patch("/v1/topics")
    assert r.status == 405 and (await r.json())["code"] == "METHOD_NOT_ALLOWED"


async def test_skew_report_endpoint(client):
    r = await client.get("/v1/reports/skew")
    assert r.status == 404 and (await r.json())["code"] == "REPORT_NOT_FOUND"
    await client.redis.set("{nsrv}:report:skew", '{"generatedAt": "2026-11-21T00:00:00Z", "topics": []}')
    r = await client.get("/v1/reports/skew")
    assert r.status == 200 and (await r.json())["generatedAt"] == "2026-11-21T00:00:00Z"
