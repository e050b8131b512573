"""The skew job on the Redis deployments the workers support: a Sentinel-managed master and a Redis Cluster
(tests/redis_topology.py, real redis-server processes on loopback). The reader's every call (index, manifests,
parts, summary, history, leases) and a full run read the same as on a single Redis."""

from __future__ import annotations

import uuid

import orjson
import pytest

from service.skew import job
from service.store.snapshot_reader import RedisSpec, SnapshotReader, part_refs
from tests.conftest import need
from tests.redis_topology import ClusterTopology, SentinelTopology
from tests.spark.conftest import put_snapshot

pytestmark = [pytest.mark.redis, pytest.mark.timeout(180)]
ROWS = [["c1", "b1", "Skewed", 8, 8, 6, 0], ["c1", "b2", "Skewed", 2, 2, 6, 0], ["c1", "b1", "Solo", 4, 4, 6, 0]]


def exercise(reader: SnapshotReader, client) -> None:
    """Every reader call against whatever `client` writes to."""
    now = reader.now_ms()
    put_snapshot(client, reader.prefix, now - 1000, ROWS, part_rows=2)
    (snap,) = reader.list_snapshots(now - 60_000)
    assert (snap.rows, snap.parts) == (3, 2)
    assert sorted(reader.fetch_parts(part_refs([snap]))) == sorted((now - 1000, *r) for r in ROWS)
    with SnapshotReader(reader.spec, reader.prefix + "-other") as other:  # keeps the job's history clean
        other.store_summary({"generatedAt": "x"})
        assert other.load_summary() == {"generatedAt": "x"}
        assert other.push_history({"runId": "1"}, keep=1) == 1 and other.history() == [{"runId": "1"}]
        assert other.acquire_lease("t", 10_000, "a") and not other.acquire_lease("t", 10_000, "b")
        assert other.renew_lease("t", 20_000, "a") and not other.release_lease("t", "b")
        assert other.release_lease("t", "a")


def run_job(spark, tmp_path, argv: list[str]) -> dict:
    out = tmp_path / "out"
    assert job.main([*argv, "--since", "1h", "--out", str(out)]) == 0
    return orjson.loads((out / "summary.json").read_bytes())


@pytest.fixture
def topologies():
    need("redis-server")
    need("redis-cli")
    started = []
    yield started
    for t in started:
        t.cleanup()


def test_sentinel(spark, tmp_path, topologies, monkeypatch):
    topo = SentinelTopology(password="data-pw-1234", sentinel_password="sentinel-pw-1234")
    topologies.append(topo)
    topo.start()
    sentinels = ",".join(f"{h}:{p}" for h, p in topo.sentinel_addrs())
    spec = RedisSpec(password="data-pw-1234", sentinels=tuple(topo.sentinel_addrs()), master_name="mymaster",
                     sentinel_password="sentinel-pw-1234", url="")
    prefix = "sen" + uuid.uuid4().hex[:6]
    with SnapshotReader(spec, prefix) as reader:
        exercise(reader, spec.client())
    monkeypatch.setenv("NAMESRV_REDIS_PASSWORD", "data-pw-1234")  # passwords come from the settings, as
    monkeypatch.setenv("NAMESRV_REDIS_SENTINEL_PASSWORD", "sentinel-pw-1234")  # for every other command
    summary = run_job(spark, tmp_path, ["--redis-sentinels", sentinels, "--redis-master-name", "mymaster",
                                        "--key-prefix", prefix])
    assert [(t["topic"], t["flags"]) for t in summary["topics"]] == [("Solo", ["SINGLE_BROKER"]),
                                                                      ("Skewed", ["CONCENTRATED"])]


def test_cluster(spark, tmp_path, topologies, monkeypatch):
    topo = ClusterTopology(password="cluster-pw-1234")
    topologies.append(topo)
    topo.start()
    spec = RedisSpec(topo.seed_url(), password="cluster-pw-1234", cluster=True)
    prefix = "clu" + uuid.uuid4().hex[:6]
    with SnapshotReader(spec, prefix) as reader:
        exercise(reader, spec.client())
    monkeypatch.setenv("NAMESRV_REDIS_PASSWORD", "cluster-pw-1234")
    summary = run_job(spark, tmp_path, ["--redis-url", topo.seed_url(), "--redis-cluster", "--key-prefix", prefix])
    assert [t["topic"] for t in summary["topics"]] == ["Solo", "Skewed"]
