"""Route streams at scale: change-to-client latency with many watchers on one worker, and what they cost idle.

    python -m benchmarks.watch_bench [--watchers 10000] [--topics 10] [--changes 40] [--idle 20] [--tiny]
                                     [--out benchmarks/results]

Starts its own redis-server and two `namesrv serve` processes on it, A and B (one worker each). Opens
`--watchers` Server-Sent Event streams (`GET /v1/watch?topics=W<i>`, topics round-robin) on B from this process
(raw asyncio connections, HTTP/1.0), then measures, with every stream open and its first event received:

- idle: B's CPU (user + system, /proc) over `--idle` seconds with keep-alive comments every 5 s, and B's resident
  memory before the streams were opened and with them (per watcher: the difference over the count);
- latency: `--changes` registrations through worker A, each changing one topic's queue counts (the next topic
  each time); for every watcher of that topic, the time from just before A was sent the registration to the
  event arriving at the watcher (so it includes A's request, the Lua script, pub/sub to B, B's read and every
  write to the watchers of that topic). p50/p99 over all of them. DESIGN §9: p99 within 50 ms at 10 000 watchers.
The benchmark process shares the machine's cores with Redis and both workers (the watchers' reads included).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import time
import urllib.request
from pathlib import Path

import orjson

from benchmarks.harness import git_info, machine_info, percentiles, write_results
from benchmarks.http_bench import namesrv, stop
from tests.redis_server import RedisServer

ROOT = Path(__file__).resolve().parent


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def register(url: str, topics: int, queues: dict[int, int], counter: int) -> None:
    body = orjson.dumps({
        "clusterName": "WatchCluster", "brokerName": "watch-a", "brokerId": 0, "brokerAddr": "10.3.0.1:10911",
        "dataVersion": {"timestamp": 1, "counter": counter, "stateVersion": 0},
        "topicConfigTable": {f"W{t}": {"readQueueNums": queues[t], "writeQueueNums": queues[t], "perm": 6}
                             for t in range(topics)}})
    req = urllib.request.Request(url + "/v1/brokers/register", data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status == 200, r.status


class Watcher(asyncio.Protocol):
    """One stream: counts its route events and tells the bench when one arrives."""

    def __init__(self, topic: int, port: int, bench: Bench) -> None:
        self.topic = topic
        self.request = (f"GET /v1/watch?topics=W{topic} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n").encode()
        self.bench = bench
        self.events = 0
        self.status = 0
        self.tail = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        if not self.status and data.startswith(b"HTTP/1."):
            self.status = int(data[9:12])
        text = self.tail + data
        n = text.count(b"\nevent: route\n")
        self.tail = text[-16:]
        if n:
            self.events += n
            self.bench.arrived(self, now)

    def connection_lost(self, exc: Exception | None) -> None:
        self.bench.lost += 1


class Bench:
    def __init__(self) -> None:
        self.lost = 0
        self.first = 0
        self.all_first = asyncio.Event()
        self.expected = 0
        self.topic = -1
        self.t0 = 0.0
        self.got = 0
        self.done = asyncio.Event()
        self.latencies: list[float] = []
        self.watchers: list[Watcher] = []

    def arrived(self, w: Watcher, now: float) -> None:
        if w.events == 1:
            self.first += 1
            if self.first == len(self.watchers):
                self.all_first.set()
        elif w.topic == self.topic:
            self.latencies.append((now - self.t0) * 1000)
            self.got += 1
            if self.got == self.expected:
                self.done.set()


async def open_watchers(bench: Bench, port: int, n: int, topics: int) -> None:
    loop = asyncio.get_running_loop()
    for start in range(0, n, 500):
        ws = [Watcher(i % topics, port, bench) for i in range(start, min(n, start + 500))]
        bench.watchers += ws
        await asyncio.gather(*(loop.create_connection(lambda w=w: w, "127.0.0.1", port) for w in ws))


async def run(args: argparse.Namespace, url_a: str, url_b: str, pid_b: int) -> dict:
    bench = Bench()
    port_b = int(url_b.rsplit(":", 1)[1])
    rss_before = rss_bytes(pid_b)
    t_open = time.perf_counter()
    await open_watchers(bench, port_b, args.watchers, args.topics)
    async with asyncio.timeout(120):
        await bench.all_first.wait()
    opened_s = time.perf_counter() - t_open
    refused = sum(1 for w in bench.watchers if w.status != 200)
    await asyncio.sleep(1)  # let the worker settle (buffers, the first keep-alive round starts)
    rss_with = rss_bytes(pid_b)
    cpu0, t0 = cpu_s(pid_b), time.perf_counter()
    await asyncio.sleep(args.idle)
    idle_cpu = (cpu_s(pid_b) - cpu0) / (time.perf_counter() - t0)
    rss_idle = rss_bytes(pid_b)
    queues = {t: 8 for t in range(args.topics)}
    loop = asyncio.get_running_loop()
    per_topic = [sum(1 for w in bench.watchers if w.topic == t) for t in range(args.topics)]
    for i in range(args.changes):
        t = i % args.topics
        queues[t] = 4 if queues[t] == 8 else 8
        bench.topic, bench.expected, bench.got = t, per_topic[t], 0
        bench.done.clear()
        bench.t0 = time.perf_counter()
        await loop.run_in_executor(None, register, url_a, args.topics, queues, 100 + i)
        async with asyncio.timeout(60):
            await bench.done.wait()
        await asyncio.sleep(0.05)
    for w in bench.watchers:
        if w.transport is not None:
            w.transport.close()
    return {"watchers": args.watchers, "refused": refused, "open_s": round(opened_s, 2),
            "watchers_per_changed_topic": per_topic[0], "changes": args.changes,
            "latency_ms": percentiles(bench.latencies), "latencies": len(bench.latencies),
            "idle_s": args.idle, "idle_cpu_percent": round(idle_cpu * 100, 2),
            "rss_before_mb": round(rss_before / 1e6, 1), "rss_with_watchers_mb": round(rss_with / 1e6, 1),
            "rss_after_idle_mb": round(rss_idle / 1e6, 1),
            "bytes_per_watcher": round((rss_with - rss_before) / max(1, args.watchers))}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--watchers", type=int, default=10_000)
    p.add_argument("--topics", type=int, default=10)
    p.add_argument("--changes", type=int, default=40)
    p.add_argument("--idle", type=float, default=20.0, help="seconds of idle CPU measurement")
    p.add_argument("--tiny", action="store_true", help="seconds: the CI smoke test (50 watchers)")
    p.add_argument("--out", default=str(ROOT / "results"))
    args = p.parse_args(argv)
    if args.tiny:
        args.watchers, args.topics, args.changes, args.idle = 50, 2, 4, 0.5
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = args.watchers + 1000
    if soft < need:  # the client's sockets here, the worker's there (it inherits the limit)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(need, soft)), hard))
    server = RedisServer().start()
    procs = []
    try:
        env = {"watch_max_per_worker": args.watchers + 10, "watch_max_per_client": args.watchers + 10,
               "watch_keepalive_s": 5}
        proc_a, url_a = namesrv(server.url, 1, **env)
        procs.append(proc_a)
        proc_b, url_b = namesrv(server.url, 1, **env)
        procs.append(proc_b)
        register(url_a, args.topics, {t: 8 for t in range(args.topics)}, 1)
        try:
            import uvloop

            runner = uvloop.run
        except ImportError:
            runner = asyncio.run
        res = runner(run(args, url_a, url_b, proc_b.pid))
    finally:
        for proc in procs:
            stop(proc)
        server.cleanup()
    res.update({"date": time.strftime("%Y-%m-%d"), "git_sha": git_info()["sha"][:10], "machine": machine_info(),
                "topics": args.topics})
    lat = res["latency_ms"]
    table = "\n".join([
        f"Measured {res['date']} on {res['machine']['summary']}, git {res['git_sha']}: {args.watchers} route streams "
        f"on worker B ({res['refused']} refused, opened in {res['open_s']} s), {args.topics} topics, "
        f"{args.changes} changes through worker A, each reaching {res['watchers_per_changed_topic']} watchers.",
        "",
        "| watchers on B | change→client p50 ms | p99 ms | max ms | idle CPU of B | RSS before → with watchers "
        "| per watcher |",
        "|---|---|---|---|---|---|---|",
        f"| {args.watchers} | {lat.get('p50', 0):.1f} | {lat.get('p99', 0):.1f} | {lat.get('max', 0):.1f} | "
        f"{res['idle_cpu_percent']:.1f} % of a core over {args.idle:g} s | {res['rss_before_mb']} → "
        f"{res['rss_with_watchers_mb']} MB | {res['bytes_per_watcher'] / 1024:.1f} KiB |",
    ]) + "\n"
    write_results(Path(args.out), "watch", res, table, args.tiny)
    return 0


if __name__ == "__main__":
    sys.exit(main())
