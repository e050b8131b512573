"""HTTP benchmarks, each against a ceiling measured in the same run (DESIGN §9).

    python -m benchmarks.http_bench [--quick | --tiny] [--out benchmarks/results]

Starts its own redis-server and workers on 127.0.0.1, drives them with `wrk`, and writes http.json, a markdown
table (http.md) and a PNG (http.png). Keys live under the `bench` prefix on a Redis of its own.
Scenarios: route read vs a bare aiohttp handler returning the same bytes; heartbeat vs a handler doing one
no-op EVALSHA; 1 vs 2 worker processes; cross-worker visibility; snapshot of 100 k rows; Redis memory per
(topic, broker) entry.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import aiohttp
import orjson
import redis
import redis.asyncio as aioredis

from benchmarks.harness import environment, parse_size, percentiles, run_header, tools_missing, write_results
from service.models import RegisterBroker, TopicConfig
from service.store import RouteStore, SnapshotStore
from tests.invariants import jsonable
from tests.redis_server import RedisServer, free_port


async def take_snapshot(store, retention_s=86_400, **kw) -> str:
    return (await SnapshotStore(store).take(retention_s, **kw)).snap_id

ROOT = Path(__file__).resolve().parent
PREFIX = "bench"
SIZES = {"tiny": dict(topics=50, duration=1, rounds=1, visibility=20, snapshot_rows=2_000, connections=16),
         "quick": dict(topics=1000, duration=2, rounds=9, visibility=200, snapshot_rows=100_000, connections=64),
         "full": dict(topics=1000, duration=3, rounds=21, visibility=1000, snapshot_rows=100_000, connections=64)}


# ---------------------------------------------------------------------------- processes

def wait_http(url: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError as exc:
            if getattr(exc, "code", None):  # an HTTP error status: the server answers
                return
            time.sleep(0.05)
    raise TimeoutError(url)


def start(cmd: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(cmd, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def worker_env(redis_url: str, port: int, workers: int = 1, **env: object) -> dict[str, str]:
    """The environment of a benchmarked `namesrv serve`: the bench's Redis and prefix, loopback, no snapshots."""
    e = {"NAMESRV_REDIS_URL": redis_url, "NAMESRV_KEY_PREFIX": PREFIX, "NAMESRV_HOST": "127.0.0.1",
         "NAMESRV_PORT": str(port), "NAMESRV_REMOTING_PORT": str(free_port()), "NAMESRV_WORKERS": str(workers),
         "NAMESRV_SNAPSHOT_INTERVAL_S": "0",
         "NAMESRV_LOG_LEVEL": "WARNING"}
    e.update({f"NAMESRV_{k.upper()}": str(v) for k, v in env.items()})
    return e


def namesrv(redis_url: str, workers: int = 1, **env: object) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = start([sys.executable, "-m", "service.cli", "serve"], worker_env(redis_url, port, workers, **env))
    url = f"http://127.0.0.1:{port}"
    wait_http(url + "/readyz")
    return proc, url


def wrk(url: str, script: str, duration: int, connections: int, *args: str) -> dict:
    """Run wrk (one thread: the other core serves) and parse throughput and latency percentiles."""
    cmd = ["wrk", "-t1", f"-c{connections}", f"-d{duration}s", "--latency", "-s", str(ROOT / "wrk" / script),
           url, "--", *args]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=duration + 60).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    lat = {}
    for pct in ("50", "90", "99"):
        m = re.search(rf"^\s+{pct}(?:\.000)?%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        if m:
            lat[f"p{pct}_ms"] = float(m.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[m.group(2)]
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errors = re.search(r"Socket errors: (.*)", out)
    res = {"rps": rps, **lat, "non2xx": int(non2xx.group(1)) if non2xx else 0,
           "socket_errors": errors.group(1) if errors else ""}
    if res["non2xx"]:  # a throughput of error replies measures nothing
        raise RuntimeError(f"wrk {script} against {url}: {res['non2xx']} non-2xx replies")
    return res


# ---------------------------------------------------------------------------- data

def bench_topics(n: int) -> dict[str, TopicConfig]:
    return {f"T{i}": TopicConfig(8, 8, 6, 0) for i in range(n)}


async def seed(redis_url: str, topics: int, brokers: int = 2,
               heartbeat_timeout_ms: int | None = None) -> dict[str, dict]:
    """Register `brokers` masters each serving every topic; return the encoded routes (the ceiling's bytes)."""
    store = RouteStore(aioredis.Redis.from_url(redis_url, decode_responses=True), PREFIX)
    table = bench_topics(topics)
    for b in range(brokers):
        await store.register_broker(RegisterBroker(
            cluster="BenchCluster", broker_name=f"bench-{b}", broker_id=0, broker_addr=f"10.1.0.{b}:10911",
            ha_server_addr=f"10.1.0.{b}:10912", topics=table, heartbeat_timeout_ms=heartbeat_timeout_ms))
    routes = {t: jsonable(await store.get_route(t)) for t in table}
    await store.redis.aclose()
    return routes


# ---------------------------------------------------------------------------- scenarios

def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and all its descendants (a supervisor's workers included)."""
    total, todo = 0.0, [pid]
    tick = os.sysconf("SC_CLK_TCK")
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo += [int(c) for c in fh.read().split()]
        except OSError:
            continue
    return total


def measured(url: str, pid: int, script: str, size: dict, *args: str) -> dict:
    """One wrk run, plus the server's CPU time per request (less sensitive to a busy machine than req/s)."""
    before = cpu_seconds(pid)
    res = wrk(url, script, size["duration"], size["connections"], *args)
    requests = res["rps"] * size["duration"]
    res["cpu_us_per_request"] = (cpu_seconds(pid) - before) / requests * 1e6 if requests else None
    return res


def paired(ceiling: tuple[str, int], service: tuple[str, int], script: str, size: dict, *args: str) -> dict:
    """Alternate short wrk runs against the ceiling and the service, `rounds` times each, both servers up all
    along: a noisy neighbour slows both sides of a round alike, and many short rounds outvote the slow ones.
    The ratio is the median of the per-round ratios; the CPU ratio (ceiling's CPU per request / the service's)
    says the same without counting wrk's share."""
    for url, _ in (ceiling, service):  # warm-up
        wrk(url, script, 1, size["connections"], *args)
    rounds = []
    for i in range(size["rounds"]):
        if i % 2:  # ceiling first, then service first: a drift within a round favours neither side
            svc = measured(*service, script, size, *args)
            bare = measured(*ceiling, script, size, *args)
        else:
            bare = measured(*ceiling, script, size, *args)
            svc = measured(*service, script, size, *args)
        cpu = (bare["cpu_us_per_request"] / svc["cpu_us_per_request"]
               if bare["cpu_us_per_request"] and svc["cpu_us_per_request"] else None)
        rounds.append({"ceiling": bare, "service": svc, "ratio": svc["rps"] / bare["rps"], "cpu_ratio": cpu})
    by_ratio = sorted(rounds, key=lambda r: r["ratio"])
    median = by_ratio[len(by_ratio) // 2]
    cpus = sorted(r["cpu_ratio"] for r in rounds if r["cpu_ratio"] is not None)
    return {"service": median["service"], "ceiling": median["ceiling"], "ratio": median["ratio"],
            "cpu_ratio": cpus[len(cpus) // 2] if cpus else None,
            "rounds": [round(r["ratio"], 3) for r in rounds]}


def route_read(redis_url: str, size: dict, tmp: str, workers: int = 1) -> dict:
    routes = asyncio.run(seed(redis_url, size["topics"]))
    bodies = os.path.join(tmp, "bodies.json")
    Path(bodies).write_bytes(orjson.dumps(routes))
    port = free_port()
    ceiling = start([sys.executable, "-m", "benchmarks.ceiling", "--mode", "route", "--port", str(port),
                     "--bodies", bodies])
    proc, url = None, ""
    try:
        wait_http(f"http://127.0.0.1:{port}/v1/topics/T0/route")
        proc, url = namesrv(redis_url, workers)
        res = paired((f"http://127.0.0.1:{port}", ceiling.pid), (url, proc.pid), "route.lua", size,
                     str(size["topics"]))
        metrics = urllib.request.urlopen(url + "/metrics").read().decode()
        hit = re.search(r"^namesrv_route_cache_hit_ratio (\S+)$", metrics, re.M)
    finally:
        stop(ceiling)
        if proc is not None:
            stop(proc)
    return {**res, "cache_hit_ratio": float(hit.group(1)) if hit else None, "workers": workers}


def heartbeat(redis_url: str, size: dict) -> dict:
    asyncio.run(seed(redis_url, 10, brokers=1))
    port = free_port()
    ceiling = start([sys.executable, "-m", "benchmarks.ceiling", "--mode", "evalsha", "--port", str(port),
                     "--redis-url", redis_url])
    proc = None
    try:
        wait_http(f"http://127.0.0.1:{port}/v1/brokers/heartbeat")
        proc, url = namesrv(redis_url)
        return paired((f"http://127.0.0.1:{port}", ceiling.pid), (url, proc.pid), "heartbeat.lua", size)
    finally:
        stop(ceiling)
        if proc is not None:
            stop(proc)


async def _visibility(url_a: str, url_b: str, n: int) -> list[float]:
    out = []
    async with aiohttp.ClientSession() as s:
        await s.post(f"{url_a}/v1/brokers/register", json={
            "clusterName": "BenchCluster", "brokerName": "vis", "brokerId": 0, "brokerAddr": "10.2.0.1:10911",
            "topicConfigTable": {"VisTopic": {"readQueueNums": 4, "writeQueueNums": 4, "perm": 6}}})
        for i in range(n):
            want = 4 if i % 2 == 0 else 6
            await s.get(f"{url_b}/v1/topics/VisTopic/route")  # keep B's cache warm
            await s.post(f"{url_a}/v1/brokers/vis/{'wipe' if want == 4 else 'add'}-write-perm")
            t0 = time.perf_counter()
            while True:
                r = await s.get(f"{url_b}/v1/topics/VisTopic/route")
                if (await r.json())["queueDatas"][0]["perm"] == want:
                    break
            out.append((time.perf_counter() - t0) * 1000)
    return out


def visibility(redis_url: str, size: dict) -> dict:
    pa, a = namesrv(redis_url)
    pb, b = namesrv(redis_url)
    try:
        lat = asyncio.run(_visibility(a, b, size["visibility"]))
    finally:
        stop(pa)
        stop(pb)
    return {"n": len(lat), **percentiles(lat, suffix="_ms")}


async def _snapshot(redis_url: str, rows: int) -> dict:
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    store = RouteStore(client, PREFIX + "snap")
    brokers = 100
    per = max(1, rows // brokers)
    for b in range(brokers):
        await store.register_broker(RegisterBroker(
            cluster=f"C{b % 4}", broker_name=f"snap-{b}", broker_id=0, broker_addr=f"10.3.{b // 250}.{b % 250}:1",
            ha_server_addr="", topics={f"S{t}": TopicConfig(8, 8, 6, 0) for t in range(per)}))
    used_before = (await client.info("memory"))["used_memory"]
    await client.config_set("slowlog-log-slower-than", 0)
    await client.config_set("slowlog-max-len", 100_000)
    await client.slowlog_reset()
    t0 = time.perf_counter()
    snap_id = await take_snapshot(store, 3600)
    total = time.perf_counter() - t0
    log = await client.slowlog_get(100_000)
    await client.config_set("slowlog-log-slower-than", 10_000)
    meta = dict(zip(("rows", "parts", "bytes"),
                    await client.hmget(store.keys.snapshot(snap_id), "rows", "parts", "bytes"), strict=True))
    longest = max((e["duration"] for e in log), default=0) / 1000
    await client.aclose()
    return {"rows": int(meta["rows"]), "parts": int(meta["parts"]), "bytes": int(meta["bytes"]),
            "bytes_per_row": int(meta["bytes"]) / max(1, int(meta["rows"])), "total_s": total,
            "longest_redis_block_ms": longest, "used_memory_before": used_before}


def memory_per_entry(redis_url: str, size: dict) -> dict:
    client = redis.Redis.from_url(redis_url)
    client.flushall()
    before = client.info("memory")["used_memory"]
    topics, brokers = size["topics"] * 10, 10
    asyncio.run(seed(redis_url, topics, brokers=brokers))
    after = client.info("memory")["used_memory"]
    client.close()
    entries = topics * brokers
    return {"entries": entries, "bytes": after - before, "bytes_per_entry": (after - before) / entries}


# ---------------------------------------------------------------------------- report

def _f(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def markdown(res: dict) -> str:
    r, h, v, s, m = res["route_read"], res["heartbeat"], res["visibility"], res["snapshot"], res["memory"]
    r2 = res["route_read_2_workers"]
    lines = [
        f"Measured {res['date']} on {res['machine']['summary']}, git {res['git_sha']}, mode {res['mode']}.",
        "",
        "| scenario | service | ceiling | ratio | target |",
        "|---|---|---|---|---|",
        f"| route read, 1 worker, {res['size']['topics']} topics (req/s) | {r['service']['rps']:.0f} "
        f"(p50 {r['service'].get('p50_ms', 0):.2f} ms, p99 {r['service'].get('p99_ms', 0):.2f} ms) | "
        f"{r['ceiling']['rps']:.0f} (p50 {r['ceiling'].get('p50_ms', 0):.2f} ms, p99 "
        f"{r['ceiling'].get('p99_ms', 0):.2f} ms) | {r['ratio']:.2f} (CPU per request: {_f(r['cpu_ratio'])}) "
        f"| ≥ 0.85 |",
        f"| route read, 2 workers (req/s) | {r2['service']['rps']:.0f} | {r2['ceiling']['rps']:.0f} (1 proc) | "
        f"{r2['ratio']:.2f} | 2 cores shared with wrk and Redis |",
        f"| heartbeat (req/s) | {h['service']['rps']:.0f} (p99 {h['service'].get('p99_ms', 0):.2f} ms) | "
        f"{h['ceiling']['rps']:.0f} | {h['ratio']:.2f} (CPU per request: {_f(h['cpu_ratio'])}) | ≥ 0.8 |",
        f"| change via A visible via B (ms) | p50 {v['p50_ms']:.2f}, p99 {v['p99_ms']:.2f} | — | — | p99 ≤ 50 |",
        f"| snapshot of {s['rows']} rows | {s['total_s']:.2f} s total, longest Redis block "
        f"{s['longest_redis_block_ms']:.2f} ms, {s['bytes_per_row']:.1f} B/row | — | — | block of a few ms |",
        f"| Redis memory per (topic, broker) entry | {m['bytes_per_entry']:.0f} B ({m['entries']} entries) "
        f"| — | — | — |",
        f"| route cache hit ratio during the read run | {r['cache_hit_ratio']:.3f} | — | — | — |",
    ]
    return "\n".join(lines) + "\n"


def plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = ["route read", "route read\n2 workers", "heartbeat"]
    svc = [res["route_read"]["service"]["rps"], res["route_read_2_workers"]["service"]["rps"],
           res["heartbeat"]["service"]["rps"]]
    ceil = [res["route_read"]["ceiling"]["rps"], res["route_read_2_workers"]["ceiling"]["rps"],
            res["heartbeat"]["ceiling"]["rps"]]
    fig, ax = plt.subplots(figsize=(7, 4))
    xs = range(len(names))
    ax.bar([x - 0.2 for x in xs], ceil, width=0.4, label="ceiling (bare aiohttp)", color="#bbbbbb")
    ax.bar([x + 0.2 for x in xs], svc, width=0.4, label="rmq-namesrv", color="#d9534f")
    for x, sv, ce in zip(xs, svc, ceil, strict=True):
        ax.text(x + 0.2, sv, f"{sv / ce:.2f}×", ha="center", va="bottom", fontsize=9)
    ax.set_xticks(list(xs), names)
    ax.set_ylabel("requests / s")
    ax.set_title(f"HTTP throughput vs same-run ceilings ({res['date']}, git {res['git_sha']})")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    mode, out = parse_size(__doc__.split("\n\n")[0], argv, "under 5 minutes", "longer runs, more samples")
    size = SIZES[mode]
    if tools_missing("wrk", package="wrk"):
        return 2
    out.mkdir(parents=True, exist_ok=True)
    server = RedisServer().start()
    tmp = tempfile.mkdtemp(prefix="nsrv-bench-")
    res: dict = run_header(mode, size)
    try:
        steps = [("route_read", lambda: route_read(server.url, size, tmp)),
                 ("route_read_2_workers", lambda: route_read(server.url, size, tmp, workers=2)),
                 ("heartbeat", lambda: heartbeat(server.url, size)),
                 ("visibility", lambda: visibility(server.url, size)),
                 ("snapshot", lambda: asyncio.run(_snapshot(server.url, size["snapshot_rows"]))),
                 ("memory", lambda: memory_per_entry(server.url, size))]
        for name, step in steps:
            t0 = time.monotonic()
            print(f"[{name}] running…", file=sys.stderr, flush=True)
            res[name] = step()
            print(f"[{name}] done in {time.monotonic() - t0:.1f}s", file=sys.stderr, flush=True)
    finally:
        server.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)
    res["versions"] = environment(res["machine"].get("redis_server", ""))["versions"]
    base = write_results(out, "http", res, markdown(res), mode == "tiny")
    plot(res, base.with_suffix(".png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
