"""A day in the life of a fleet (issue 40 item 4): brokers re-registering, some changing their topics, a rolling
restart, a set of brokers dying and expiring, clients reading routes and an admin reading cluster info and topic
lists, all time-compressed but with the frames stock 5.x brokers and clients send, replayed against Apache's Java
NameServer 5.5.0 and ours (1 and 2 workers on one real redis-server), one server at a time, the same schedule.

    python -m benchmarks.fleet                  # 10 000 brokers x 100 topics, 50 000 clients, 20 simulated minutes
    python -m benchmarks.fleet --quick          # 2 000 brokers, 10 000 clients, 10 minutes
    python -m benchmarks.fleet --tiny           # the smoke test's size (tests/integration/test_bench_smoke.py)
    knobs: --brokers N --topics M --clients C --minutes S --period SECONDS --servers java,1,2 --out DIR

Time runs `30 / --period` times faster than the fleet's: a 30 s registration period takes --period real seconds
(6 s at the full size, 3 s with --quick). Every period of the model is scaled alike, on both servers the same
way: the brokers' timeout (REGISTER_BROKER's heartbeatTimeoutMillis: 120 s, 10 s for brokers with
enableSlaveActingMaster) and the expiry scan (Java's scanNotActiveBrokerInterval, ours NAMESRV_SCAN_INTERVAL_MS:
5 s); ours also flushes heartbeats (NAMESRV_HEARTBEAT_FLUSH_MS) at the scaled 1 s. Timeouts are kept at 2 s at
least (1 s with --tiny): a busy 2-core machine stalls processes that long.

The load is replayed by benchmarks/fleetload.c (one thread, epoll, compiled here) from frames and a schedule built
here; it reports per request type and period the requests, replies by code and latency, and its own CPU. A sampler
reads each server's CPU and memory (ours: the workers and the redis-server apart, with Redis's used_memory) every
half period, and a probe times the dead brokers' disappearance from their topics' routes. Writes fleet.json,
fleet.md and fleet.png (method: benchmarks/README.md, "A day in the life of a fleet").
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import broker_frames as bf
from benchmarks.harness import percentile, run_header, write_results
from benchmarks.http_bench import cpu_seconds
from benchmarks.peers import Java, Ours, Server, connect, java_live_heap_mb, reply, rss_mb
from service.remoting.codec import RemotingCommand, encode

SIM_PERIOD = 30.0  # a stock broker registers every 30 s (registerNameServerPeriod); clients poll routes as often
TYPES = ("register, same bytes", "register, changed", "register, first", "unregister", "heartbeat (oneway)",
         "route read", "cluster info", "topic list")
REG, CHANGED, FIRST, UNREG, HEARTBEAT, READ, CLUSTER_INFO, TOPIC_LIST = range(len(TYPES))
OP_SEND, OP_CONNECT, OP_CLOSE, OP_ONEWAY = range(4)
OPAQUE = 1_000_000_000  # ten digits: fleetload writes each request's own opaque over them
RECORD = struct.Struct("<dddIIBBH")
HERE = Path(__file__).resolve().parent

SIZES = {
    "full": dict(brokers=10_000, topics=100, cluster_size=10, clients=50_000, minutes=20, period=6.0),
    "quick": dict(brokers=2_000, topics=100, cluster_size=10, clients=10_000, minutes=10, period=3.0),
    "tiny": dict(brokers=40, topics=10, cluster_size=4, clients=200, minutes=8, period=0.25, clients_per_conn=20,
                 min_timeout_ms=1000),
}


@dataclass
class Plan:
    """The fleet and its day, in simulated seconds; `real()` turns them into seconds of the run.

    Before the day, a warm-up at the same speed: the brokers come up (first registrations spread at most
    `ramp_rate` a real second), then the clients (each distinct topic a cache miss on each worker of ours at
    first: at most `client_ramp_rate` new topics a real second). The day itself is `minutes` long."""

    brokers: int = 10_000
    topics: int = 100  # per broker; every broker of a cluster serves its cluster's topics
    cluster_size: int = 10
    clients: int = 50_000
    client_topics: int = 2  # routes each client reads every period
    clients_per_conn: int = 100  # logical clients multiplexed on one socket (one client process)
    minutes: int = 20  # the day: simulated minutes after the warm-up
    period: float = 6.0  # real seconds per simulated 30 s
    ramp_rate: float = 400.0  # first registrations a real second in the warm-up, at most
    client_ramp_rate: float = 400.0  # distinct topics first read a real second in the warm-up, at most
    acting_every: int = 10  # every 10th broker runs with enableSlaveActingMaster: BROKER_HEARTBEAT every 1 s
    change_per_minute: float = 0.01  # share of brokers whose topic table changes each simulated minute
    restart_share: float = 0.10  # rolling restart midway: unregister, close, reconnect, first registration (0: none)
    restart_down_s: float = 10.0  # how long a restarted broker is away
    die_share: float = 0.01  # brokers that go silent at once, connections left open, until expiry removes them (0:
    # none; at least one broker otherwise)
    admin_info_every_s: float = 10.0  # GET_BROKER_CLUSTER_INFO, as a dashboard polls it
    admin_topics_every_s: float = 60.0  # GET_ALL_TOPIC_LIST_FROM_NAMESERVER
    min_timeout_ms: int = 2000  # a compressed timeout is never shorter (a busy 2-core machine stalls processes)
    seed: int = 40

    @property
    def scale(self) -> float:
        return self.period / SIM_PERIOD

    def real(self, sim_s: float) -> float:
        return sim_s * self.scale

    def _whole_minutes(self, real_s: float) -> float:
        return 60.0 * max(1, math.ceil(real_s / self.scale / 60))

    @property
    def ramp_s(self) -> float:
        """The brokers' warm-up: whole simulated minutes."""
        return self._whole_minutes(self.brokers / self.ramp_rate)

    @property
    def day_s(self) -> float:
        """When the day starts: after the clients' warm-up."""
        return self.ramp_s + self._whole_minutes(self.clusters * self.topics / self.client_ramp_rate)

    @property
    def end_s(self) -> float:
        return self.day_s + self.minutes * 60

    @property
    def restart_window(self) -> tuple[float, float]:
        start = self.day_s + self.minutes * 60 / 2
        return start, start + max(30.0, self.minutes * 6.0)

    @property
    def death_s(self) -> float:
        return self.restart_window[1] + 30

    @property
    def timeout_ms(self) -> int:
        return max(self.min_timeout_ms, round(120_000 * self.scale))

    @property
    def acting_timeout_ms(self) -> int:
        return max(self.min_timeout_ms, round(10_000 * self.scale))

    @property
    def expiry_due_s(self) -> float:
        """When the dead brokers are due to expire (simulated): their timeout after the death."""
        return self.death_s + self.timeout_ms / 1000 / self.scale

    @property
    def client_window(self) -> int:
        """Route reads in flight on one client socket: one (a client's calls are synchronous) per real-time lane."""
        return max(1, round(SIM_PERIOD / self.period))

    @property
    def request_timeouts(self) -> list[float]:
        """Real seconds a client waits for each request type before it gives up (TYPES order): a broker's calls
        registerBrokerTimeoutMills (24 s), scaled like the period it lives by, at least 3 s; a client's route read
        mqClientApiTimeout (3 s) and an admin's call (10 s) as they are: they wait for a server, not a period."""
        broker = max(3.0, 24.0 * self.scale)
        return [broker, broker, broker, broker, 0.0, 3.0, 10.0, 10.0]

    @property
    def scan_ms(self) -> int:
        return max(100, round(5_000 * self.scale))

    @property
    def heartbeat_flush_ms(self) -> int:
        return max(10, round(1_000 * self.scale))

    @property
    def clusters(self) -> int:
        return math.ceil(self.brokers / self.cluster_size)

    @property
    def intervals(self) -> int:
        return round(self.end_s / SIM_PERIOD)

    def check(self) -> None:
        if self.die_share and self.expiry_due_s + 20 > self.end_s:
            raise SystemExit(f"--minutes {self.minutes}: too short for the rolling restart, the death and the "
                             f"expiry {self.expiry_due_s - self.death_s:.0f} s later")
        if self.brokers < self.cluster_size or self.clients < 1:
            raise SystemExit("at least one cluster of brokers and one client")


# ---------------------------------------------------------------------------- the fleet's frames

def broker_name(b: int) -> str:
    return f"fb{b:05d}"


def broker_addr(b: int) -> str:
    return f"10.{40 + (b >> 16)}.{(b >> 8) & 255}.{b & 255}:10911"


def cluster_name(c: int) -> str:
    return f"FleetC{c:04d}"


def topic_name(c: int, j: int) -> str:
    return f"C{c:04d}T{j:03d}"


def command(code: int, ext: dict[str, Any], body: bytes = b"", oneway: bool = False) -> bytes:
    return encode(RemotingCommand(code=code, version=bf.VERSION, opaque=OPAQUE, flag=2 if oneway else 0,
                                  ext_fields={k: str(v).lower() if isinstance(v, bool) else str(v)
                                              for k, v in ext.items()}, body=body))


class Frames:
    """The frames file fleetload reads, written as frames are first needed; an index per frame."""

    def __init__(self, path: Path) -> None:
        self.fh = open(path, "wb")  # noqa: SIM115 - closed by close()
        self.count = 0
        self.bytes = 0
        self.ids: dict[Any, int] = {}

    def add(self, key: Any, build: Any) -> int:
        if key not in self.ids:
            data = build()
            self.fh.write(data)
            self.bytes += len(data)
            self.ids[key] = self.count
            self.count += 1
        return self.ids[key]

    def close(self) -> None:
        self.fh.close()


def registration(plan: Plan, b: int, version: int) -> bytes:
    """Broker b's REGISTER_BROKER after `version` topic changes: each change moved one more topic's queue count
    (8 <-> 16) and the data version; plain JSON, as 5.x sends it by default (compressedRegister=false)."""
    c = b // plan.cluster_size
    m = plan.topics
    topics = {topic_name(c, j): 8 if ((version - j + m - 1) // m if version > j else 0) % 2 == 0 else 16
              for j in range(m)}
    body = bf.register_body(topics, 1 + version)
    acting = b % plan.acting_every == 0
    ext = bf.register_header(cluster_name(c), broker_name(b), broker_addr(b), "plain", body,
                             plan.acting_timeout_ms if acting else plan.timeout_ms)
    if acting:
        ext["enableActingMaster"] = True
    return command(bf.REGISTER_BROKER, ext, body)


def heartbeat(plan: Plan, b: int) -> bytes:
    c = b // plan.cluster_size
    return command(904, {"clusterName": cluster_name(c), "brokerAddr": broker_addr(b), "brokerName": broker_name(b),
                         "brokerId": 0}, oneway=True)


def unregistration(plan: Plan, b: int) -> bytes:
    return command(bf.UNREGISTER_BROKER, bf.unregister_header(cluster_name(b // plan.cluster_size), broker_name(b),
                                                              broker_addr(b)))


# ---------------------------------------------------------------------------- the day's schedule

@dataclass
class Schedule:
    records: list[tuple] = field(default_factory=list)
    restarted: list[int] = field(default_factory=list)
    dying: list[int] = field(default_factory=list)
    changes: int = 0
    connections: dict[str, int] = field(default_factory=dict)

    def add(self, plan: Plan, op: int, conn: int, start_s: float, frame: int = 0, kind: int = 0,
            period_s: float = 0.0, end_s: float | None = None) -> None:
        """One record, times given in simulated seconds (a repeated send that would end before it starts is none)."""
        if end_s is not None and start_s >= end_s:
            return
        start = plan.real(start_s)
        end = plan.real(end_s) if end_s is not None else start + 1
        self.records.append((start, plan.real(period_s), end, conn, frame, kind, op, 0))

    def connect(self, plan: Plan, conn: int, start_s: float, window: int, waiting: int) -> None:
        """A connection opened: at most `window` requests in flight on it (a stock client waits for each
        synchronous call), `waiting` due requests queued behind them (more are not made)."""
        self.records.append((plan.real(start_s), 0.0, plan.real(start_s) + 1, conn, window, 0, OP_CONNECT, waiting))


def build(plan: Plan, frames: Frames) -> Schedule:
    """Every connection's life: brokers (ramp, periodic registrations, heartbeats, changes, restart or death),
    clients (a route read per topic and period), the admin reads."""
    rnd = random.Random(plan.seed)
    sched = Schedule()
    n, period = plan.brokers, SIM_PERIOD
    restart_from, restart_to = plan.restart_window
    by_cluster = [list(range(c * plan.cluster_size, min(n, (c + 1) * plan.cluster_size)))
                  for c in range(plan.clusters)]
    # the restarted: the middle broker of each cluster (10 % with clusters of 10), in cluster order; the dying: the
    # second broker (not one with enableSlaveActingMaster: those are the first of ten) of clusters spread over the
    # fleet, as a rack going dark
    sched.restarted = [b for b in range(n) if b % plan.cluster_size == plan.cluster_size // 2][
        : round(n * plan.restart_share)]
    die_n = max(1, round(n * plan.die_share)) if plan.die_share else 0
    step = max(1, plan.clusters // max(1, die_n))
    sched.dying = [by_cluster[c][1 % len(by_cluster[c])] for c in range(0, plan.clusters, step)][:die_n]
    restarts = {b: restart_from + i * (restart_to - restart_from) / max(1, len(sched.restarted))
                for i, b in enumerate(sched.restarted)}
    dying = set(sched.dying)
    steady = [b for b in range(n) if b not in dying and b not in restarts]
    changes: dict[int, list[float]] = {}
    for minute in range(plan.minutes):
        lo = plan.day_s + minute * 60
        for b in rnd.sample(steady, min(len(steady), max(1, round(n * plan.change_per_minute)))):
            changes.setdefault(b, []).append(lo + rnd.random() * 60)
    sched.changes = sum(len(v) for v in changes.values())

    next_conn = n
    for b in range(n):
        conn = b
        start = plan.ramp_s * b / n
        events = sorted([(t, "change") for t in changes.get(b, [])] +
                        ([(restarts[b], "restart")] if b in restarts else []) +
                        ([(plan.death_s, "death")] if b in dying else []))
        acting = b % plan.acting_every == 0
        hb = frames.add(("hb", b), lambda b=b: heartbeat(plan, b)) if acting else 0
        version = 0
        sched.connect(plan, conn, start, 1, 1)  # a broker's registrations and unregistration are synchronous
        sched.add(plan, OP_SEND, conn, start + 1e-6, frames.add(("reg", b, 0), lambda b=b: registration(plan, b, 0)),
                  FIRST)
        phase, cursor, until = start, start, plan.end_s
        for t, what in [*events, (plan.end_s, "end")]:
            tick = phase + (math.floor((cursor - phase) / period) + 1) * period
            if tick < t:
                sched.add(plan, OP_SEND, conn, tick, frames.add(("reg", b, version),
                                                                lambda b=b, v=version: registration(plan, b, v)),
                          REG, period, t)
            if acting:
                sched.add(plan, OP_ONEWAY, conn, cursor + 1, hb, HEARTBEAT, 1.0, t)
            if what == "change":
                version += 1
                sched.add(plan, OP_SEND, conn, t, frames.add(("reg", b, version),
                                                             lambda b=b, v=version: registration(plan, b, v)), CHANGED)
                cursor = t
            elif what == "restart":
                sched.add(plan, OP_SEND, conn, t, frames.add(("unreg", b), lambda b=b: unregistration(plan, b)), UNREG)
                sched.add(plan, OP_CLOSE, conn, t + 1e-6)
                conn, next_conn = next_conn, next_conn + 1
                up = t + plan.restart_down_s
                sched.connect(plan, conn, up, 1, 1)
                sched.add(plan, OP_SEND, conn, up + 1e-6, frames.add(("reg", b, version),
                                                                      lambda b=b, v=version: registration(plan, b, v)),
                          FIRST)
                phase = cursor = up
            elif what == "death":
                break  # silent from now on: no registration, no heartbeat, the connection left open
            if t >= until:
                break
    sched.connections["brokers"] = next_conn

    # clients: each reads the routes of its topics once a period, at its own phase; a socket per process
    # the clients come up one after another over the clients' warm-up: client i first reads at its start, then
    # every period; 1/clients_per_conn of them per socket
    sockets = math.ceil(plan.clients / plan.clients_per_conn)
    base = next_conn
    for s in range(sockets):
        # one client process: its MQClientInstance refreshes routes one synchronous call after another; with time
        # running 30/period times faster, as many calls in flight keep each one's pace a real client's (the calls
        # wait for a server, whose latency is not compressed)
        sched.connect(plan, base + s, plan.ramp_s - period / 4, plan.client_window,
                      plan.clients_per_conn * plan.client_topics)
    all_topics = plan.clusters * plan.topics
    warm = plan.day_s - plan.ramp_s
    for i in range(plan.clients):
        first = plan.ramp_s + warm * i / plan.clients
        for t in rnd.sample(range(all_topics), min(plan.client_topics, all_topics)):
            c, j = divmod(t, plan.topics)
            f = frames.add(("read", t), lambda c=c, j=j: command(bf.GET_ROUTEINFO_BY_TOPIC,
                                                                 {"topic": topic_name(c, j)}))
            sched.add(plan, OP_SEND, base + i % sockets, first + rnd.random() * period, f, READ, period, plan.end_s)
    sched.connections["client sockets"] = sockets
    admin = base + sockets
    sched.connect(plan, admin, plan.ramp_s - period / 4, 1, 2)
    sched.add(plan, OP_SEND, admin, plan.ramp_s + 1, frames.add("info", lambda: command(106, {})), CLUSTER_INFO,
              plan.admin_info_every_s, plan.end_s)
    sched.add(plan, OP_SEND, admin, plan.ramp_s + 5, frames.add("topics", lambda: command(206, {})), TOPIC_LIST,
              plan.admin_topics_every_s, plan.end_s)
    sched.connections["admin"] = 1
    return sched


def write_schedule(path: Path, sched: Schedule) -> None:
    with open(path, "wb") as fh:
        fh.write(b"".join(RECORD.pack(*r) for r in sched.records))


def build_loader(tmp: Path) -> str:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise RuntimeError("a C compiler is needed for benchmarks/fleetload.c: apt-get install -y gcc")
    exe = str(tmp / "fleetload")
    subprocess.run([cc, "-O2", "-o", exe, str(HERE / "fleetload.c")], check=True)
    return exe


@dataclass
class Load:
    """The load tool compiled and the fleet's frames and schedule written, in `tmp`: what `start_loader` replays."""

    exe: str
    frames: Frames
    sched: Schedule
    frames_path: Path
    sched_path: Path


def prepare(plan: Plan, tmp: Path, who: str = "fleet") -> Load:
    """Compile fleetload and build the fleet's frames and its schedule (benchmarks.fleet and stall_bench's --fleet)."""
    exe = build_loader(tmp)
    frames = Frames(tmp / "fleet.frames")
    t = time.monotonic()
    sched = build(plan, frames)
    frames.close()
    write_schedule(tmp / "fleet.schedule", sched)
    print(f"{who}: {len(sched.records):,} schedule records, {frames.count:,} frames "
          f"({frames.bytes / 2**20:.0f} MB) built in {time.monotonic() - t:.1f} s", flush=True)
    return Load(exe, frames, sched, tmp / "fleet.frames", tmp / "fleet.schedule")


def start_loader(load: Load, plan: Plan, ports: list[int], t0: float, interval_s: float, intervals: int,
                 drain: float) -> subprocess.Popen:
    """fleetload replaying the schedule from `t0` (time.monotonic()) against the native doors on `ports` (its
    connections spread over them), reporting per interval of `interval_s` real seconds; it prints its JSON at the
    end (after the schedule, or at SIGUSR1, and at most `drain` seconds of replies)."""
    return subprocess.Popen([load.exe, "127.0.0.1", ",".join(map(str, ports)), str(load.frames_path),
                             str(load.sched_path), f"{t0:.6f}", f"{interval_s:g}", str(intervals), str(len(TYPES)),
                             str(drain), ",".join(f"{x:g}" for x in plan.request_timeouts)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def load_errors(load: dict) -> dict[str, dict[str, int]]:
    """fleetload's failures per request type: replies other than SUCCESS by code, and the requests given up, left
    unanswered or not made."""
    errors: dict[str, dict[str, int]] = {}
    for name, t in zip(TYPES, load["types"], strict=True):
        bad = {f"code {c}": n for c, n in t["codes"].items() if c != "0"}
        for key in ("no_reply", "no_reply_dropped", "skipped", "timed_out", "late", "window_skipped"):
            if t[key]:
                bad[key.replace("_", " ")] = t[key]
        if bad:
            errors[name] = bad
    return errors


# ---------------------------------------------------------------------------- watching a server during the day

class Sampler(threading.Thread):
    """CPU seconds and RSS of the server (ours: workers and redis-server apart, and Redis's INFO memory) and of
    the load tool, every half period on the run's clock."""

    def __init__(self, server: Server, t0: float, step: float, count: int) -> None:
        super().__init__(daemon=True)
        self.server, self.t0, self.step, self.count = server, t0, step, count
        self.loader_pid: int | None = None
        self.samples: list[dict[str, float | None]] = []
        self.stopping = threading.Event()
        self.redis = None
        if getattr(server, "redis", None) is not None:
            import redis

            self.redis = redis.Redis.from_url(server.redis.url)

    def sample(self) -> dict[str, float | None]:
        own, red = self.server.cpu()
        s: dict[str, float | None] = {
            "t": time.monotonic() - self.t0, "cpu_s": own, "redis_cpu_s": red if self.server.redis_pid else None,
            "rss_mb": rss_mb(self.server.pid),
            "redis_rss_mb": rss_mb(self.server.redis_pid) if self.server.redis_pid else None,
            "loader_cpu_s": cpu_seconds(self.loader_pid) if self.loader_pid else None}
        if self.redis is not None:
            try:
                mem = self.redis.info("memory")
                s["redis_used_mb"] = mem["used_memory"] / 2**20
            except Exception:  # noqa: BLE001 - a sample without it
                s["redis_used_mb"] = None
        return s

    def run(self) -> None:
        for i in range(self.count + 1):
            wait = self.t0 + i * self.step - time.monotonic()
            if wait > 0 and self.stopping.wait(wait):
                return
            self.samples.append(self.sample())


class Probe(threading.Thread):
    """From the death on, reads routes of the dead brokers' topics every simulated second on a connection of its
    own and notes when each dead broker is gone from them; 15 simulated seconds before the end (the fleet's
    connections still open: closing them unregisters), counts the brokers GET_BROKER_CLUSTER_INFO lists."""

    def __init__(self, server: Server, plan: Plan, dying: list[int], t0: float) -> None:
        super().__init__(daemon=True)
        self.server, self.plan, self.t0 = server, plan, t0
        self.watched = dying[:3]
        self.gone: dict[str, float] = {}
        self.listed: int | None = None
        self.capacity: dict | None = None
        self.error = ""
        self.stopping = threading.Event()

    def wait_until(self, sim_s: float) -> bool:
        return not self.stopping.wait(max(0.0, self.t0 + self.plan.real(sim_s) - time.monotonic()))

    def run(self) -> None:
        every = max(0.02, self.plan.real(1.0))
        try:
            if not self.wait_until(self.plan.death_s):
                return
            with connect(self.server.port) as sock:
                while len(self.gone) < len(self.watched) and not self.stopping.is_set():
                    for b in self.watched:
                        name = broker_name(b)
                        if name in self.gone:
                            continue
                        topic = topic_name(b // self.plan.cluster_size, 0)
                        code, body = reply(sock, command(bf.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
                        if code == 17 or code == 0 and f'"brokerName":"{name}"'.encode() not in body:
                            self.gone[name] = (time.monotonic() - self.t0) / self.plan.scale
                    self.stopping.wait(every)
                if self.wait_until(self.plan.end_s - 15):
                    code, body = reply(sock, command(106, {}))
                    self.listed = body.count(b'"brokerAddrs"') if code == 0 else -code
                    self.capacity = capacity_report(self.server)
        except OSError as exc:
            self.error = repr(exc)


def capacity_report(server: Server) -> dict | None:
    """Ours: what `namesrv admin capacity` says of the fleet (GET /v1/capacity), and how long it took."""
    port = getattr(server, "http_port", None)
    if port is None:
        return None
    import urllib.request

    t = time.perf_counter()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/capacity", timeout=30) as resp:
        doc = json.loads(resp.read())
    doc["took_ms"] = round((time.perf_counter() - t) * 1000, 1)
    return doc


def slow_commands(server: Server) -> dict[str, Any] | None:
    """Redis commands of 10 ms or more during the run (the slow log is set at the start): how many, over 20 ms,
    the longest, and the commands they were (a script by the first key it names). The slow log times wall clock:
    on a busy machine a command whose process waits for a CPU is counted as long."""
    if getattr(server, "redis", None) is None:
        return None
    import redis

    r = redis.Redis.from_url(server.redis.url)
    entries = r.slowlog_get(1000)
    durations = sorted((e["duration"] / 1000 for e in entries), reverse=True)
    kinds: dict[str, int] = {}
    for e in entries:
        args = e["command"].decode(errors="replace").split(" ")
        name = args[0].upper()
        if name == "EVALSHA" and len(args) > 3:
            name = "script on " + args[3].split("}:", 1)[-1].split(":", 1)[0]
        kinds[name] = kinds.get(name, 0) + 1
    return {"over_10ms": len(durations), "over_20ms": sum(d > 20 for d in durations),
            "longest_ms": round(durations[0], 1) if durations else 0.0, "commands": kinds}


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# ---------------------------------------------------------------------------- one server's day

def start_server(kind: str, plan: Plan, tmp: Path) -> Server:
    if kind == "java":
        return Java(tmp / "java", scanNotActiveBrokerInterval=plan.scan_ms)
    server = Ours(int(kind), scan_interval_ms=plan.scan_ms, scan_first_delay_ms=plan.scan_ms,
                  heartbeat_flush_ms=plan.heartbeat_flush_ms)
    import redis

    r = redis.Redis.from_url(server.redis.url)
    r.config_set("slowlog-log-slower-than", 10_000)
    r.config_set("slowlog-max-len", 1000)
    r.slowlog_reset()
    return server


def wait_quiet(limit: float, longest_s: float = 1800) -> float:
    """Wait (at most `longest_s`) until the 1-minute load average is below `limit`; the seconds waited."""
    started = time.monotonic()
    while os.getloadavg()[0] >= limit and time.monotonic() - started < longest_s:
        time.sleep(5)
    return time.monotonic() - started


def day(load: Load, kind: str, plan: Plan, tmp: Path, quiet: float | None = None) -> dict:
    waited = wait_quiet(quiet) if quiet else 0.0
    load_before = load_average()
    server = start_server(kind, plan, tmp)
    try:
        lead = 1.0
        t0 = time.monotonic() + lead
        intervals = plan.intervals
        sampler = Sampler(server, t0, plan.period / 2, intervals * 2)
        probe = Probe(server, plan, load.sched.dying, t0)
        sampler.start()
        probe.start()
        drain = max(5.0, plan.period * 2)
        proc = start_loader(load, plan, [server.port], t0, plan.period, intervals, drain)
        sampler.loader_pid = proc.pid
        try:
            out, err = proc.communicate(timeout=plan.real(plan.end_s) + drain + 600)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if proc.returncode == 0:
            sampler.join(max(0.0, t0 + plan.real(plan.end_s) - time.monotonic()) + 2)  # its last sample: the end
        sampler.stopping.set()
        probe.stopping.set()
        sampler.join(10)
        probe.join(10)
        if proc.returncode:
            raise RuntimeError(f"fleetload exited {proc.returncode}: {err.strip()[-400:]}")
        replayed = json.loads(out)
        live_heap = java_live_heap_mb(server.pid) if isinstance(server, Java) else None
        slow = slow_commands(server)
        result = {"server": server.name, "kind": kind, "note": server.note, "load": replayed,
                  "samples": sampler.samples, "expiry": {"gone_at_s": probe.gone, "error": probe.error,
                                                         "watched": len(probe.watched)},
                  "brokers_listed_at_end": probe.listed,
                  "capacity": probe.capacity, "java_live_heap_mb": live_heap, "redis_slow": slow,
                  "load_average_before": load_before, "load_average_after": load_average(),
                  "waited_for_quiet_s": round(waited)}
    finally:
        server.stop()
    return summarize(result, plan, load.sched)


def summarize(res: dict, plan: Plan, sched: Schedule) -> dict:
    """Per simulated minute: CPU seconds (server, its Redis, the load tool), memory; per type: totals, errors."""
    samples = res["samples"]
    per_minute = []
    for m in range(round(plan.end_s / 60)):
        a, b = 4 * m, 4 * (m + 1)
        if b >= len(samples):
            break
        sa, sb = samples[a], samples[b]
        row = {"minute": m, "cpu_s": round(sb["cpu_s"] - sa["cpu_s"], 3),
               "redis_cpu_s": round(sb["redis_cpu_s"] - sa["redis_cpu_s"], 3) if sa["redis_cpu_s"] is not None
               else None,
               "loader_cpu_s": round((sb["loader_cpu_s"] or 0) - (sa["loader_cpu_s"] or 0), 3),
               "rss_mb": round(max(s["rss_mb"] for s in samples[a:b + 1]), 1)}
        if sa.get("redis_used_mb") is not None:
            row["redis_rss_mb"] = round(max(s["redis_rss_mb"] or 0 for s in samples[a:b + 1]), 1)
            row["redis_used_mb"] = round(max(s["redis_used_mb"] or 0 for s in samples[a:b + 1]), 1)
        per_minute.append(row)
    res["per_minute"] = per_minute
    day = round(plan.day_s / 60)
    restart = {m for m in range(round(plan.end_s / 60))
               if plan.restart_window[0] < (m + 1) * 60 and m * 60 < plan.restart_window[1]}
    expiry_min = int(plan.expiry_due_s // 60)
    steady = [r for r in per_minute if r["minute"] >= day and r["minute"] not in restart
              and r["minute"] not in (expiry_min, expiry_min + 1)]

    def total(r: dict) -> float:
        return r["cpu_s"] + (r["redis_cpu_s"] or 0)

    def med(rows: list[dict], key: Any) -> float | None:
        return round(percentile([key(r) for r in rows], 50), 3) if rows else None

    res["cpu_per_minute"] = {
        "steady": med(steady, total), "steady_redis": med(steady, lambda r: r["redis_cpu_s"] or 0),
        "restart": med([r for r in per_minute if r["minute"] in restart], total),
        "expiry": med([r for r in per_minute if r["minute"] == expiry_min], total),
        "peak": max((total(r) for r in per_minute[day:]), default=None),
        "warmup": round(sum(total(r) for r in per_minute[:day]), 2),
        "loader_steady": med(steady, lambda r: r["loader_cpu_s"])}
    res["memory_mb"] = {"rss_peak": max((s["rss_mb"] for s in samples), default=None),
                        "redis_rss_peak": max((s["redis_rss_mb"] or 0 for s in samples), default=None)
                        if samples and samples[0]["redis_rss_mb"] is not None else None,
                        "redis_used_peak": max((s.get("redis_used_mb") or 0 for s in samples), default=None)
                        if samples and samples[0].get("redis_used_mb") is not None else None}
    res["errors"] = load_errors(res["load"])
    gone = res["expiry"]["gone_at_s"]
    res["expiry"]["observed_s"] = round(max(gone.values()), 1) if len(gone) == res["expiry"]["watched"] else None
    res["expiry"]["after_death_s"] = (round(res["expiry"]["observed_s"] - plan.death_s, 1)
                                      if res["expiry"]["observed_s"] is not None else None)
    res["expected_brokers_at_end"] = plan.brokers - len(sched.dying)
    return res


# ---------------------------------------------------------------------------- report

def markdown(doc: dict) -> str:
    plan = doc["plan"]
    lines = [f"Measured {doc['date']} on {doc['machine']['summary']}, git {doc['git_sha']}, mode {doc['mode']}: "
             f"{plan['brokers']:,} brokers × {plan['topics']} topics ({doc['fleet']['topics']:,} topics in all, "
             f"{doc['fleet']['entries']:,} (topic, broker) entries), {plan['clients']:,} clients reading "
             f"{plan['client_topics']} routes each every period over {doc['fleet']['client_sockets']} sockets, "
             f"a day of {plan['minutes']} simulated minutes after a warm-up of {doc['markers']['day'] / 60:.0f} "
             f"(brokers, then clients, coming up), a 30 s period in {plan['period']:g} s. Load average before each "
             "server: "
             + ", ".join(f"{r['server']} {r['load_average_before'][0]}" for r in doc["servers"]) + ".", ""]
    names = [r["server"] for r in doc["servers"]]
    lines.append("| | " + " | ".join(names) + " |")
    lines.append("|---|" + "---|" * len(names))

    def row(label: str, cell: Any) -> None:
        lines.append(f"| {label} | " + " | ".join(cell(r) for r in doc["servers"]) + " |")

    def cpu(key: str) -> Any:
        def f(r: dict) -> str:
            c = r["cpu_per_minute"]
            v = c.get(key)
            if v is None:
                return "—"
            extra = f" (Redis {c['steady_redis']:.2f})" if key == "steady" and r["kind"] != "java" else ""
            return f"{v:.2f}{extra}"
        return f

    row("CPU-s per simulated minute, steady (median)", cpu("steady"))
    row("… during the rolling restart", cpu("restart"))
    row("… in the expiry's minute", cpu("expiry"))
    row("… peak minute of the day", cpu("peak"))
    row("CPU-s of the whole warm-up (first registrations, cold caches)", cpu("warmup"))
    row("load tool's CPU-s per simulated minute, steady", lambda r: f"{r['cpu_per_minute']['loader_steady']:.2f}")

    def mem(r: dict) -> str:
        m = r["memory_mb"]
        if r["kind"] == "java":
            heap = f" (heap in use after a full GC: {r['java_live_heap_mb']:.0f})" if r["java_live_heap_mb"] else ""
            return f"{m['rss_peak']:.0f} MB RSS{heap}"
        return (f"{m['rss_peak'] + m['redis_rss_peak']:.0f} MB ({m['rss_peak']:.0f} workers + Redis RSS "
                f"{m['redis_rss_peak']:.0f}; used_memory {m['redis_used_peak']:.0f})")

    row("memory, peak", mem)
    for i, t in enumerate(TYPES):
        if t == "heartbeat (oneway)":
            row(f"{t}: sent", lambda r, i=i: f"{r['load']['types'][i]['sent']:,}")
            continue

        def lat(r: dict, i: int = i) -> str:
            x = r["load"]["types"][i]
            if not x["replies"]:
                return f"{x['sent']:,} sent, no reply"
            return f"{x['p50_ms']:.2f} / {x['p99_ms']:.2f} ms ({x['replies']:,})"
        row(f"{t}: p50 / p99 (replies)", lat)
    row("errors", lambda r: "; ".join(f"{t}: " + ", ".join(f"{k} {v:,}" for k, v in e.items())
                                      for t, e in r["errors"].items()) or "none")
    row("dead brokers gone from routes, s after the death (simulated)",
        lambda r: f"{r['expiry']['after_death_s']}" if r["expiry"]["after_death_s"] is not None else "NOT SEEN")
    row("brokers in cluster info at the end (expected)",
        lambda r: f"{r['brokers_listed_at_end']:,} ({r['expected_brokers_at_end']:,})")
    def cap(r: dict) -> str:
        c = r.get("capacity")
        if not c:
            return "—"
        room = c.get("headroom") or {}
        return (f"{c['brokers']:,} brokers, {c['entries']:,} entries, Redis {c['redis']['usedMemoryMb']} MB; "
                f"{room.get('moreBrokers', 0):,} more before {room.get('limit', '?')} ({c['took_ms']:.0f} ms)")

    row("`namesrv admin capacity` at the end", cap)
    row("Redis commands ≥ 10 ms / > 20 ms, longest", lambda r: "—" if not r["redis_slow"] else
        f"{r['redis_slow']['over_10ms']} / {r['redis_slow']['over_20ms']}, {r['redis_slow']['longest_ms']} ms")
    row("load tool: lag behind schedule p99 / max", lambda r: f"{r['load']['lag_ms']['p99']:.1f} / "
        f"{r['load']['lag_ms']['max']:.1f} ms")
    lines.append("")
    lines += [f"- {r['server']}: {r['note']}" for r in doc["servers"]]
    lines.append(f"- scaled: broker timeout {doc['scaled']['timeout_ms']} ms ({doc['scaled']['acting_timeout_ms']} "
                 f"ms with enableActingMaster), expiry scan every {doc['scaled']['scan_ms']} ms on both; ours "
                 f"flushes heartbeats every {doc['scaled']['heartbeat_flush_ms']} ms")
    lines.append(f"- rolling restart {doc['markers']['restart'][0] / 60:.1f}–{doc['markers']['restart'][1] / 60:.1f} "
                 f"min ({doc['fleet']['restarted']:,} brokers), {doc['fleet']['dying']:,} brokers silent from "
                 f"{doc['markers']['death'] / 60:.1f} min (timeout "
                 f"{(doc['markers']['expiry_due'] - doc['markers']['death']):.0f} simulated s)")
    return "\n".join(lines) + "\n"


def plot(doc: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    servers = doc["servers"]
    fig, axes = plt.subplots(2, len(servers), figsize=(5.2 * len(servers), 7.5), sharex=True, sharey="row",
                             squeeze=False)
    period_min = SIM_PERIOD / 60
    shown = {READ: ("route read", "tab:blue"), REG: ("register, same bytes", "tab:green"),
             CHANGED: ("register, changed", "tab:orange"), FIRST: ("register, first", "tab:red"),
             CLUSTER_INFO: ("cluster info", "tab:purple")}
    m = doc["markers"]
    for col, r in enumerate(servers):
        ax = axes[0][col]
        for i, (label, color) in shown.items():
            iv = r["load"]["types"][i]["intervals"]
            xs = [(k + 0.5) * period_min for k, x in enumerate(iv) if x["p99_ms"] is not None]
            ys = [x["p99_ms"] for x in iv if x["p99_ms"] is not None]
            if i in (CHANGED, FIRST):
                ax.plot(xs, ys, "o", ms=3, color=color, label=f"{label} p99")
            else:
                ax.plot(xs, ys, "-", lw=1.4, color=color, label=f"{label} p99")
        read = r["load"]["types"][READ]["intervals"]
        ax.plot([(k + 0.5) * period_min for k, x in enumerate(read) if x["p50_ms"] is not None],
                [x["p50_ms"] for x in read if x["p50_ms"] is not None], ":", lw=1.2, color="tab:blue",
                label="route read p50")
        ax.set_yscale("log")
        ax.set_title(r["server"], fontsize=11)
        if col == 0:
            ax.set_ylabel("latency, ms (log)")
        ax2 = axes[1][col]
        pm = r["per_minute"]
        xs = [x["minute"] + 0.5 for x in pm]
        own = [x["cpu_s"] for x in pm]
        red = [x["redis_cpu_s"] or 0 for x in pm]
        ax2.bar(xs, own, width=0.8, color="tab:gray", label="workers" if r["kind"] != "java" else "JVM")
        if r["kind"] != "java":
            ax2.bar(xs, red, width=0.8, bottom=own, color="tab:red", alpha=0.7, label="redis-server")
        ax2.plot(xs, [x["loader_cpu_s"] for x in pm], "k--", lw=1, label="load tool")
        ax2.set_xlabel("simulated minutes")
        if col == 0:
            ax2.set_ylabel("CPU-seconds per simulated minute")
        for a in (ax, ax2):
            a.axvspan(0, m["day"] / 60, color="0.85", alpha=0.5, lw=0, zorder=0)
            a.axvspan(m["restart"][0] / 60, m["restart"][1] / 60, color="tab:cyan", alpha=0.18, lw=0, zorder=0)
            a.axvline(m["death"] / 60, color="k", lw=1)
            exp = r["expiry"]["observed_s"]
            if exp is not None:
                a.axvline(exp / 60, color="tab:red", lw=1, ls="--")
            a.grid(alpha=0.3)
        marks = ax.get_xaxis_transform()  # x in minutes, y as a fraction of the panel
        ax.text(m["day"] / 120, 0.98, "warm-up", transform=marks, ha="center", va="top", fontsize=8)
        ax.text(sum(m["restart"]) / 120, 0.98, "rolling\nrestart", transform=marks, ha="center", va="top",
                fontsize=8)
        ax.text(m["death"] / 60, 0.80, " brokers\n die", transform=marks, ha="left", va="top", fontsize=8)
        if r["expiry"]["observed_s"] is not None:
            ax.text(r["expiry"]["observed_s"] / 60, 0.62, " expired", transform=marks, ha="left", va="top",
                    fontsize=8, color="tab:red")
        ax2.legend(fontsize=7, loc="upper right")
    axes[0][0].legend(fontsize=7, loc="lower left")
    plan = doc["plan"]
    fig.suptitle(f"A day of {plan['brokers']:,} brokers × {plan['topics']} topics and {plan['clients']:,} clients\n"
                 f"(30 s in {plan['period']:g} s; latency per 30 s; git {doc['git_sha']})", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------------------- command line

def parse(argv: list[str] | None) -> tuple[str, Plan, argparse.Namespace]:
    p = argparse.ArgumentParser(prog="python -m benchmarks.fleet", description=__doc__.split("\n\n")[0])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="2 000 brokers, 10 000 clients, 10 minutes (~5 minutes)")
    g.add_argument("--tiny", action="store_true", help="seconds per server: the CI smoke test")
    p.add_argument("--brokers", type=int)
    p.add_argument("--topics", type=int, help="topics per broker (every broker of a cluster serves them)")
    p.add_argument("--cluster-size", type=int, help="brokers per cluster (default 10)")
    p.add_argument("--clients", type=int)
    p.add_argument("--client-topics", type=int, help="routes each client reads every period (default 2)")
    p.add_argument("--clients-per-conn", type=int, help="logical clients per socket (default 100)")
    p.add_argument("--minutes", type=int, help="simulated minutes of the day, after the warm-up")
    p.add_argument("--period", type=float, help="real seconds per simulated 30 s (default 6; --quick 3)")
    p.add_argument("--servers", default="java,1,2", help="java and/or worker counts of ours (default java,1,2)")
    p.add_argument("--out", default=str(HERE / "results"))
    p.add_argument("--wait-quiet", type=float, metavar="LOAD",
                   help="before each server, wait (up to 30 min) for the 1-minute load average to fall below LOAD")
    p.add_argument("--sizing", action="store_true",
                   help="then re-make the README's Sizing table from the results (python -m benchmarks.sizing)")
    args = p.parse_args(argv)
    mode = "tiny" if args.tiny else "quick" if args.quick else "full"
    size = dict(SIZES[mode])
    for key in ("brokers", "topics", "cluster_size", "clients", "client_topics", "clients_per_conn", "minutes",
                "period"):
        if getattr(args, key) is not None:
            size[key] = getattr(args, key)
    plan = Plan(**size)
    plan.check()
    return mode, plan, args


def publish(mode: str, plan: Plan, sched: Schedule, frames: Frames, servers: list[dict], notes: list[str],
            out: Path) -> Path:
    """fleet.json, fleet.md and fleet.png of the servers measured so far."""
    doc = {"benchmark": "fleet", **run_header(mode, asdict(plan)), "plan": asdict(plan),
           "fleet": {"topics": plan.clusters * plan.topics, "entries": plan.brokers * plan.topics,
                     "restarted": len(sched.restarted), "dying": len(sched.dying), "changes": sched.changes,
                     "client_sockets": sched.connections["client sockets"],
                     "broker_connections": sched.connections["brokers"], "frames": frames.count,
                     "frame_mb": round(frames.bytes / 2**20, 1), "schedule_records": len(sched.records)},
           "scaled": {"timeout_ms": plan.timeout_ms, "acting_timeout_ms": plan.acting_timeout_ms,
                      "scan_ms": plan.scan_ms, "heartbeat_flush_ms": plan.heartbeat_flush_ms,
                      "request_timeouts_s": dict(zip(TYPES, plan.request_timeouts, strict=True))},
           "markers": {"ramp": plan.ramp_s, "day": plan.day_s, "restart": list(plan.restart_window),
                       "death": plan.death_s, "expiry_due": plan.expiry_due_s, "end": plan.end_s},
           "types": list(TYPES), "servers": servers, "notes": notes}
    base = write_results(out, "fleet", doc, markdown(doc), mode == "tiny")
    if servers:
        plot(doc, base.with_suffix(".png"))
    return base


def main(argv: list[str] | None = None) -> int:
    import signal

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the server under test and clean up on the way out
    mode, plan, args = parse(argv)
    kinds = [k.strip() for k in args.servers.split(",") if k.strip()]
    notes = []
    if "java" in kinds:
        from tests.interop import rocketmq as rmq

        if shutil.which("java") is None or not (rmq.JAVA_DIR / "server5" / "target" / "classpath.txt").is_file():
            kinds.remove("java")
            notes.append("Apache Java NameServer skipped: tests/interop/java is not built "
                         "(mvn -B -q -f tests/interop/java/pom.xml package)")
    tmp = Path(tempfile.mkdtemp(prefix="nsrv-fleet-"))
    servers: list[dict] = []
    try:
        load = prepare(plan, tmp)
        for kind in kinds:
            print(f"fleet: {kind} …", flush=True)
            servers.append(day(load, kind, plan, tmp, args.wait_quiet))
            r = servers[-1]
            print(f"fleet: {r['server']}: steady {r['cpu_per_minute']['steady']} CPU-s/min, errors {r['errors']}, "
                  f"expiry {r['expiry']['after_death_s']} s after death", flush=True)
            publish(mode, plan, load.sched, load.frames, servers, notes, Path(args.out))  # kept as each day ends
        if not servers:
            publish(mode, plan, load.sched, load.frames, servers, notes, Path(args.out))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.sizing:
        from benchmarks import sizing

        return sizing.main([])
    return 0


if __name__ == "__main__":
    sys.exit(main())
