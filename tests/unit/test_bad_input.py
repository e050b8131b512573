"""A battery of bad inputs: each gets a 4xx JSON error and writes nothing (the registry version is unchanged)."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from tests.battery import FIELD_CASES, KV_NAME_CASES, KV_NAMES_KEPT, KV_VALUE_CASES, TOPIC_CASES
from tests.unit.conftest import master

IDENT = {"clusterName": "C1", "brokerName": "broker-a", "brokerId": 0, "brokerAddr": "10.0.0.1:10911"}

BAD_REGISTRATIONS = [
    {},
    [],
    "text",
    master(clusterName=""),
    master(clusterName="bad name"),
    master(clusterName="x" * 128),
    master(brokerName="a/b"),
    master(brokerName=None),
    master(brokerId=-1),
    master(brokerId="zero"),
    master(brokerId=2**60),
    master(brokerId=True),
    master(brokerAddr="10.0.0.1"),
    master(brokerAddr="10.0.0.1:0"),
    master(brokerAddr="10.0.0.1:70000"),
    master(brokerAddr="host name:1"),
    master(haServerAddr="nohost"),
    master(heartbeatTimeoutMillis=5),
    master(heartbeatTimeoutMillis="soon"),
    master(enableActingMaster="maybe"),
    master(dataVersion="v1"),
    master(dataVersion={"timestamp": "x"}),
    master(topics={"bad topic": {"readQueueNums": 1, "writeQueueNums": 1, "perm": 6}}),
    master(topics={"T" * 128: {"readQueueNums": 1, "writeQueueNums": 1, "perm": 6}}),
    master(topics={"T": {"readQueueNums": -1, "writeQueueNums": 1, "perm": 6}}),
    master(topics={"T": {"readQueueNums": 1, "writeQueueNums": 70000, "perm": 6}}),
    master(topics={"T": {"readQueueNums": 1, "writeQueueNums": 1, "perm": 99}}),
    master(topics={"T": "not an object"}),
    master(topics=["T"]),
    master(filterServerList="10.0.0.1:1"),
    master(filterServerList=["not-an-address"]),
    master(zoneName="zone one"),
    # numbers must be JSON numbers, booleans JSON booleans (types as the schema says, never coerced)
    master(brokerId="0"),
    master(heartbeatTimeoutMillis="30000"),
    master(enableActingMaster="true"),
    master(topics={"T": {"readQueueNums": "8", "writeQueueNums": 8, "perm": 6}}),
    master(topics={"T": {"readQueueNums": 8, "writeQueueNums": 8, "perm": 6, "order": "false"}}),
    master(dataVersion={"timestamp": 1, "counter": "1", "stateVersion": 0}),
    master(brokerId=1.0),
    *[master(**{field: value}) for field, value in FIELD_CASES],
    *[master(topics={t: {"readQueueNums": 1, "writeQueueNums": 1, "perm": 6}}) for t in TOPIC_CASES],
]


async def version(client):
    return await client.redis.get("{nsrv}:ver"), sorted(await client.redis.keys("*"))


@pytest.mark.parametrize("body", BAD_REGISTRATIONS, ids=range(len(BAD_REGISTRATIONS)))
async def test_bad_registration_writes_nothing(client, body):
    before = await version(client)
    r = await client.post("/v1/brokers/register", json=body)
    assert 400 <= r.status < 500, await r.text()
    err = await r.json()
    assert set(err) >= {"code", "rocketmqCode", "message"}
    assert await version(client) == before


@pytest.mark.parametrize("raw", [b"", b"{", b"\xff\xfe", b"{\"a\": 1e999999}", b"[1,2", b"null",
                                 b'{"clusterName": "C1", "brokerId": 123456789012345678901234567890}'])
async def test_malformed_json(client, raw):
    before = await version(client)
    r = await client.post("/v1/brokers/register", data=raw, headers={"Content-Type": "application/json"})
    assert 400 <= r.status < 500
    assert (await r.json())["code"] == "INVALID_ARGUMENT"
    assert await version(client) == before


@pytest.mark.parametrize(("method", "path", "body"), [
    ("POST", "/v1/brokers/heartbeat", {**IDENT, "brokerAddr": "x"}),
    ("POST", "/v1/brokers/heartbeat", {**IDENT, "dataVersion": []}),
    ("POST", "/v1/brokers/unregister", {**IDENT, "clusterName": "a b"}),
    ("GET", "/v1/topics/bad%20topic/route", None),
    ("GET", "/v1/topics/" + "T" * 200 + "/route", None),
    ("GET", "/v1/clusters/a%20b/topics", None),
    ("DELETE", "/v1/topics/bad!topic", None),
    ("DELETE", "/v1/topics/T?cluster=a%20b", None),
    ("PUT", "/v1/topics/T/route", {"queueDatas": []}),
    ("PUT", "/v1/topics/T/route", {"queueDatas": [{"brokerName": "b"}]}),
    ("PUT", "/v1/topics/T/route", {"queueDatas": [
        {"brokerName": "b", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6},
        {"brokerName": "b", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6}]}),
    ("PUT", "/v1/kv/ns/k", {"value": 5}),
    ("PUT", "/v1/kv/ns/k", {"value": "x" * 70000}),
    ("PUT", "/v1/kv/ns/k", {}),
    ("PUT", "/v1/config", {}),
    ("PUT", "/v1/config", {"enableTopicList": {"nested": 1}}),
    ("POST", "/v1/brokers/a%2Fb/wipe-write-perm", None),
])
async def test_other_bad_requests(client, method, path, body):
    await client.post("/v1/brokers/register", json=master())
    before = await version(client)
    r = await client.request(method, path, json=body)
    assert 400 <= r.status < 500, (r.status, await r.text())
    assert (await r.json())["code"]
    assert await version(client) == before


async def test_body_limit_is_413(make_client):
    c = await make_client(max_body_bytes=2048)
    r = await c.post("/v1/brokers/register", data=b"{" + b" " * 4096 + b"}",
                     headers={"Content-Type": "application/json"})
    assert r.status == 413
    assert (await r.json())["code"] == "PAYLOAD_TOO_LARGE"


def _seg(name: str) -> str:
    return quote(name, safe="")


KV_BAD = ([(f"/v1/kv/{_seg(n)}/k", "v") for n in KV_NAME_CASES] + [(f"/v1/kv/ns/{_seg(n)}", "v") for n in KV_NAME_CASES]
          + [("/v1/kv/ns/k", v) for v in KV_VALUE_CASES])


@pytest.mark.parametrize(("path", "value"), KV_BAD, ids=lambda x: repr(x)[:60])
async def test_bad_kv_names_and_values(client, path, value):
    before = await version(client)
    r = await client.put(path, json={"value": value})
    assert 400 <= r.status < 500, (r.status, await r.text())
    assert (await r.json())["code"] == "INVALID_ARGUMENT"
    assert await version(client) == before
    assert (await client.get("/v1/kv")).status == 200 and (await (await client.get("/v1/kv")).json()) == {
        "namespaces": []}


@pytest.mark.parametrize("name", KV_NAMES_KEPT, ids=repr)
async def test_kv_names_java_keeps_are_kept(client, name):
    """Any text but control characters, as namespace and as key, percent-encoded as one path segment (issue 42)."""
    for ns, key in ((name, "k"), ("ns", name)):
        r = await client.put(f"/v1/kv/{_seg(ns)}/{_seg(key)}", json={"value": name})
        assert r.status == 200, await r.text()
        assert await (await client.get(f"/v1/kv/{_seg(ns)}/{_seg(key)}")).json() == {"value": name}
        assert (await (await client.get(f"/v1/kv/{_seg(ns)}")).json())["table"] == {key: name}
        assert ns in (await (await client.get("/v1/kv")).json())["namespaces"]
        assert await (await client.delete(f"/v1/kv/{_seg(ns)}/{_seg(key)}")).json() == {"deleted": True}
