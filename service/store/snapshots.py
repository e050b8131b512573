"""Snapshots of the route tables for the skew job: chunked reads, zlib parts, an index by time, retention.

Format (read back by service/store/snapshot_reader.py for the Spark job): ZSET `{P}:snaps` id -> takenAt;
HASH `{P}:snap:<id>` (takenAt, parts, rows, bytes, brokers = zlib(JSON list)); STRING `{P}:snap:<id>:<i>` =
zlib(JSON list of [cluster, brokerName, topic, readQueueNums, writeQueueNums, perm, topicSysFlag]), at most
5 000 rows a part. Reading pages through `snapshotChunk` keeps every Redis call short; writes are one small key
at a time.
"""

from __future__ import annotations

import logging
import zlib
from dataclasses import dataclass

import orjson

from service.store.routes import RouteStore, store_errors

log = logging.getLogger(__name__)
ROWS_PER_PART = 5000


@dataclass(frozen=True)
class SnapshotInfo:
    snap_id: str
    taken_at: int
    rows: int
    parts: int
    bytes: int


class SnapshotStore:
    """The writer side of snapshots, the cluster-wide leases, and the stored skew summary."""

    def __init__(self, store: RouteStore) -> None:
        self.store = store
        self.redis = store.redis
        self.keys = store.keys

    @store_errors
    async def take(self, retention_s: int = 86_400, target_rows: int = 2000, now_ms: int | None = None
                   ) -> SnapshotInfo:
        """Write one snapshot and drop those older than the retention."""
        r, k = self.redis, self.keys
        taken_at = now_ms if now_ms is not None else await self.store.redis_time_ms()
        snap_id = str(taken_at)
        total_rows = total_bytes = parts = 0
        buf: list[list] = []

        async def flush() -> None:
            nonlocal parts, total_bytes, buf
            blob = zlib.compress(orjson.dumps(buf), 6)
            await r.set(k.snapshot_part(snap_id, parts), blob, ex=retention_s + 3600)
            parts += 1
            total_bytes += len(blob)
            buf = []

        async for rows in self.store.snapshot_pages(target_rows):
            for cluster, broker, topic, qd in rows:
                buf.append([cluster, broker, topic, qd.read_queue_nums, qd.write_queue_nums, qd.perm,
                            qd.topic_sys_flag])
                total_rows += 1
                if len(buf) >= ROWS_PER_PART:
                    await flush()
        if buf or parts == 0:
            await flush()
        brokers = zlib.compress(orjson.dumps([b.to_snapshot_dict() for b in await self.store.live_brokers()]), 6)
        total_bytes += len(brokers)
        await r.hset(k.snapshot(snap_id), mapping={"takenAt": taken_at, "parts": parts, "rows": total_rows,
                                                   "bytes": total_bytes, "brokers": brokers})
        await r.expire(k.snapshot(snap_id), retention_s + 3600)
        await r.zadd(k.snapshots, {snap_id: taken_at})
        await self.prune(retention_s, taken_at)
        log.info("snapshot %s: %d rows in %d parts, %d bytes", snap_id, total_rows, parts, total_bytes)
        return SnapshotInfo(snap_id, taken_at, total_rows, parts, total_bytes)

    @store_errors
    async def prune(self, retention_s: int, now_ms: int) -> int:
        """Delete snapshots older than the retention window (index entry, manifest and parts)."""
        r, k = self.redis, self.keys
        old = await r.zrangebyscore(k.snapshots, "-inf", f"({now_ms - retention_s * 1000}")
        for snap_id in old:
            parts = int(await r.hget(k.snapshot(snap_id), "parts") or 0)
            await r.delete(k.snapshot(snap_id), *[k.snapshot_part(snap_id, i) for i in range(parts)])
            await r.zrem(k.snapshots, snap_id)
        return len(old)

    @store_errors
    async def acquire_lease(self, name: str, ttl_ms: int, owner: str) -> bool:
        """One worker per tick cluster-wide: SET NX PX; the lease simply expires, nobody releases it."""
        return bool(await self.redis.set(self.keys.lease(name), owner, nx=True, px=ttl_ms))

    @store_errors
    async def skew_summary(self) -> str | None:
        """The latest skew summary JSON the Spark job stored, as text."""
        return await self.redis.get(self.keys.skew_report)

    @store_errors
    async def skew_trend(self) -> dict | None:
        """The latest summary's `trend` with when that report ran; None without a report (or one written before
        reports had a trend)."""
        raw = await self.redis.get(self.keys.skew_report)
        summary = orjson.loads(raw) if raw else {}
        if "trend" not in summary:
            return None
        return {"generatedAt": summary.get("generatedAt"),
                "latestTakenAt": summary.get("window", {}).get("latestTakenAt"), **summary["trend"]}

    @store_errors
    async def skew_history(self, limit: int) -> list[dict]:
        """The skew job's run records, newest first (zlib JSON entries of a LIST; see snapshot_reader)."""
        raw = await self.redis.execute_command("LRANGE", self.keys.skew_history, 0, max(0, limit - 1),
                                               NEVER_DECODE=True)
        return [orjson.loads(zlib.decompress(b)) for b in raw]
