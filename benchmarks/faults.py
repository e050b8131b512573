"""Time to 503 against a hung Redis, per operation, and the time back to service once it continues.

A real `namesrv serve` worker on a redis-server of the bench's own; the server is stopped with SIGSTOP (its
sockets stay open, nothing answers: a hung or stalled Redis), each operation is timed until its 503, then
SIGCONT and the time until reads and registrations succeed again is measured. Each operation is also timed
against the healthy server first (its ordinary latency, which a 503 includes: e.g. parsing 100 000 topics).

    python -m benchmarks.faults                  # 3 rounds, 100 000-topic registration → results/faults.json
    python -m benchmarks.faults --tiny           # 1 round, 1 000 topics (the smoke test)
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks.harness import RESULTS, environment, summarize, write_json
from tests.integration.conftest import Namesrv
from tests.redis_topology import RedisNode, _data_args

SIZES = {"full": {"rounds": 3, "topics": 100_000}, "tiny": {"rounds": 1, "topics": 1000}}


def topics(n: int) -> dict[str, Any]:
    return {f"T{i:06d}": {"readQueueNums": 4, "writeQueueNums": 4, "perm": 6} for i in range(n)}


def body(name: str, addr: str, n: int, counter: int) -> dict[str, Any]:
    return {"clusterName": "F", "brokerName": name, "brokerId": 0, "brokerAddr": addr, "haServerAddr": "",
            "dataVersion": {"timestamp": 1, "counter": counter, "stateVersion": 0}, "topicConfigTable": topics(n)}


async def timed(s: aiohttp.ClientSession, method: str, url: str, **kw: Any) -> tuple[int, float]:
    started = time.monotonic()
    async with s.request(method, url, **kw) as r:
        await r.read()
        return r.status, time.monotonic() - started


async def run(args: argparse.Namespace) -> dict[str, Any]:
    size = SIZES[args.size]
    rounds, n_big = args.rounds or size["rounds"], args.topics or size["topics"]
    base_dir = tempfile.mkdtemp(prefix="nsrv-faults-")
    node = RedisNode("faults", base_dir)
    node.start(_data_args(node, None, []))
    settings = {"redis_deadline_ms": args.deadline_ms, "redis_bulk_deadline_ms": args.bulk_deadline_ms}
    srv = Namesrv(node.url, "f" + uuid.uuid4().hex[:6], 1, **settings)
    healthy: dict[str, list[float]] = {}
    to_503: dict[str, list[float]] = {}
    statuses: dict[str, set[int]] = {}
    recovery: dict[str, list[float]] = {"read": [], "register": []}
    try:
        srv.wait_ready(30)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as s:
            u = srv.url
            counter = 1

            def ops() -> dict[str, tuple[str, str, dict[str, Any]]]:
                return {
                    "route read (cache miss)": ("GET", f"{u}/v1/topics/Miss{uuid.uuid4().hex[:8]}/route", {}),
                    "heartbeat": ("POST", f"{u}/v1/brokers/heartbeat", {"json": {
                        "clusterName": "F", "brokerName": "small", "brokerId": 0, "brokerAddr": "10.0.0.1:1"}}),
                    "register, 10 topics": ("POST", f"{u}/v1/brokers/register",
                                            {"json": body("small", "10.0.0.1:1", 10, counter)}),
                    f"register, {n_big:,} topics": ("POST", f"{u}/v1/brokers/register",
                                                    {"json": body("big", "10.0.0.2:1", n_big, counter)}),
                    "unregister, 10 topics": ("POST", f"{u}/v1/brokers/unregister", {"json": {
                        "clusterName": "F", "brokerName": "gone", "brokerId": 0, "brokerAddr": "10.0.0.3:1"}}),
                    "readyz": ("GET", f"{u}/readyz", {}),
                }

            for rnd in range(rounds):
                counter += 1
                await timed(s, "POST", f"{u}/v1/brokers/register", json=body("gone", "10.0.0.3:1", 10, 1))
                for name, (method, url, kw) in ops().items():  # healthy first (and the brokers exist)
                    if name.startswith("unregister"):
                        continue
                    status, took = await timed(s, method, url, **kw)
                    assert status in (200, 404), (name, status)
                    healthy.setdefault(name, []).append(took)
                counter += 1
                node.freeze()
                try:
                    for name, (method, url, kw) in ops().items():
                        status, took = await timed(s, method, url, **kw)
                        statuses.setdefault(name, set()).add(status)
                        to_503.setdefault(name, []).append(took)
                        print(f"round {rnd + 1}: {name}: {status} after {took:.2f} s", flush=True)
                finally:
                    node.thaw()
                thawed = time.monotonic()
                for kind, (method, url, kw) in (("read", ("GET", f"{u}/v1/topics/T000001/route", {})),
                                                ("register", ops()["register, 10 topics"])):
                    while (await timed(s, method, url, **kw))[0] != 200:
                        if time.monotonic() - thawed > 30:
                            raise RuntimeError(f"{kind}: no recovery 30 s after SIGCONT")
                        await asyncio.sleep(0.02)
                    recovery[kind].append(time.monotonic() - thawed)
            assert srv.proc.poll() is None, "the worker died"
    finally:
        srv.stop()
        node.thaw()
        node.kill()
        shutil.rmtree(base_dir, ignore_errors=True)
    rows = []
    for name, times in to_503.items():
        rows.append({"operation": name, "statuses": sorted(statuses[name]), "seconds_to_503": summarize(times, 2),
                     "healthy_seconds": summarize(healthy.get(name, []), 3)})
    return {"benchmark": "faults", **environment(node_version()),
            "params": {"size": args.size, "rounds": rounds, "big_topics": n_big, **settings},
            "results": rows, "recovery_seconds": {k: summarize(v, 3) for k, v in recovery.items()}}


def node_version() -> str:
    import subprocess

    out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout
    return next((p[2:] for p in out.split() if p.startswith("v=")), "")


def markdown(doc: dict[str, Any]) -> str:
    lines = ["| operation | answer | time to answer, s (p50 / max) | healthy, s (p50) |", "|---|---|---|---|"]
    for r in doc["results"]:
        t = r["seconds_to_503"]
        lines.append(f"| {r['operation']} | {'/'.join(map(str, r['statuses']))} | {t['p50']:.2f} / {t['max']:.2f} "
                     f"| {r['healthy_seconds'].get('p50', '')} |")
    rec = doc["recovery_seconds"]
    lines.append(f"\nBack to service after SIGCONT: route read p50 {rec['read']['p50']:.3f} s (max "
                 f"{rec['read']['max']:.3f}), registration p50 {rec['register']['p50']:.3f} s "
                 f"(max {rec['register']['max']:.3f}); same worker process throughout.")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.faults", description=__doc__.split("\n\n")[0])
    p.add_argument("--tiny", dest="size", action="store_const", const="tiny", default="full")
    p.add_argument("--rounds", type=int, default=0)
    p.add_argument("--topics", type=int, default=0, help="topics of the big registration")
    p.add_argument("--deadline-ms", type=int, default=1000, help="NAMESRV_REDIS_DEADLINE_MS")
    p.add_argument("--bulk-deadline-ms", type=int, default=10_000, help="NAMESRV_REDIS_BULK_DEADLINE_MS")
    p.add_argument("--out", default="")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if shutil.which("redis-server") is None:
        sys.exit("redis-server is not installed")
    doc = asyncio.run(run(args))
    write_json(Path(args.out or RESULTS / ("faults.json" if args.size == "full" else "faults-tiny.json")), doc)
    print(markdown(doc))
    return doc


if __name__ == "__main__":
    main()
