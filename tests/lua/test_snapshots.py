"""Snapshots: the format the skew job reads, retention pruning, and the once-per-tick lease."""

from __future__ import annotations

import zlib

import orjson

from service.models import RegisterBroker, TopicConfig
from service.store import SnapshotStore
from tests.invariants import check_invariants


async def take_snapshot(store, retention_s=86_400, **kw) -> str:
    return (await SnapshotStore(store).take(retention_s, **kw)).snap_id


async def _register(store, name, cluster, addr, topics):
    await store.register_broker(RegisterBroker(cluster=cluster, broker_name=name, broker_id=0, broker_addr=addr,
                                               ha_server_addr="", topics=topics))


async def test_snapshot_rows_parts_and_brokers(store):
    await _register(store, "b1", "C1", "10.0.0.1:1", {f"T{i}": TopicConfig(8, 4, 6, i % 3) for i in range(30)})
    await _register(store, "b2", "C2", "10.0.0.2:1", {"T0": TopicConfig(2, 2, 4, 0)})
    snap_id = await take_snapshot(store, retention_s=3600, target_rows=7)
    k = store.keys
    assert await store.redis.zscore(k.snapshots, snap_id) == int(snap_id)
    rows_n, parts, nbytes = await store.redis.hmget(k.snapshot(snap_id), "rows", "parts", "bytes")
    assert int(rows_n) == 31 and int(parts) == 1 and int(nbytes) > 0
    raw = await store.redis.execute_command("GET", k.snapshot_part(snap_id, 0), NEVER_DECODE=True)
    rows = orjson.loads(zlib.decompress(raw))
    assert sorted(map(tuple, rows)) == sorted(
        [("C1", "b1", f"T{i}", 8, 4, 6, i % 3) for i in range(30)] + [("C2", "b2", "T0", 2, 2, 4, 0)])
    brokers_raw = await store.redis.execute_command("HGET", k.snapshot(snap_id), "brokers", NEVER_DECODE=True)
    brokers = orjson.loads(zlib.decompress(brokers_raw))
    assert {(b["cluster"], b["brokerName"], b["brokerAddr"]) for b in brokers} == {
        ("C1", "b1", "10.0.0.1:1"), ("C2", "b2", "10.0.0.2:1")}
    await check_invariants(store.redis, k.prefix)


async def test_retention_prunes_old_snapshots(store):
    await _register(store, "b1", "C1", "10.0.0.1:1", {"T": TopicConfig()})
    now = 10_000_000
    old = await take_snapshot(store, retention_s=60, now_ms=now - 120_000)
    recent = await take_snapshot(store, retention_s=60, now_ms=now - 30_000)
    latest = await take_snapshot(store, retention_s=60, now_ms=now)
    k = store.keys
    assert await store.redis.zrange(k.snapshots, 0, -1) == [recent, latest]
    assert not await store.redis.exists(k.snapshot(old), k.snapshot_part(old, 0))
    assert await store.redis.exists(k.snapshot(recent), k.snapshot_part(recent, 0)) == 2


async def test_lease_admits_one_worker_per_tick(store):
    snaps = SnapshotStore(store)
    assert await snaps.acquire_lease("snapshot", 60_000, "worker-a")
    assert not await snaps.acquire_lease("snapshot", 60_000, "worker-b")
    assert await store.redis.get(store.keys.lease("snapshot")) == "worker-a"
    assert 0 < await store.redis.pttl(store.keys.lease("snapshot")) <= 60_000


async def test_snapshot_uses_the_redis_clock(store):
    snap_id = await take_snapshot(store, retention_s=3600)
    assert abs(int(snap_id) - await store.redis_time_ms()) < 5_000
