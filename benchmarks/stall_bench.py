"""Route reads while brokers with 100 000 topics register: the worker's event-loop lag and the route-read p99.

    python -m benchmarks.stall_bench [--topics 100000] [--registrations 3] [--tiny] [--out benchmarks/results]

Starts its own redis-server and one worker on 127.0.0.1. Runs wrk (route reads of 1 000 topics) twice for the
same duration: once quiet, once while a client registers brokers of `--topics` topics over HTTP one after the
other. Reports wrk's latency percentiles for both runs, and the worker's event-loop lag (its
namesrv_event_loop_lag_* metrics: a 50 ms timer that fires late shows a stall). DESIGN §9: no stall over 50 ms.
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


def big_body(i: int, topics: int) -> bytes:
    table = {f"Big{i}-Topic-{t:06d}": {"readQueueNums": 8, "writeQueueNums": 8, "perm": 6} for t in range(topics)}
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--topics", type=int, default=100_000)
    p.add_argument("--registrations", type=int, default=3)
    p.add_argument("--duration", type=int, default=0, help="wrk seconds per run (default: long enough)")
    p.add_argument("--tiny", action="store_true", help="seconds: the CI smoke test (2 000 topics)")
    p.add_argument("--out", default=str(ROOT / "results"))
    args = p.parse_args(argv)
    if args.tiny:
        args.topics, args.registrations = 2_000, 1
    server = RedisServer().start()
    proc = None
    try:
        asyncio.run(seed(server.url, 1000))
        bodies = [big_body(i, args.topics) for i in range(args.registrations)]
        proc, url = namesrv(server.url, 1)
        wrk(url, "route.lua", 1, 32, "1000")
        took: list[float] = []
        t0 = time.perf_counter()
        register_all(url, bodies[:1], took)  # sizes the run; first registration starts the parser process
        one = time.perf_counter() - t0
        duration = args.duration or max(2, int(one * args.registrations * 1.5) + 1)
        quiet = wrk(url, "route.lua", duration, 32, "1000")
        lag_before = lag(url)
        took.clear()
        worker = threading.Thread(target=register_all, args=(url, bodies, took))
        worker.start()
        busy = wrk(url, "route.lua", duration, 32, "1000")
        worker.join()
        lag_after = lag(url)
    finally:
        if proc is not None:
            stop(proc)
        server.cleanup()
    res = {"date": time.strftime("%Y-%m-%d"), "git_sha": git_info()["sha"][:10], "machine": machine_info(),
           "topics": args.topics, "registrations": args.registrations, "body_bytes": len(bodies[0]),
           "duration_s": duration, "registration_s": took, "quiet": quiet, "busy": busy,
           "lag_quiet": lag_before, "lag_during_registrations": {
               "max_ms": lag_after["max_ms"], "over_50ms": lag_after["over_50ms"] - lag_before["over_50ms"],
               "over_25ms": lag_after["over_25ms"] - lag_before["over_25ms"],
               "samples": lag_after["samples"] - lag_before["samples"]}}
    table = "\n".join([
        f"Measured {res['date']} on {res['machine']['summary']}, git {res['git_sha']}: {args.registrations} "
        f"registrations of {args.topics} topics ({len(bodies[0]) / 1e6:.1f} MB JSON each, "
        f"{', '.join(f'{t:.1f} s' for t in took)}) during {duration} s of route reads.",
        "",
        "| route reads (wrk, 32 conns) | req/s | p50 ms | p99 ms | loop lag max ms | timers late > 50 ms |",
        "|---|---|---|---|---|---|",
        f"| quiet | {quiet['rps']:.0f} | {quiet.get('p50_ms', 0):.2f} | {quiet.get('p99_ms', 0):.2f} | "
        f"{lag_before['max_ms']:.1f} (since start) | — |",
        f"| during registrations | {busy['rps']:.0f} | {busy.get('p50_ms', 0):.2f} | {busy.get('p99_ms', 0):.2f} | "
        f"{lag_after['max_ms']:.1f} | {res['lag_during_registrations']['over_50ms']:.0f} of "
        f"{res['lag_during_registrations']['samples']:.0f} |",
    ]) + "\n"
    write_results(Path(args.out), "stall", res, table, args.tiny)
    return 0


if __name__ == "__main__":
    sys.exit(main())
