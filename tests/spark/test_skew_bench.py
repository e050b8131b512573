"""Smoke test of benchmarks/skew_bench.py at a tiny size, so the benchmark does not rot."""

from __future__ import annotations

import orjson
import pytest

from benchmarks import skew_bench


def test_topic_generator_is_deterministic_and_well_formed():
    a = [skew_bench.topic_rows(i, snap=0) for i in range(200)]
    assert a == [skew_bench.topic_rows(i, snap=0) for i in range(200)]
    for rows in a:
        assert rows and len({r[1] for r in rows}) == len(rows)  # one row per broker
        for cluster, broker, topic, rq, wq, perm, flag in rows:
            assert broker.startswith(cluster) and topic.startswith("T") and rq == wq > 0
            assert perm in (4, 6) and flag == 0
    assert a != [skew_bench.topic_rows(i, snap=1) for i in range(200)]  # some topics drift


@pytest.mark.redis
def test_bench_runs_at_tiny_size(spark, redis_server, tmp_path):
    doc = skew_bench.run([3000], snapshots=2, results_dir=tmp_path, warmup=False)
    saved = orjson.loads((tmp_path / "skew.json").read_bytes())
    assert saved == orjson.loads(orjson.dumps(doc))
    (r,) = saved["results"]
    assert r["rows"] >= 3000 and r["snapshots"] == 2 and r["jobSeconds"] > 0 and r["rowsPerSecond"] > 0
    assert r["topicsLatest"] > 0 and set(r["stages"]) >= {"fetch", "topics", "write"}
    assert {"python", "pyspark", "java", "redis"} <= saved["versions"].keys()
    assert saved["machine"]["cpus"] and saved["git"]
    assert (tmp_path / "skew.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
