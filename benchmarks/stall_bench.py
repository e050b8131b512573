"""Route reads while a broker with 100 000 topics registers and re-registers changed: event-loop lag, route-read
latency and the longest Redis command.

    python -m benchmarks.stall_bench [--topics 100000] [--registrations 3] [--workers 2] [--tiny]
                                     [--out benchmarks/results]

Starts its own redis-server and `--workers` workers on 127.0.0.1 (one port, SO_REUSEPORT: wrk's connections spread
over them). Runs wrk (route reads of 1 000 topics) twice for the same duration: once quiet, once while a client
re-registers one broker of `--topics` topics over HTTP `--registrations` times, each time with every queue count
changed (it registered once before). Reports wrk's latency percentiles, its max latency and non-2xx replies for
both runs, the workers' event-loop lag (namesrv_event_loop_lag_* of the worker /metrics answered: a 50 ms timer
that fires late shows a stall), and the longest Redis command of the busy run (SLOWLOG, every command over 1 ms).
DESIGN §9 and issue 26: no stall over 50 ms, route reads max < 50 ms with no non-200, no Redis command over 20 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import threading
import time
import urllib.request
from pathlib import Path

import orjson

from benchmarks.harness import git_info, machine_info, write_results
from benchmarks.http_bench import namesrv, seed, stop, wrk
from tests.redis_server import RedisServer

ROOT = Path(__file__).resolve().parent


def big_body(i: int, topics: int, variant: int = 0) -> bytes:
    """Broker big-<i>'s registration; each variant has other queue counts for every topic (all changed)."""
    q = 8 if variant % 2 == 0 else 4
    table = {f"Big{i}-Topic-{t:06d}": {"readQueueNums": q, "writeQueueNums": q, "perm": 6} for t in range(topics)}
    return orjson.dumps({"clusterName": "StallCluster", "brokerName": f"big-{i}", "brokerId": 0,
                         "brokerAddr": f"10.9.0.{i}:10911", "topicConfigTable": table})


def register_all(url: str, bodies: list[bytes], out: list[float]) -> None:
    for b in bodies:
        t0 = time.perf_counter()
        req = urllib.request.Request(url + "/v1/brokers/register", data=b, method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            assert r.status == 200, r.status
        out.append(time.perf_counter() - t0)


def lag(url: str) -> dict:
    text = urllib.request.urlopen(url + "/metrics").read().decode()
    worst = float(re.search(r"^namesrv_event_loop_lag_max_seconds (\S+)$", text, re.M).group(1))
    buckets = {float(b): float(n) for b, n in
               re.findall(r'^namesrv_event_loop_lag_seconds_bucket\{le="([0-9.]+)"\} (\S+)$', text, re.M)}
    count = float(re.search(r"^namesrv_event_loop_lag_seconds_count (\S+)$", text, re.M).group(1))
    return {"max_ms": worst * 1000, "samples": count,
            "over_50ms": count - buckets.get(0.05, count), "over_25ms": count - buckets.get(0.025, count)}


def wrk_all(url: str, duration: int) -> dict:
    """wrk's route reads with its max latency and non-2xx count kept (http_bench.wrk refuses non-2xx runs)."""
    import subprocess

    cmd = ["wrk", "-t1", "-c32", f"-d{duration}s", "--latency", "-s", str(ROOT / "wrk" / "route.lua"), url,
           "--", "1000"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=duration + 60).stdout
    unit = {"us": 0.001, "ms": 1.0, "s": 1000.0}
    res: dict = {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))}
    m = re.search(r"^\s+Latency\s+\S+\s+\S+\s+([\d.]+)(us|ms|s)", out, re.M)
    res["max_ms"] = float(m.group(1)) * unit[m.group(2)] if m else None
    for pct in ("50", "99"):
        m = re.search(rf"^\s+{pct}(?:\.000)?%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        if m:
            res[f"p{pct}_ms"] = float(m.group(1)) * unit[m.group(2)]
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errors = re.search(r"Socket errors: (.*)", out)
    res["non2xx"] = int(non2xx.group(1)) if non2xx else 0
    res["socket_errors"] = errors.group(1) if errors else ""
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--topics", type=int, default=100_000)
    p.add_argument("--registrations", type=int, default=3)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--duration", type=int, default=0, help="wrk seconds per run (default: long enough)")
    p.add_argument("--tiny", action="store_true", help="seconds: the CI smoke test (2 000 topics)")
    p.add_argument("--out", default=str(ROOT / "results"))
    args = p.parse_args(argv)
    if args.tiny:
        args.topics, args.registrations = 2_000, 1
    import redis

    server = RedisServer().start()
    proc = None
    try:
        asyncio.run(seed(server.url, 1000))
        admin = redis.Redis.from_url(server.url)
        admin.config_set("slowlog-log-slower-than", 1000)  # µs: every command over 1 ms
        admin.config_set("slowlog-max-len", 10_000)
        bodies = [big_body(0, args.topics, v) for v in range(args.registrations + 1)]
        proc, url = namesrv(server.url, args.workers)
        wrk(url, "route.lua", 1, 32, "1000")
        took: list[float] = []
        t0 = time.perf_counter()
        register_all(url, bodies[:1], took)  # sizes the run; first registration starts the parser process
        one = time.perf_counter() - t0
        duration = args.duration or max(2, int(one * args.registrations * 1.5) + 1)
        quiet = wrk_all(url, duration)
        lag_before = lag(url)
        took.clear()
        admin.slowlog_reset()
        worker = threading.Thread(target=register_all, args=(url, bodies[1:], took))  # each one changes all
        worker.start()
        busy = wrk_all(url, duration)
        worker.join()
        lag_after = lag(url)
        slow = admin.slowlog_get(10_000)
        longest = max(slow, key=lambda e: e["duration"]) if slow else None
        admin.close()
    finally:
        if proc is not None:
            stop(proc)
        server.cleanup()
    res = {"date": time.strftime("%Y-%m-%d"), "git_sha": git_info()["sha"][:10], "machine": machine_info(),
           "topics": args.topics, "registrations": args.registrations, "workers": args.workers,
           "body_bytes": len(bodies[0]),
           "redis_longest_ms": longest["duration"] / 1000 if longest else 0.0,
           "redis_longest_command": (longest["command"].decode(errors="replace")[:60] if longest else ""),
           "redis_commands_over_20ms": sum(1 for e in slow if e["duration"] > 20_000),
           "duration_s": duration, "registration_s": took, "quiet": quiet, "busy": busy,
           "lag_quiet": lag_before, "lag_during_registrations": {
               "max_ms": lag_after["max_ms"], "over_50ms": lag_after["over_50ms"] - lag_before["over_50ms"],
               "over_25ms": lag_after["over_25ms"] - lag_before["over_25ms"],
               "samples": lag_after["samples"] - lag_before["samples"]}}
    table = "\n".join([
        f"Measured {res['date']} on {res['machine']['summary']}, git {res['git_sha']}, {args.workers} workers: "
        f"{args.registrations} changed re-registrations of one broker of {args.topics} topics "
        f"({len(bodies[0]) / 1e6:.1f} MB JSON each, {', '.join(f'{t:.1f} s' for t in took)}) during {duration} s "
        f"of route reads. Longest Redis command during them: {res['redis_longest_ms']:.1f} ms "
        f"({res['redis_longest_command'].split(' ')[0]}); commands over 20 ms: {res['redis_commands_over_20ms']}.",
        "",
        "| route reads (wrk, 32 conns) | req/s | p50 ms | p99 ms | max ms | non-2xx | loop lag max ms "
        "| timers late > 50 ms |",
        "|---|---|---|---|---|---|---|---|",
        f"| quiet | {quiet['rps']:.0f} | {quiet.get('p50_ms', 0):.2f} | {quiet.get('p99_ms', 0):.2f} | "
        f"{quiet['max_ms']} | {quiet['non2xx']} | {lag_before['max_ms']:.1f} (since start) | — |",
        f"| during registrations | {busy['rps']:.0f} | {busy.get('p50_ms', 0):.2f} | {busy.get('p99_ms', 0):.2f} | "
        f"{busy['max_ms']} | {busy['non2xx']} | {lag_after['max_ms']:.1f} | "
        f"{res['lag_during_registrations']['over_50ms']:.0f} of {res['lag_during_registrations']['samples']:.0f} |",
    ]) + "\n"
    write_results(Path(args.out), "stall", res, table, args.tiny)
    return 0


if __name__ == "__main__":
    sys.exit(main())
