"""The store's snapshot reader (no Spark needed: the executor function is called directly): the window, part
fetches including a part vanishing mid-read, snapshots written by the store's writer and by hand in the
format older versions wrote, pickling for executors, errors, and what it imports."""

from __future__ import annotations

import pickle
import subprocess
import sys
import uuid
import zlib

import orjson
import pytest
import redis
import redis.asyncio as aioredis

from service.errors import StoreUnavailable
from service.models import RegisterBroker, TopicConfig
from service.store import RouteStore, SnapshotStore
from service.store.snapshot_reader import (
    RedisSpec,
    SnapshotReader,
    broker_rows,
    decode_manifest,
    part_refs,
)
from tests.redis_server import free_port
from tests.spark.conftest import put_snapshot


@pytest.fixture
def client(redis_server):
    c = redis.Redis.from_url(redis_server.url)
    yield c
    c.close()


@pytest.fixture
def prefix():
    return "skew" + uuid.uuid4().hex[:8]


@pytest.fixture
def reader(redis_server, prefix):
    with SnapshotReader(RedisSpec(redis_server.url), prefix, fetch_batch=2) as r:
        yield r


@pytest.mark.redis
def test_list_snapshots_in_window_and_fetch_parts(client, prefix, reader):
    rows = [["c1", f"b{i % 3}", f"T{i}", 8, 4, 6, i % 2] for i in range(7)]
    put_snapshot(client, prefix, 1_000, rows[:2])
    put_snapshot(client, prefix, 2_000, rows, part_rows=3)  # 3 parts: 3 + 3 + 1 rows
    put_snapshot(client, prefix, 3_000, rows[:1])
    client.zadd(f"{{{prefix}}}:snaps", {"2500": 2_500})  # indexed, manifest already gone: skipped

    snaps = reader.list_snapshots(1_500, 3_000)
    assert [(s.snap_id, s.taken_at, s.parts, s.rows) for s in snaps] == [
        ("2000", 2000, 3, 7),
        ("3000", 3000, 1, 1),
    ]
    assert {b["brokerName"] for b in snaps[0].brokers} == {"b0", "b1", "b2"}
    assert broker_rows(snaps[1:]) == [(3000, "c1", "b0")]

    refs = part_refs(snaps)
    assert refs == [(2000, "2000", 0), (2000, "2000", 1), (2000, "2000", 2), (3000, "3000", 0)]
    got = list(reader.fetch_parts(iter(refs)))
    assert got == [(2000, *r) for r in rows] + [(3000, *rows[0])]

    # A part deleted by retention between listing and fetching gives one marker row for its snapshot.
    client.delete(f"{{{prefix}}}:snap:2000:1")
    got = list(reader.fetch_parts(iter(refs)))
    assert (2000, None, None, None, None, None, None, None) in got
    assert len(got) == 3 + 1 + 1 + 1


@pytest.mark.redis
async def test_reads_what_the_store_writer_wrote(redis_server, prefix):
    """The reader and service/store/snapshots.py agree on the format: rows, parts and brokers round-trip."""
    aclient = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
    try:
        store = RouteStore(aclient, prefix=prefix)
        await store.load_scripts()
        topics = {f"T{i}": TopicConfig(8, 4, 6 if i % 5 else 4, i % 3) for i in range(23)}
        await store.register_broker(RegisterBroker(cluster="C1", broker_name="b1", broker_id=0,
                                                   broker_addr="10.0.0.1:10911", ha_server_addr="", topics=topics))
        info = await SnapshotStore(store).take(3600, target_rows=5)
    finally:
        await aclient.aclose()
    with SnapshotReader(RedisSpec(redis_server.url), prefix) as reader:
        (snap,) = reader.list_snapshots(0)
        assert (snap.snap_id, snap.taken_at, snap.rows, snap.parts, snap.bytes) == (
            info.snap_id, info.taken_at, info.rows, info.parts, info.bytes)
        got = sorted(reader.fetch_parts(part_refs([snap])))
    assert got == sorted(
        (info.taken_at, "C1", "b1", t, c.read_queue_nums, c.write_queue_nums, c.perm, c.topic_sys_flag)
        for t, c in topics.items()
    )
    assert broker_rows([snap]) == [(info.taken_at, "C1", "b1")]


@pytest.mark.redis
def test_summary_round_trip(reader, client, prefix):
    assert reader.load_summary() is None
    reader.store_summary({"topics": [], "generatedAt": "x"})
    assert orjson.loads(client.get(f"{{{prefix}}}:report:skew")) == {"topics": [], "generatedAt": "x"}
    assert reader.load_summary() == {"topics": [], "generatedAt": "x"}


@pytest.mark.redis
def test_pickles_without_its_connection_and_fetches_after(client, prefix, reader):
    """Executors receive `reader.fetch_parts` pickled; the open client must not travel (it cannot)."""
    put_snapshot(client, prefix, 5_000, [["c", "b", "T", 1, 1, 6, 0]])
    reader.ping()  # opens the driver's connection
    assert reader._client is not None
    fn = pickle.loads(pickle.dumps(reader.fetch_parts))
    assert fn.__self__._client is None and fn.__self__.keys.prefix == prefix
    assert list(fn([(5_000, "5000", 0)])) == [(5_000, "c", "b", "T", 1, 1, 6, 0)]


def test_unreachable_redis_is_store_unavailable():
    with SnapshotReader(RedisSpec(f"redis://127.0.0.1:{free_port()}/0", connect_timeout_s=0.5)) as reader:
        with pytest.raises(StoreUnavailable):
            reader.now_ms()


def test_manifest_brokers_blob_is_zlib_orjson():
    raw = {
        b"takenAt": b"5",
        b"parts": b"2",
        b"rows": b"9",
        b"bytes": b"100",
        b"brokers": zlib.compress(orjson.dumps([{"cluster": "c", "brokerName": "b"}])),
    }
    info = decode_manifest("5", raw)
    assert (info.taken_at, info.parts, info.rows, info.bytes) == (5, 2, 9, 100)
    assert list(info.brokers) == [{"cluster": "c", "brokerName": "b"}]
    assert decode_manifest("5", {}) is None


def test_executors_import_only_what_the_reader_needs():
    """An executor unpickling the fetch function imports service.store.snapshot_reader: that must not pull in
    the async store, fakeredis, pyspark or pandas (executors given only the code need redis and orjson)."""
    code = (
        "import sys, service.store.snapshot_reader\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('fakeredis', 'pyspark', 'pandas', 'aiohttp')"
        " or m in ('service.store.routes', 'service.store.connect', 'service.config'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == ""


@pytest.mark.redis
def test_history_is_newest_first_and_bounded(reader, client, prefix):
    assert reader.history() == []
    for i in range(4):
        assert reader.push_history({"runId": str(i), "n": i}, keep=3) == min(i + 1, 3)
    assert [r["runId"] for r in reader.history()] == ["3", "2", "1"]
    assert [r["runId"] for r in reader.history(limit=1)] == ["3"]
    assert client.type(f"{{{prefix}}}:report:skew:history") == b"list"


@pytest.mark.redis
def test_leases_belong_to_their_owner(reader, client, prefix):
    key = f"{{{prefix}}}:lease:job"
    assert reader.acquire_lease("job", 10_000, "a") and not reader.acquire_lease("job", 10_000, "b")
    assert not reader.renew_lease("job", 60_000, "b") and not reader.release_lease("job", "b")
    assert client.get(key) == b"a" and client.pttl(key) <= 10_000
    assert reader.renew_lease("job", 60_000, "a") and client.pttl(key) > 10_000
    assert reader.release_lease("job", "a") and client.get(key) is None
    assert not reader.renew_lease("job", 1000, "a")  # gone: nothing to renew
