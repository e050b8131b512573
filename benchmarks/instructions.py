"""Instructions per HTTP route read, counted by valgrind's callgrind: the service against the bare aiohttp ceiling.

    python -m benchmarks.instructions [--quick | --tiny] [--out benchmarks/results]

Throughput on a shared VM swings by 2x within minutes (benchmarks/README.md), so `http_bench`'s req/s ratio can
land anywhere from 0.7 to 1.0 run to run. The instructions a server executes per request do not depend on the
neighbours. Each server runs under callgrind: the `namesrv serve` worker; `benchmarks/ceiling.py --mode route`,
a bare aiohttp handler serving the very same route bytes; and `--mode route-unrouted`, that handler called
before aiohttp's router. After a warm-up that fills the route cache, its counters are zeroed, a client outside
valgrind sends exactly N keep-alive GETs of random topics, and the counters are dumped. The worker's count
includes whatever its background work (cache poll, change events, scheduler) did meanwhile; its idle rate is
measured too, and reported, not subtracted. Results: instructions.json / instructions.md.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from benchmarks.harness import environment, parse_size, run_header, tools_missing, write_results
from benchmarks.http_bench import seed, stop, wait_http, worker_env
from tests.redis_server import RedisServer, free_port

SIZES = {"tiny": dict(topics=50, warm=300, requests=300, connections=8, idle_s=2),
         "quick": dict(topics=1000, warm=12_000, requests=4_000, connections=64, idle_s=10),
         "full": dict(topics=1000, warm=20_000, requests=20_000, connections=64, idle_s=20)}


async def _send(host: str, port: int, topics: int, total: int, connections: int) -> None:
    """Exactly `total` GETs of random topics over `connections` keep-alive connections; every reply a 200."""

    async def one(count: int) -> None:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            for _ in range(count):
                writer.write(f"GET /v1/topics/T{random.randrange(topics)}/route HTTP/1.1\r\nHost: bench\r\n\r\n"
                             .encode())
                head = await reader.readuntil(b"\r\n\r\n")
                if not head.startswith(b"HTTP/1.1 200"):
                    raise RuntimeError(f"route read answered {head[:40]!r}")
                length = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
                await reader.readexactly(int(length.group(1)))
        finally:
            writer.close()

    per = [total // connections + (1 if i < total % connections else 0) for i in range(connections)]
    await asyncio.gather(*(one(n) for n in per if n))


def _callgrind_total(path: str) -> int:
    text = Path(path).read_text(errors="replace")
    m = re.search(r"^summary:\s+(\d+)", text, re.M) or re.search(r"^totals:\s+(\d+)", text, re.M)
    if m is None:
        raise RuntimeError(f"no instruction total in {path}")
    return int(m.group(1))


def _dump(pid: int, out: str) -> int:
    """Dump the counters of the callgrind run `pid` and return the instructions since the last zeroing."""
    before = set(Path(out).parent.glob(Path(out).name + ".*"))
    _control(pid, "-d")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        new = set(Path(out).parent.glob(Path(out).name + ".*")) - before
        if new:
            time.sleep(0.5)  # written in one go, but let the writer finish
            return _callgrind_total(str(max(new, key=os.path.getmtime)))
        time.sleep(0.2)
    raise TimeoutError(f"callgrind wrote no dump for pid {pid}")


def _control(pid: int, *command: str) -> None:
    subprocess.run(["callgrind_control", *command, str(pid)], check=True, capture_output=True, timeout=120)


def _zero(pid: int) -> None:
    _control(pid, "-z")


@dataclass
class Traced:
    """One server started under callgrind, its port and where its counters are dumped."""

    name: str
    port: int
    out: str
    proc: subprocess.Popen
    started: float = field(default_factory=time.monotonic)


def start_traced(name: str, cmd: list[str], env: dict[str, str], port: int, tmp: str) -> Traced:
    out = os.path.join(tmp, f"callgrind.{name}")
    # --instr-atstart=no: start-up runs at valgrind's bare ~4x slowdown instead of callgrind's 20-50x; measure()
    # turns instrumentation on before the warm-up, so the counted reads are instrumented code throughout
    proc = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--dump-instr=no",
                             "--instr-atstart=no", *cmd], env={**os.environ, **env}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    return Traced(name, port, out, proc)


def measure(t: Traced, size: dict) -> dict:
    """Once `t` is up: warm-up, (for the worker) its idle rate, then the counted reads."""
    wait_http(f"http://127.0.0.1:{t.port}/v1/topics/T0/route", timeout=900)
    print(f"[{t.name}] up under callgrind after {time.monotonic() - t.started:.0f} s; warming up", file=sys.stderr,
          flush=True)
    _control(t.proc.pid, "-i", "on")
    wait_http(f"http://127.0.0.1:{t.port}/v1/topics/T0/route", timeout=900)  # its code translated anew: slow once
    asyncio.run(_send("127.0.0.1", t.port, size["topics"], size["warm"], size["connections"]))
    res = {"name": t.name}
    if size["idle_s"] and t.name == "service":
        _zero(t.proc.pid)
        time.sleep(size["idle_s"])
        res["idle_instructions_per_s"] = _dump(t.proc.pid, t.out) / size["idle_s"]
    _zero(t.proc.pid)
    t0 = time.monotonic()
    asyncio.run(_send("127.0.0.1", t.port, size["topics"], size["requests"], size["connections"]))
    res["wall_s"] = time.monotonic() - t0
    total = _dump(t.proc.pid, t.out)
    res.update(requests=size["requests"], instructions=total, per_request=total / size["requests"])
    print(f"[{t.name}] {res['per_request']:.0f} instructions per route read", file=sys.stderr, flush=True)
    return res


def markdown(doc: dict) -> str:
    s, c, u = doc["service"], doc["ceiling"], doc["unrouted"]
    idle = s.get("idle_instructions_per_s")
    return "\n".join([
        f"Measured {doc['date']} on {doc['machine']['summary']}, git {doc['git_sha']}, mode {doc['mode']}: "
        f"{doc['size']['requests']} route reads of {doc['size']['topics']} topics over "
        f"{doc['size']['connections']} connections, after {doc['size']['warm']} warm-up reads.",
        "",
        "| server | instructions per route read | ceiling ÷ server | target |",
        "|---|---|---|---|",
        f"| bare aiohttp handler, same bytes (ceiling) | {c['per_request']:,.0f} | 1.00 | — |",
        f"| the same handler called before aiohttp's router | {u['per_request']:,.0f} | "
        f"{c['per_request'] / u['per_request']:.2f} | — (what the router costs) |",
        f"| rmq-namesrv worker | {s['per_request']:,.0f} | {doc['ratio']:.2f} | ≥ 0.85 |",
        "",
        f"The worker's count includes its background work during the run (idle: "
        f"{'n/a' if idle is None else f'{idle:,.0f}'} instructions/s; the run took {s['wall_s']:.1f} s under "
        f"callgrind).",
    ]) + "\n"


def main(argv: list[str] | None = None) -> int:
    mode, out = parse_size(__doc__.split("\n\n")[0], argv, "a few minutes", "more requests")
    size = SIZES[mode]
    if tools_missing("valgrind", "callgrind_control", package="valgrind"):
        return 2
    server = RedisServer().start()
    tmp = tempfile.mkdtemp(prefix="nsrv-instr-")
    doc: dict = run_header(mode, size)
    traced: list[Traced] = []
    try:
        # brokers that outlive a slow start under valgrind (the default 120 s timeout would expire them)
        routes = asyncio.run(seed(server.url, size["topics"], heartbeat_timeout_ms=86_400_000))
        bodies = os.path.join(tmp, "bodies.json")
        Path(bodies).write_bytes(orjson.dumps(routes))
        # Start-up under callgrind is most of the run (25-60 s a server on 2 cores, far more on a busy machine):
        # the three start together, and counts do not depend on neighbours; each is then measured alone, its
        # counters zeroed after its warm-up.
        for name, ceiling_mode in (("ceiling", "route"), ("unrouted", "route-unrouted")):
            port = free_port()
            traced.append(start_traced(name, [sys.executable, "-m", "benchmarks.ceiling", "--mode", ceiling_mode,
                                              "--port", str(port), "--bodies", bodies], {}, port, tmp))
        port = free_port()
        # Redis calls' deadline (1 s) is for a Redis that stalls, not for a worker that valgrind slows down 50x
        # (right after instrumentation is switched on, on a busy machine, a read took longer: 503)
        traced.append(start_traced("service", [sys.executable, "-m", "service.cli", "serve"],
                                   worker_env(server.url, port, redis_deadline_ms=60_000), port, tmp))
        for t in traced:
            doc[t.name] = measure(t, size)
            stop(t.proc)
    finally:
        for t in traced:
            stop(t.proc)
        server.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)
    doc["ratio"] = doc["ceiling"]["per_request"] / doc["service"]["per_request"]
    doc["versions"] = environment(doc["machine"].get("redis_server", ""))["versions"]
    write_results(out, "instructions", doc, markdown(doc), mode == "tiny")
    return 0


if __name__ == "__main__":
    sys.exit(main())
