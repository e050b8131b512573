"""Unchanged re-registration: Redis time and worker CPU per registration at 100 to 100 000 topics.

    python -m benchmarks.register_bench [--quick | --full | --tiny] [--out benchmarks/results]

Starts its own redis-server (every command in the slow log) and one worker (`namesrv serve`) on 127.0.0.1, and
drives its native door (9876's protocol) the way a stock broker does every 30 s: the same RegisterBrokerBody
again, in the compressed form 5.x brokers send (`compressedRegister=true`: zipped) and in the plain fastjson form.
Each size and form is one broker: all register once in full, re-register unchanged `warmup` times in turn, then
each re-registers unchanged `repeat` times, one after the other, measured:

- Redis µs per registration: the registration scripts' own durations from `SLOWLOG` (every command logged; the
  worker's expiry scans, another script, left out): mean, p50 and the longest;
- worker CPU µs per registration: on-CPU time of the worker process (/proc schedstat, ns) over the run, and the same
  for sending the same frame under a request code the worker refuses at once (`receive only`: reading and
  framing the bytes), so the CPU beyond receiving the bytes is the difference;
- client round trip p50/p99.

DESIGN.md §9: an unchanged re-registration costs the same Redis time and worker CPU at 100 and 100 000 topics
(within 2x); for the plain form the CPU beyond receiving the bytes. The worker runs with heartbeat_flush_ms 0, so
each one is the store's O(1) path; by default a worker answers bytes the store already confirmed from memory
(service/core/unchanged.py), which `benchmarks.peers` measures.
"""

from __future__ import annotations

import asyncio
import re
import struct
import sys
import time
import urllib.request
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.harness import BenchRedis, environment, parse_size, percentiles, run_header, write_results
from benchmarks.http_bench import start, stop, wait_http, worker_env
from service.remoting import codes, fastjson
from service.remoting.bodies import crc32_of
from tests.redis_server import free_port
from tests.remoting.client import Client

SIZES = {
    "tiny": {"topics": [10, 200], "repeat": 5, "warmup": 1},
    "quick": {"topics": [100, 1000, 10_000, 100_000], "repeat": 200, "warmup": 50},
    "full": {"topics": [100, 1000, 10_000, 100_000], "repeat": 1000, "warmup": 200},
}
VERSION_5X = 493  # MQVersion of 5.4.0, as its brokers send it
NOT_A_CODE = 9999  # answered REQUEST_CODE_NOT_SUPPORTED once the frame is read: the cost of receiving it


def cpu_seconds(pid: int) -> float:
    """On-CPU time of every thread of the process, from /proc/<pid>/task/*/schedstat (ns; /proc's stat counts
    10 ms ticks, too coarse for a few hundred registrations of a few hundred µs)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            continue  # a thread that ended meanwhile
    return total / 1e9


def topic_lines(prefix: str, n: int) -> list[str]:
    return [f"{prefix}-topic-{i:06d} 8 8 6 SINGLE_TAG {{}}" for i in range(n)]


def compressed_body(prefix: str, n: int) -> bytes:
    """RegisterBrokerBody.encode(true) of a 5.x broker (reference §4.5): zlib, best compression."""
    def chunk(raw: bytes) -> bytes:
        return struct.pack(">i", len(raw)) + raw

    raw = [chunk(b'{"counter":7,"stateVersion":0,"timestamp":1700000000000}'), struct.pack(">i", n)]
    raw += [chunk(line.encode()) for line in topic_lines(prefix, n)]
    raw += [chunk(b"[]"), struct.pack(">i", 0)]
    return zlib.compress(b"".join(raw), 9)


def plain_body(prefix: str, n: int) -> bytes:
    table = {}
    for i in range(n):
        t = f"{prefix}-topic-{i:06d}"
        table[t] = {"order": False, "perm": 6, "readQueueNums": 8, "topicFilterType": "SINGLE_TAG", "topicName": t,
                    "topicSysFlag": 0, "writeQueueNums": 8}
    return fastjson.dumps({"filterServerList": [], "topicConfigSerializeWrapper": {
        "dataVersion": {"counter": 7, "stateVersion": 0, "timestamp": 1700000000000}, "topicConfigTable": table}})


def header(name: str, i: int, compressed: bool, body: bytes) -> dict[str, Any]:
    return {"clusterName": "BenchCluster", "brokerName": name, "brokerId": 0, "brokerAddr": f"10.7.{i}.1:10911",
            "haServerAddr": f"10.7.{i}.1:10912", "compressed": "true" if compressed else "false",
            "bodyCrc32": crc32_of(body), "enableActingMaster": "false"}


async def registration_script_times_us(bench: BenchRedis) -> list[int]:
    """Durations (µs, SLOWLOG: every command is logged) of the registration scripts since the last reset: the
    EVALSHA calls of the most frequent script, so that the worker's own expiry scans (another script, every
    10 s) are not counted as registrations."""
    entries = await bench.client.slowlog_get(100_000)
    by_sha: dict[str, list[int]] = {}
    for e in entries:
        cmd = e.get("command", "")
        cmd = cmd.decode(errors="replace") if isinstance(cmd, bytes) else cmd
        parts = cmd.split(" ", 2)
        if parts[0].upper() == "EVALSHA" and len(parts) > 1:
            by_sha.setdefault(parts[1], []).append(int(e["duration"]))
    return max(by_sha.values(), key=len) if by_sha else []


def unchanged_count(url: str) -> float:
    """The worker's namesrv_broker_registrations_total{result="unchanged"}."""
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    m = re.search(r'^namesrv_broker_registrations_total\{result="unchanged"\} (\S+)$', text, re.M)
    return float(m.group(1)) if m else 0.0


@dataclass
class Case:
    form: str
    topics: int
    body: bytes
    ext: dict[str, Any]
    client: Client
    first_s: float = 0.0

    async def register(self) -> None:
        r = await self.client.request(codes.REGISTER_BROKER, self.ext, self.body, version=VERSION_5X, timeout=120)
        if r.code != 0:
            raise RuntimeError(f"{self.form}-{self.topics}: registration answered {r.code} {r.remark}")

    async def receive_only(self) -> None:
        r = await self.client.request(NOT_A_CODE, self.ext, self.body, version=VERSION_5X, timeout=120)
        assert r.code == 3, r.code  # REQUEST_CODE_NOT_SUPPORTED


async def prepare(client: Client, form: str, n: int, i: int) -> Case:
    """One broker of `n` topics registered in full (the registration that writes its topics)."""
    name = f"{form}-{n}"
    compressed = form == "compressed"
    body = compressed_body(name, n) if compressed else plain_body(name, n)
    c = Case(form, n, body, header(name, i, compressed, body), client)
    t0 = time.perf_counter()
    await c.register()
    c.first_s = time.perf_counter() - t0
    return c


async def measure(bench: BenchRedis, c: Case, pid: int, url: str, size: dict) -> dict:
    async def run(op: Any) -> tuple[float, list[float]]:
        lat = []
        cpu0 = cpu_seconds(pid)
        for _ in range(size["repeat"]):
            t = time.perf_counter()
            await op()
            lat.append((time.perf_counter() - t) * 1000)
        return (cpu_seconds(pid) - cpu0) / size["repeat"] * 1e6, lat

    recv_cpu, _ = await run(c.receive_only)
    unchanged_before = unchanged_count(url)
    await bench.reset()
    cpu, lat = await run(c.register)
    scripts = await registration_script_times_us(bench)
    unchanged = unchanged_count(url) - unchanged_before
    stats = (await bench.client.info("commandstats")).get("cmdstat_evalsha", {})
    return {"form": c.form, "topics": c.topics, "body_bytes": len(c.body), "repeat": size["repeat"],
            "first_registration_s": round(c.first_s, 3), "unchanged": unchanged,
            "redis_us_per_registration": round(sum(scripts) / len(scripts), 1),
            "redis_us_per_registration_p50": percentiles(scripts)["p50"],
            "registration_scripts": len(scripts),
            "evalsha_usec_all": stats.get("usec", 0), "evalsha_calls_all": stats.get("calls", 0),
            "longest_script_us": max(scripts),
            "worker_cpu_us": round(cpu, 1), "receive_only_cpu_us": round(recv_cpu, 1),
            "cpu_beyond_receiving_us": round(cpu - recv_cpu, 1), **percentiles(lat, "_ms")}


def markdown(res: dict) -> str:
    head = ("| form | topics | body bytes | Redis µs / registration (mean) | p50 | longest script µs "
            "| worker CPU µs | receive-only CPU µs | CPU beyond receiving µs | client p50 ms | p99 ms |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in res["results"]:
        lines.append(f"| {r['form']} | {r['topics']:,} | {r['body_bytes']:,} | {r['redis_us_per_registration']} "
                     f"| {r['redis_us_per_registration_p50']} "
                     f"| {r['longest_script_us']} | {r['worker_cpu_us']} | {r['receive_only_cpu_us']} "
                     f"| {r['cpu_beyond_receiving_us']} | {r['p50_ms']} | {r['p99_ms']} |")
    def ratio(a: float, b: float) -> str:
        return f"{a / b:.2f}x" if b > 0 else "n/a"

    for form in ("compressed", "plain"):
        rows = [r for r in res["results"] if r["form"] == form]
        if len(rows) > 1:
            lo, hi = rows[0], rows[-1]
            lines.append(f"\n{form}, {hi['topics']:,} vs {lo['topics']:,} topics: Redis time (p50) "
                         f"{ratio(hi['redis_us_per_registration_p50'], lo['redis_us_per_registration_p50'])}, "
                         f"worker CPU "
                         f"{ratio(hi['worker_cpu_us'], lo['worker_cpu_us'])}, CPU beyond receiving "
                         f"{ratio(hi['cpu_beyond_receiving_us'], lo['cpu_beyond_receiving_us'])}")
    return "\n".join(lines) + "\n"


async def run_all(mode: str, size: dict) -> dict:
    async with BenchRedis() as bench:
        port = free_port()
        # the first (full) registration of 100 000 topics may take seconds of Redis on a busy 2-core machine;
        # heartbeat_flush_ms 0: every unchanged registration is asked of the store (what this bench measures),
        # not answered from the worker's memory once confirmed (service/core/unchanged.py; benchmarks.peers)
        env = worker_env(bench.server.url, port, remoting_max_frame_bytes=64 * 1024 * 1024,
                         redis_deadline_ms=10_000, heartbeat_flush_ms=0)
        proc = start([sys.executable, "-m", "service.cli", "serve"], env)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_http(url + "/readyz")
            client = await Client.connect(int(env["NAMESRV_REMOTING_PORT"]))
            results = []
            try:
                # Every broker registers in full first, then all re-register unchanged `warmup` times: right after
                # a full registration of 100 000 topics Redis's script calls run slower for a while (its Lua
                # heap's garbage is collected in steps), and that would be charged to whichever case came next.
                cases = [await prepare(client, form, n, 2 * i + j) for i, n in enumerate(size["topics"])
                         for j, form in enumerate(("compressed", "plain"))]
                for _ in range(size["warmup"]):
                    for c in cases:
                        await c.register()
                        await c.receive_only()
                for c in cases:
                    results.append(await measure(bench, c, proc.pid, url, size))
                    print(results[-1], file=sys.stderr)
            finally:
                await client.close()
        finally:
            stop(proc)
        return {"benchmark": "register", **run_header(mode, size), **environment(await bench.version()),
                "results": results}


def main(argv: list[str] | None = None) -> dict:
    mode, out = parse_size(__doc__.split("\n\n")[0], argv, "200 registrations per size and form",
                           "1 000 per size and form")
    size = SIZES[mode]
    res = asyncio.run(run_all(mode, size))
    write_results(out, "register", res, markdown(res), tiny=mode == "tiny")
    return res


if __name__ == "__main__":
    main()
