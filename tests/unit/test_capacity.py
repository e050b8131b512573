"""The sizing formula (service/core/capacity.py) that the README's table and `namesrv admin capacity` share: its
shape (linear in brokers, costs between the 100- and 1 000-topic measurements), the headroom bound, and the
report of a registry through the HTTP API on the embedded store (which has no INFO)."""

from __future__ import annotations

import pytest

from service.core import capacity
from service.core.capacity import Fleet, Model, headroom, predict
from service.core.capacity_model import MODEL
from tests.unit.conftest import master


def model(**changes: object) -> Model:
    base = dict(reg_same_worker_us=(30.0, 50.0), reg_changed_worker_us=(300.0, 1400.0),
                reg_changed_redis_us=(175.0, 1450.0), liveness_redis_us=3.6, heartbeat_worker_us=7.0,
                read_worker_us=4.0, event_worker_us_per_topic=1.0, redis_bytes_per_entry=90.0,
                redis_bytes_per_topic=100.0, redis_base_mb=1.0, worker_base_mb=70.0, worker_bytes_per_broker=2000.0,
                worker_bytes_per_route=2000.0, brokers_per_topic_measured=10, body_bytes_per_topic=174.0)
    return Model(**{**base, **changes})


def test_costs_go_linearly_between_the_measured_sizes():
    assert capacity.at((30.0, 50.0), 100) == 30.0
    assert capacity.at((30.0, 50.0), 1000) == 50.0
    assert capacity.at((30.0, 50.0), 550) == pytest.approx(40.0)
    assert capacity.at((30.0, 50.0), 10_000) == pytest.approx(250.0)  # beyond: the same slope
    assert capacity.at((300.0, 50.0), 10_000) == 0.0  # never below zero


def test_load_grows_with_the_brokers_at_a_fixed_shape():
    m = model()
    small = predict(m, Fleet(brokers=1000, topics_per_broker=100, topics=10_000))
    big = predict(m, Fleet(brokers=10_000, topics_per_broker=100, topics=100_000))
    assert big.redis_cores == pytest.approx(10 * small.redis_cores)
    assert big.worker_cores == pytest.approx(10 * small.worker_cores)
    assert big.redis_mb - m.redis_base_mb == pytest.approx(10 * (small.redis_mb - m.redis_base_mb))
    # per second at 1 000 brokers: 1000/30 registrations + 100 heartbeats, each 3.6 µs of Redis liveness, plus
    # 10/60 changed registrations of 175 µs
    assert small.redis_cores == pytest.approx(((1000 / 30 + 100) * 3.6 + 1000 * 0.01 / 60 * 175) / 1e6)
    assert small.redis_cores_peak > small.redis_cores  # the rolling restart


def test_factors_and_extra_workers_come_from_the_fleet_measurement():
    f = Fleet(brokers=50_000, topics_per_broker=1000, topics=5_000_000)
    one = predict(model(), f)
    scaled = predict(model(worker_factor=2.0, redis_factor=3.0), f)
    assert scaled.redis_cores == pytest.approx(3 * one.redis_cores)
    assert scaled.workers >= one.workers
    extra = predict(model(extra_worker_cores=0.1), f)
    assert extra.worker_cores == pytest.approx(one.worker_cores + (extra.workers - 1) * 0.1)
    assert extra.worker_cores_peak <= extra.workers * capacity.WORKER_CORE_TARGET


def test_headroom_is_the_first_limit_reached():
    m = model()
    f = Fleet(brokers=2000, topics_per_broker=100, topics=20_000)
    h = headroom(m, f)
    bounds = {name: f.brokers / u for name, u in h.load.utilisation.items() if u}
    assert h.limit == min(bounds, key=bounds.get) and h.max_brokers == int(bounds[h.limit])
    # a small maxmemory binds first: 80 % of it over the memory one broker adds
    tight = headroom(m, f, redis_maxmemory_mb=10.0)
    per_broker = (h.load.redis_mb - m.redis_base_mb) / f.brokers
    assert tight.limit == "Redis memory" and tight.max_brokers == int((8.0 - m.redis_base_mb) / per_broker)
    assert tight.redis_memory_limit_mb == 8.0


def test_the_generated_model_is_the_measured_one():
    """benchmarks.sizing wrote it: every cost positive and the basis naming the benchmark it came from."""
    assert MODEL.reg_same_worker_us[0] > 0 and MODEL.reg_changed_redis_us[1] > MODEL.reg_changed_redis_us[0]
    assert MODEL.read_worker_us > 0 and MODEL.redis_bytes_per_entry > 0
    assert MODEL.basis["per request"].startswith("benchmarks.peers")


async def test_capacity_over_http_on_the_embedded_store(client):
    """GET /v1/capacity: counts from the store, no Redis INFO on fakeredis (shown as unknown), no headroom
    without a live broker, then a broker registers and the model weighs it."""
    empty = await (await client.get("/v1/capacity")).json()
    assert empty["brokers"] == 0 and empty["headroom"] is None and empty["redis"]["usedMemoryMb"] is None
    body = master(topics={f"T{i}": {"readQueueNums": 4, "writeQueueNums": 4, "perm": 6} for i in range(5)})
    assert (await client.post("/v1/brokers/register", json=body)).status == 200
    data = await (await client.get("/v1/capacity")).json()
    assert (data["brokers"], data["topics"], data["entries"], data["topicsPerBroker"]) == (1, 5, 5, 5.0)
    assert data["headroom"]["maxBrokers"] > 1 and data["model"]["workersNeeded"] == 1


def test_sizing_is_made_from_the_committed_results():
    """benchmarks.sizing reads benchmarks/results/*.json (nothing written here): one row per planned fleet, each
    naming the limit it meets first and the measurement it extrapolates from."""
    from benchmarks import sizing

    model, points = sizing.derive()
    md = sizing.table(model, points)
    rows = [line for line in md.splitlines() if line.startswith("| ") and "×" in line and "brokers ×" not in line]
    assert len(rows) == len(sizing.ROWS) == 7
    point = "the fleet point" if "fleet" in points else "no fleet point (not calibrated)"
    assert all(point in r and any(k in r for k in ("Redis CPU", "Redis memory", "event application",
                                                                 "route cache")) for r in rows)
    assert "| 10,000 × 200 (1,000,000) |" in md


def test_sizing_calibrates_on_a_fleet_day_that_was_not_overloaded():
    """A day of ours in which more than 1 % of the requests failed (other work on the machine) says what overload
    costs: the calibration takes ours with 1 worker, else with 2, whichever was not, and the basis names the one
    left out."""
    from benchmarks import sizing

    model, points = sizing.derive()
    fleet = sizing.load("fleet.json")
    if fleet is None:
        assert model.basis["fleet"].startswith("none") and not points
        return
    days = {s["server"]: s for s in fleet["servers"] if s["kind"] != "java"}
    clean = [name for name, s in days.items() if sizing.failed_share(s) <= 0.01]
    if not clean:
        assert model.basis["fleet"].startswith("not used") and not points
        return
    assert points["fleet"]["calibrated_on"] == clean[0] and model.worker_factor > 0
    for name, s in days.items():
        if name not in clean:
            assert f"{name} not used, {sizing.failed_share(s):.1%}" in model.basis["fleet"]


def test_a_brokers_liveness_is_priced_by_the_touchlive_batch_when_measured():
    """The batched path (every heartbeat and unchanged registration) once redis_capacity measured it; older results
    keep the heartbeat batch of 50."""
    from benchmarks import sizing

    old = {"results": [{"case": "heartbeat, batch of 1", "redis_usec_per_call": 7.0},
                       {"case": "heartbeat, batch of 50", "redis_usec_per_call": 190.0}]}
    row, per = sizing.liveness_case(old)
    assert (row["redis_usec_per_call"], per) == (190.0, 50)
    new = {"results": [*old["results"], {"case": "touchLive, batch of 2000 (heartbeats and unchanged registrations, "
                                                 "batched)", "redis_usec_per_call": 1500.0}]}
    row, per = sizing.liveness_case(new)
    assert (row["redis_usec_per_call"], per) == (1500.0, 2000)
