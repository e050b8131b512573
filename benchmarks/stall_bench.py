"""Route reads on every worker while a broker with 100 000 topics registers and re-registers changed: their
latency, the workers' event-loop lag and the longest Redis command.

    python -m benchmarks.stall_bench [--topics 100000] [--registrations 3] [--workers 2] [--rate 200] [--tiny]
                                     [--out benchmarks/results]

Starts its own redis-server and `--workers` one-worker `namesrv serve` processes on 127.0.0.1, each on its own
port. A probe process (its own interpreter, so it competes with nothing of the bench's) reads routes from every
worker at a fixed rate, `--rate` a second per worker on 8 keep-alive connections each, for the same duration
twice: once quiet, once while the bench re-registers one broker of `--topics` topics through the first worker
`--registrations` times over HTTP, each time with every queue count changed (it registered once before). Half the
reads ask for one of 1 000 small topics (served from the workers' route caches), half for a topic of the big
broker (whose cache entries every registration invalidates, so those reads go to Redis). Latency is timed from the
moment a read was due, not from when it was sent, so a stalled worker cannot hide its stall by sending less
(coordinated omission). Reports each worker's reads (p50, p99, max, non-200), its event-loop lag
(namesrv_event_loop_lag_* of its /metrics: a 50 ms timer that fires late shows a stall), and the longest Redis
command of the busy run (SLOWLOG, every command over 1 ms).
DESIGN §9 and issue 26: route reads max < 50 ms with no non-200, no Redis command over 20 ms.
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
from typing import Any

import orjson

from benchmarks.harness import git_info, machine_info, write_results
from benchmarks.http_bench import namesrv, seed, stop
from tests.redis_server import RedisServer

ROOT = Path(__file__).resolve().parent


def big_body(i: int, topics: int, variant: int = 0) -> bytes:
    """Broker big-<i>'s registration; each variant has other queue counts for every topic (all changed) and its own
    data version."""
    q = 8 if variant % 2 == 0 else 4
    table = {f"Big{i}-Topic-{t:06d}": {"readQueueNums": q, "writeQueueNums": q, "perm": 6} for t in range(topics)}
    return orjson.dumps({"clusterName": "StallCluster", "brokerName": f"big-{i}", "brokerId": 0,
                         "brokerAddr": f"10.9.0.{i}:10911", "topicConfigTable": table,
                         # a new data version, as a broker whose topics changed sends (the same one would let the
                         # NameServer skip every topic already registered, as Java does)
                         "dataVersion": {"timestamp": 1, "counter": variant}})


def seed_body(b: int) -> bytes:
    """One of the two brokers serving the 1 000 small topics T0..T999 (embedded mode: no Redis to seed)."""
    table = {f"T{t}": {"readQueueNums": 8, "writeQueueNums": 8, "perm": 6} for t in range(1000)}
    return orjson.dumps({"clusterName": "BenchCluster", "brokerName": f"bench-{b}", "brokerId": 0,
                         "brokerAddr": f"10.1.0.{b}:10911", "topicConfigTable": table})


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


def probe(urls: list[str], topics: int, rate: int, duration: float, out: Any) -> None:
    """The probe process: fixed-rate route reads of every worker; puts {url: [(latency ms, status), ...]}."""
    import random

    import aiohttp

    async def lane(session: aiohttp.ClientSession, url: str, t0: float, interval: float, first: int,
                   lanes: int, rows: list) -> None:
        i = first
        while True:
            due = t0 + i * interval
            if due - t0 >= duration:
                return
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            topic = f"T{random.randrange(1000)}" if i % 2 else f"Big0-Topic-{random.randrange(topics):06d}"
            try:
                async with session.get(f"{url}/v1/topics/{topic}/route") as r:
                    await r.read()
                    status = r.status
            except aiohttp.ClientError as exc:
                status = type(exc).__name__
            rows.append(((time.perf_counter() - due) * 1000, status))
            i += lanes

    async def reads() -> dict:
        res: dict[str, list] = {u: [] for u in urls}
        lanes = 8
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30),
                                         connector=aiohttp.TCPConnector(limit=0)) as session:
            for u in urls:  # connections up before the clock starts
                for r in await asyncio.gather(*(session.get(f"{u}/v1/topics/T0/route") for _ in range(lanes))):
                    r.release()
            t0 = time.perf_counter() + 0.2
            await asyncio.gather(*(lane(session, u, t0, 1 / rate, k, lanes, res[u]) for u in urls
                                   for k in range(lanes)))
        return res

    out.put(asyncio.run(reads()))


def summary(rows: list[tuple[float, Any]]) -> dict:
    lat = sorted(ms for ms, _ in rows)
    pct = (lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]) if lat else (lambda q: 0.0)
    return {"reads": len(rows), "p50_ms": pct(0.5), "p99_ms": pct(0.99), "max_ms": lat[-1] if lat else 0.0,
            "non200": sum(1 for _, st in rows if st != 200)}


def read_run(urls: list[str], topics: int, rate: int, duration: float, during: Any = None) -> dict:
    """One probe run (in a process of its own), with `during` (a thread's target) running meanwhile."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    proc = ctx.Process(target=probe, args=(urls, topics, rate, duration, q))
    proc.start()
    worker = None
    if during is not None:
        time.sleep(1.0)  # the probe's interpreter and connections first
        worker = threading.Thread(target=during)
        worker.start()
    res = q.get(timeout=duration + 120)
    proc.join(30)
    if worker is not None:
        worker.join()
    return {u: summary(rows) for u, rows in res.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--topics", type=int, default=100_000)
    p.add_argument("--registrations", type=int, default=3)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--rate", type=int, default=200, help="route reads a second per worker")
    p.add_argument("--duration", type=int, default=0, help="seconds per probe run (default: long enough)")
    p.add_argument("--chunk-topics", type=int, default=0,
                   help="the workers' NAMESRV_REGISTRATION_CHUNK_TOPICS (0: their default; 1000000: never chunked, "
                        "the baseline)")
    p.add_argument("--embedded", action="store_true",
                   help="one worker in embedded mode (no Redis: fakeredis on the worker's own event loop)")
    p.add_argument("--tiny", action="store_true", help="seconds: the CI smoke test (2 000 topics)")
    p.add_argument("--out", default=str(ROOT / "results"))
    args = p.parse_args(argv)
    if args.tiny:
        args.topics, args.registrations = 2_000, 1
    import redis

    if args.embedded:
        args.workers = 1
    server = None if args.embedded else RedisServer().start()
    procs: list = []
    slow: list = []
    try:
        bodies = [big_body(0, args.topics, v) for v in range(args.registrations + 1)]
        admin = None
        if server is not None:
            asyncio.run(seed(server.url, 1000))
            admin = redis.Redis.from_url(server.url)
            admin.config_set("slowlog-log-slower-than", 1000)  # µs: every command over 1 ms
            admin.config_set("slowlog-max-len", 10_000)
        urls = []
        for _ in range(args.workers):
            proc, url = namesrv(server.url if server else "", 1, registration_chunk_topics=args.chunk_topics)
            procs.append(proc)
            urls.append(url)
        if server is None:  # the small topics, through the worker itself
            register_all(urls[0], [seed_body(b) for b in range(2)], [])
        took: list[float] = []
        t0 = time.perf_counter()
        register_all(urls[0], bodies[:1], took)  # sizes the run; the first starts the parser process
        one = time.perf_counter() - t0
        duration = args.duration or max(3, int(one * args.registrations * 1.5) + 2)
        quiet = read_run(urls, args.topics, args.rate, duration)
        lag_before = [lag(u) for u in urls]
        took.clear()
        if admin is not None:
            admin.slowlog_reset()
        busy = read_run(urls, args.topics, args.rate, duration,
                        during=lambda: register_all(urls[0], bodies[1:], took))  # each one changes all
        lag_after = [lag(u) for u in urls]
        if admin is not None:
            slow = admin.slowlog_get(10_000)
            admin.close()
        longest = max(slow, key=lambda e: e["duration"]) if slow else None
    finally:
        for proc in procs:
            stop(proc)
        if server is not None:
            server.cleanup()
    if len(took) != args.registrations:
        raise RuntimeError(f"{len(took)} of {args.registrations} registrations completed during the busy run")
    lag_busy = [{"max_ms": after["max_ms"], "over_50ms": after["over_50ms"] - before["over_50ms"],
                 "over_25ms": after["over_25ms"] - before["over_25ms"], "samples": after["samples"] - before["samples"]}
                for before, after in zip(lag_before, lag_after, strict=True)]
    res = {"date": time.strftime("%Y-%m-%d"), "git_sha": git_info()["sha"][:10], "machine": machine_info(),
           "topics": args.topics, "registrations": args.registrations, "workers": args.workers, "rate": args.rate,
           "embedded": args.embedded,
           "chunk_topics": args.chunk_topics or "default",
           "body_bytes": len(bodies[0]),
           "redis_longest_ms": longest["duration"] / 1000 if longest else 0.0,
           "redis_longest_command": (longest["command"].decode(errors="replace")[:60] if longest else ""),
           "redis_commands_over_20ms": sum(1 for e in slow if e["duration"] > 20_000),
           "redis_commands_over_1ms": len(slow),
           "duration_s": duration, "registration_s": took,
           "quiet": [quiet[u] for u in urls], "busy": [busy[u] for u in urls],
           "lag_quiet": lag_before, "lag_during_registrations": lag_busy}
    rows = []
    for i, u in enumerate(urls):
        for phase, run, lag_row in (("quiet", quiet, None), ("during registrations", busy, lag_busy[i])):
            r = run[u]
            late = f"{lag_row['over_50ms']:.0f} of {lag_row['samples']:.0f}" if lag_row else "—"
            loop = f"{lag_row['max_ms']:.1f}" if lag_row else f"{lag_before[i]['max_ms']:.1f} (since start)"
            rows.append(f"| {i} | {phase} | {r['reads']} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['max_ms']:.2f} | "
                        f"{r['non200']} | {loop} | {late} |")
    table = "\n".join([
        f"Measured {res['date']} on {res['machine']['summary']}, git {res['git_sha']}, {args.workers} workers: "
        f"{args.registrations} changed re-registrations of one broker of {args.topics} topics through worker 0 "
        f"({len(bodies[0]) / 1e6:.1f} MB JSON each, {', '.join(f'{t:.1f} s' for t in took)}) during {duration} s "
        f"of route reads at {args.rate}/s per worker; registrations in steps of "
        f"{args.chunk_topics or 'the default'} topics{' (embedded mode)' if args.embedded else ''}. "
        f"Longest Redis command during them: "
        f"{res['redis_longest_ms']:.1f} ms ({res['redis_longest_command'].split(' ')[0] or 'none over 1 ms'}); "
        f"commands over 20 ms: {res['redis_commands_over_20ms']}, over 1 ms: {len(slow)}.",
        "",
        "| worker | route reads | reads | p50 ms | p99 ms | max ms | non-200 | loop lag max ms | timers late > 50 ms |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
    ]) + "\n"
    write_results(Path(args.out), "stall-embedded" if args.embedded else "stall", res, table, args.tiny)
    return 0


if __name__ == "__main__":
    sys.exit(main())
