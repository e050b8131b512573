"""GET /v1/reports/skew/history and /v1/reports/skew/trend: what the skew job stored (written here by the store's
own reader, on the same fakeredis server the app reads), read roles, bad limits."""

from __future__ import annotations

import fakeredis
import orjson
import pytest

from service.store.snapshot_reader import RedisSpec, SnapshotReader
from tests.unit.conftest import READ


@pytest.fixture
async def secured(make_client):
    return await make_client(admin_token="admin-token-123456", read_token=READ)


def job_side(client) -> SnapshotReader:
    """The skew job's (sync) reader on the app's fakeredis server."""
    return SnapshotReader(RedisSpec("redis://unused"), client.settings.key_prefix,
                          client=fakeredis.FakeRedis(server=client.fake_server))


def record(run_at: int) -> dict:
    return {"runId": str(run_at), "runAt": run_at, "generatedAt": f"g{run_at}", "latestTakenAt": run_at - 1,
            "totals": {"topics": 2}, "clusters": [{"cluster": "c", "gini": run_at / 1000}],
            "brokers": [{"cluster": "c", "brokerName": "b", "share": 1.0}], "topics": [{"topic": "T"}]}


async def test_history_newest_first_bounded_and_compact(client):
    r = await client.get("/v1/reports/skew/history")
    assert r.status == 200 and await r.json() == {"runs": []}
    reader = job_side(client)
    for run_at in (100, 200, 300):
        reader.push_history(record(run_at), keep=2)
    runs = (await (await client.get("/v1/reports/skew/history")).json())["runs"]
    assert [x["runId"] for x in runs] == ["300", "200"]
    assert runs[0] == {k: v for k, v in record(300).items() if k not in ("brokers", "topics")}
    runs = (await (await client.get("/v1/reports/skew/history?limit=1")).json())["runs"]
    assert [x["runId"] for x in runs] == ["300"]
    for bad in ("0", "x", "1001"):
        r = await client.get(f"/v1/reports/skew/history?limit={bad}")
        assert r.status == 400 and (await r.json())["code"] == "INVALID_ARGUMENT"


async def test_trend_of_the_latest_report(client):
    r = await client.get("/v1/reports/skew/trend")
    assert r.status == 404 and (await r.json())["code"] == "REPORT_NOT_FOUND"
    reader = job_side(client)
    reader.store_summary({"generatedAt": "old", "window": {"latestTakenAt": 5}, "topics": []})  # no trend yet
    assert (await client.get("/v1/reports/skew/trend")).status == 404
    trend = {"runs": 2, "previous": {"runId": "100"}, "topicsGrew": [{"topic": "T", "delta": 0.1}],
             "newlyFlagged": [], "brokersGrew": [], "clusters": [{"cluster": "c", "runAt": 100, "gini": 0.1}]}
    reader.store_summary({"generatedAt": "now", "window": {"latestTakenAt": 7}, "topics": [], "trend": trend})
    r = await client.get("/v1/reports/skew/trend")
    assert r.status == 200
    assert await r.json() == {"generatedAt": "now", "latestTakenAt": 7, **trend}
    assert orjson.loads(await (await client.get("/v1/reports/skew")).read())["trend"] == trend


async def test_reads_need_a_read_token_when_one_is_set(secured):
    for path in ("/v1/reports/skew/history", "/v1/reports/skew/trend"):
        assert (await secured.get(path)).status == 401
    r = await secured.get("/v1/reports/skew/history", headers={"Authorization": f"Bearer {READ}"})
    assert r.status == 200
