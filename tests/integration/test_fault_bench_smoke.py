"""benchmarks/faults.py, failover_bench.py and redis_capacity.py at tiny size, so they do not rot: each runs end
to end and reports what it names (speed is not asserted here; the numbers are in benchmarks/README.md)."""

from __future__ import annotations

import orjson
import pytest

from benchmarks import failover_bench, faults, redis_capacity
from tests.conftest import need

pytestmark = [pytest.mark.redis, pytest.mark.integration]


def test_faults_tiny(tmp_path):
    need("redis-server")
    out = tmp_path / "faults.json"
    doc = faults.main(["--tiny", "--out", str(out)])
    assert orjson.loads(out.read_bytes())["benchmark"] == "faults"
    rows = {r["operation"]: r for r in doc["results"]}
    assert set(rows) == {"route read (cache miss)", "heartbeat", "register, 10 topics", "register, 1,000 topics",
                         "unregister, 10 topics", "readyz"}
    assert all(r["statuses"] == [503] for r in rows.values())
    assert doc["recovery_seconds"]["register"]["n"] == 1


def test_redis_capacity_tiny(tmp_path):
    need("redis-server")
    need("redis-benchmark")
    doc = redis_capacity.main(["--tiny", "--out", str(tmp_path / "cap.json")])
    cases = [r["case"] for r in doc["results"]]
    assert cases == ["registerBroker, 10 topics, data version unchanged (the 30 s re-registration)",
                     "registerBroker, 10 topics, the same bytes again (unchanged: decided by digest, no topic "
                     "touched)",
                     "heartbeat, batch of 1", "heartbeat, batch of 5",
                     "touchLive, batch of 20 (heartbeats and unchanged registrations, batched)",
                     "getRoute, topic on 2 brokers (route-cache miss)"]
    assert all(r["calls_per_s"] > 0 and r["redis_usec_per_call"] > 0 for r in doc["results"])


def test_failover_bench_tiny(tmp_path):
    need("redis-server")
    need("redis-cli")
    doc = failover_bench.main(["--tiny", "--out", str(tmp_path / "failover.json")])
    assert [r["event"] for r in doc["results"]] == ["Sentinel: SENTINEL FAILOVER", "Cluster: CLUSTER FAILOVER"]
    for r in doc["results"]:
        assert r["requests"] > 0 and r["worker_restarts"] == 0 and r["acked_registrations_missing"] == 0
