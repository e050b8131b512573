"""The job's Redis reader and file helpers (no Spark needed: the executor function is called directly)."""

from __future__ import annotations

import uuid
import zlib

import orjson
import pytest
import redis

from service.skew import io as skew_io
from tests.spark.conftest import put_snapshot


@pytest.fixture
def client(redis_server):
    c = redis.Redis.from_url(redis_server.url)
    yield c
    c.close()


@pytest.fixture
def prefix():
    return "skew" + uuid.uuid4().hex[:8]


def test_parse_duration():
    assert skew_io.parse_duration("24h") == 86400
    assert skew_io.parse_duration("10m") == 600
    assert skew_io.parse_duration("90s") == 90
    assert skew_io.parse_duration("7d") == 7 * 86400
    assert skew_io.parse_duration("1.5h") == 5400
    assert skew_io.parse_duration("500ms") == 0.5
    assert skew_io.parse_duration("42") == 42
    for bad in ("", "h", "24x", "-1h", "0m", "1h30m"):
        with pytest.raises(ValueError, match="bad duration"):
            skew_io.parse_duration(bad)


def test_keys_share_the_hash_tag():
    assert skew_io.index_key("nsrv") == "{nsrv}:snaps"
    assert skew_io.manifest_key("nsrv", "17") == "{nsrv}:snap:17"
    assert skew_io.part_key("nsrv", "17", 3) == "{nsrv}:snap:17:3"
    assert skew_io.report_key("nsrv") == "{nsrv}:report:skew"


@pytest.mark.redis
def test_list_snapshots_in_window_and_fetch_parts(client, prefix, redis_server):
    rows = [["c1", f"b{i % 3}", f"T{i}", 8, 4, 6, i % 2] for i in range(7)]
    put_snapshot(client, prefix, 1_000, rows[:2])
    put_snapshot(client, prefix, 2_000, rows, part_rows=3)  # 3 parts: 3 + 3 + 1 rows
    put_snapshot(client, prefix, 3_000, rows[:1])
    client.zadd(skew_io.index_key(prefix), {"2500": 2_500})  # indexed, manifest already gone: skipped

    snaps = skew_io.list_snapshots(client, prefix, 1_500, 3_000)
    assert [(s.snap_id, s.taken_at, s.parts, s.rows) for s in snaps] == [
        ("2000", 2000, 3, 7),
        ("3000", 3000, 1, 1),
    ]
    assert {b["brokerName"] for b in snaps[0].brokers} == {"b0", "b1", "b2"}
    assert skew_io.broker_rows(snaps[1:]) == [(3000, "c1", "b0")]

    specs = skew_io.part_specs(prefix, snaps)
    assert specs == [
        (2000, f"{{{prefix}}}:snap:2000:0"),
        (2000, f"{{{prefix}}}:snap:2000:1"),
        (2000, f"{{{prefix}}}:snap:2000:2"),
        (3000, f"{{{prefix}}}:snap:3000:0"),
    ]

    fetch = skew_io.PartFetcher(skew_io.RedisSpec(redis_server.url), batch=2)
    got = list(fetch(iter(specs)))
    expected = [(2000, *r) for r in rows] + [(3000, *rows[0])]
    assert got == [tuple(r) for r in expected]

    # A part deleted by retention between listing and fetching gives one marker row for its snapshot.
    client.delete(f"{{{prefix}}}:snap:2000:1")
    got = list(fetch(iter(specs)))
    assert (2000, None, None, None, None, None, None, None) in got
    assert len(got) == 3 + 1 + 1 + 1


@pytest.mark.redis
def test_store_summary(client, prefix):
    key = skew_io.store_summary(client, prefix, {"topics": [], "generatedAt": "x"})
    assert key == f"{{{prefix}}}:report:skew"
    assert orjson.loads(client.get(key)) == {"topics": [], "generatedAt": "x"}


def test_manifest_brokers_blob_is_zlib_orjson():
    raw = {
        b"takenAt": b"5",
        b"parts": b"2",
        b"rows": b"9",
        b"bytes": b"100",
        b"brokers": zlib.compress(orjson.dumps([{"cluster": "c", "brokerName": "b"}])),
    }
    info = skew_io._decode_manifest("5", raw)
    assert (info.taken_at, info.parts, info.rows, info.bytes) == (5, 2, 9, 100)
    assert info.brokers == [{"cluster": "c", "brokerName": "b"}]
    assert skew_io._decode_manifest("5", {}) is None


def test_load_weights_json_and_csv(tmp_path):
    j = tmp_path / "w.json"
    j.write_text('{"Orders": 120.5, "Audit": 0, "*": 1}')
    assert skew_io.load_weights(j) == {"Orders": 120.5, "Audit": 0.0, "*": 1.0}

    c = tmp_path / "w.csv"
    c.write_text("topic,weight\nOrders,120.5\n# comment\n\nAudit, 2\n")
    assert skew_io.load_weights(c) == {"Orders": 120.5, "Audit": 2.0}

    headerless = tmp_path / "h.csv"
    headerless.write_text("Orders,3\n")
    assert skew_io.load_weights(headerless) == {"Orders": 3.0}


@pytest.mark.parametrize(
    "name,text,match",
    [
        ("a.json", "[1, 2]", "expected a JSON object"),
        ("b.json", "{not json", "not valid JSON"),
        ("c.json", '{"T": -1}', "finite number >= 0"),
        ("d.json", '{"T": "lots"}', "not a number"),
        ("e.csv", "topic,weight\nT\n", "expected 'topic,weight'"),
        ("f.csv", "topic,weight\nT,nan\n", "finite number >= 0"),
    ],
)
def test_load_weights_rejects_bad_files(tmp_path, name, text, match):
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(ValueError, match=match):
        skew_io.load_weights(p)
