"""Auth matrix: 401 without or with an unknown token, 403 with a wrong role or cluster, 2xx otherwise."""

from __future__ import annotations

import pytest

from service.config import ConfigError, load_settings, parse_broker_tokens
from service.core import Access
from tests.unit.conftest import ADMIN, BROKER_A, BROKER_ANY, READ, master


def bearer(token):
    return {"Authorization": f"Bearer {token}"} if token else {}


@pytest.mark.parametrize(("token", "cluster", "status"), [
    (None, "C1", 401), ("wrong-token-xyz", "C1", 401), (READ, "C1", 403),
    (BROKER_A, "C2", 403), (BROKER_A, "C1", 200), (BROKER_ANY, "C2", 200), (ADMIN, "C3", 200),
])
async def test_register_matrix(secured, token, cluster, status):
    r = await secured.post("/v1/brokers/register", json=master(cluster=cluster, name=f"b-{cluster}"),
                           headers=bearer(token))
    assert r.status == status, await r.text()
    if status != 200:
        body = await r.json()
        assert body["code"] == {401: "UNAUTHORIZED", 403: "FORBIDDEN"}[status]
        info = await (await secured.get("/v1/cluster-info", headers=bearer(ADMIN))).json()
        assert info["clusterAddrTable"] == {}


@pytest.mark.parametrize(("token", "status"), [(None, 401), (BROKER_A, 403), (READ, 403), (ADMIN, 200)])
async def test_admin_matrix(secured, token, status):
    r = await secured.put("/v1/kv/ns/k", json={"value": "v"}, headers=bearer(token))
    assert r.status == status
    r = await secured.post("/v1/brokers/b/wipe-write-perm", headers=bearer(token))
    assert r.status == status
    r = await secured.get("/v1/config", headers=bearer(token))
    assert r.status == status


@pytest.mark.parametrize(("token", "status"), [(None, 401), ("nope-nope-nope", 401), (READ, 404),
                                               (BROKER_A, 404), (ADMIN, 404)])
async def test_read_matrix_with_read_token(secured, token, status):
    r = await secured.get("/v1/topics/Missing/route", headers=bearer(token))
    assert r.status == status


async def test_open_endpoints_need_no_token(secured):
    for path in ("/livez", "/readyz", "/metrics", "/openapi.json", "/rocketmq/nsaddr"):
        assert (await secured.get(path)).status == 200, path


async def test_malformed_authorization_header(secured):
    r = await secured.get("/v1/topics", headers={"Authorization": "Basic abc"})
    assert r.status == 401


@pytest.mark.parametrize("header", ["Bearer", "Bearer ", "bearer   ", ""])
async def test_an_empty_credential_is_anonymous(make_client, header):
    c = await make_client(admin_token=ADMIN)  # reads need no credential
    r = await c.get("/v1/topics/Missing/route", headers={"Authorization": header})
    assert r.status == 404, await r.text()
    r = await c.put("/v1/kv/ns/k", json={"value": "v"}, headers={"Authorization": header})
    assert r.status == 401 and (await r.json())["code"] == "UNAUTHORIZED"
    assert (await (await c.get("/v1/kv")).json())["namespaces"] == []


async def test_reads_open_without_read_token(make_client):
    c = await make_client(admin_token=ADMIN)
    assert (await c.get("/v1/topics")).status == 200
    assert (await c.post("/v1/brokers/register", json=master())).status == 401
    assert (await c.post("/v1/brokers/register", json=master(), headers=bearer(ADMIN))).status == 200


async def test_config_endpoint_masks_secrets(secured):
    cfg = await (await secured.get("/v1/config", headers=bearer(ADMIN))).json()
    text = str(cfg)
    for secret in (ADMIN, BROKER_A, BROKER_ANY, READ):
        assert secret not in text
    assert cfg["config"]["admin_token"] == "***"


def test_token_parsing():
    assert parse_broker_tokens("a:12345678, *:abcdefgh,zzzzzzzz") == [
        ("a", "12345678"), ("*", "abcdefgh"), ("*", "zzzzzzzz")]
    with pytest.raises(ConfigError):
        parse_broker_tokens("a:short")
    assert Access(load_settings(env={})).open_mode


async def state(client):
    return await client.redis.get("{nsrv}:ver"), sorted(await client.redis.keys("*"))


async def test_a_cluster_bound_token_cannot_reach_into_another_cluster(secured):
    admin = bearer(ADMIN)
    topic = {"readQueueNums": 4, "writeQueueNums": 4, "perm": 6}
    r = await secured.post("/v1/brokers/register", headers=admin, json=master(
        cluster="C2", name="victim", addr="10.0.0.2:10911", topics={"Payments": topic, "TBW102": topic}))
    assert r.status == 200
    before = await state(secured)
    # a stolen C1 token pulls C2's producers onto its broker: refused, nothing written
    r = await secured.post("/v1/brokers/register", headers=bearer(BROKER_A), json=master(
        cluster="C1", name="thief", addr="10.0.0.9:10911", topics={"Payments": topic, "Own": topic}))
    assert r.status == 403 and (await r.json())["code"] == "CROSS_CLUSTER_REFUSED"
    assert "Payments" in (await r.json())["message"]
    # ... or takes the address a live C2 broker holds
    r = await secured.post("/v1/brokers/register", headers=bearer(BROKER_A), json=master(
        cluster="C1", name="thief", addr="10.0.0.2:10911", topics={"Own": topic}))
    assert r.status == 403 and "10.0.0.2:10911" in (await r.json())["message"]
    assert await state(secured) == before
    # system topics live on every cluster; a broker of C1 may carry them (5.5.0 brokers add RocksDB ones)
    rocksdb = ("RMQ_SYS_ROCKSDB_TRANS_HALF_TOPIC", "RMQ_SYS_ROCKSDB_TRANS_OP_HALF_TOPIC", "CHECKPOINT_TOPIC")
    r = await secured.post("/v1/brokers/register", headers=admin, json=master(
        cluster="C2", name="victim", addr="10.0.0.2:10911",
        topics={"Payments": topic, **dict.fromkeys(rocksdb, topic)}))
    assert r.status == 200
    r = await secured.post("/v1/brokers/register", headers=bearer(BROKER_A), json=master(
        cluster="C1", name="honest", addr="10.0.0.3:10911",
        topics={"TBW102": topic, "Own": topic, **dict.fromkeys(rocksdb, topic)}))
    assert r.status == 200, await r.text()
    # an any-cluster token is not cluster-bound: the operator trusted it with every cluster
    r = await secured.post("/v1/brokers/register", headers=bearer(BROKER_ANY), json=master(
        cluster="C3", name="other", addr="10.0.0.4:10911", topics={"Payments": topic}))
    assert r.status == 200


async def test_topics_may_span_clusters_when_the_operator_allows_it(make_client):
    c = await make_client(admin_token=ADMIN, broker_tokens=f"C1:{BROKER_A}", allow_cross_cluster_topics="true")
    topic = {"readQueueNums": 4, "writeQueueNums": 4, "perm": 6}
    await c.post("/v1/brokers/register", headers=bearer(ADMIN), json=master(
        cluster="C2", name="b2", addr="10.0.0.2:10911", topics={"Shared": topic}))
    r = await c.post("/v1/brokers/register", headers=bearer(BROKER_A), json=master(
        cluster="C1", name="b1", addr="10.0.0.9:10911", topics={"Shared": topic}))
    assert r.status == 200
    route = await (await c.get("/v1/topics/Shared/route")).json()
    assert sorted(b["cluster"] for b in route["brokerDatas"]) == ["C1", "C2"]
    r = await c.post("/v1/brokers/register", headers=bearer(BROKER_A), json=master(
        cluster="C1", name="b3", addr="10.0.0.2:10911", topics={"Own": topic}))
    assert r.status == 403  # a live address of another cluster stays refused
