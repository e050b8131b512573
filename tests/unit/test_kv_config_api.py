"""The whole KV config over HTTP (issue 42): `GET /v1/kv-config` in the layout of Java's kvConfig.json, and
`POST /v1/kv-config/import`, one step for every namespace, with a dry run; a body holding any entry that breaks a
rule is refused naming each such entry, and nothing is written."""

from __future__ import annotations

import orjson
import pytest

from tests.unit.conftest import ADMIN, READ


async def version(client) -> int:
    return int(await client.redis.get(client.settings.key_prefix.join("{}") + ":ver") or 0)


async def test_import_then_export_in_javas_layout(client):
    await client.put("/v1/kv/NS/keep", json={"value": "1"})
    body = {"configTable": {"ORDER_TOPIC_CONFIG": {"TopicA": "broker-a:4"}, "NS": {"keep": "1", "k": "v"},
                            "Empty": {}}}
    r = await client.post("/v1/kv-config/import", json=body)
    assert r.status == 200, await r.text()
    res = await r.json()
    assert res["dryRun"] is False and res["totals"] == {"namespacesCreated": 2, "added": 2, "changed": 0,
                                                         "unchanged": 1, "removed": 0, "kept": 0}
    by_ns = {n["namespace"]: n for n in res["namespaces"]}
    assert by_ns["NS"] == {"namespace": "NS", "created": False, "added": {"k": "v"}, "changed": {},
                           "unchanged": ["keep"], "removed": {}, "kept": []}
    r = await client.get("/v1/kv-config")
    assert await r.json() == {"configTable": {"Empty": {}, "NS": {"k": "v", "keep": "1"},
                                              "ORDER_TOPIC_CONFIG": {"TopicA": "broker-a:4"}}}
    r = await client.get("/v1/kv-config", params=[("namespace", "NS"), ("namespace", "nope")])
    assert await r.json() == {"configTable": {"NS": {"k": "v", "keep": "1"}}}
    assert await (await client.get("/v1/kv/Empty")).json() == {"table": {}}


async def test_dry_run_and_replace(client):
    await client.put("/v1/kv/NS/a", json={"value": "1"})
    await client.put("/v1/kv/NS/b", json={"value": "2"})
    before = await version(client)
    body = {"configTable": {"NS": {"a": "9"}}, "replace": True, "dryRun": True}
    res = await (await client.post("/v1/kv-config/import", json=body)).json()
    assert res["namespaces"][0]["changed"] == {"a": {"before": "1", "after": "9"}}
    assert res["namespaces"][0]["removed"] == {"b": "2"}
    assert await (await client.get("/v1/kv/NS")).json() == {"table": {"a": "1", "b": "2"}}  # nothing written
    assert await version(client) == before
    merge = await (await client.post("/v1/kv-config/import", json={**body, "replace": False})).json()
    assert merge["namespaces"][0]["kept"] == ["b"] and merge["namespaces"][0]["removed"] == {}


BAD = [
    ({"configTable": {"NS": {"k\n": "v", "ok": "v"}, "N\x00S": {}, "X": {"k": 5}, "Y": ["k"]}}, 4),
    ({"configTable": {"NS": {"": "v"}}}, 1),
    ({"configTable": {"NS": {"k": None}}}, 1),
    ({"configTable": {"NS": {"k" * 256: "v"}}}, 1),
    ({"configTable": []}, 1),
    ({}, 1),
]


@pytest.mark.parametrize(("body", "count"), BAD, ids=range(len(BAD)))
async def test_a_table_with_entries_it_cannot_take_is_refused_whole(client, body, count):
    before = await version(client)
    r = await client.post("/v1/kv-config/import", json=body)
    assert r.status == 400
    err = await r.json()
    assert err["code"] == "INVALID_ARGUMENT" and "nothing was written" in err["message"]
    assert err["details"]["count"] == count == len(err["details"]["problems"])
    assert await version(client) == before
    assert await (await client.get("/v1/kv-config")).json() == {"configTable": {}}


async def test_every_entry_is_named(client):
    body = {"configTable": {"NS": {"k\n": "v"}, "N\x00S": {}, "X": {"k": 5}}}
    err = await (await client.post("/v1/kv-config/import", json=body)).json()
    assert {(p.get("namespace"), p.get("key")) for p in err["details"]["problems"]} == {
        ("NS", "k\n"), ("N\x00S", None), ("X", "k")}
    assert "'NS' key 'k\\n': key: control character U+000A at position 1" in err["message"]


async def test_a_large_import_is_parsed_apart_and_written_whole(client):
    """Over 256 KiB the body is parsed in the parser process, as a large registration is."""
    table = {"ORDER_TOPIC_CONFIG": {f"Topic{i:05d}": f"broker-{i % 9}:16;broker-x:16" for i in range(12_000)}}
    raw = orjson.dumps({"configTable": table})
    assert len(raw) > 256 * 1024
    r = await client.post("/v1/kv-config/import", data=raw, headers={"Content-Type": "application/json"})
    assert r.status == 200, await r.text()
    assert (await r.json())["totals"]["added"] == 12_000
    assert (await (await client.get("/v1/kv-config")).json())["configTable"] == table
    bad = orjson.dumps({"configTable": {**table, "NS": {"k\x01": "v"}}})
    r = await client.post("/v1/kv-config/import", data=bad, headers={"Content-Type": "application/json"})
    assert r.status == 400 and (await r.json())["details"]["problems"][0]["key"] == "k\x01"


async def test_roles(secured):
    body = {"configTable": {"NS": {"k": "v"}}}
    read, admin = {"Authorization": f"Bearer {READ}"}, {"Authorization": f"Bearer {ADMIN}"}
    assert (await secured.post("/v1/kv-config/import", json=body)).status == 401
    assert (await secured.post("/v1/kv-config/import", json={**body, "dryRun": True}, headers=read)).status == 200
    assert (await secured.post("/v1/kv-config/import", json=body, headers=read)).status == 403
    assert (await secured.post("/v1/kv-config/import", json=body, headers=admin)).status == 200
    assert (await secured.get("/v1/kv-config")).status == 401
    r = await secured.get("/v1/kv-config", headers=read)
    assert await r.json() == {"configTable": {"NS": {"k": "v"}}}
