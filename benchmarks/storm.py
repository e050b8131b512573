"""A fleet's cold start: N brokers, each on its own connection, send their first REGISTER_BROKER at once, to Apache's
Java NameServer 5.5.0 and to ours (1 worker; 2 workers on one Redis), one after the other in the same run.

    python -m benchmarks.storm            # the issue-40 cases and the growth series → results/storm.json, .md, .png
    python -m benchmarks.storm --quick    # the three issue-40 cases only
    python -m benchmarks.storm --tiny     # seconds: the smoke test (tests/integration/test_bench_smoke.py)
    python -m benchmarks.storm --cases 1000x1000,200x200 --servers ours1,ours2 [--env NAME=VALUE]

Each (case, server) starts from nothing: a fresh NameServer (ours: a fresh redis-server and fresh workers), one seed
broker of 100 topics registered on a kept connection, then the storm. Brokers come in 10 clusters (fewer when N < 10)
of N/10 brokers each; the brokers of a cluster serve the same M topics (as `mqadmin updateTopic -c` creates them), so
each route lists N/10 brokers and there are 10 × M topics in all. Frames are built as a stock 5.x broker builds them
(benchmarks/broker_frames.py: fastjson RegisterBrokerBody, `bodyCrc32`, request version of 5.4.0). Ours with 2
workers: two one-worker `namesrv serve` processes on their own ports and one Redis, the brokers spread over them
alternately, as a load balancer spreads them.

The N connections are opened first; then every frame is written at once (t = 0). Measured:

- **refused**: replies other than SUCCESS, connections closed without a reply, and replies later than 24 s (a 5.x
  broker's `registerBrokerTimeoutMills`: it gave up and retries next period) — each counted apart;
- **acked**: when the last SUCCESS arrived;
- **all routed**: once every broker is acknowledged, a verifier reads every topic's route from every worker (ours-2:
  both; natively, GET_ROUTEINFO_BY_TOPIC; 2 connections × 8 in flight per worker) and re-reads until it lists every
  broker of its cluster; the instant the last (topic, worker) pair was confirmed. Verifying only then keeps its
  reads (the first read of a route is a cache miss on our workers) out of the storm it times;
- **route reads throughout**: a reader process of its own reads at a fixed rate (`--rate` a second per worker), half
  the seed broker's topics, half the storm's, timed from when each read was due (coordinated omission), from just
  before t = 0 until all is routed: p50 / p99 / max and errors (an answer is SUCCESS or TOPIC_NOT_EXIST);
- **Redis**: the longest command while the storm ran (SLOWLOG, every command over 1 ms) and how many passed 20 ms;
- **CPU**: the server's CPU-seconds over the storm (ours: workers + redis-server).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import random
import re
import shutil
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from benchmarks import broker_frames as frames
from benchmarks.harness import git_info, machine_info, write_results
from benchmarks.http_bench import cpu_seconds, start, stop, wait_http, worker_env
from benchmarks.stall_bench import command_name
from service.remoting.codec import FrameDecoder, RemotingCommand, encode
from tests.redis_server import RedisServer, free_port

ROOT = Path(__file__).resolve().parent
BROKER_TIMEOUT_S = 24.0  # 5.x registerBrokerTimeoutMills: a broker waits this long for each NameServer's answer
GIVE_UP_S = 180.0  # the bench waits this long for the last reply before it calls the rest unanswered
SEED_TOPICS = 100
CLUSTERS = 10
MAIN = ["1000x1000", "5000x200", "100x10000"]
GROWTH_N = ["250x200", "500x200", "1000x200", "2000x200"]  # with 5000x200: time against N at M = 200
GROWTH_M = ["100x1000", "100x3000"]  # with 100x10000 (and 1000x1000 for N): time against M at N = 100
SERVERS = ("java", "ours1", "ours2")
TINY = ["40x50"]


# ---------------------------------------------------------------------------- the fleet

@dataclass
class Fleet:
    """N brokers in clusters of consecutive brokers; the brokers of a cluster serve the same M topics."""

    brokers: int
    topics: int
    clusters: int = 0

    def __post_init__(self) -> None:
        self.clusters = self.clusters or min(CLUSTERS, self.brokers)

    @property
    def name(self) -> str:
        return f"{self.brokers}x{self.topics}"

    def cluster_of(self, b: int) -> int:
        return b * self.clusters // self.brokers

    def members(self, c: int) -> list[int]:
        return [b for b in range(self.brokers) if self.cluster_of(b) == c]

    def topic(self, c: int, t: int) -> str:
        return f"Storm{c}-T{t:05d}"

    def identity(self, b: int) -> tuple[str, str, str]:
        addr = f"10.{20 + b // 62500}.{b // 250 % 250}.{b % 250}:10911"
        return f"StormCluster{self.cluster_of(b)}", f"storm-{b}", addr

    def bodies(self) -> list[bytes]:
        """One RegisterBrokerBody per cluster (every broker of it sends the same topic table)."""
        return [frames.register_body({self.topic(c, t): 8 for t in range(self.topics)}, 1)
                for c in range(self.clusters)]

    def frame(self, b: int, body: bytes) -> tuple[bytes, bytes]:
        """Broker b's REGISTER_BROKER: (prefix and header, body), written together."""
        cluster, name, addr = self.identity(b)
        ext = frames.register_header(cluster, name, addr, "plain", body)
        whole = encode(RemotingCommand(code=frames.REGISTER_BROKER, version=frames.VERSION, opaque=1,
                                       ext_fields={k: str(v).lower() if isinstance(v, bool) else str(v)
                                                   for k, v in ext.items()}))
        # encode() with an empty body: patch the total length to cover the body written after it
        head = (len(whole) - 4 + len(body)).to_bytes(4, "big") + whole[4:]
        return head, body


def seed_frame() -> bytes:
    body = frames.register_body({f"Seed-T{t}": 8 for t in range(SEED_TOPICS)}, 1)
    ext = frames.register_header("SeedCluster", "seed-0", "10.1.0.1:10911", "plain", body)
    return encode(RemotingCommand(code=frames.REGISTER_BROKER, version=frames.VERSION, opaque=1, body=body,
                                  ext_fields={k: str(v).lower() if isinstance(v, bool) else str(v)
                                              for k, v in ext.items()}))


def route_frame(topic: str, opaque: int) -> bytes:
    return encode(RemotingCommand(code=frames.GET_ROUTEINFO_BY_TOPIC, version=frames.VERSION, opaque=opaque,
                                  ext_fields={"topic": topic}))


# ---------------------------------------------------------------------------- a remoting client connection

class Conn(asyncio.Protocol):
    """One client connection: requests matched to replies by opaque; a closed connection fails what it awaits."""

    def __init__(self) -> None:
        self.decoder = FrameDecoder(256 * 1024 * 1024)
        self.waiting: dict[int, asyncio.Future[RemotingCommand]] = {}
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.opaques = iter(range(1, 1 << 30))

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        for cmd in self.decoder.feed(data):
            fut = self.waiting.pop(cmd.opaque, None)  # type: ignore[union-attr]
            if fut is not None and not fut.done():
                fut.set_result(cmd)  # type: ignore[arg-type]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        for fut in self.waiting.values():
            if not fut.done():
                fut.set_exception(ConnectionResetError("closed by the server"))
        self.waiting.clear()

    def expect(self, opaque: int) -> asyncio.Future[RemotingCommand]:
        fut = asyncio.get_running_loop().create_future()
        if self.closed:
            fut.set_exception(ConnectionResetError("closed by the server"))
        else:
            self.waiting[opaque] = fut
        return fut

    async def read_route(self, topic: str) -> RemotingCommand:
        opaque = next(self.opaques)
        fut = self.expect(opaque)
        assert self.transport is not None
        self.transport.write(route_frame(topic, opaque))
        return await fut


async def connect(port: int) -> Conn:
    loop = asyncio.get_running_loop()
    for attempt in range(50):
        try:
            _, conn = await loop.create_connection(Conn, "127.0.0.1", port)
            return conn
        except OSError:
            if attempt == 49:
                raise
            await asyncio.sleep(0.05)
    raise AssertionError("unreachable")


def brokers_in(reply: RemotingCommand) -> int:
    """The brokers a route reply lists (queue data entries: one per broker serving the topic); works on fastjson's
    non-standard JSON (Java writes integer map keys unquoted) as on ours."""
    return reply.body.count(b'"writeQueueNums"') if reply.code == 0 and reply.body else 0


# ---------------------------------------------------------------------------- the storm, in the bench's process

async def storm(fleet: Fleet, ports: list[int], verifiers: int = 2, in_flight: int = 8, verify: bool = True) -> dict:
    bodies = fleet.bodies()
    conns = [await connect(ports[b % len(ports)]) for b in range(fleet.brokers)]
    sent = [fleet.frame(b, bodies[fleet.cluster_of(b)]) for b in range(fleet.brokers)]
    outcome: list[Any] = [None] * fleet.brokers  # (seconds, code, remark) or (seconds, "closed")
    readers = {p: [await connect(p) for _ in range(verifiers)] for p in ports}
    routed_at = [0.0]
    rereads = [0]
    loop = asyncio.get_running_loop()
    t0 = 0.0

    async def verify_port(port: int) -> None:
        """Confirm every queued topic on this worker; incomplete ones go round again."""
        todo: asyncio.Queue[tuple[int, int]] = port_queues[port]
        pool = readers[port]

        async def lane(k: int) -> None:
            conn = pool[k % len(pool)]
            while True:
                item = await todo.get()
                c, t = item
                reply = await conn.read_route(fleet.topic(c, t))
                if brokers_in(reply) >= len(members[c]):
                    routed_at[0] = max(routed_at[0], time.perf_counter() - t0)
                    pending_pairs[0] -= 1
                    if pending_pairs[0] == 0:
                        done.set()
                else:
                    rereads[0] += 1
                    loop.call_later(0.01, todo.put_nowait, item)
                todo.task_done()

        await asyncio.gather(*(lane(k) for k in range(verifiers * in_flight)))

    members = {c: fleet.members(c) for c in range(fleet.clusters)}
    port_queues: dict[int, asyncio.Queue[tuple[int, int]]] = {p: asyncio.Queue() for p in ports}
    pending_pairs = [fleet.clusters * fleet.topics * len(ports)]
    done = asyncio.Event()

    def acked(b: int, fut: asyncio.Future[RemotingCommand]) -> None:
        took = time.perf_counter() - t0
        try:
            reply = fut.result()
            outcome[b] = (took, reply.code, reply.remark or "")
        except Exception as exc:  # noqa: BLE001 - a closed connection is an outcome
            outcome[b] = (took, "closed", repr(exc))
            return


    checkers = [asyncio.ensure_future(verify_port(p)) for p in ports]
    futs = []
    t0 = time.perf_counter()
    for b, conn in enumerate(conns):
        fut = conn.expect(1)
        fut.add_done_callback(lambda f, b=b: acked(b, f))
        futs.append(fut)
        assert conn.transport is not None
        conn.transport.writelines(sent[b])
    written = time.perf_counter() - t0
    try:
        await asyncio.wait_for(asyncio.gather(*futs, return_exceptions=True), GIVE_UP_S)
    except TimeoutError:
        pass
    answered = time.perf_counter() - t0
    if verify and all(o is not None and o[1] == 0 for o in outcome):
        for c in range(fleet.clusters):  # every broker acknowledged: every route, every worker
            for p in ports:
                for t in range(fleet.topics):
                    port_queues[p].put_nowait((c, t))
        try:
            await asyncio.wait_for(done.wait(), GIVE_UP_S)
        except TimeoutError:
            pass
    for task in checkers:
        task.cancel()
    for conn in conns + [c for pool in readers.values() for c in pool]:
        if conn.transport is not None:
            conn.transport.close()
    codes: dict[str, int] = {}
    remarks: dict[str, str] = {}
    late = unanswered = closed = 0
    ok_times = []
    for o in outcome:
        if o is None:
            unanswered += 1
        elif o[1] == "closed":
            closed += 1
        elif o[1] != 0:
            codes[str(o[1])] = codes.get(str(o[1]), 0) + 1
            remarks.setdefault(str(o[1]), o[2][:200])
        elif o[0] > BROKER_TIMEOUT_S:
            late += 1
        else:
            ok_times.append(o[0])
    refused = sum(codes.values()) + closed + unanswered + late
    all_routed = pending_pairs[0] == 0
    return {"brokers": fleet.brokers, "topics": fleet.topics, "clusters": fleet.clusters, "ports": len(ports),
            "frame_bytes": sum(len(h) + len(b) for h, b in sent) // fleet.brokers,
            "written_s": round(written, 3), "refused": refused, "refused_codes": codes, "refused_remarks": remarks,
            "closed": closed, "unanswered": unanswered, "late": late,
            "acked_s": round(max(ok_times), 3) if ok_times else None,
            "ack_p50_s": round(sorted(ok_times)[len(ok_times) // 2], 3) if ok_times else None,
            "answered_s": round(answered, 3),
            "routed_s": round(routed_at[0], 3) if all_routed else None, "rereads": rereads[0],
            "pairs_unconfirmed": pending_pairs[0], "t0": t0}


# ---------------------------------------------------------------------------- the reader, a process of its own

def reader(ports: list[int], fleet: Fleet, rate: int, started: Any, stop_flag: Any, out: Any) -> None:
    """Fixed-rate route reads of every port (lanes of `rate`/s in all per port) until `stop_flag`; puts the rows."""

    async def main() -> dict:
        lanes = 4
        rows: dict[int, list[tuple[float, Any]]] = {p: [] for p in ports}
        conns = {p: [await connect(p) for _ in range(lanes)] for p in ports}
        rnd = random.Random(7)
        t0 = time.perf_counter() + 0.2
        started.set()

        async def lane(p: int, k: int) -> None:
            conn, i, interval = conns[p][k], k, lanes / rate
            while not stop_flag.is_set():
                due = t0 + i * interval / lanes
                delay = due - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                seed_read = bool(i % 2)
                if seed_read:
                    topic = f"Seed-T{rnd.randrange(SEED_TOPICS)}"
                else:
                    topic = fleet.topic(rnd.randrange(fleet.clusters), rnd.randrange(fleet.topics))
                try:
                    async with asyncio.timeout(30):
                        reply = await conn.read_route(topic)
                    status: Any = "ok" if reply.code in (0, 17) else reply.code
                except (TimeoutError, ConnectionError) as exc:
                    status = type(exc).__name__
                    if conn.closed:
                        conn = conns[p][k] = await connect(p)
                rows[p].append(((time.perf_counter() - due) * 1000, status, seed_read, due))
                i += lanes

        await asyncio.gather(*(lane(p, k) for p in ports for k in range(lanes)))
        return rows

    out.put(asyncio.run(main()))


def read_summary(rows: list[tuple[float, Any, bool]], split: bool = True) -> dict:
    """p50/p99/max and errors; with `split`, the seed topics' reads (cached routes that the storm does not change)
    and the storm topics' reads (routes it changes: cache misses on our workers) apart too."""
    lat = sorted(r[0] for r in rows)
    pct = (lambda q: round(lat[min(len(lat) - 1, int(q * len(lat)))], 2)) if lat else (lambda q: None)
    errors: dict[str, int] = {}
    for r in rows:
        if r[1] != "ok":
            errors[str(r[1])] = errors.get(str(r[1]), 0) + 1
    out = {"reads": len(rows), "p50_ms": pct(0.5), "p99_ms": pct(0.99), "max_ms": round(lat[-1], 2) if lat else None,
           "errors": errors}
    if split:
        out["seed_topics"] = read_summary([r for r in rows if r[2]], False)
        out["storm_topics"] = read_summary([r for r in rows if not r[2]], False)
    return out


# ---------------------------------------------------------------------------- the servers

class Server:
    kind: str
    name: str
    ports: list[int]
    pids: list[int]
    redis: RedisServer | None = None

    def cpu(self) -> float:
        return sum(cpu_seconds(p) for p in self.pids) + self.redis_cpu()

    def redis_cpu(self) -> float:
        return cpu_seconds(self.redis.proc.pid) if self.redis else 0.0

    def stop(self) -> None:
        raise NotImplementedError


class Ours(Server):
    def __init__(self, workers: int, env: dict[str, Any], redis_profile: bool = False) -> None:
        self.kind = f"ours{workers}"
        self.name = f"rmq-namesrv, {workers} worker{'s' if workers > 1 else ''}"
        self.redis = RedisServer().start()
        self.procs: list[Any] = []
        self.ports = []
        self.urls: list[str] = []
        try:
            for _ in range(workers):
                port, http_port = free_port(), free_port()
                self.procs.append(start([sys.executable, "-m", "service.cli", "serve"],
                                        worker_env(self.redis.url, http_port, 1, remoting_port=port, **env)))
                self.urls.append(f"http://127.0.0.1:{http_port}")
                wait_http(f"{self.urls[-1]}/readyz", 90)
                self.ports.append(port)
        except BaseException:
            self.stop()
            raise
        self.pids = [p.pid for p in self.procs]
        import redis

        self.admin = redis.Redis.from_url(self.redis.url)
        # --redis-profile: every command, for the Redis time per script (Redis cannot tell one EVALSHA from another
        # in INFO commandstats); else those over 1 ms, for the longest.
        self.redis_profile = redis_profile
        self.admin.config_set("slowlog-log-slower-than", 0 if redis_profile else 1000)
        self.admin.config_set("slowlog-max-len", 2_000_000 if redis_profile else 100_000)

    def slowlog_reset(self) -> None:
        self.admin.slowlog_reset()

    def slowlog(self) -> dict:
        slow = self.admin.slowlog_get(2_000_000 if self.redis_profile else 100_000)
        longest = sorted(slow, key=lambda e: -e["duration"])[:5]
        profile: dict[str, Any] = {}
        if self.redis_profile:
            by: dict[str, list[float]] = {}
            for e in slow:
                row = by.setdefault(command_name(e["command"]), [0, 0.0])
                row[0] += 1
                row[1] += e["duration"] / 1e6
            profile["redis_s_by_command"] = {name: {"calls": c, "s": round(t, 3)} for name, (c, t) in
                                             sorted(by.items(), key=lambda kv: -kv[1][1])[:12]}
        slow = [e for e in slow if e["duration"] > 1000]
        return {**profile, "redis_longest_ms": round(longest[0]["duration"] / 1000, 2) if longest else 0.0,
                "redis_longest": [{"ms": round(e["duration"] / 1000, 2), "command": command_name(e["command"])}
                                  for e in longest],
                "redis_over_20ms": sum(1 for e in slow if e["duration"] > 20_000),
                "redis_over_1ms": len(slow), "redis_used_memory_mb": round(
                    self.admin.info("memory")["used_memory"] / 1e6, 1)}

    def metrics(self) -> list[dict]:
        """Per worker: its event loop's longest lag, and what its admission did (waits for room, for a turn)."""
        out = []
        for url in self.urls:
            text = urllib.request.urlopen(url + "/metrics", timeout=30).read().decode()
            out.append({name: float(m.group(1)) if (m := re.search(rf"^{metric} (\S+)$", text, re.M)) else None
                        for name, metric in (("loop_lag_max_s", "namesrv_event_loop_lag_max_seconds"),
                                             ("waits", "namesrv_remoting_waits_total"),
                                             ("turns_waited", "namesrv_redis_turns_waited_total"),
                                             ("turn_wait_s", "namesrv_redis_turn_wait_seconds_total"),
                                             ("cache_hits", "namesrv_route_cache_hits"),
                                             ("cache_misses", "namesrv_route_cache_misses"))})
        return out

    def stop(self) -> None:
        for p in self.procs:
            stop(p)
        if self.redis is not None:
            self.redis.cleanup()


class Java(Server):
    def __init__(self, root: Path) -> None:
        from benchmarks.peers import Java as PeersJava

        self.kind = "java"
        self.java = PeersJava(root)
        self.name = self.java.name
        self.ports = [self.java.port]
        self.pids = [self.java.pid]

    def stop(self) -> None:
        self.java.stop()


def java_available() -> bool:
    from tests.interop import rocketmq as rmq

    return shutil.which("java") is not None and (rmq.JAVA_DIR / "server5" / "target" / "classpath.txt").is_file()


def start_server(kind: str, tmp: Path, env: dict[str, Any], redis_profile: bool = False) -> Server:
    if kind == "java":
        return Java(tmp / f"java-{time.monotonic_ns()}")
    return Ours(int(kind[-1]), env, redis_profile)


async def seed(ports: list[int]) -> Conn:
    """The seed broker, on a connection kept open for the run (a closed one would drop it)."""
    conn = await connect(ports[0])
    fut = conn.expect(1)
    assert conn.transport is not None
    conn.transport.write(seed_frame())
    reply = await asyncio.wait_for(fut, 60)
    if reply.code != 0:
        raise RuntimeError(f"the seed registration answered {reply.code}: {reply.remark}")
    return conn


# ---------------------------------------------------------------------------- one (case, server)

def run_one(kind: str, fleet: Fleet, tmp: Path, rate: int, env: dict[str, Any], redis_profile: bool = False) -> dict:
    load_before = os.getloadavg()
    server = start_server(kind, tmp, env, redis_profile)
    try:
        ctx = multiprocessing.get_context("spawn")
        started, stop_flag, out = ctx.Event(), ctx.Event(), ctx.Queue()

        async def go() -> dict:
            seed_conn = await seed(server.ports)
            proc = ctx.Process(target=reader, args=(server.ports, fleet, rate, started, stop_flag, out))
            proc.start()
            try:
                while not started.is_set():
                    await asyncio.sleep(0.05)
                await asyncio.sleep(0.5)
                if isinstance(server, Ours):
                    server.slowlog_reset()
                cpu0, redis0 = server.cpu(), server.redis_cpu()
                res = await storm(fleet, server.ports)
                res["server_cpu_s"] = round(server.cpu() - cpu0, 2)
                if server.redis is not None:  # of which redis-server's (the rest: the workers')
                    res["redis_cpu_s"] = round(server.redis_cpu() - redis0, 2)
            finally:
                stop_flag.set()
            rows = out.get(timeout=120)
            proc.join(30)
            every = [r for p in server.ports for r in rows[p]]
            res["reads"] = read_summary(every)
            storm_end = res.pop("t0") + (res["answered_s"] or 0)
            res["reads_during_storm"] = read_summary([r for r in every if r[3] <= storm_end])
            res["reads_per_worker"] = [read_summary(rows[p]) for p in server.ports]
            if seed_conn.transport is not None:
                seed_conn.transport.close()
            return res

        res = asyncio.run(go())
        if isinstance(server, Ours):
            res.update(server.slowlog())
            res["workers"] = server.metrics()
    finally:
        server.stop()
    return {"server": server.name, "kind": kind, "case": fleet.name, "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()], **res}


# ---------------------------------------------------------------------------- report

def markdown(doc: dict) -> str:
    runs = doc["runs"]
    kinds = [k for k in SERVERS if any(r["kind"] == k for r in runs)]
    names = {r["kind"]: r["server"] for r in runs}
    cases = list(dict.fromkeys(r["case"] for r in runs))
    by = {(r["case"], r["kind"]): r for r in runs}
    lines = [f"Measured {doc['date']} on {doc['machine']['summary']}, git {doc['git']['sha'][:10]}"
             f"{' (dirty tree)' if doc['git']['dirty'] else ''}, `python -m benchmarks.storm{doc['argv']}`. N "
             f"brokers × M topics each, 10 clusters, every broker on its own connection, all frames written at once; "
             f"refused = non-SUCCESS + closed + no reply within 24 s; acked = the last SUCCESS; all routed = every "
             f"topic's route listing every broker of its cluster on every worker (verified from the last ack); "
             f"route reads from t = 0 to all routed; CPU = the server's (ours: workers + redis-server, Redis's part "
             f"in brackets) over the run; "
             f"load = the host's 1-minute load average as the run began (2 cores).", "",
             "| N × M | server | refused | acked s | all routed s | route reads p50 / p99 / max ms (errors) "
             "| longest Redis ms (> 20 ms) | CPU s | load |",
             "|---|---|---|---|---|---|---|---|---|"]
    for case in cases:
        for k in kinds:
            r = by.get((case, k))
            if r is None:
                continue
            if r.get("error"):
                lines.append(f"| {case} | {names[k]} | failed: {r['error'][:100]} | | | | | | |")
                continue
            refused = str(r["refused"])
            if r["refused"]:
                why = [f"{n}× code {c}" for c, n in r["refused_codes"].items()]
                why += [f"{r[x]} {x}" for x in ("closed", "unanswered", "late") if r[x]]
                refused = f"**{r['refused']}** ({', '.join(why)})"
            reads = r["reads"]
            err = sum(reads["errors"].values())
            redis = (f"{r['redis_longest_ms']:.1f} ({r['redis_over_20ms']})" if "redis_longest_ms" in r else "—")
            cpu = f"{r['server_cpu_s']} ({r['redis_cpu_s']})" if "redis_cpu_s" in r else str(r["server_cpu_s"])
            lines.append(f"| {case} | {names[k]} | {refused} | {r['acked_s']} | {r['routed_s']} | "
                         f"{reads['p50_ms']} / {reads['p99_ms']} / {reads['max_ms']}"
                         f"{f' ({err})' if err else ''} | {redis} | {cpu} | {r['load_before'][0]} |")
    return "\n".join(lines) + "\n"


def plot(doc: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [r for r in doc["runs"] if not r.get("error") and r.get("routed_s") is not None]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, fixed, var, label in ((axes[0], ("topics", 200), "brokers", "N brokers (M = 200 topics each)"),
                                  (axes[1], ("brokers", 100), "topics", "M topics per broker (N = 100 brokers)")):
        for i, kind in enumerate(SERVERS):
            pts = sorted((r[var], r["acked_s"], r["routed_s"]) for r in runs
                         if r["kind"] == kind and r[fixed[0]] == fixed[1])
            if len(pts) > 1:
                name = next(r["server"] for r in runs if r["kind"] == kind)
                color = f"C{i}"
                ax.plot([p[0] for p in pts], [p[2] for p in pts], marker="o", color=color, label=f"{name}: all routed")
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", linestyle="--", color=color,
                        label=f"{name}: all acked")
        ax.set_xlabel(label)
        ax.set_ylabel("seconds from the storm's start")
        ax.set_xscale("log")
        xs = sorted({r[var] for r in runs if r[fixed[0]] == fixed[1]})
        ax.set_xticks(xs, [str(x) for x in xs])
        ax.minorticks_off()
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Cold start of a fleet: time until all routed")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="the three issue-40 cases, no growth series")
    g.add_argument("--tiny", action="store_true", help="seconds: the smoke test")
    p.add_argument("--cases", help="comma-separated NxM (default: the issue's three and the growth series)")
    p.add_argument("--servers", default=",".join(SERVERS), help="java, ours1, ours2 (comma-separated)")
    p.add_argument("--rate", type=int, default=200, help="route reads a second per worker during the storm")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="a NAMESRV_ setting for our workers, without the prefix (e.g. redis_bulk_concurrency=8)")
    p.add_argument("--redis-profile", action="store_true",
                   help="log every Redis command (SLOWLOG at 0 µs) and report Redis time per script in the JSON")
    p.add_argument("--out", default=str(ROOT / "results"))
    args = p.parse_args(argv if argv is not None else sys.argv[1:])
    if args.cases:
        cases = args.cases.split(",")
    elif args.tiny:
        cases = TINY
    elif args.quick:
        cases = MAIN
    else:
        cases = MAIN + GROWTH_N + GROWTH_M
    kinds = [k for k in args.servers.split(",") if k]
    notes = []
    if "java" in kinds and not java_available():
        kinds.remove("java")
        notes.append("Apache's Java NameServer skipped: build tests/interop/java first "
                     "(mvn -B -q -f tests/interop/java/pom.xml package)")
    env = dict(e.split("=", 1) for e in args.env)
    tmp = Path(tempfile.mkdtemp(prefix="nsrv-storm-"))
    runs = []
    try:
        for i, case in enumerate(cases):
            n, m = (int(x) for x in case.split("x"))
            fleet = Fleet(n, m)
            for kind in kinds if i % 2 == 0 else kinds[::-1]:
                print(f"storm {case} on {kind} ...", file=sys.stderr, flush=True)
                try:
                    r = run_one(kind, fleet, tmp, args.rate, env, args.redis_profile)
                except Exception as exc:  # noqa: BLE001 - the other runs still count
                    r = {"kind": kind, "case": case, "server": kind, "error": repr(exc),
                         "load_before": list(os.getloadavg())}
                print(f"  {orjson.dumps({k: v for k, v in r.items() if k != 'reads_per_worker'}).decode()}",
                      file=sys.stderr, flush=True)
                runs.append(r)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    shown = " " + " ".join(argv if argv is not None else sys.argv[1:])
    doc = {"benchmark": "storm", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "git": git_info(),
           "machine": machine_info(), "argv": shown.rstrip(), "cases": cases, "servers": kinds, "rate": args.rate,
           "env": env, "notes": notes, "runs": runs}
    name = "storm" if not (args.tiny or args.quick or args.cases) else "storm-quick" if args.quick else "storm"
    base = write_results(Path(args.out), name if not args.cases else "storm-custom", doc, markdown(doc), args.tiny)
    if not args.tiny and any(r.get("routed_s") for r in runs):
        plot(doc, base.with_suffix(".png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
