"""`namesrv admin compare` on large registries: wall time and the comparing process's peak RSS.

    python -m benchmarks.compare_bench [--quick | --full | --tiny] [--out benchmarks/results]

Starts its own redis-server and two workers (`namesrv serve`), each with a registry of its own (two key prefixes):
the same four brokers (two clusters, a master and a slave each) registered over HTTP with N topics between them,
then, on the second registry only, planted differences — 10 topics deleted, 10 with other read and write queue
counts (two differences each), 10 more topics, 5 ORDER_TOPIC_CONFIG values changed of 1 000: 45 — and runs the
CLI as operators do, in a process of its own: `namesrv admin --json compare --server A --with B`, over the native
door on both sides and over HTTP against the native door. Each run must find exactly the planted differences
(exit 5). Measured: wall time, topics per second, and peak RSS (VmHWM of the process), beside the same for
`namesrv admin clusters` (what the interpreter and the CLI's imports take, not the comparison). The first
comparison of a size reads every route for the first time, so each is a route-cache miss in both workers (a Redis
read): it runs cold, the next ones warm.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import urllib.request
from typing import Any

import orjson

from benchmarks.harness import BenchRedis, environment, parse_size, run_header, write_results
from benchmarks.http_bench import start, stop, wait_http, worker_env
from tests.redis_server import free_port

SIZES = {
    "tiny": {"topics": [400]},
    "quick": {"topics": [10_000, 100_000]},
    "full": {"topics": [1_000, 10_000, 100_000]},
}
BROKERS = [("CmpA", "broker-a", 0, "10.9.0.1:10911"), ("CmpA", "broker-a", 1, "10.9.0.2:10911"),
           ("CmpB", "broker-b", 0, "10.9.1.1:10911"), ("CmpB", "broker-b", 1, "10.9.1.2:10911")]
# deleted on B, read and write queue counts changed on B (two fields each), only on B, KV values changed on B
PLANTED = 10 + 2 * 10 + 10 + 5
# The CLI, then its peak RSS: VmHWM of its own memory map (ru_maxrss would also count the parent's RSS at fork)
RUN_CHILD = ("import sys\nfrom service.cli import main\nrc = main(sys.argv[1:])\nsys.stdout.flush()\n"
             "hwm = next(ln for ln in open('/proc/self/status') if ln.startswith('VmHWM:'))\n"
             "print('MAXRSS_KB', hwm.split()[1], file=sys.stderr)\nsys.exit(rc)\n")


def call(url: str, method: str, body: Any = None) -> Any:
    data = orjson.dumps(body) if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return orjson.loads(r.read())


def registry(url: str, n: int, planted: bool) -> None:
    """The brokers with n topics between the two clusters (odd ones on broker-a, even ones on broker-b), 1 000
    ORDER_TOPIC_CONFIG entries; `planted`: the differences the comparison must find."""
    for cluster, name, bid, addr in BROKERS:
        topics = {f"CmpTopic-{i:07d}": {"readQueueNums": 8, "writeQueueNums": 8, "perm": 6, "topicSysFlag": 0}
                  for i in range(n) if (i % 2 == 1) == (name == "broker-a")}
        call(url + "/v1/brokers/register", "POST", {
            "clusterName": cluster, "brokerName": name, "brokerId": bid, "brokerAddr": addr,
            "haServerAddr": addr.replace(":10911", ":10912"), "topicConfigTable": topics,
            "dataVersion": {"timestamp": 1, "counter": n, "stateVersion": 0}})  # a new one each size: in full
    order = {f"CmpTopic-{i:07d}": f"broker-{'a' if i % 2 else 'b'}:8" for i in range(min(n, 1000))}
    if planted:
        for i in range(5):
            order[f"CmpTopic-{i:07d}"] = "broker-x:1"
        for i in range(10):
            call(f"{url}/v1/topics/CmpTopic-{n - 1 - i:07d}", "DELETE")
            t = f"CmpTopic-{n - 11 - i:07d}"
            broker = "broker-a" if (n - 11 - i) % 2 else "broker-b"
            call(f"{url}/v1/topics/{t}/route", "PUT", {"queueDatas": [
                {"brokerName": broker, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6, "topicSysFlag": 0}]})
            call(f"{url}/v1/topics/CmpOnlyB-{i}/route", "PUT", {"queueDatas": [
                {"brokerName": "broker-a", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6, "topicSysFlag": 0}]})
    call(url + "/v1/kv-config/import", "POST", {"configTable": {"ORDER_TOPIC_CONFIG": order}})


def compare(a: str, b: str) -> dict[str, Any]:
    """The CLI in a process of its own: its answer, wall time and peak RSS."""
    argv = [sys.executable, "-c", RUN_CHILD, "admin", "--json", "--timeout", "60", "compare", "--server", a,
            "--with", b, "--progress", "0"]
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - t0
    rss = int(done.stderr.rsplit("MAXRSS_KB", 1)[1].split()[0])
    return {"exit": done.returncode, "seconds": round(seconds, 2), "peak_rss_mb": round(rss / 1024, 1),
            "answer": orjson.loads(done.stdout) if done.stdout.startswith("{") else done.stdout + done.stderr}


def baseline_rss(a: str) -> float:
    done = subprocess.run([sys.executable, "-c", RUN_CHILD, "admin", "--server", a, "clusters"],
                          capture_output=True, text=True, timeout=120)
    return round(int(done.stderr.rsplit("MAXRSS_KB", 1)[1].split()[0]) / 1024, 1)


async def run_all(mode: str, size: dict) -> dict:
    async with BenchRedis() as bench:
        procs, urls, natives = [], [], []
        try:
            for prefix in ("cmpA", "cmpB"):
                port, rport = free_port(), free_port()
                env = worker_env(bench.server.url, port, key_prefix=prefix, remoting_port=rport,
                                 broker_timeout_ms=3_600_000, scan_interval_ms=3_600_000, redis_deadline_ms=30_000,
                                 max_body_bytes=128 * 1024 * 1024)
                procs.append(start([sys.executable, "-m", "service.cli", "serve"], env))
                urls.append(f"http://127.0.0.1:{port}")
                natives.append(f"rmq://127.0.0.1:{rport}")
            for url in urls:
                wait_http(url + "/readyz")
            rows = []
            for n in size["topics"]:
                for prefix_url, planted in ((urls[0], False), (urls[1], True)):
                    registry(prefix_url, n, planted)
                base = baseline_rss(urls[0])
                # the first read of each route misses both workers' route caches (a Redis read each): cold
                for label, a, b in (("native / native (cold caches)", natives[0], natives[1]),
                                    ("native / native (warm)", natives[0], natives[1]),
                                    ("http / native (warm)", urls[0], natives[1])):
                    res = compare(a, b)
                    ans = res.pop("answer")
                    found = ans.get("differenceCount") if isinstance(ans, dict) else None
                    row = {"case": label, "topics": n + 10, **res, "baseline_rss_mb": base,
                           "topics_per_s": round((n + 10) / res["seconds"]), "differences_found": found,
                           "correct": res["exit"] == 5 and found == PLANTED}
                    rows.append(row)
                    print(row, file=sys.stderr)
        finally:
            for p in procs:
                stop(p)
        return {"benchmark": "compare", **run_header(mode, size), **environment(await bench.version()),
                "results": rows}


def markdown(res: dict) -> str:
    lines = ["| doors (A / B) | topics | wall s | topics/s | peak RSS MB | CLI baseline MB | differences found "
             "(planted 45) |", "|---|---|---|---|---|---|---|"]
    for r in res["results"]:
        lines.append(f"| {r['case']} | {r['topics']:,} | {r['seconds']:.1f} | {r['topics_per_s']:,} | "
                     f"{r['peak_rss_mb']:.0f} | {r['baseline_rss_mb']:.0f} | {r['differences_found']}"
                     f"{'' if r['correct'] else ' (WRONG)'} |".replace(",", " "))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    mode, out = parse_size(__doc__.split("\n\n")[0], argv, "10 000 and 100 000 topics", "1 000 to 100 000 topics")
    size = SIZES[mode]
    res = asyncio.run(run_all(mode, size))
    write_results(out, "compare", res, markdown(res), tiny=mode == "tiny")
    return res


if __name__ == "__main__":
    main()
