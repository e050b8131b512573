"""The job on a real Spark standalone cluster (a master and two workers on loopback, started from the pyspark
wheel): `namesrv skew-report --master spark://…` and `spark-submit` of the packaged job give the same report as
a `local[*]` run on the same snapshots, and both workers ran executors."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import orjson
import pandas as pd
import pytest
import redis

from benchmarks.skew_bench import topic_rows
from tests.spark.cluster import spark_home
from tests.spark.conftest import put_snapshot

pytestmark = [pytest.mark.redis, pytest.mark.timeout(420)]
REPO = Path(__file__).resolve().parents[2]
TABLES = ("topics", "brokers", "clusters", "worsening", "imbalance", "actions", "hot_brokers")
# Differ between two runs of the same data: when it ran, and what it is compared with (the runs share Redis).
VOLATILE = {"generatedAt", "trend"}


def plant(client, prefix: str) -> None:
    sec, usec = client.time()
    now = int(sec) * 1000 + int(usec) // 1000
    for snap in range(3):
        rows = [r for i in range(600) for r in topic_rows(i, snap)]
        put_snapshot(client, prefix, now - (3 - snap) * 60_000, rows, part_rows=500)


def run(argv: list[str], out: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"  # driver on loopback, like the workers
    p = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-5000:]
    assert "ModuleNotFoundError" not in p.stderr
    assert (out / "summary.json").is_file()
    return p


def report(out: Path) -> tuple[dict, dict[str, pd.DataFrame]]:
    summary = orjson.loads((out / "summary.json").read_bytes())
    summary["window"] = {k: v for k, v in summary["window"].items() if k not in ("sinceMs", "untilMs")}
    tables = {}
    for name in TABLES:
        t = pd.read_parquet(out / f"{name}.parquet")
        keys = [c for c in ("cluster", "topic", "brokerName", "takenAt", "rank") if c in t.columns]
        tables[name] = t.sort_values(keys).reset_index(drop=True) if keys and not t.empty else t
    return {k: v for k, v in summary.items() if k not in VOLATILE}, tables


def same(a: tuple[dict, dict[str, pd.DataFrame]], b: tuple[dict, dict[str, pd.DataFrame]]) -> None:
    assert a[0] == b[0]
    for name in TABLES:
        pd.testing.assert_frame_equal(a[1][name], b[1][name], check_exact=False, rtol=1e-9, obj=name)


def test_cluster_runs_equal_the_local_run(standalone_cluster, redis_server, tmp_path):
    prefix = "cl" + uuid.uuid4().hex[:8]
    client = redis.Redis.from_url(redis_server.url)
    plant(client, prefix)
    client.close()
    common = ["--redis-url", redis_server.url, "--key-prefix", prefix, "--since", "1h"]

    local = tmp_path / "local"
    run([sys.executable, "-m", "service.cli", "skew-report", *common, "--out", str(local), "--master", "local[*]"],
        local)
    expected = report(local)
    assert expected[0]["totals"]["topics"] == 600 and expected[0]["totals"]["actions"] > 0

    on_cluster = tmp_path / "cluster"
    run([sys.executable, "-m", "service.cli", "skew-report", *common, "--out", str(on_cluster),
         "--master", standalone_cluster.master_url], on_cluster)
    same(report(on_cluster), expected)

    # spark-submit of the packaged job, as docs/skew-report.md describes it
    bundle = tmp_path / "namesrv.zip"
    subprocess.run([sys.executable, "-m", "zipfile", "-c", str(bundle), "service/"], cwd=REPO, check=True)
    submitted = tmp_path / "submitted"
    run([str(spark_home() / "bin" / "spark-submit"), "--master", standalone_cluster.master_url,
         "--py-files", str(bundle), "--conf", "spark.ui.enabled=false",
         "service/skew/job.py", *common, "--out", str(submitted)], submitted)
    same(report(submitted), expected)

    # Both runs were standalone applications, and both workers ran executors for each.
    apps = [a for a in standalone_cluster.state()["completedapps"] if a["name"] == "namesrv-skew-report"]
    assert len(apps) >= 2
    for app in apps[:2]:
        for i in range(standalone_cluster.workers):
            assert (standalone_cluster.worker_dir(i) / app["id"]).is_dir(), (i, app["id"])
