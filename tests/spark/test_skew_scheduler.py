"""`namesrv skew-scheduler`: one run per interval cluster-wide whatever the number of schedulers, no overlap
when a run outlasts its interval, a dead scheduler's run lease expires, and a real scheduled run.
Several schedulers run in threads against a real redis-server, each with its own Redis connection."""

from __future__ import annotations

import threading
import time
import uuid

import orjson
import pytest
import redis

from service.cli import build_parser
from service.skew import options, scheduler
from service.skew.scheduler import BUSY, RAN, RUN_LEASE, TAKEN, SkewScheduler
from service.store.snapshot_reader import RedisSpec, SnapshotReader
from tests.spark.conftest import put_snapshot

pytestmark = pytest.mark.redis


@pytest.fixture
def prefix():
    return "sched" + uuid.uuid4().hex[:8]


def readers(url: str, prefix: str, n: int) -> list[SnapshotReader]:
    return [SnapshotReader(RedisSpec(url), prefix) for _ in range(n)]


def run_schedulers(url, prefix, n, interval_s, work, until, deadline_s=15.0, run_lease_ms=60_000):
    """n schedulers in threads until `until()` holds (polled) or the deadline passes; then stopped."""
    stop = threading.Event()
    scheds = [SkewScheduler(r, interval_s, work, owner=f"s{i}", stop=stop, run_lease_ms=run_lease_ms)
              for i, r in enumerate(readers(url, prefix, n))]
    threads = [threading.Thread(target=s.loop, daemon=True) for s in scheds]
    for t in threads:
        t.start()
    deadline = time.monotonic() + deadline_s
    while not until() and time.monotonic() < deadline:
        stop.wait(0.05)
    stop.set()
    for t in threads:
        t.join(10)
    for s in scheds:
        s.reader.close()
    assert not any(t.is_alive() for t in threads)


def test_one_run_per_interval_whatever_the_number_of_schedulers(redis_server, prefix):
    clock = SnapshotReader(RedisSpec(redis_server.url), prefix)
    runs: list[int] = []
    lock = threading.Lock()

    def work():
        with lock:
            runs.append(clock.now_ms() // 1000)

    run_schedulers(redis_server.url, prefix, 3, 1.0, work, until=lambda: len(runs) >= 4)
    clock.close()
    assert len(runs) >= 4
    assert len(set(runs)) == len(runs), f"an interval ran twice: {runs}"
    assert runs == list(range(runs[0], runs[0] + len(runs))), f"an interval was missed: {runs}"


def test_a_run_longer_than_its_interval_is_not_overlapped(redis_server, prefix, monkeypatch):
    """Runs of 1.3 s on a 0.5 s interval, two schedulers, a run lease of 0.3 s kept alive by renewal: runs
    never overlap, and the intervals that find a run going are skipped."""
    spans: list[tuple[float, float]] = []
    results: list[str] = []

    def work():  # a run that takes 1.3 s
        start = time.monotonic()
        threading.Event().wait(1.3)
        spans.append((start, time.monotonic()))

    original = SkewScheduler.tick

    def tick(self):
        out = original(self)
        results.append(out)
        return out

    monkeypatch.setattr(SkewScheduler, "tick", tick)  # records each tick's outcome
    run_schedulers(redis_server.url, prefix, 2, 0.5, work, until=lambda: len(spans) >= 3, run_lease_ms=300)
    spans.sort()
    assert len(spans) >= 3
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:], strict=False)), spans
    assert BUSY in results and RAN in results


def test_a_dead_schedulers_run_lease_expires(redis_server, prefix):
    reader = SnapshotReader(RedisSpec(redis_server.url), prefix)
    assert reader.acquire_lease(RUN_LEASE, 300, "ghost")  # a scheduler that died mid-run
    assert not reader.release_lease(RUN_LEASE, "someone-else")  # not theirs to release
    ran: list[int] = []
    s = SkewScheduler(reader, 0.2, lambda: ran.append(1), owner="alive")
    assert s.tick() == BUSY
    deadline = time.monotonic() + 5
    while not ran and time.monotonic() < deadline:
        s.stop.wait(s.seconds_to_next_tick())
        s.tick()
    assert ran == [1]
    assert reader.client.get(f"{{{prefix}}}:lease:{RUN_LEASE}") is None  # released after the run
    reader.close()


def test_a_scheduled_run_writes_the_report_and_history(spark, redis_server, prefix, tmp_path):
    c = redis.Redis.from_url(redis_server.url)
    sec, usec = c.time()
    now = int(sec) * 1000 + int(usec) // 1000
    put_snapshot(c, prefix, now - 1000, [["c", "b1", "T", 8, 8, 6, 0], ["c", "b2", "T", 2, 2, 6, 0]])
    args = build_parser().parse_args(["skew-scheduler", "--redis-url", redis_server.url, "--key-prefix", prefix,
                                      "--since", "1h", "--out", str(tmp_path), "--interval", "10m"])
    opts = options.options_of(args)
    assert opts.settings.skew_interval_s == 600
    from service.skew import job

    with job.reader_for(opts) as reader:
        # both ticks in one interval: a run crossing a 10-minute boundary of the clock made the second tick the next
        # interval's, which is then rightly its own (CI's run did, at 14:10 UTC)
        reader.now_ms = lambda: now
        s = SkewScheduler(reader, opts.settings.skew_interval_s, lambda: job.run_once(spark, opts), owner="a")
        other = SkewScheduler(reader, opts.settings.skew_interval_s, lambda: pytest.fail("ran twice"), owner="b")
        assert s.tick() == RAN
        assert other.tick() == TAKEN  # same interval
    summary = orjson.loads(c.get(f"{{{prefix}}}:report:skew"))
    assert summary["topics"][0]["topic"] == "T" and summary["topics"][0]["flags"] == ["CONCENTRATED"]
    assert c.llen(f"{{{prefix}}}:report:skew:history") == 1
    assert (tmp_path / "summary.json").is_file()
    c.close()


def test_interval_from_env_flag_and_file(monkeypatch, tmp_path):
    monkeypatch.setenv("NAMESRV_SKEW_INTERVAL_S", "900")
    a = build_parser().parse_args(["skew-scheduler", "--redis-url", "redis://h:1/0"])
    assert options.options_of(a).settings.skew_interval_s == 900
    a = build_parser().parse_args(["skew-scheduler", "--redis-url", "redis://h:1/0", "--interval", "2h"])
    assert options.options_of(a).settings.skew_interval_s == 7200
    monkeypatch.setenv("NAMESRV_SKEW_INTERVAL_S", "5")
    with pytest.raises(options.ConfigError, match="below the minimum"):
        options.options_of(build_parser().parse_args(["skew-scheduler", "--redis-url", "redis://h:1/0"]))
    assert scheduler.tick_lease(7) == "skew-report:tick:7"
