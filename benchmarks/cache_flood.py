"""A flood of route reads for random topics that do not exist: the worker's memory stays flat.

    python -m benchmarks.cache_flood [--topics 200000] [--tiny] [--out benchmarks/results]

Starts its own redis-server and one worker; asks the native door for `--topics` random unknown topics (pipelined,
64 in flight), twice, and records the worker's resident memory before, after the first and after the second
flood, with the route cache's entries and bytes from /metrics. The negative cache is bounded by
route_cache_max_absent (entries) and route_cache_max_bytes; before that bound existed, 200 000 unknown topics cost
a worker about 900 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
import urllib.request
import uuid
from pathlib import Path

from benchmarks.harness import git_info, machine_info, write_results
from benchmarks.http_bench import namesrv, stop
from tests.redis_server import RedisServer, free_port
from tests.remoting.client import Client

ROOT = Path(__file__).resolve().parent


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        return int(re.search(r"^VmRSS:\s+(\d+) kB", fh.read(), re.M).group(1)) / 1024


def metric(url: str, name: str) -> float:
    text = urllib.request.urlopen(url + "/metrics").read().decode()
    return float(re.search(rf"^{name} (\S+)$", text, re.M).group(1))


async def flood(port: int, n: int, in_flight: int = 64) -> int:
    c = await Client.connect(port)
    missing = 0
    pending: list[int] = []
    for _ in range(n):
        pending.append(c.send(105, {"topic": "Nope-" + uuid.uuid4().hex}))
        if len(pending) >= in_flight:
            for opaque in pending:
                missing += (await c.reply_to(opaque)).code == 17
                c.pending.pop(opaque, None)
            pending = []
    for opaque in pending:
        missing += (await c.reply_to(opaque)).code == 17
    await c.close()
    return missing


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--topics", type=int, default=200_000)
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--out", default=str(ROOT / "results"))
    args = p.parse_args(argv)
    n = 2_000 if args.tiny else args.topics
    server = RedisServer().start()
    proc = None
    try:
        port = free_port()
        proc, url = namesrv(server.url, 1, remoting_port=port)
        base = rss_mb(proc.pid)
        t0 = time.perf_counter()
        first = asyncio.run(flood(port, n))
        t1 = time.perf_counter()
        after_first = rss_mb(proc.pid)
        second = asyncio.run(flood(port, n))
        after_second = rss_mb(proc.pid)
        entries = metric(url, "namesrv_route_cache_entries")
    finally:
        if proc is not None:
            stop(proc)
        server.cleanup()
    assert first == second == n, (first, second, n)  # every answer was TOPIC_NOT_EXIST
    res = {"date": time.strftime("%Y-%m-%d"), "git_sha": git_info()["sha"][:10], "machine": machine_info(),
           "unknown_topics_per_flood": n, "floods": 2, "rss_mb": {"before": base, "after_first": after_first,
                                                                   "after_second": after_second},
           "cache_entries_after": entries, "reads_per_s": n / (t1 - t0)}
    table = "\n".join([
        f"Measured {res['date']} on {res['machine']['summary']}, git {res['git_sha']}: two floods of {n} route "
        f"reads for distinct unknown topics over the native door ({res['reads_per_s']:.0f} reads/s).",
        "",
        "| worker RSS before | after 1st flood | after 2nd flood | route cache entries |",
        "|---|---|---|---|",
        f"| {base:.1f} MB | {after_first:.1f} MB | {after_second:.1f} MB | {entries:.0f} |",
    ]) + "\n"
    write_results(Path(args.out), "cache_flood", res, table, args.tiny)
    return 0


if __name__ == "__main__":
    sys.exit(main())
