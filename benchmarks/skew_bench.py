"""Skew-report job benchmark: synthetic snapshots of N rows in a redis-server of its own (loopback, keys under
`{bench}`), the job timed per size on a local Spark master or on a Spark standalone cluster started on loopback;
and how long Redis is blocked while a snapshot is read under route-read load.

    python -m benchmarks.skew_bench [--rows 1000000,10000000] [--quick] [--repeat 2] [--master local[*]]
    python -m benchmarks.skew_bench --rows 1000000,10000000 --master standalone   # 2 workers x 1 core
    python -m benchmarks.skew_bench --redis-block 10000000                      # longest Redis command

Results: benchmarks/results/skew.json (+ skew.png), skew-standalone.json, skew-redis.json.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import redis

from service.config import load_settings
from service.skew import job
from service.skew.options import JobOptions, conf_pair
from service.skew.session import spark_session
from service.store.keys import Keys
from tests.redis_server import RedisServer

log = logging.getLogger("benchmarks.skew_bench")

PREFIX = "bench"
KEYS = Keys(PREFIX)
PART_ROWS = 5000  # as service/store/snapshots.py
CLUSTERS = ("bench-a", "bench-b")
BROKERS_PER_CLUSTER = 12
QUICK_ROWS = 20_000
WARMUP_ROWS = 200_000  # enough for the JIT to settle; smaller warm-ups left the first size ~2x slow
RESULTS = Path(__file__).resolve().parent / "results"


# --- synthetic snapshots


def topic_rows(idx: int, snap: int, seed: int = 7) -> list[list[Any]]:
    """The rows of topic #idx in snapshot #snap. Deterministic per topic; a few topics drift between
    snapshots so that the trend part of the report has something to find. Mix, roughly as in a real
    cluster: 60% created cluster-wide (even), 25% on a few brokers with uneven queue counts, 15%
    auto-created on one broker, mostly the first one (the TBW102 effect)."""
    rng = random.Random(idx * 1_000_003 + seed)
    cluster = CLUSTERS[idx % len(CLUSTERS)]
    brokers = [f"{cluster}-{i:02d}" for i in range(BROKERS_PER_CLUSTER)]
    topic = f"T{idx:08d}"
    kind = rng.random()
    if kind < 0.60:
        q = rng.choice((4, 8, 16))
        placement = [(b, q) for b in brokers]
    elif kind < 0.85:
        placement = [(b, rng.randint(2, 16)) for b in rng.sample(brokers, rng.randint(2, 6))]
        if (idx + snap) % 20 == 0:  # drift: the first broker gains queues
            placement[0] = (placement[0][0], placement[0][1] * 2)
    else:
        b = brokers[0] if rng.random() < 0.7 else rng.choice(brokers)
        placement = [(b, rng.choice((4, 8)))]
    perm = 6 if rng.random() > 0.01 else 4
    return [[cluster, b, topic, q, q, perm, 0] for b, q in placement]


def write_snapshot(client: redis.Redis, taken_at: int, snap: int, rows_target: int) -> tuple[int, int]:
    """One snapshot of about rows_target rows in the writer's format. Returns (rows, parts)."""
    snap_id = str(taken_at)
    rows: list[list[Any]] = []
    n_rows = parts = size = 0
    idx = 0
    pipe = client.pipeline(transaction=False)

    def flush(final: bool = False) -> None:
        nonlocal rows, parts, size
        while len(rows) >= PART_ROWS or (final and rows):
            chunk, rows = rows[:PART_ROWS], rows[PART_ROWS:]
            blob = zlib.compress(orjson.dumps(chunk))
            pipe.set(KEYS.snapshot_part(snap_id, parts), blob)
            parts += 1
            size += len(blob)
            if parts % 32 == 0:
                pipe.execute()

    while n_rows < rows_target:
        r = topic_rows(idx, snap)
        rows.extend(r)
        n_rows += len(r)
        idx += 1
        if len(rows) >= PART_ROWS:
            flush()
    flush(final=True)
    brokers = [
        {
            "cluster": c,
            "brokerName": f"{c}-{i:02d}",
            "brokerId": 0,
            "brokerAddr": f"10.1.{k}.{i}:10911",
            "lastHeartbeat": taken_at,
        }
        for k, c in enumerate(CLUSTERS)
        for i in range(BROKERS_PER_CLUSTER)
    ]
    pipe.hset(
        KEYS.snapshot(snap_id),
        mapping={
            "takenAt": taken_at,
            "parts": parts,
            "rows": n_rows,
            "bytes": size,
            "brokers": zlib.compress(orjson.dumps(brokers)),
        },
    )
    pipe.zadd(KEYS.snapshots, {snap_id: taken_at})
    pipe.execute()
    return n_rows, parts


def generate(client: redis.Redis, rows: int, snapshots: int) -> dict[str, Any]:
    """`snapshots` snapshots one minute apart, `rows` rows in all."""
    client.flushdb()  # our own throwaway server
    sec, usec = client.time()  # Redis' clock, as the writer and the job use
    now = int(sec) * 1000 + int(usec) // 1000
    t0 = time.perf_counter()
    total = parts = 0
    for s in range(snapshots):
        n, p = write_snapshot(client, now - (snapshots - s) * 60_000, s, rows // snapshots)
        total += n
        parts += p
    return {
        "rows": total,
        "snapshots": snapshots,
        "parts": parts,
        "redisBytes": int(client.info("memory")["used_memory"]),
        "generateSeconds": round(time.perf_counter() - t0, 2),
    }


# --- environment


def _cmd(*argv: str) -> str:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return (p.stdout or p.stderr).strip().splitlines()[0] if (p.stdout or p.stderr).strip() else "unknown"


def environment(master: str, conf: list[tuple[str, str]]) -> dict[str, Any]:
    import pandas
    import pyarrow
    import pyspark

    cpu = "unknown"
    try:
        cpu = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        pass
    mem_gb = None
    try:
        kb = int(
            next(
                line.split()[1]
                for line in Path("/proc/meminfo").read_text().splitlines()
                if line.startswith("MemTotal")
            )
        )
        mem_gb = round(kb / 1024 / 1024, 1)
    except (OSError, StopIteration, ValueError):
        pass
    root = Path(__file__).resolve().parent.parent
    sha = _cmd("git", "-C", str(root), "rev-parse", "--short", "HEAD")
    dirty = _cmd("git", "-C", str(root), "status", "--porcelain", "--untracked-files=no")
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "git": sha if sha.isalnum() else "uncommitted",
        "gitDirty": dirty not in ("", "unknown"),
        "machine": {"platform": platform.platform(), "cpu": cpu, "cpus": os.cpu_count(), "memGB": mem_gb},
        "versions": {
            "python": platform.python_version(),
            "pyspark": pyspark.__version__,
            "pyarrow": pyarrow.__version__,
            "pandas": pandas.__version__,
            "java": _cmd("java", "-version"),
            "redis": _cmd("redis-server", "--version"),
        },
        "spark": {"master": master, "conf": dict(conf)},
    }


# --- the run


def job_options(url: str, out: Path, master: str, conf: list[tuple[str, str]]) -> JobOptions:
    settings = load_settings(env={}, flags={"redis_url": url, "key_prefix": PREFIX})
    return JobOptions(settings=settings, since_s=3600, out=out, master=master, conf=tuple(conf))


def plot(results: list[dict[str, Any]], env: dict[str, Any], path: Path) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.5))
    ax = fig.add_subplot()
    xs = [r["rows"] for r in results]
    ys = [r["jobSeconds"] for r in results]
    ax.plot(xs, ys, marker="o")
    for x, y, r in zip(xs, ys, results, strict=True):
        ax.annotate(
            f"{y:.0f} s\n{r['rowsPerSecond']:,.0f} rows/s",
            (x, y),
            textcoords="offset points",
            xytext=(6, -18),
            fontsize=8,
        )
    if len(xs) > 1:
        from matplotlib.ticker import FuncFormatter

        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / 1e6:g} M"))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("snapshot rows in the window")
    ax.set_ylabel("job time (s)")
    ax.set_title(
        f"namesrv skew-report, {env['spark']['master']}, {env['machine']['cpus']} CPUs (git {env['git']})",
        fontsize=10,
    )
    ax.grid(True, which="both", alpha=0.3)
    fig.savefig(path, dpi=100, bbox_inches="tight")


STANDALONE = "standalone"


def start_standalone(workers: int, memory: str) -> Any:
    """A Spark standalone master and `workers` one-core workers on loopback (tests/spark/cluster.py)."""
    from tests.spark.cluster import StandaloneCluster

    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"  # the driver (this process) on loopback, like the cluster
    return StandaloneCluster(workers=workers, cores=1, memory=memory).start()


def run(
    sizes: list[int],
    *,
    snapshots: int = 4,
    master: str = "local[2]",
    conf: list[tuple[str, str]] | None = None,
    results_dir: Path = RESULTS,
    warmup: bool = True,
    repeat: int = 1,
    workers: int = 2,
    worker_memory: str = "6g",
) -> dict[str, Any]:
    """Time the job at each size (median of `repeat` runs; every run's time is kept) and write the results.
    master "standalone": a Spark standalone cluster of `workers` one-core workers, started for the run."""
    conf = list(conf or [])
    server = RedisServer().start()
    work = Path(tempfile.mkdtemp(prefix="skew-bench-"))
    spark = owned = cluster = None
    name = "skew-standalone" if master == STANDALONE else "skew"
    try:
        client = redis.Redis.from_url(server.url)
        if master == STANDALONE:
            cluster = start_standalone(workers, worker_memory)
            master = cluster.master_url
            if not any(k == "spark.executor.memory" for k, _ in conf):
                conf.append(("spark.executor.memory", worker_memory))
        opts = job_options(server.url, work / "report", master, conf)
        t0 = time.perf_counter()
        spark, owned = spark_session(opts)
        startup = round(time.perf_counter() - t0, 2)
        env = environment(master, conf)
        env["sparkStartupSeconds"] = startup
        if cluster is not None:
            env["spark"]["standalone"] = {"workers": workers, "coresPerWorker": 1, "workerMemory": worker_memory}
        if warmup:  # JVM JIT, Python workers: not what a long run pays per report
            generate(client, WARMUP_ROWS, 2)
            job.run_once(spark, opts)
        results = []
        for rows in sizes:
            gen = generate(client, rows, snapshots)
            log.info("generated %s", gen)
            load_before = os.getloadavg()[0]
            times = []
            for _ in range(max(1, repeat)):
                t0 = time.perf_counter()
                outcome = job.run_once(spark, opts)
                times.append(round(time.perf_counter() - t0, 2))
            seconds = statistics.median(times)
            result = {
                **gen,
                "jobSeconds": round(seconds, 2),
                "jobSecondsAll": times,
                "rowsPerSecond": round(gen["rows"] / seconds),
                "loadAverage1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
                "jobRows": outcome.summary["window"]["rows"],
                "jobSnapshots": outcome.summary["window"]["snapshots"],
                "topicsLatest": outcome.summary["totals"]["topics"],
                "worsening": outcome.summary["totals"]["worsening"],
                "stages": outcome.stages,
            }
            log.info("result %s", result)
            results.append(result)
        client.close()
        doc = {"benchmark": "skew-report", **env, "results": results}
        results_dir.mkdir(parents=True, exist_ok=True)
        (results_dir / f"{name}.json").write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
        plot(results, env, results_dir / f"{name}.png")
        return doc
    finally:
        if spark is not None and owned:
            spark.stop()
        if cluster is not None:
            cluster.cleanup()
        server.cleanup()
        shutil.rmtree(work, ignore_errors=True)


# --- how long Redis is blocked while the job reads a snapshot, under route-read load

ROUTE_PREFIX = "routes"
ROUTE_TOPICS = 1000
SLOW_US = 100  # slowlog threshold: every command of 0.1 ms or more is kept (route reads take ~20-50 µs)


async def _plant_registry(url: str) -> list[str]:
    """4 brokers x ROUTE_TOPICS topics registered through the store (the route reads' Redis work is real)."""
    import redis.asyncio as aioredis

    from service.models import RegisterBroker, TopicConfig
    from service.store import RouteStore

    client = aioredis.Redis.from_url(url, decode_responses=True)
    try:
        store = RouteStore(client, prefix=ROUTE_PREFIX)
        await store.load_scripts()
        topics = [f"route-topic-{i:05d}" for i in range(ROUTE_TOPICS)]
        for b in range(4):
            await store.register_broker(RegisterBroker(
                cluster="C", broker_name=f"broker-{b}", broker_id=0, broker_addr=f"10.9.0.{b}:10911",
                ha_server_addr="", topics={t: TopicConfig(8, 8, 6, 0) for t in topics}))
        return topics
    finally:
        await client.aclose()


def _route_load(url: str, topics: list[str], stop: Any, out: Any, concurrency: int = 8) -> None:
    """Child process: route reads through the store (getRoutes script), `concurrency` at a time, until stop is
    set; sends [(t_monotonic, latency_ms), ...] back."""
    import asyncio
    import random

    import redis.asyncio as aioredis

    from service.store import RouteStore

    async def main() -> list[tuple[float, float]]:
        client = aioredis.Redis.from_url(url, decode_responses=True)
        store = RouteStore(client, prefix=ROUTE_PREFIX)
        await store.load_scripts()
        samples: list[tuple[float, float]] = []

        async def reader() -> None:
            rng = random.Random()
            while not stop.is_set():
                t0 = time.perf_counter()
                await store.get_route(rng.choice(topics))
                samples.append((time.monotonic(), (time.perf_counter() - t0) * 1000))

        await asyncio.gather(*(reader() for _ in range(concurrency)))
        await client.aclose()
        return samples

    out.send(asyncio.run(main()))
    out.close()


def _latency(samples: list[tuple[float, float]], start: float, end: float) -> dict[str, Any]:
    from benchmarks.harness import summarize

    window = [ms for t, ms in samples if start <= t <= end]
    return {"reads": len(window), "readsPerSecond": round(len(window) / max(end - start, 1e-9)),
            "latencyMs": summarize(window)}


def redis_block(rows: int, *, snapshots: int = 4, master: str = "local[2]", conf: list[tuple[str, str]] | None = None,
                results_dir: Path = RESULTS, baseline_s: float = 5.0) -> dict[str, Any]:
    """The job reads `rows` snapshot rows while 8 concurrent route reads run in another process. Redis' SLOWLOG
    (every command of SLOW_US µs or more) gives the longest single command, per command name; the route
    reads' client latency is compared with the same load before the job."""
    import asyncio
    import multiprocessing

    conf = list(conf or [])
    server = RedisServer().start()
    work = Path(tempfile.mkdtemp(prefix="skew-bench-"))
    ctx = multiprocessing.get_context("spawn")
    stop, (recv, send) = ctx.Event(), ctx.Pipe(duplex=False)
    loader = spark = owned = None
    try:
        client = redis.Redis.from_url(server.url)
        gen = generate(client, rows, snapshots)
        topics = asyncio.run(_plant_registry(server.url))
        opts = job_options(server.url, work / "report", master, conf)
        spark, owned = spark_session(opts)
        env = environment(master, conf)
        loader = ctx.Process(target=_route_load, args=(server.url, topics, stop, send), daemon=True)
        loader.start()
        time.sleep(2.0)  # the load process imports and loads its scripts
        client.config_set("slowlog-log-slower-than", SLOW_US)
        client.config_set("slowlog-max-len", 1_000_000)
        client.slowlog_reset()
        client.config_resetstat()
        base_start = time.monotonic()
        time.sleep(baseline_s)
        base_end = job_start = time.monotonic()
        outcome = job.run_once(spark, opts)
        job_end = time.monotonic()
        slow = client.slowlog_get(1_000_000)
        stats = client.info("commandstats")
        stop.set()
        samples = recv.recv()
        loader.join(30)
        # Slow-log entries by who sent them: the job's (keys of {bench}) or the route reads' ({routes}).
        families: dict[str, dict[str, dict[str, Any]]] = {"snapshotRead": {}, "routeReads": {}, "other": {}}
        for e in slow:
            cmd = e["command"].decode(errors="replace") if isinstance(e["command"], bytes) else str(e["command"])
            family = ("snapshotRead" if "{" + PREFIX + "}" in cmd
                      else "routeReads" if "{" + ROUTE_PREFIX + "}" in cmd or cmd.upper().startswith("EVALSHA")
                      else "other")
            entry = families[family].setdefault(cmd.split(" ", 1)[0].upper(), {"slowCalls": 0, "maxMs": 0.0})
            entry["slowCalls"] += 1
            entry["maxMs"] = max(entry["maxMs"], round(e["duration"] / 1000, 3))
        # Calls and mean time per command, whoever sent them (INFO commandstats counts script calls too).
        commandstats = {
            name.removeprefix("cmdstat_").upper(): {"calls": int(row["calls"]),
                                                    "usecPerCall": float(row["usec_per_call"])}
            for name, row in stats.items()
        }
        doc = {
            "benchmark": "skew-report redis block",
            **env,
            "rows": gen["rows"],
            "parts": gen["parts"],
            "jobSeconds": round(job_end - job_start, 2),
            "jobRows": outcome.summary["window"]["rows"],
            # Commands shorter than the threshold are not logged: a family without entries stayed below it.
            "slowlogThresholdMs": SLOW_US / 1000,
            "longestSnapshotReadMs": max((c["maxMs"] for c in families["snapshotRead"].values()), default=None),
            "longestRouteReadMs": max((c["maxMs"] for c in families["routeReads"].values()), default=None),
            "slowlog": families,
            "commandstats": dict(sorted(commandstats.items())),
            "routeReads": {"before": _latency(samples, base_start, base_end),
                           "duringJob": _latency(samples, job_start, job_end)},
        }
        results_dir.mkdir(parents=True, exist_ok=True)
        (results_dir / "skew-redis.json").write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
        client.close()
        return doc
    finally:
        stop.set()
        if loader is not None and loader.is_alive():
            loader.terminate()
        if spark is not None and owned:
            spark.stop()
        server.cleanup()
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.skew_bench", description=__doc__.splitlines()[0])
    p.add_argument("--rows", default="1000000", help="comma-separated total row counts (default 1000000)")
    p.add_argument("--quick", action="store_true", help=f"one tiny size ({QUICK_ROWS} rows), no warm-up")
    p.add_argument("--snapshots", type=int, default=4, help="snapshots the rows are spread over (default 4)")
    p.add_argument("--repeat", type=int, default=1, help="timed runs per size; the median is reported")
    p.add_argument("--master", default="local[2]",
                   help="a Spark master, or 'standalone': a standalone cluster on loopback for the run")
    p.add_argument("--workers", type=int, default=2, help="standalone: one-core workers (default 2)")
    p.add_argument("--worker-memory", default="6g", help="standalone: memory per worker and executor (default 6g)")
    p.add_argument("--redis-block", type=int, default=None, metavar="ROWS",
                   help="instead of timing: the longest Redis command while the job reads ROWS under route reads")
    p.add_argument("--conf", type=conf_pair, action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--results", type=Path, default=RESULTS, help="directory for skew.json and skew.png")
    a = p.parse_args(argv)
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if a.redis_block:
        block = redis_block(a.redis_block, snapshots=a.snapshots, master=a.master, conf=a.conf,
                            results_dir=a.results)
        below = f"< {block['slowlogThresholdMs']}"
        snap, route = block["longestSnapshotReadMs"] or below, block["longestRouteReadMs"] or below
        print(f"{block['rows']:,} rows read in {block['jobSeconds']} s; longest snapshot-read command {snap} ms, "
              f"longest route-read command {route} ms")
        return 0
    sizes = [QUICK_ROWS] if a.quick else [int(x.replace("_", "")) for x in a.rows.split(",") if x.strip()]
    doc = run(
        sizes,
        snapshots=2 if a.quick else a.snapshots,
        master=a.master,
        conf=a.conf,
        results_dir=a.results,
        warmup=not a.quick,
        repeat=a.repeat,
        workers=a.workers,
        worker_memory=a.worker_memory,
    )
    for r in doc["results"]:
        print(f"{r['rows']:>12,} rows  {r['jobSeconds']:>8.1f} s  {r['rowsPerSecond']:>10,} rows/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
