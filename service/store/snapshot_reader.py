"""The read side of route snapshots and the skew report's Redis keys (summary, history, scheduler leases),
for the Spark job: a synchronous (redis-py), picklable reader that the driver and the executors share. Keys
come from `Keys` only; the format is the writer's (service/store/snapshots.py). Imports nothing from the async
store, so executors need only redis and orjson.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import wraps
from typing import Any, ParamSpec, TypeVar

import orjson
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from service.errors import StoreUnavailable
from service.store.keys import Keys

log = logging.getLogger(__name__)

# One row of a snapshot part, as the writer stores it.
PART_FIELDS = ("cluster", "brokerName", "topic", "readQueueNums", "writeQueueNums", "perm", "topicSysFlag")
# Parts fetched per MGET: a part is at most 5 000 rows (~60 kB compressed), so one call stays well under a MB
# and a few ms of Redis time.
FETCH_BATCH = 8
# Manifests read per pipeline round trip on the driver.
MANIFEST_BATCH = 500

P = ParamSpec("P")
R = TypeVar("R")

# (takenAt, snapshot id, part index): what the driver hands to the executors. No key names leave the store.
PartRef = tuple[int, str, int]


def _redis_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """redis-py failures leave the store as StoreUnavailable, so the job never needs to know redis-py."""

    @wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except redis.RedisError as exc:
            raise StoreUnavailable(f"{type(exc).__name__}: {exc}") from exc

    return wrapper


@dataclass(frozen=True)
class RedisSpec:
    """How to reach Redis — one URL, Sentinel (`sentinels` + `master_name`) or Cluster (`cluster`, `url` a seed
    node); picklable, so each executor opens its own connection. Timeouts are longer than the workers' (an MGET of
    8 parts under load), but bounded."""

    url: str
    password: str | None = None
    socket_timeout_s: float = 30.0
    connect_timeout_s: float = 5.0
    sentinels: tuple[tuple[str, int], ...] = ()
    master_name: str = "mymaster"
    sentinel_password: str | None = None
    cluster: bool = False
    cluster_nodes: tuple[tuple[str, int], ...] = ()  # more seeds than the URL's node
    sentinel_tls: tuple[tuple[str, Any], ...] = ()  # Sentinel mode's TLS options (Settings.sentinel_tls_options)

    @classmethod
    def from_settings(cls, s: Any) -> RedisSpec:
        """The spec of a service.config.Settings (any of the three deployments)."""
        return cls(s.redis_url, password=s.redis_password or None, sentinels=tuple(s.sentinel_addresses),
                   master_name=s.redis_master_name, sentinel_password=s.redis_sentinel_password or None,
                   cluster=s.redis_cluster, cluster_nodes=tuple(s.cluster_seed_addresses),
                   sentinel_tls=tuple(sorted(s.sentinel_tls_options.items())))

    def client(self) -> redis.Redis:
        kwargs: dict[str, Any] = {
            "socket_timeout": self.socket_timeout_s,
            "socket_connect_timeout": self.connect_timeout_s,
        }
        if self.password:
            kwargs["password"] = self.password
        if self.sentinels:
            from redis.sentinel import Sentinel

            fast = {"socket_timeout": min(self.socket_timeout_s, 5.0), "socket_connect_timeout":
                    self.connect_timeout_s, "retry": Retry(NoBackoff(), 0)}  # next sentinel at once
            if self.sentinel_password:
                fast["password"] = self.sentinel_password
            tls = dict(self.sentinel_tls)
            return Sentinel(list(self.sentinels), sentinel_kwargs={**fast, **tls},
                            **kwargs, **tls).master_for(self.master_name)
        if self.cluster:
            from redis.cluster import ClusterNode, RedisCluster

            seeds = [ClusterNode(host, port) for host, port in self.cluster_nodes] or None
            return RedisCluster.from_url(self.url, startup_nodes=seeds, **kwargs)  # type: ignore[return-value]
        return redis.Redis.from_url(self.url, **kwargs)


@dataclass(frozen=True)
class SnapshotManifest:
    snap_id: str
    taken_at: int
    parts: int
    rows: int
    bytes: int
    brokers: tuple[Mapping[str, Any], ...] = field(default=())


def decode_manifest(snap_id: str, raw: Mapping[bytes, bytes]) -> SnapshotManifest | None:
    """A manifest HASH as HGETALL returns it (bytes); None when it is gone."""
    if not raw or b"parts" not in raw:
        return None
    blob = raw.get(b"brokers")
    return SnapshotManifest(
        snap_id=snap_id,
        taken_at=int(raw.get(b"takenAt", snap_id)),
        parts=int(raw[b"parts"]),
        rows=int(raw.get(b"rows", 0)),
        bytes=int(raw.get(b"bytes", 0)),
        brokers=tuple(orjson.loads(zlib.decompress(blob))) if blob else (),
    )


def part_refs(snaps: Iterable[SnapshotManifest]) -> list[PartRef]:
    """Every part of every snapshot, in order."""
    return [(s.taken_at, s.snap_id, i) for s in snaps for i in range(s.parts)]


def broker_rows(snaps: Iterable[SnapshotManifest]) -> list[tuple[int, str, str]]:
    """Distinct (takenAt, cluster, brokerName) from the manifests: brokers that host no topic still count."""
    seen: set[tuple[int, str, str]] = set()
    for s in snaps:
        for b in s.brokers:
            cluster, name = b.get("cluster"), b.get("brokerName")
            if cluster and name:
                seen.add((s.taken_at, str(cluster), str(name)))
    return sorted(seen)


class SnapshotReader:
    """Snapshots in a window, their parts, the Redis clock, and the stored skew summary.

    Pickling keeps the spec and the prefix only (the connection is opened lazily where it is used), so
    `rdd.mapPartitions(reader.fetch_parts)` ships it to the executors."""

    def __init__(self, spec: RedisSpec, prefix: str = "nsrv", fetch_batch: int = FETCH_BATCH,
                 client: redis.Redis | None = None) -> None:
        """`client`: the driver's connection, when the caller has one (it does not travel to executors)."""
        self.spec = spec
        self.keys = Keys(prefix)
        self.fetch_batch = fetch_batch
        self._client: redis.Redis | None = client

    def __getstate__(self) -> dict[str, Any]:
        return {"spec": self.spec, "keys": self.keys, "fetch_batch": self.fetch_batch, "_client": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    @property
    def prefix(self) -> str:
        return self.keys.prefix

    @property
    def index_name(self) -> str:
        """The snapshot index key, for messages that tell an operator where the job looked."""
        return self.keys.snapshots

    @property
    def summary_name(self) -> str:
        return self.keys.skew_report

    @property
    def client(self) -> redis.Redis:
        if self._client is None:
            self._client = self.spec.client()
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> SnapshotReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- driver

    @_redis_errors
    def ping(self) -> None:
        self.client.ping()

    @_redis_errors
    def now_ms(self) -> int:
        """Redis' clock, the project's one clock (snapshot scores come from it too)."""
        sec, usec = self.client.time()
        return int(sec) * 1000 + int(usec) // 1000

    @_redis_errors
    def list_snapshots(self, since_ms: int, until_ms: int | None = None) -> list[SnapshotManifest]:
        """Snapshots taken in [since_ms, until_ms] (no upper bound by default: a snapshot stamped by a worker
        whose clock runs ahead of Redis' still counts), oldest first. Ids whose manifest is gone (retention ran
        between the ZRANGE and the HGETALL) are skipped."""
        upper: int | str = "+inf" if until_ms is None else until_ms
        ids = [_text(m) for m in self.client.zrangebyscore(self.keys.snapshots, since_ms, upper)]
        out: list[SnapshotManifest] = []
        for start in range(0, len(ids), MANIFEST_BATCH):
            chunk = ids[start : start + MANIFEST_BATCH]
            pipe = self.client.pipeline(transaction=False)
            for sid in chunk:
                pipe.hgetall(self.keys.snapshot(sid))
            for sid, raw in zip(chunk, pipe.execute(), strict=True):
                info = decode_manifest(sid, raw)
                if info is None:
                    log.warning("snapshot %s is indexed but its manifest is gone; skipped", sid)
                else:
                    out.append(info)
        out.sort(key=lambda s: s.taken_at)
        return out

    @_redis_errors
    def store_summary(self, summary: Mapping[str, Any]) -> str:
        """SET the summary JSON where the HTTP workers serve it (GET /v1/reports/skew). Returns the key."""
        self.client.set(self.keys.skew_report, orjson.dumps(summary, option=orjson.OPT_SERIALIZE_NUMPY))
        return self.keys.skew_report

    @_redis_errors
    def load_summary(self) -> dict[str, Any] | None:
        raw = self.client.get(self.keys.skew_report)
        return orjson.loads(raw) if raw else None

    @_redis_errors
    def push_history(self, record: Mapping[str, Any], keep: int) -> int:
        """Prepend one run's record to the skew history and keep the newest `keep`; returns the length."""
        blob = zlib.compress(orjson.dumps(record, option=orjson.OPT_SERIALIZE_NUMPY), 6)
        pipe = self.client.pipeline(transaction=True)
        pipe.lpush(self.keys.skew_history, blob)
        pipe.ltrim(self.keys.skew_history, 0, max(1, keep) - 1)
        pipe.llen(self.keys.skew_history)
        return int(pipe.execute()[-1])

    @_redis_errors
    def history(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The stored run records, newest first (at most `limit`)."""
        raw = self.client.lrange(self.keys.skew_history, 0, -1 if limit is None else max(0, limit - 1))
        return [decode_history(b) for b in raw]

    # --- leases (the skew scheduler: one run per interval cluster-wide)

    @_redis_errors
    def acquire_lease(self, name: str, ttl_ms: int, owner: str) -> bool:
        """SET NX PX: true for the one caller that gets `name` until it expires or is released."""
        return bool(self.client.set(self.keys.lease(name), owner, nx=True, px=max(1, int(ttl_ms))))

    @_redis_errors
    def renew_lease(self, name: str, ttl_ms: int, owner: str) -> bool:
        """Extend a lease this owner still holds (checked and extended in one MULTI, under WATCH)."""
        return self._if_owner(name, owner, lambda pipe, key: pipe.pexpire(key, max(1, int(ttl_ms))))

    @_redis_errors
    def release_lease(self, name: str, owner: str) -> bool:
        """Delete a lease this owner still holds; another owner's lease is left alone."""
        return self._if_owner(name, owner, lambda pipe, key: pipe.delete(key))

    def _if_owner(self, name: str, owner: str, action: Callable[[Any, str], Any]) -> bool:
        key = self.keys.lease(name)
        with self.client.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(key)
                if _text(pipe.get(key) or b"") != owner:
                    return False
                pipe.multi()
                action(pipe, key)
                return bool(pipe.execute()[0])
            except redis.WatchError:  # changed between GET and EXEC: no longer ours to touch
                return False

    # --- executors

    def fetch_parts(self, refs: Iterable[PartRef]) -> Iterator[tuple[Any, ...]]:
        """mapPartitions function: one Redis client per Spark partition, parts fetched with MGET in small
        batches, each decoded (zlib + orjson) into (takenAt, *PART_FIELDS) tuples.

        A part that has vanished (retention) yields one marker row `(takenAt, None, ...)` so the driver can
        drop that whole snapshot instead of reporting on part of it."""
        client = self.spec.client()
        try:
            batch: list[PartRef] = []
            for ref in refs:
                batch.append(ref)
                if len(batch) >= self.fetch_batch:
                    yield from self._fetch(client, batch)
                    batch = []
            if batch:
                yield from self._fetch(client, batch)
        finally:
            client.close()

    def _fetch(self, client: redis.Redis, batch: list[PartRef]) -> Iterator[tuple[Any, ...]]:
        blobs = client.mget([self.keys.snapshot_part(sid, i) for _, sid, i in batch])
        for (taken_at, sid, i), blob in zip(batch, blobs, strict=True):
            if blob is None:
                log.warning("snapshot %s lost part %d; the snapshot will be skipped", sid, i)
                yield (taken_at, None, None, None, None, None, None, None)
                continue
            for r in orjson.loads(zlib.decompress(blob)):
                yield (taken_at, r[0], r[1], r[2], int(r[3]), int(r[4]), int(r[5]), int(r[6]))


def decode_history(blob: bytes) -> dict[str, Any]:
    """One history entry: zlib(JSON) as push_history writes it."""
    return orjson.loads(zlib.decompress(blob))


def _text(v: bytes | str) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)
