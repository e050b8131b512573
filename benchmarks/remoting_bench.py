"""The native door's route reads (code 105) against the ceiling of a bare asyncio server answering a fixed
frame, and against the HTTP door of the same worker, all in the same run (DESIGN §9).

    python -m benchmarks.remoting_bench [--quick | --tiny] [--out benchmarks/results]

Starts its own redis-server, one worker (HTTP + remoting) and the ceiling on 127.0.0.1; drives the remoting side
with benchmarks/rmqload.c (compiled here with cc; one thread, pipelined, like wrk) and the HTTP side with wrk.
Rounds alternate ceiling and service so a noisy neighbour slows both alike; besides req/s, the servers' CPU time
per request is recorded. Writes remoting.json and remoting.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from benchmarks.harness import parse_size, run_header, tools_missing, write_results
from benchmarks.http_bench import cpu_seconds, namesrv, seed, start, stop, wrk
from tests.redis_server import RedisServer, free_port

ROOT = Path(__file__).resolve().parent
SIZES = {"tiny": dict(topics=50, duration=1, rounds=1, connections=8, depth=4),
         "quick": dict(topics=1000, duration=5, rounds=3, connections=32, depth=16),
         "full": dict(topics=1000, duration=10, rounds=5, connections=64, depth=16)}


def build_load_tool(tmp: str) -> str:
    """Compile rmqload.c (C, epoll) so the load generator costs the shared CPU as little as wrk does."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise RuntimeError("a C compiler is needed for benchmarks/rmqload.c: apt-get install -y gcc")
    exe = os.path.join(tmp, "rmqload")
    subprocess.run([cc, "-O2", "-o", exe, str(ROOT / "rmqload.c")], check=True)
    return exe


def rmqload(exe: str, port: int, pid: int, size: dict, duration: float | None = None) -> dict:
    before = cpu_seconds(pid)
    out = subprocess.run([exe, "127.0.0.1", str(port), str(size["connections"]), str(size["depth"]),
                          str(duration or size["duration"]), str(size["topics"])],
                         capture_output=True, text=True, check=True, timeout=(duration or size["duration"]) + 60)
    res = json.loads(out.stdout)
    served = res["ok"] + res["other"]
    res["cpu_us_per_request"] = (cpu_seconds(pid) - before) / served * 1e6 if served else None
    if res["other"] or res["errors"]:  # a rate of error replies measures nothing
        raise RuntimeError(f"rmqload against :{port}: {res['other']} non-SUCCESS replies, {res['errors']} errors")
    return res


def run(size: dict, tmp: str) -> dict:
    exe = build_load_tool(tmp)
    server = RedisServer().start()
    procs: list[subprocess.Popen] = []
    try:
        routes = asyncio.run(seed(server.url, size["topics"]))
        bodies = Path(tmp) / "bodies.json"
        bodies.write_bytes(orjson.dumps(routes))
        ceiling_port = free_port()
        ceiling = start([sys.executable, "-m", "benchmarks.ceiling", "--mode", "remoting", "--port",
                         str(ceiling_port), "--bodies", str(bodies)])
        procs.append(ceiling)
        remoting_port = free_port()
        svc, url = namesrv(server.url, 1, remoting_port=remoting_port)
        procs.append(svc)
        _wait_port(ceiling_port)
        for port, pid in ((ceiling_port, ceiling.pid), (remoting_port, svc.pid)):  # warm-up (fills the cache)
            rmqload(exe, port, pid, size, duration=1)
        wrk(url, "route.lua", 1, 64, str(size["topics"]))
        rounds = []
        for _ in range(size["rounds"]):
            bare = rmqload(exe, ceiling_port, ceiling.pid, size)
            native = rmqload(exe, remoting_port, svc.pid, size)
            before = cpu_seconds(svc.pid)
            http = wrk(url, "route.lua", size["duration"], 64, str(size["topics"]))
            http["cpu_us_per_request"] = (cpu_seconds(svc.pid) - before) / (http["rps"] * size["duration"]) * 1e6
            rounds.append({"ceiling": bare, "native": native, "http": http,
                           "ratio": native["rps"] / bare["rps"],
                           "cpu_ratio": bare["cpu_us_per_request"] / native["cpu_us_per_request"],
                           "native_over_http": native["rps"] / http["rps"]})
        median = sorted(rounds, key=lambda r: r["ratio"])[len(rounds) // 2]
        return {"rounds": rounds, "ratio": median["ratio"], "cpu_ratio": median["cpu_ratio"],
                "native_over_http": median["native_over_http"], "ceiling": median["ceiling"],
                "native": median["native"], "http": median["http"]}
    finally:
        for p in procs:
            stop(p)
        server.cleanup()


def _wait_port(port: int, timeout: float = 20.0) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on {port}")


def markdown(res: dict) -> str:
    n, c, h = res["native"], res["ceiling"], res["http"]
    ratios = ", ".join(f"{r['ratio']:.2f}" for r in res["rounds"])
    return "\n".join([
        f"Measured {res['date']} on {res['machine']['summary']}, git {res['git_sha']}, mode {res['mode']} "
        f"({res['size']['connections']} connections × {res['size']['depth']} pipelined, "
        f"{res['size']['topics']} topics; per-round ratios {ratios}).",
        "",
        "| route read, 1 worker | req/s | p50 ms | p99 ms | CPU µs/request | vs ceiling | target |",
        "|---|---|---|---|---|---|---|",
        f"| bare asyncio, fixed frame (ceiling) | {c['rps']:.0f} | {c['p50_ms']:.2f} | {c['p99_ms']:.2f} | "
        f"{c['cpu_us_per_request']:.1f} | 1.00 | — |",
        f"| native door (105) | {n['rps']:.0f} | {n['p50_ms']:.2f} | {n['p99_ms']:.2f} | "
        f"{n['cpu_us_per_request']:.1f} | **{res['ratio']:.2f}** (CPU {res['cpu_ratio']:.2f}) | ≥ 0.8 |",
        f"| HTTP door, same worker (wrk, 64 conns) | {h['rps']:.0f} | {h.get('p50_ms', 0):.2f} | "
        f"{h.get('p99_ms', 0):.2f} | {h['cpu_us_per_request']:.1f} | native / HTTP = "
        f"**{res['native_over_http']:.2f}** | native > HTTP |",
    ]) + "\n"


def main(argv: list[str] | None = None) -> int:
    mode, out = parse_size(__doc__.split("\n\n")[0], argv, "about a minute", "longer rounds")
    if tools_missing("wrk", package="wrk"):
        return 2
    size = SIZES[mode]
    tmp = tempfile.mkdtemp(prefix="nsrv-rbench-")
    try:
        res = run(size, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res.update(run_header(mode, size))
    write_results(out, "remoting", res, markdown(res), mode == "tiny")
    return 0


if __name__ == "__main__":
    sys.exit(main())
