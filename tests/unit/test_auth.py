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
