"""Skew-report I/O: list snapshots in Redis, fetch and decode their parts (on executors), read weights,
write the output files and store the summary. No pyspark import here: executors import this module too.
"""

from __future__ import annotations

import csv
import logging
import math
import os
import re
import tempfile
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import redis

log = logging.getLogger(__name__)

# One row of a snapshot part, as the snapshot writer stores it (service/snapshot.py).
PART_FIELDS = ("cluster", "brokerName", "topic", "readQueueNums", "writeQueueNums", "perm", "topicSysFlag")
# Parts fetched per MGET: a part is at most 5 000 rows (~60 kB compressed), so a batch stays well under a MB.
FETCH_BATCH = 8
# Manifests read per pipeline round trip on the driver.
MANIFEST_BATCH = 500

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0, None: 1.0}


# --- keys (the snapshot writer's schema; literal braces are the Redis Cluster hash tag)


def index_key(prefix: str) -> str:
    return f"{{{prefix}}}:snaps"


def manifest_key(prefix: str, snap_id: str) -> str:
    return f"{{{prefix}}}:snap:{snap_id}"


def part_key(prefix: str, snap_id: str, i: int) -> str:
    return f"{{{prefix}}}:snap:{snap_id}:{i}"


def report_key(prefix: str) -> str:
    return f"{{{prefix}}}:report:skew"


def parse_duration(text: str) -> float:
    """'90s', '10m', '24h', '7d', '1w', '500ms' or plain seconds -> seconds (> 0). ValueError otherwise."""
    m = _DURATION.match(str(text))
    if not m:
        raise ValueError(f"bad duration {text!r}: use a number with a unit, e.g. 30m, 24h, 7d")
    seconds = float(m.group(1)) * _UNIT_S[m.group(2)]
    if seconds <= 0:
        raise ValueError(f"bad duration {text!r}: must be positive")
    return seconds


# --- Redis connections (driver and executors)


@dataclass(frozen=True)
class RedisSpec:
    """How to reach Redis; picklable so executors can open their own connection."""

    url: str
    password: str | None = None
    socket_timeout_s: float = 30.0

    def client(self) -> redis.Redis:
        kwargs: dict[str, Any] = {"socket_timeout": self.socket_timeout_s, "socket_connect_timeout": 5.0}
        if self.password:
            kwargs["password"] = self.password
        return redis.Redis.from_url(self.url, **kwargs)


def redis_now_ms(client: redis.Redis) -> int:
    """Redis' clock, the project's one clock (snapshot scores come from it too)."""
    sec, usec = client.time()
    return int(sec) * 1000 + int(usec) // 1000


# --- snapshot manifests (driver)


@dataclass
class SnapshotInfo:
    snap_id: str
    taken_at: int
    parts: int
    rows: int
    bytes: int
    brokers: list[dict[str, Any]] = field(default_factory=list)


def _decode_manifest(snap_id: str, raw: Mapping[bytes, bytes]) -> SnapshotInfo | None:
    if not raw or b"parts" not in raw:
        return None
    blob = raw.get(b"brokers")
    brokers = orjson.loads(zlib.decompress(blob)) if blob else []
    return SnapshotInfo(
        snap_id=snap_id,
        taken_at=int(raw.get(b"takenAt", snap_id)),
        parts=int(raw[b"parts"]),
        rows=int(raw.get(b"rows", 0)),
        bytes=int(raw.get(b"bytes", 0)),
        brokers=brokers,
    )


def list_snapshots(
    client: redis.Redis, prefix: str, since_ms: int, until_ms: int | None = None
) -> list[SnapshotInfo]:
    """Snapshots taken in [since_ms, until_ms] (no upper bound by default: a snapshot stamped by a worker
    whose clock runs ahead of Redis' still counts), oldest first. Ids whose manifest is gone (retention ran
    between the ZRANGE and the HGETALL) are skipped."""
    upper: int | str = "+inf" if until_ms is None else until_ms
    ids = [
        m.decode() if isinstance(m, bytes) else str(m)
        for m in client.zrangebyscore(index_key(prefix), since_ms, upper)
    ]
    out: list[SnapshotInfo] = []
    for start in range(0, len(ids), MANIFEST_BATCH):
        chunk = ids[start : start + MANIFEST_BATCH]
        pipe = client.pipeline(transaction=False)
        for sid in chunk:
            pipe.hgetall(manifest_key(prefix, sid))
        for sid, raw in zip(chunk, pipe.execute(), strict=True):
            info = _decode_manifest(sid, raw)
            if info is None:
                log.warning("snapshot %s is indexed but its manifest is gone; skipped", sid)
            else:
                out.append(info)
    out.sort(key=lambda s: s.taken_at)
    return out


def part_specs(prefix: str, snaps: Iterable[SnapshotInfo]) -> list[tuple[int, str]]:
    """(takenAt, part key) for every part of every snapshot: what the driver hands to the executors."""
    return [(s.taken_at, part_key(prefix, s.snap_id, i)) for s in snaps for i in range(s.parts)]


def broker_rows(snaps: Iterable[SnapshotInfo]) -> list[tuple[int, str, str]]:
    """Distinct (takenAt, cluster, brokerName) from the manifests: brokers that host no topic still count."""
    seen: set[tuple[int, str, str]] = set()
    for s in snaps:
        for b in s.brokers:
            cluster, name = b.get("cluster"), b.get("brokerName")
            if cluster and name:
                seen.add((s.taken_at, str(cluster), str(name)))
    return sorted(seen)


# --- part fetch (executors)


class PartFetcher:
    """mapPartitions function: one Redis client per Spark partition, parts fetched with MGET in small
    batches, each decoded (zlib + orjson) into row tuples.

    A part that has vanished (retention) yields one marker row `(takenAt, None, ...)` so the driver can
    drop that whole snapshot instead of reporting on part of it."""

    def __init__(self, spec: RedisSpec, batch: int = FETCH_BATCH):
        self.spec = spec
        self.batch = batch

    def __call__(self, specs: Iterable[tuple[int, str]]) -> Iterator[tuple[Any, ...]]:
        client = self.spec.client()
        try:
            batch: list[tuple[int, str]] = []
            for item in specs:
                batch.append(item)
                if len(batch) >= self.batch:
                    yield from self._fetch(client, batch)
                    batch = []
            if batch:
                yield from self._fetch(client, batch)
        finally:
            client.close()

    @staticmethod
    def _fetch(client: redis.Redis, batch: list[tuple[int, str]]) -> Iterator[tuple[Any, ...]]:
        blobs = client.mget([k for _, k in batch])
        for (taken_at, key), blob in zip(batch, blobs, strict=True):
            if blob is None:
                log.warning("snapshot part %s is gone; snapshot %s will be skipped", key, taken_at)
                yield (taken_at, None, None, None, None, None, None, None)
                continue
            for r in orjson.loads(zlib.decompress(blob)):
                yield (taken_at, r[0], r[1], r[2], int(r[3]), int(r[4]), int(r[5]), int(r[6]))


# --- weights


def _weight(topic: str, raw: Any, source: str) -> float:
    try:
        w = float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"{source}: weight of topic {topic!r} is not a number: {raw!r}") from None
    if not math.isfinite(w) or w < 0:
        raise ValueError(f"{source}: weight of topic {topic!r} must be a finite number >= 0, got {raw!r}")
    return w


def load_weights(path: str | os.PathLike[str]) -> dict[str, float]:
    """Topic -> traffic weight, from JSON ({"topic": weight, ...}) or CSV (topic,weight; header optional).
    The entry "*" (if any) is the weight of topics the file does not name."""
    p = Path(path)
    text = p.read_text(encoding="utf-8")
    source = str(p)
    weights: dict[str, float] = {}
    if p.suffix.lower() == ".json" or text.lstrip().startswith("{"):
        try:
            data = orjson.loads(text)
        except orjson.JSONDecodeError as e:
            raise ValueError(f"{source}: not valid JSON: {e}") from None
        if not isinstance(data, dict):
            raise ValueError(f'{source}: expected a JSON object {{"topic": weight, ...}}')
        for topic, raw in data.items():
            weights[str(topic)] = _weight(str(topic), raw, source)
        return weights
    for lineno, row in enumerate(csv.reader(text.splitlines()), start=1):
        if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
            continue
        if len(row) < 2:
            raise ValueError(f"{source}:{lineno}: expected 'topic,weight'")
        topic, raw = row[0].strip(), row[1].strip()
        if lineno == 1 and not _is_number(raw):
            continue  # header
        weights[topic] = _weight(topic, raw, f"{source}:{lineno}")
    return weights


def _is_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


# --- outputs


def _atomic_write(path: Path, data: bytes) -> None:
    """Readers (a web server, a planner's browser) never see a half-written file, also under --every."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, obj: Any) -> None:
    _atomic_write(path, orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))


def write_text(path: Path, text: str) -> None:
    _atomic_write(path, text.encode("utf-8"))


def write_table(out: Path, name: str, pdf: Any) -> list[Path]:
    """One pandas table as <name>.csv and <name>.parquet. List columns (flags) are '|'-joined in the CSV."""
    import io as _io

    csv_pdf = pdf.copy()
    for col in csv_pdf.columns:
        if csv_pdf[col].dtype == object and csv_pdf[col].map(_is_sequence).any():
            csv_pdf[col] = csv_pdf[col].map(lambda v: "|".join(map(str, v)) if _is_sequence(v) else "")
    buf = _io.StringIO()
    csv_pdf.to_csv(buf, index=False)
    csv_path, pq_path = out / f"{name}.csv", out / f"{name}.parquet"
    _atomic_write(csv_path, buf.getvalue().encode("utf-8"))
    pq_buf = _io.BytesIO()
    pdf.to_parquet(pq_buf, index=False)
    _atomic_write(pq_path, pq_buf.getvalue())
    return [csv_path, pq_path]


def _is_sequence(v: Any) -> bool:
    return v is not None and not isinstance(v, str | bytes) and hasattr(v, "__iter__")


def store_summary(client: redis.Redis, prefix: str, summary: Mapping[str, Any]) -> str:
    """SET the summary JSON where the HTTP workers serve it (GET /v1/reports/skew)."""
    key = report_key(prefix)
    client.set(key, orjson.dumps(summary, option=orjson.OPT_SERIALIZE_NUMPY))
    return key
