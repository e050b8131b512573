"""Route reads on both doors of every worker while a broker with 100 000 topics registers and re-registers changed,
then while it is unregistered, expires and loses its connection: their latency, the workers' event-loop lag and the
longest Redis command of each phase.

    python -m benchmarks.stall_bench [--topics 100000] [--registrations 3] [--workers 2] [--rate 200]
                                     [--door native|http] [--body plain|compressed|zipped] [--tiny]
                                     [--fleet [--fleet-brokers 2000 --fleet-topics 100 --fleet-clients 10000
                                               --fleet-period 6]] [--out benchmarks/results]

Starts its own redis-server and `--workers` one-worker `namesrv serve` processes on 127.0.0.1. A probe process (its
own interpreter, so it competes with nothing of the bench's) reads routes from every worker at a fixed rate,
`--rate` a second per worker and door, over HTTP (8 keep-alive connections) and the native door (8 connections,
GET_ROUTEINFO_BY_TOPIC), in one run per phase:

- quiet: nothing else happens;
- registrations: the bench re-registers one broker of `--topics` topics through worker 0 `--registrations` times,
  each time with every queue count changed and a new data version (it registered once before). By default as a
  stock broker does, on the native door (`--door native`), the body as `--body` says: `plain` fastjson JSON,
  `compressed` the zipped form flagged as a 4.9.x broker flags it, `zipped` the same bytes flagged
  `compressed=false` as 5.x brokers send them with `compressedRegister=true`;
- unregister: the broker (registered again beforehand, outside the run) sends UNREGISTER_BROKER;
- expiry: the broker (registered beforehand with heartbeatTimeoutMillis 2 000, its connection kept open) sends no
  heartbeat; the workers' expiry scan (every second here) removes it;
- drop: the broker (registered beforehand) closes its connection; the worker that holds it removes the broker.

Half the reads ask for one of 1 000 small topics (served from the workers' route caches), half for a topic of the
big broker (whose cache entries every change invalidates, so those reads go to Redis; after a removal they answer
TOPIC_NOT_EXIST, which counts as an answer, not an error). Latency is timed from the moment a read was due, not from
when it was sent, so a stalled worker cannot hide its stall by sending less (coordinated omission). Reports each
worker's and door's reads (p50, p99, max, errors), its event-loop lag (namesrv_event_loop_lag_* of its /metrics)
and the longest Redis command of each phase (SLOWLOG, every command over 1 ms).
DESIGN §9 and issues 26/32: route reads max < 50 ms with no errors, no Redis command over 20 ms, in every phase.
With `--fleet` (issue 40 item 2), a fleet's everyday traffic runs against the same workers and Redis for the whole
of the phases (benchmarks/fleet_beside.py), warmed up once before the quiet phase; the report gives its size and,
per phase, its request rate and errors.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import orjson

from benchmarks import broker_frames as frames
from benchmarks import fleet_beside
from benchmarks.harness import git_info, machine_info, write_results
from benchmarks.http_bench import namesrv, seed, stop
from tests.redis_server import RedisServer, free_port

ROOT = Path(__file__).resolve().parent
BIG = ("StallCluster", "big-0", "10.9.0.0:10911")  # cluster, brokerName, brokerAddr of the big broker
DOORS = ("http", "native")
EXPIRY_TIMEOUT_MS = 2000
MAX_FRAME = 64 * 1024 * 1024
FLEET_HORIZON_S = 1800  # --fleet: its schedule's length after the warm-up, real seconds (stopped when the phases end)


def big_topics(topics: int, variant: int) -> dict[str, int]:
    """The big broker's topics; each variant has other queue counts for every topic (all changed)."""
    q = 8 if variant % 2 == 0 else 4
    return {f"Big0-Topic-{t:06d}": q for t in range(topics)}


def big_body(topics: int, variant: int = 0, timeout_ms: int | None = None) -> bytes:
    """The big broker's registration as the HTTP door takes it, with a new data version per variant (the same one
    would let the NameServer skip every topic already registered, as Java does)."""
    table = {t: {"readQueueNums": q, "writeQueueNums": q, "perm": 6} for t, q in big_topics(topics, variant).items()}
    cluster, name, addr = BIG
    return orjson.dumps({"clusterName": cluster, "brokerName": name, "brokerId": 0, "brokerAddr": addr,
                         "topicConfigTable": table, "dataVersion": {"timestamp": 1, "counter": variant},
                         **({"heartbeatTimeoutMillis": timeout_ms} if timeout_ms else {})})


def seed_body(b: int) -> bytes:
    """One of the two brokers serving the 1 000 small topics T0..T999 (embedded mode: no Redis to seed)."""
    table = {f"T{t}": {"readQueueNums": 8, "writeQueueNums": 8, "perm": 6} for t in range(1000)}
    return orjson.dumps({"clusterName": "BenchCluster", "brokerName": f"bench-{b}", "brokerId": 0,
                         "brokerAddr": f"10.1.0.{b}:10911", "topicConfigTable": table})


def http_post(url: str, path: str, body: bytes) -> None:
    req = urllib.request.Request(url + path, data=body, method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        assert r.status == 200, r.status


class BigBroker:
    """The big broker: its registrations through one worker's HTTP or native door (a connection of its own, on a
    thread and event loop of its own, kept open until `close`), as a stock broker sends them."""

    def __init__(self, url: str, native_port: int, topics: int, door: str, body: str) -> None:
        self.url, self.port, self.topics, self.door, self.body = url, native_port, topics, door, body
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.client: Any = None
        self.frames: dict[tuple[int, int | None], tuple[dict, bytes]] = {}

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=300)

    def prepare(self, variants: int, timeout_ms: int | None = None) -> None:
        """Encode the registrations before any clock starts."""
        for v in range(variants):
            if self.door == "http":
                self.frames[(v, timeout_ms)] = ({}, big_body(self.topics, v, timeout_ms))
            else:
                raw = frames.register_body(big_topics(self.topics, v), v, self.body)
                self.frames[(v, timeout_ms)] = (frames.register_header(*BIG, self.body, raw, timeout_ms), raw)

    def register(self, variant: int, timeout_ms: int | None = None) -> float:
        ext, raw = self.frames[(variant, timeout_ms)]
        t0 = time.perf_counter()
        if self.door == "http":
            http_post(self.url, "/v1/brokers/register", raw)
        else:
            reply = self._call(self._request(frames.REGISTER_BROKER, ext, raw))
            if reply.code != 0:
                raise RuntimeError(f"REGISTER_BROKER answered {reply.code}: {reply.remark}")
        return time.perf_counter() - t0

    def unregister(self) -> None:
        if self.door == "http":
            cluster, name, addr = BIG
            http_post(self.url, "/v1/brokers/unregister", orjson.dumps(
                {"clusterName": cluster, "brokerName": name, "brokerId": 0, "brokerAddr": addr}))
        else:
            reply = self._call(self._request(frames.UNREGISTER_BROKER, frames.unregister_header(*BIG)))
            if reply.code != 0:
                raise RuntimeError(f"UNREGISTER_BROKER answered {reply.code}: {reply.remark}")

    async def _request(self, code: int, ext: dict, body: bytes = b"") -> Any:
        from tests.remoting.client import Client

        if self.client is None or self.client.closed.is_set():
            self.client = await Client.connect(self.port)
        return await self.client.request(code, ext, body, version=frames.VERSION, timeout=120)

    def close(self) -> None:
        """Close the broker's connection (the drop phase), and so end its thread."""
        async def close() -> None:
            if self.client is not None:
                await self.client.close()
                self.client = None
        self._call(close())

    def stop(self) -> None:
        self.close()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def lag(url: str) -> dict:
    text = urllib.request.urlopen(url + "/metrics").read().decode()
    worst = float(re.search(r"^namesrv_event_loop_lag_max_seconds (\S+)$", text, re.M).group(1))
    buckets = {float(b): float(n) for b, n in
               re.findall(r'^namesrv_event_loop_lag_seconds_bucket\{le="([0-9.]+)"\} (\S+)$', text, re.M)}
    count = float(re.search(r"^namesrv_event_loop_lag_seconds_count (\S+)$", text, re.M).group(1))
    # full collections (the worker's namesrv_gc_pause_seconds, generation 2): how many, in all, and over 25 ms
    gc_buckets = {float(b): float(n) for b, n in
                  re.findall(r'^namesrv_gc_pause_seconds_bucket\{generation="2",le="([0-9.]+)"\} (\S+)$', text, re.M)}
    gc_count = float(re.search(r'^namesrv_gc_pause_seconds_count\{generation="2"\} (\S+)$', text, re.M).group(1))
    gc_sum = float(re.search(r'^namesrv_gc_pause_seconds_sum\{generation="2"\} (\S+)$', text, re.M).group(1))
    return {"max_ms": worst * 1000, "samples": count,
            "over_50ms": count - buckets.get(0.05, count), "over_25ms": count - buckets.get(0.025, count),
            "full_gcs": gc_count, "full_gc_ms": gc_sum * 1000,
            "full_gcs_over_25ms": gc_count - gc_buckets.get(0.025, gc_count)}


def big_present(url: str) -> bool:
    with urllib.request.urlopen(url + "/v1/cluster-info", timeout=30) as r:
        return BIG[1] in orjson.loads(r.read())["brokerAddrTable"]


def probe(targets: list[tuple[str, int]], topics: int, rate: int, runs_in: Any, out: Any) -> None:
    """The probe process: fixed-rate route reads of every worker on both doors, for each duration taken from
    `runs_in` (None ends it), on connections kept from run to run; puts "ready" once connected, "started" as a
    run's clock starts, then
    {"<url> <door>": [(latency ms, status), ...]}. An answer (route or TOPIC_NOT_EXIST) is 200 / 404 on HTTP and
    0 / 17 natively. One process for every phase: a probe interpreter starting at each phase (imports,
    connections) took a core from the workers for its first second, the phase's own reads' worst."""
    import random

    import aiohttp

    from tests.remoting.client import Client

    lanes = 8

    def topic_of(i: int) -> str:
        return f"T{random.randrange(1000)}" if i % 2 else f"Big0-Topic-{random.randrange(topics):06d}"

    async def lane(read: Any, t0: float, interval: float, first: int, duration: float, rows: list) -> None:
        i = first
        while True:
            due = t0 + i * interval
            if due - t0 >= duration:
                return
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            try:
                status = await read(topic_of(i))
            except (aiohttp.ClientError, ConnectionError, TimeoutError) as exc:
                status = type(exc).__name__
            rows.append(((time.perf_counter() - due) * 1000, status))
            i += lanes

    async def reads() -> None:
        readers: list[tuple[Any, int, str]] = []
        clients = []
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30),
                                         connector=aiohttp.TCPConnector(limit=0)) as session:
            async def http_read(url: str, topic: str) -> Any:
                async with session.get(f"{url}/v1/topics/{topic}/route") as r:
                    await r.read()
                    return 200 if r.status in (200, 404) else r.status

            for url, port in targets:  # connections up before the first clock starts
                for r in await asyncio.gather(*(session.get(f"{url}/v1/topics/T0/route") for _ in range(lanes))):
                    r.release()
                for k in range(lanes):
                    c = await Client.connect(port)
                    clients.append(c)

                    async def native_read(topic: str, c: Any = c) -> Any:
                        reply = await c.request(frames.GET_ROUTEINFO_BY_TOPIC, {"topic": topic},
                                                version=frames.VERSION, timeout=30)
                        return 200 if reply.code in (0, 17) else reply.code

                    readers.append((lambda topic, url=url: http_read(url, topic), k, f"{url} http"))
                    readers.append((native_read, k, f"{url} native"))
            out.put("ready")
            loop = asyncio.get_running_loop()
            while (duration := await loop.run_in_executor(None, runs_in.get)) is not None:
                res: dict[str, list] = {key: [] for _, _, key in readers}
                t0 = time.perf_counter() + 0.2
                out.put("started")
                await asyncio.gather(*(lane(read, t0, 1 / rate, k, duration, res[key]) for read, k, key in readers))
                out.put(res)
        for c in clients:
            await c.close()

    asyncio.run(reads())


class Prober:
    """The probe process (probe), started once; `run` is one phase's reads."""

    def __init__(self, targets: list[tuple[str, int]], topics: int, rate: int) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self.runs, self.out = ctx.Queue(), ctx.Queue()
        self.proc = ctx.Process(target=probe, args=(targets, topics, rate, self.runs, self.out))
        self.proc.start()
        if self.out.get(timeout=120) != "ready":
            raise RuntimeError("the probe process did not connect")

    def run(self, duration: float, during: Any = None) -> dict:
        """One run of the reads, with `during` (a thread's target) started once they are under way."""
        self.runs.put(duration)
        if self.out.get(timeout=120) != "started":
            raise RuntimeError("the probe process did not start its reads")
        worker = None
        failed: list[BaseException] = []
        if during is not None:
            time.sleep(0.5)  # some reads before it

            def guarded() -> None:
                try:
                    during()
                except BaseException as exc:  # noqa: BLE001 (re-raised below, after the probe's run ends)
                    failed.append(exc)

            worker = threading.Thread(target=guarded)
            worker.start()
        res = self.out.get(timeout=duration + 120)
        if worker is not None:
            worker.join()
        if failed:
            raise failed[0]
        return {key: summary(rows) for key, rows in res.items()}

    def close(self) -> None:
        self.runs.put(None)
        self.proc.join(30)
        if self.proc.is_alive():
            self.proc.kill()


def summary(rows: list[tuple[float, Any]]) -> dict:
    lat = sorted(ms for ms, _ in rows)
    pct = (lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]) if lat else (lambda q: 0.0)
    return {"reads": len(rows), "p50_ms": pct(0.5), "p99_ms": pct(0.99), "max_ms": lat[-1] if lat else 0.0,
            "non200": sum(1 for _, st in rows if st != 200)}


class Slowlog:
    """The Redis commands over 1 ms of one phase (none when the workers run embedded)."""

    def __init__(self, url: str | None) -> None:
        import redis

        self.admin = redis.Redis.from_url(url) if url else None
        if self.admin is not None:
            self.admin.config_set("slowlog-log-slower-than", 1000)  # µs: every command over 1 ms
            self.admin.config_set("slowlog-max-len", 10_000)

    def reset(self) -> None:
        if self.admin is not None:
            self.admin.slowlog_reset()

    def read(self) -> dict:
        slow = self.admin.slowlog_get(10_000) if self.admin is not None else []
        top = sorted(slow, key=lambda e: -e["duration"])[:5]
        by_script: dict[str, list[float]] = {}
        for e in slow:
            name = command_name(e["command"])
            if name in STEP_SCRIPTS:
                by_script.setdefault(name, []).append(e["duration"] / 1000)
        steps = {name: {"calls_over_1ms": len(ms), "p50_ms": round(sorted(ms)[len(ms) // 2], 2),
                        "max_ms": round(max(ms), 2)} for name, ms in by_script.items()}
        return {"redis_steps": steps, "redis_longest_ms": top[0]["duration"] / 1000 if top else 0.0,
                "redis_longest_command": (top[0]["command"].decode(errors="replace")[:60] if top else ""),
                "redis_longest": [{"ms": round(e["duration"] / 1000, 2), "command": command_name(e["command"])}
                                  for e in top],
                "redis_commands_over_20ms": sum(1 for e in slow if e["duration"] > 20_000),
                "redis_commands_over_1ms": len(slow)}


def command_name(command: bytes) -> str:
    """A SLOWLOG entry's command, an EVALSHA named by its script (the SHA says nothing to a reader)."""
    words = command.decode(errors="replace").split(" ")
    if words[0].upper() == "EVALSHA" and len(words) > 1:
        return f"EVALSHA {SCRIPTS.get(words[1], words[1][:12])}"
    return " ".join(words[:2])[:60]


def _script_names() -> dict[str, str]:
    import hashlib

    from service.store.scripts import load_all

    return {hashlib.sha1(s.source.encode()).hexdigest(): name for name, s in load_all().items()}


SCRIPTS = _script_names()
STEP_SCRIPTS = ("EVALSHA registerChunk", "EVALSHA registerFinish", "EVALSHA sweepBroker", "EVALSHA expireBrokers",
                "EVALSHA clusterInfoStep")


def step_sizes(url: str) -> dict:
    """A worker's step sizes now and the cost per topic they measured (namesrv_store_step_*, steps.py)."""
    text = urllib.request.urlopen(url + "/metrics").read().decode()
    sizes = dict(re.findall(r'^namesrv_store_step_topics\{kind="(\w+)"\} (\S+)$', text, re.M))
    costs = dict(re.findall(r'^namesrv_store_step_cost_microseconds\{kind="(\w+)"\} (\S+)$', text, re.M))
    return {k: {"topics": int(float(v)), "us_per_topic": round(float(costs[k]), 2) if k in costs else None}
            for k, v in sizes.items()}


def burn(until: float) -> None:
    """A process that keeps one core busy until `until` (time.time()): the bench's "slow machine"."""
    x = 0
    while time.time() < until:
        for _ in range(100_000):
            x += 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--topics", type=int, default=100_000)
    p.add_argument("--registrations", type=int, default=3)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--rate", type=int, default=200, help="route reads a second per worker and door")
    p.add_argument("--duration", type=int, default=0, help="seconds per probe run (default: long enough)")
    p.add_argument("--door", choices=DOORS, default="native", help="where the big broker registers (native: as a "
                   "stock broker does)")
    p.add_argument("--body", choices=frames.BODIES, default="plain", help="native door: the RegisterBrokerBody form")
    p.add_argument("--no-removals", action="store_true", help="only the registrations: no unregister/expiry/drop")
    p.add_argument("--chunk-topics", type=int, default=0,
                   help="the workers' NAMESRV_REGISTRATION_CHUNK_TOPICS (0: their default; 1000000: never in steps, "
                        "the baseline)")
    p.add_argument("--embedded", action="store_true",
                   help="one worker in embedded mode (no Redis: fakeredis on the worker's own event loop)")
    p.add_argument("--busy", type=int, default=0, help="processes spinning on a core each for the whole run (a "
                   "slower, loaded machine: the steps sized by time shrink)")
    p.add_argument("--fleet", action="store_true", help="a fleet's everyday traffic against the same workers and "
                   "Redis for the whole of the phases (benchmarks.fleet's load tool): 2 000 brokers x 100 topics, "
                   "10 000 clients, every rate 5x a real fleet's unless the --fleet-* options say otherwise")
    p.add_argument("--fleet-brokers", type=int, help="the fleet's brokers (default 2 000; --tiny 40)")
    p.add_argument("--fleet-topics", type=int, help="topics per broker, every broker of a cluster of 10 serving its "
                   "cluster's (default 100)")
    p.add_argument("--fleet-clients", type=int, help="clients reading 2 routes each every period (default 10 000)")
    p.add_argument("--fleet-period", type=float, help="real seconds per simulated 30 s period (default 6: every "
                   "rate 5x a real fleet's; 30: real time)")
    p.add_argument("--tiny", action="store_true", help="seconds: the CI smoke test (2 000 topics)")
    p.add_argument("--out", default=str(ROOT / "results"))
    args = p.parse_args(argv)
    if args.tiny:
        args.topics, args.registrations = 2_000, 1
    if args.embedded:
        args.workers = 1
    fleet_size = None
    sized = [f"--fleet-{key}" for key in ("brokers", "topics", "clients", "period")
             if getattr(args, f"fleet_{key}") is not None]
    if sized and not args.fleet:
        p.error(f"{', '.join(sized)}: only with --fleet")
    if args.fleet:
        if args.embedded:
            p.error("--fleet needs Redis: not with --embedded")
        fleet_size = dict(fleet_beside.SIZES["tiny" if args.tiny else "default"])
        for key in ("brokers", "topics", "clients", "period"):
            if getattr(args, f"fleet_{key}") is not None:
                fleet_size[key] = getattr(args, f"fleet_{key}")
    fleet_env = ({"heartbeat_flush_ms": fleet_beside.plan_for(fleet_size, 60).heartbeat_flush_ms}
                 if fleet_size else {})  # as benchmarks.fleet runs ours: heartbeats flushed at the scaled second
    server = None if args.embedded else RedisServer().start()
    procs: list = []
    broker = None
    burners = []
    if args.busy:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        burners = [ctx.Process(target=burn, args=(time.time() + 3600,), daemon=True) for _ in range(args.busy)]
        for b in burners:
            b.start()
    phases: dict[str, dict] = {}
    lags: dict[str, list] = {}
    load_seen: list[float] = []  # the 1-minute load average as each phase began
    sizes: dict[str, list] = {}  # per phase, each worker's step sizes after it
    side = None
    fleet_res = None
    tmp = Path(tempfile.mkdtemp(prefix="nsrv-stall-")) if fleet_size else None
    prober: Prober | None = None
    try:
        if server is not None:
            asyncio.run(seed(server.url, 1000))
        slowlog = Slowlog(server.url if server else None)
        urls, targets = [], []
        for _ in range(args.workers):
            port = free_port()
            # A plain body of 100 000 topics (17.8 MB) is past RocketMQ's frameMaxLength (16 MiB, ours the same):
            # a broker that large registers zipped (compressedRegister=true) or both sides raise the limit.
            proc, url = namesrv(server.url if server else "", 1, registration_chunk_topics=args.chunk_topics,
                                remoting_port=port, scan_interval_ms=1000, remoting_max_frame_bytes=MAX_FRAME,
                                **fleet_env)
            procs.append(proc)
            urls.append(url)
            targets.append((url, port))
        if server is None:  # the small topics, through the worker itself
            for b in range(2):
                http_post(urls[0], "/v1/brokers/register", seed_body(b))
        broker = BigBroker(urls[0], targets[0][1], args.topics, args.door, args.body)
        broker.prepare(args.registrations + 1)
        broker.prepare(1, EXPIRY_TIMEOUT_MS)
        if fleet_size:  # the fleet up first, so that the first registration sizes the phases under its load
            side = fleet_beside.FleetBeside(fleet_beside.plan_for(fleet_size, FLEET_HORIZON_S),
                                            [port for _, port in targets], tmp)
            print(f"stall_bench: the fleet's warm-up took {side.start()} s", flush=True)
        one = broker.register(0)  # sizes the run; the first starts the parser process
        duration = args.duration or max(4, int(one * args.registrations * 1.5) + 2)

        def phase(name: str, during: Any = None, seconds: float = duration) -> None:
            load_seen.append(round(os.getloadavg()[0], 2))
            before = [lag(u) for u in urls]
            slowlog.reset()
            began = time.monotonic()
            phases[name] = {"reads": prober.run(seconds, during), **slowlog.read()}
            if side is not None:
                side.mark(name, began, time.monotonic())
            after = [lag(u) for u in urls]
            sizes[name] = [step_sizes(u) for u in urls]
            lags[name] = [{"max_ms": a["max_ms"], "over_50ms": a["over_50ms"] - b["over_50ms"],
                           "over_25ms": a["over_25ms"] - b["over_25ms"], "samples": a["samples"] - b["samples"],
                           **{k: round(a[k] - b[k], 1) for k in ("full_gcs", "full_gc_ms", "full_gcs_over_25ms")}}
                          for b, a in zip(before, after, strict=True)]

        prober = Prober(targets, args.topics, args.rate)
        took: list[float] = []
        phase("quiet")
        phase("registrations", lambda: took.extend(broker.register(v) for v in range(1, args.registrations + 1)))
        if len(took) != args.registrations:
            raise RuntimeError(f"{len(took)} of {args.registrations} registrations completed during the busy run")
        removals = {}
        if not args.no_removals:
            short = max(4.0, 2 + 3 * EXPIRY_TIMEOUT_MS / 1000)
            broker.register(0)
            phase("unregister", broker.unregister, short)
            removals["unregister"] = not big_present(urls[1 % len(urls)])
            broker.register(0, EXPIRY_TIMEOUT_MS)
            phase("expiry", None, short)
            removals["expiry"] = not big_present(urls[1 % len(urls)])
            if args.door == "native":
                broker.close()
                broker.register(0)
                phase("drop", broker.close, short)
                removals["drop"] = not big_present(urls[1 % len(urls)])
            if not all(removals.values()):
                raise RuntimeError(f"the big broker was not removed in every phase: {removals}")
        if side is not None:
            fleet_res = side.stop()
    finally:
        if prober is not None:
            prober.close()
        if side is not None:
            side.close()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        for b in burners:
            b.terminate()
            b.join(10)
        if broker is not None:
            broker.stop()
        for proc in procs:
            stop(proc)
        if server is not None:
            server.cleanup()
    keys = [(i, u, d) for i, u in enumerate(urls) for d in DOORS]
    res = {"date": time.strftime("%Y-%m-%d"), "git_sha": git_info()["sha"][:10], "machine": machine_info(),
           "topics": args.topics, "registrations": args.registrations, "workers": args.workers, "rate": args.rate,
           "embedded": args.embedded, "door": args.door, "body": args.body if args.door == "native" else "json",
           "chunk_topics": args.chunk_topics or "default", "duration_s": duration, "registration_s": took,
           "busy": args.busy, "load_average": load_seen, "fleet": fleet_res,
           "body_bytes": len(broker.frames[(0, None)][1]),
           # per phase: the longest Redis command, and per worker and door its reads
           "phases": {name: {**{k: v for k, v in ph.items() if k != "reads"},
                             "reads": [{"worker": i, "door": d, **ph["reads"][f"{u} {d}"]} for i, u, d in keys],
                             "lag": lags[name], "steps": sizes[name]} for name, ph in phases.items()}}
    # the published names the README and the smoke test read (registrations: as before this bench had phases)
    res.update({k: phases["registrations"][k] for k in ("redis_longest_ms", "redis_longest_command",
                                                         "redis_commands_over_20ms", "redis_commands_over_1ms")})
    rows = []
    for name, ph in res["phases"].items():
        for r in ph["reads"]:
            lag_row = ph["lag"][r["worker"]]
            rows.append(f"| {name} | {r['worker']} | {r['door']} | {r['reads']} | {r['p50_ms']:.2f} | "
                        f"{r['p99_ms']:.2f} | {r['max_ms']:.2f} | {r['non200']} | {lag_row['over_25ms']:.0f} | "
                        f"{lag_row['full_gcs']:.0f} ({lag_row['full_gcs_over_25ms']:.0f}) | "
                        f"{ph['redis_longest_ms']:.1f} | {ph['redis_commands_over_20ms']} |")
    sent = (f"on the native door ({args.body} RegisterBrokerBody, {len(broker.frames[(0, None)][1]) / 1e6:.1f} MB)"
            if args.door == "native" else f"over HTTP ({len(broker.frames[(0, None)][1]) / 1e6:.1f} MB JSON)")
    table = "\n".join([
        f"Measured {res['date']} on {res['machine']['summary']}, git {res['git_sha']}, {args.workers} workers: "
        f"{args.registrations} changed re-registrations of one broker of {args.topics} topics through worker 0 {sent} "
        f"({', '.join(f'{t:.1f} s' for t in took)}), then its unregistration, expiry"
        f"{' and connection drop' if args.door == 'native' else ''}, during route reads at {args.rate}/s per worker "
        f"and door; registrations in steps of {args.chunk_topics or 'the default'} topics"
        f"{' (embedded mode)' if args.embedded else ''}. Redis columns: the longest command of the phase and the "
        f"commands over 20 ms.",
        "",
        *([fleet_beside.describe(fleet_res), "", *fleet_beside.table(fleet_res), ""] if fleet_res else []),
        "| phase | worker | door | reads | p50 ms | p99 ms | max ms | errors | loop lags > 25 ms | full GCs (> 25 ms) "
        "| Redis longest ms | Redis > 20 ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        "Loop lags: how many of the worker's 50 ms timer ticks in the phase fired over 25 ms late; full GCs: the "
        "worker's generation-2 collections in the phase (those over 25 ms). The worst loop lag since each worker "
        "started (warm-up included): "
        + ", ".join(f"{lag_row['max_ms']:.1f} ms" for lag_row in res["phases"][list(res["phases"])[-1]]["lag"]) + ".",
        "",
        f"Load average (1 min) as each phase began: {', '.join(map(str, load_seen))}"
        f"{f'; {args.busy} processes spinning on a core each' if args.busy else ''}. The longest Redis commands "
        "of each phase:",
        "",
        *(f"- {name}: " + ", ".join(f"{c['command']} {c['ms']} ms" for c in ph.get("redis_longest", []))
          for name, ph in res["phases"].items()),
        "",
        "Step scripts of each phase over 1 ms (calls, p50, max) and worker 0's step sizes after it (topics; µs a "
        "topic measured):",
        "",
        *(f"- {name}: " + (", ".join(f"{k.split()[-1]} {v['calls_over_1ms']} × p50 {v['p50_ms']} max {v['max_ms']} ms"
                                     for k, v in ph.get("redis_steps", {}).items()) or "none")
          + "; sizes " + ", ".join(f"{k} {v['topics']}" + (f" ({v['us_per_topic']} µs)" if v["us_per_topic"] else "")
                                   for k, v in (ph["steps"][0] if ph["steps"] else {}).items())
          for name, ph in res["phases"].items()),
    ]) + "\n"
    name = "stall-embedded" if args.embedded else "stall"
    if args.door == "native" and args.body != "plain":
        name += "-" + args.body
    if args.busy:
        name += "-busy"
    if fleet_res:
        name += "-fleet"
    write_results(Path(args.out), name, res, table, args.tiny)
    return 0


if __name__ == "__main__":
    sys.exit(main())
