"""Spark tier fixtures: one session-wide local SparkSession, and a writer of snapshots in the format of
service/store/snapshots.py for tests of the job's reader that do not need a registry."""

from __future__ import annotations

import logging
import os
import shutil
import zlib
from collections.abc import Iterator, Sequence
from typing import Any

import orjson
import pytest

IN_CI = bool(os.environ.get("CI"))

# No blanket filter for pyspark's pandas-3 FutureWarning: the job silences that one notice itself
# (service/skew/session.py: quiet_pandas_notice), and tests run with warnings as errors to keep it so.
SPARK_WARNING_FILTERS = (
    "ignore::DeprecationWarning:pyspark.*",
    "ignore::DeprecationWarning:py4j.*",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.spark)
            for f in SPARK_WARNING_FILTERS:
                item.add_marker(pytest.mark.filterwarnings(f))


def _need_java() -> None:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        if IN_CI:
            pytest.fail("Java is required for the spark tests in CI (.ci/run installs a JRE 17)")
        pytest.skip("Java is not installed (the spark tier needs a JRE 17+)")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """local[2], no UI, few shuffle partitions, small memory: the whole tier shares one JVM."""
    _need_java()
    from pyspark.sql import SparkSession

    from service.skew.session import quiet_pandas_notice

    quiet_pandas_notice()  # as the job does before its session

    session = (
        SparkSession.builder.master("local[2]")
        .appName("rmq-namesrv-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "768m")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
    # py4j logs "Closing down clientserver connection" at interpreter exit, after pytest closed its streams
    logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture(scope="session")
def standalone_cluster(tmp_path_factory) -> Iterator[Any]:
    """A Spark standalone master and two workers (1 core, 1 GiB each) on loopback, for the whole session."""
    _need_java()
    from tests.spark.cluster import StandaloneCluster

    cluster = StandaloneCluster(workers=2, cores=1, memory="1g", root=tmp_path_factory.mktemp("spark-standalone"))
    cluster.start()
    yield cluster
    cluster.cleanup()


Row = Sequence[Any]  # [cluster, brokerName, topic, readQueueNums, writeQueueNums, perm, topicSysFlag]


def put_snapshot(
    client: Any,
    prefix: str,
    taken_at: int,
    rows: Sequence[Row],
    brokers: Sequence[dict[str, Any]] | None = None,
    part_rows: int = 5000,
) -> str:
    """Write one snapshot in the format service/store/snapshots.py writes (index ZSET, manifest HASH,
    zlib+orjson parts), spelled out here independently so that a Redis written by an older version is still
    read: the keys are literal on purpose."""
    snap_id = str(taken_at)
    base = f"{{{prefix}}}:snap:{snap_id}"
    parts = [list(rows[i : i + part_rows]) for i in range(0, len(rows), part_rows)] or [[]]
    size = 0
    pipe = client.pipeline(transaction=False)
    for i, part in enumerate(parts):
        blob = zlib.compress(orjson.dumps(part))
        size += len(blob)
        pipe.set(f"{base}:{i}", blob)
    if brokers is None:
        brokers = [
            {
                "cluster": c,
                "brokerName": b,
                "brokerId": 0,
                "brokerAddr": f"10.0.0.{n}:10911",
                "lastHeartbeat": taken_at,
            }
            for n, (c, b) in enumerate(sorted({(r[0], r[1]) for r in rows}))
        ]
    pipe.hset(
        base,
        mapping={
            "takenAt": taken_at,
            "parts": len(parts),
            "rows": len(rows),
            "bytes": size,
            "brokers": zlib.compress(orjson.dumps(list(brokers))),
        },
    )
    pipe.zadd(f"{{{prefix}}}:snaps", {snap_id: taken_at})
    pipe.execute()
    return snap_id
