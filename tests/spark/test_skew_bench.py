"""Smoke test of benchmarks/skew_bench.py at a tiny size, so the benchmark does not rot."""

from __future__ import annotations

import orjson
import pytest

from benchmarks import skew_bench
from service.skew import job


def test_topic_generator_is_deterministic_and_well_formed():
    a = [skew_bench.topic_rows(i, snap=0) for i in range(200)]
    assert a == [skew_bench.topic_rows(i, snap=0) for i in range(200)]
    for rows in a:
        assert rows and len({r[1] for r in rows}) == len(rows)  # one row per broker
        for cluster, broker, topic, rq, wq, perm, flag in rows:
            assert broker.startswith(cluster) and topic.startswith("T") and rq == wq > 0
            assert perm in (4, 6) and flag == 0
    assert a != [skew_bench.topic_rows(i, snap=1) for i in range(200)]  # some topics drift


def planted(rows: int, snapshots: int) -> tuple[int, int]:
    """(rows, topics of the latest snapshot) the generator plants, recounted from topic_rows alone."""
    total = topics = 0
    for snap in range(snapshots):
        n = idx = 0
        while n < rows // snapshots:
            n += len(skew_bench.topic_rows(idx, snap))
            idx += 1
        total, topics = total + n, idx
    return total, topics


RESULT_KEYS = {
    "rows", "snapshots", "parts", "redisBytes", "generateSeconds", "jobSeconds", "jobSecondsAll", "rowsPerSecond",
    "loadAverage1m", "jobRows", "jobSnapshots", "topicsLatest", "worsening", "stages",
}


@pytest.mark.redis
def test_bench_runs_at_tiny_size(spark, redis_server, tmp_path):
    doc = skew_bench.run([3000], snapshots=2, results_dir=tmp_path, warmup=False)
    saved = orjson.loads((tmp_path / "skew.json").read_bytes())
    assert saved == orjson.loads(orjson.dumps(doc))
    (r,) = saved["results"]
    assert set(r) == RESULT_KEYS
    rows, topics = planted(3000, 2)
    # What the job counted is what the bench planted (rows through Redis, the executors and Spark).
    assert (r["rows"], r["jobRows"], r["snapshots"], r["jobSnapshots"]) == (rows, rows, 2, 2)
    assert r["topicsLatest"] == topics
    assert r["parts"] == 2  # 1 500 rows a snapshot: one part each
    # Every stage logged, in order, each ending no earlier than the one before.
    assert list(r["stages"]) == list(job.STAGES)
    assert list(r["stages"].values()) == sorted(r["stages"].values())
    assert {"python", "pyspark", "java", "redis"} <= saved["versions"].keys()
    assert saved["machine"]["cpus"] and saved["git"] and saved["spark"]["master"] == "local[2]"
    assert (tmp_path / "skew.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
