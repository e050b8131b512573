"""Route streams at scale: change-to-client latency with many watchers on one worker, and what they cost idle.

    python -m benchmarks.watch_bench [--watchers 10000] [--topics 10] [--changes 40] [--gap 0.05] [--clients 1]
                                     [--idle 20] [--tiny] [--out benchmarks/results]

Starts its own redis-server and two `namesrv serve` processes on it, A and B (one worker each). Opens
`--watchers` Server-Sent Event streams (`GET /v1/watch?topics=W<i>`, topics round-robin) on B from `--clients`
client processes of its own (raw asyncio connections, HTTP/1.0; so reading the streams does not compete with
this process's timing of the changes), then measures, with every stream open and its first event received:

- idle: B's CPU (user + system, /proc) over `--idle` seconds with keep-alive comments every `--keepalive` s (5),
  and B's resident memory before the streams were opened and with them (per watcher: the difference over the count);
- latency: `--changes` registrations through worker A, each changing one topic's queue counts (the next topic
  each time); for every watcher of that topic, the time from just before A was sent the registration to the
  event arriving at the watcher (so it includes A's request, the Lua script, pub/sub to B, B's read and every
  write to the watchers of that topic). p50/p99 over all of them. DESIGN §9: p99 within 50 ms at 10 000 watchers.
  Arrival times are taken in the client processes on CLOCK_MONOTONIC, the clock this process sent the change on.
  Also B's CPU time per change (its fan-out, the keep-alives that fell in the changes' time), and B's own
  `namesrv_watch_fanout_seconds` over the changes: from the change's event reaching B to its last stream written.
Everything shares the machine's cores: Redis, A, B and the client processes (reading every stream).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
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


def fanouts(url: str) -> dict[str, float]:
    """B's namesrv_watch_fanout_seconds histogram: cumulative count by bucket bound ("+Inf" too), "sum"."""
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith('namesrv_watch_fanout_seconds_bucket{le="'):
            out[line.split('"')[1]] = float(line.split()[-1])
        elif line.startswith("namesrv_watch_fanout_seconds_sum"):
            out["sum"] = float(line.split()[-1])
    return out


def fanout_summary(before: dict[str, float], after: dict[str, float]) -> dict:
    """The fan-outs between two scrapes: how many, their mean, and the bucket bound p50 and p99 fall within."""
    bounds = [b for b in after if b != "sum"]
    count = after["+Inf"] - before.get("+Inf", 0)
    res: dict = {"count": int(count), "mean_ms": round((after["sum"] - before.get("sum", 0)) / count * 1000, 2)
                 if count else 0}
    for q in (0.5, 0.99):
        res[f"p{round(q * 100)}_at_most_ms"] = next(
            (float(b) * 1000 if b != "+Inf" else float("inf") for b in bounds
             if after[b] - before.get(b, 0) >= q * count), None)
    return res


class Watcher(asyncio.Protocol):
    """One stream: counts its route events and tells its client process when one arrives."""

    def __init__(self, topic: int, port: int, client: Client) -> None:
        self.topic = topic
        self.request = (f"GET /v1/watch?topics=W{topic} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n").encode()
        self.client = client
        self.events = 0
        self.status = 0
        self.tail = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        now = time.monotonic()  # CLOCK_MONOTONIC: the same clock in the bench's process, which sent the change
        if not self.status and data.startswith(b"HTTP/1."):
            self.status = int(data[9:12])
        text = self.tail + data
        n = text.count(b"\nevent: route\n")
        self.tail = text[-16:]
        for _ in range(n):
            self.events += 1
            self.client.arrived(self, now)

    def connection_lost(self, exc: Exception | None) -> None:
        self.client.lost += 1


class Client:
    """A client process's watchers: reports when all have their first event, then when all watchers of a topic
    have its next change (`done <topic> <n>`), and at the end every arrival time."""

    def __init__(self, topics: int) -> None:
        self.lost = 0
        self.first = 0
        self.watchers: list[Watcher] = []
        self.per_topic = [0] * topics
        self.got: dict[tuple[int, int], list[float]] = {}  # (topic, n-th change of it) -> arrival times
        self.all_first = asyncio.Event()

    def arrived(self, w: Watcher, now: float) -> None:
        if w.events == 1:
            self.first += 1
            if self.first == len(self.watchers):
                self.all_first.set()
            return
        key = (w.topic, w.events - 1)
        times = self.got.setdefault(key, [])
        times.append(now)
        if len(times) == self.per_topic[w.topic]:
            sys.stdout.write(f"done {key[0]} {key[1]}\n")
            sys.stdout.flush()


async def client_main(port: int, indices: range, topics: int) -> None:
    """A client process: open the streams `indices` (topic = index mod topics), then follow the bench's lines."""
    client = Client(topics)
    loop = asyncio.get_running_loop()
    ws = [Watcher(i % topics, port, client) for i in indices]
    client.watchers = ws
    for w in ws:
        client.per_topic[w.topic] += 1
    for start in range(0, len(ws), 500):
        await asyncio.gather(*(loop.create_connection(lambda w=w: w, "127.0.0.1", port) for w in ws[start:start + 500]))
    try:
        async with asyncio.timeout(120):
            await client.all_first.wait()
    except TimeoutError:
        silent = [w for w in ws if not w.events]
        raise SystemExit(f"{len(silent)} streams got no first event in 120 s; status "
                         f"{sorted({w.status for w in silent})}, {client.lost} connections closed; last bytes: "
                         f"{[w.tail for w in silent[:5]]}") from None
    refused = sum(1 for w in ws if w.status != 200)
    gc.collect()
    gc.disable()  # a collection over the client's 10 000 connections would delay its arrival times, not B's events
    print(orjson.dumps({"ready": len(ws), "refused": refused, "per_topic": client.per_topic}).decode(), flush=True)
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    await reader.readline()  # "report": the changes are over
    print(orjson.dumps({"arrivals": [[t, n, times] for (t, n), times in client.got.items()],
                        "lost": client.lost}).decode(), flush=True)  # lost: streams B closed during the run
    for w in ws:
        if w.transport is not None:
            w.transport.close()


async def spawn_clients(args: argparse.Namespace, port: int) -> list[asyncio.subprocess.Process]:
    procs = []
    for c in range(args.clients):
        procs.append(await asyncio.create_subprocess_exec(
            sys.executable, "-m", "benchmarks.watch_bench", "--client-of", str(port), "--topics", str(args.topics),
            "--watchers", str(args.watchers), "--client-index", f"{c}/{args.clients}",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=1 << 28, cwd=ROOT.parent))
    return procs


async def run(args: argparse.Namespace, url_a: str, url_b: str, pid_b: int) -> dict:
    port_b = int(url_b.rsplit(":", 1)[1])
    rss_before = rss_bytes(pid_b)
    t_open = time.perf_counter()
    clients = await spawn_clients(args, port_b)
    ready = []
    async with asyncio.timeout(180):
        for proc in clients:
            ready.append(orjson.loads(await proc.stdout.readline()))  # type: ignore[union-attr]
    opened_s = time.perf_counter() - t_open
    refused = sum(r["refused"] for r in ready)
    await asyncio.sleep(1)  # let the worker settle (buffers, the first keep-alive round starts)
    rss_with = rss_bytes(pid_b)
    cpu0, t0 = cpu_s(pid_b), time.perf_counter()
    await asyncio.sleep(args.idle)
    idle_cpu = (cpu_s(pid_b) - cpu0) / (time.perf_counter() - t0)
    rss_idle = rss_bytes(pid_b)
    queues = {t: 8 for t in range(args.topics)}
    loop = asyncio.get_running_loop()
    per_topic = [sum(r["per_topic"][t] for r in ready) for t in range(args.topics)]
    sent_at: dict[tuple[int, int], float] = {}
    fan_before = await loop.run_in_executor(None, fanouts, url_b)
    cpu_changes, changes_from = cpu_s(pid_b), time.monotonic()
    for i in range(args.changes):
        t, n = i % args.topics, i // args.topics + 1
        queues[t] = 4 if queues[t] == 8 else 8
        waiting = [proc for proc, r in zip(clients, ready, strict=True) if r["per_topic"][t]]
        sent_at[(t, n)] = time.monotonic()
        await loop.run_in_executor(None, register, url_a, args.topics, queues, 100 + i)
        async with asyncio.timeout(60):
            for proc in waiting:
                line = (await proc.stdout.readline()).decode().split()  # type: ignore[union-attr]
                assert line == ["done", str(t), str(n)], line
        await asyncio.sleep(args.gap)
    cpu_changes, changes_to = cpu_s(pid_b) - cpu_changes, time.monotonic()
    fan_out = fanout_summary(fan_before, await loop.run_in_executor(None, fanouts, url_b))
    latencies: list[float] = []
    per_change: dict[tuple[int, int], list[float]] = {}
    lost = 0
    for proc in clients:
        proc.stdin.write(b"report\n")  # type: ignore[union-attr]
        report = orjson.loads(await proc.stdout.readline())  # type: ignore[union-attr]
        lost += report["lost"]
        for t, n, times in report["arrivals"]:
            ms = [(at - sent_at[(t, n)]) * 1000 for at in times]
            latencies += ms
            per_change.setdefault((t, n), []).extend(ms)
        await proc.wait()
    in_order = sorted(per_change, key=lambda k: sent_at[k])
    assert len(latencies) == sum(per_topic[i % args.topics] for i in range(args.changes)), len(latencies)
    return {"watchers": args.watchers, "clients": args.clients, "refused": refused, "open_s": round(opened_s, 2),
            "watchers_per_changed_topic": per_topic[0], "changes": args.changes, "gap_s": args.gap,
            "latency_ms": percentiles(latencies), "latencies": len(latencies), "lost": lost,
            "cpu_of_b_per_change_ms": round(cpu_changes / args.changes * 1000, 2),
            "fanout_in_b": fan_out,  # B's own share: event received → written to every stream (its /metrics)
            "changes_monotonic_s": [round(changes_from, 3), round(changes_to, 3)],  # to place gc_probe's pauses
            # each change in the order sent: when (monotonic s), its first and its last watcher's latency (ms)
            "per_change": [[round(sent_at[k], 3), round(min(per_change[k]), 1), round(max(per_change[k]), 1)]
                           for k in in_order],
            "keepalive_s": args.keepalive, "idle_s": args.idle, "idle_cpu_percent": round(idle_cpu * 100, 2),
            "rss_before_mb": round(rss_before / 1e6, 1), "rss_with_watchers_mb": round(rss_with / 1e6, 1),
            "rss_after_idle_mb": round(rss_idle / 1e6, 1),
            "bytes_per_watcher": round((rss_with - rss_before) / max(1, args.watchers))}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--watchers", type=int, default=10_000)
    p.add_argument("--topics", type=int, default=10)
    p.add_argument("--changes", type=int, default=40)
    p.add_argument("--gap", type=float, default=0.05, help="seconds between one change's last event and the next")
    p.add_argument("--clients", type=int, default=1, help="client processes holding the streams")
    p.add_argument("--idle", type=float, default=20.0, help="seconds of idle CPU measurement")
    p.add_argument("--keepalive", type=float, default=5.0, help="B's NAMESRV_WATCH_KEEPALIVE_S")
    p.add_argument("--tiny", action="store_true", help="seconds: the CI smoke test (50 watchers)")
    p.add_argument("--out", default=str(ROOT / "results"))
    p.add_argument("--client-of", type=int, help=argparse.SUPPRESS)  # a client process: worker B's port
    p.add_argument("--client-index", default="0/1", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.tiny:
        args.watchers, args.topics, args.changes, args.idle = 50, 2, 4, 0.5
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = args.watchers + 1000
    if soft < need:  # the clients' sockets, the worker's (both inherit the limit)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(need, soft)), hard))
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:
        runner = asyncio.run
    if args.client_of is not None:
        c, k = (int(x) for x in args.client_index.split("/"))
        runner(client_main(args.client_of, range(c, args.watchers, k), args.topics))
        return 0
    server = RedisServer().start()
    procs = []
    try:
        env = {"watch_max_per_worker": args.watchers + 10, "watch_max_per_client": args.watchers + 10,
               "watch_keepalive_s": args.keepalive}
        proc_a, url_a = namesrv(server.url, 1, **env)
        procs.append(proc_a)
        proc_b, url_b = namesrv(server.url, 1, **env)
        procs.append(proc_b)
        register(url_a, args.topics, {t: 8 for t in range(args.topics)}, 1)
        res = runner(run(args, url_a, url_b, proc_b.pid))
    finally:
        for proc in procs:
            stop(proc)
        server.cleanup()
    res.update({"date": time.strftime("%Y-%m-%d"), "git_sha": git_info()["sha"][:10], "machine": machine_info(),
                "topics": args.topics})
    lat, fan = res["latency_ms"], res["fanout_in_b"]
    table = "\n".join([
        f"Measured {res['date']} on {res['machine']['summary']}, git {res['git_sha']}: {args.watchers} route streams "
        f"on worker B ({res['refused']} refused, opened in {res['open_s']} s) held by {args.clients} client "
        f"process(es), {args.topics} topics, {args.changes} changes through worker A, each reaching "
        f"{res['watchers_per_changed_topic']} watchers.",
        "",
        "| watchers on B | change→client p50 ms | p99 ms | max ms | B's fan-out: mean, p99 within | CPU of B per "
        "change | idle CPU of B | RSS before → with watchers | per watcher |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {args.watchers} | {lat.get('p50', 0):.1f} | {lat.get('p99', 0):.1f} | {lat.get('max', 0):.1f} | "
        f"{fan['mean_ms']:.1f} ms, ≤ {fan['p99_at_most_ms']:g} ms | {res['cpu_of_b_per_change_ms']:.1f} ms | "
        f"{res['idle_cpu_percent']:.1f} % of a core over {args.idle:g} s | {res['rss_before_mb']} → "
        f"{res['rss_with_watchers_mb']} MB | {res['bytes_per_watcher'] / 1024:.1f} KiB |",
    ]) + "\n"
    write_results(Path(args.out), "watch", res, table, args.tiny)
    return 0


if __name__ == "__main__":
    sys.exit(main())
