"""One benchmark, three NameServers, same run: Apache's Java NameServer 5.5.0, rocketmq-rust's NameServer and ours
(1 worker, and 2 workers), driven over the native remoting protocol by the same load tool (issue 22 item 2).

    python -m benchmarks.peers [--quick | --tiny | --full] [--out benchmarks/results] [--rust-bin PATH]
                               [--only WORDS] [--no-memory]

Workloads (benchmarks/rmqload.c, compiled here; frames built here): route reads (105) of random topics of 1 000;
registrations (103) of a 100- and of a 1 000-topic broker, unchanged (the same frame again) and changed (data
version and queue counts move every time); broker heartbeats (904); a mix of 95 % route reads and 5 % changed
registrations of a 100-topic broker serving topics that are read. Every (workload, round) measures every server
back to back, in alternating order, so a noisy neighbour slows all alike. Reported: req/s, p50/p99, and CPU-µs
per request from each server's own /proc/<pid>/stat utime+stime (children included; for ours the redis-server's
CPU is counted too and shown apart), and resident memory holding M brokers × T topics (1 000 × 1 000 at quick
size). Writes peers.json and peers.md.

Java: tests/interop's jars (mvn -B -q -f tests/interop/java/pom.xml package); a JVM as runserver.sh sizes it on
JDK ≥ 9 (G1, full tiered compilation), with a 1 GiB heap instead of 4 GiB for this small host; warmed up.
rocketmq-rust: its binary is not part of this repository; build it once, outside the tree:
    CARGO_TARGET_DIR=/tmp/rocketmq-rust-target cargo install rocketmq-namesrv --version 1.0.0 --locked \\
        --root /tmp/rocketmq-rust-bin
then pass --rust-bin /tmp/rocketmq-rust-bin/bin/rocketmq-namesrv-rust (or set RMQ_RUST_NAMESRV). Without it the
rust column is skipped with a note.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import broker_frames
from benchmarks.harness import git_info, run_header, write_results
from benchmarks.http_bench import cpu_seconds, start, stop, wait_http, worker_env
from benchmarks.remoting_bench import build_load_tool
from service.remoting import fastjson
from service.remoting.codec import RemotingCommand, encode
from tests.redis_server import RedisServer, free_port

RUST_DEFAULT = "/tmp/rocketmq-rust-bin/bin/rocketmq-namesrv-rust"
RUST_HOWTO = ("rocketmq-rust's NameServer not found: build it outside the tree with "
              "`CARGO_TARGET_DIR=/tmp/rocketmq-rust-target cargo install rocketmq-namesrv --version 1.0.0 "
              "--locked --root /tmp/rocketmq-rust-bin` and pass "
              f"--rust-bin {RUST_DEFAULT} (or set RMQ_RUST_NAMESRV)")
JAVA_HEAP = "1g"

SIZES = {
    "tiny": dict(topics=50, small=10, big=50, duration=0.5, rounds=1, warmup=0.2, java_warmup=1,
                 read=(8, 4), register=(2, 1), heartbeat=(8, 4), mix=(8, 4), mem_brokers=20, mem_topics=50),
    "quick": dict(topics=1000, small=100, big=1000, duration=3, rounds=3, warmup=2, java_warmup=10,
                  read=(32, 16), register=(4, 2), heartbeat=(32, 16), mix=(32, 16), mem_brokers=1000,
                  mem_topics=1000),
    "full": dict(topics=1000, small=100, big=1000, duration=10, rounds=5, warmup=3, java_warmup=20,
                 read=(64, 16), register=(4, 2), heartbeat=(32, 16), mix=(32, 16), mem_brokers=1000,
                 mem_topics=1000),
}
CLUSTER = "PeerCluster"


# ---------------------------------------------------------------------------- frames

def frame(code: int, ext: dict[str, Any], body: bytes = b"", opaque: int = 1) -> bytes:
    return encode(RemotingCommand(code=code, version=479, opaque=opaque,
                                  ext_fields={k: str(v) for k, v in ext.items()}, body=body))


def register_body(topics: list[str], queues: int, counter: int) -> bytes:
    """As a 5.x broker sends it (TopicConfigAndMappingSerializeWrapper; rocketmq-rust requires every field)."""
    table = {t: {"attributes": {}, "order": False, "perm": 6, "readQueueNums": queues,
                 "topicFilterType": "SINGLE_TAG", "topicName": t, "topicSysFlag": 0, "writeQueueNums": queues}
             for t in topics}
    return fastjson.dumps({"filterServerList": [], "topicConfigSerializeWrapper": {
        "dataVersion": {"counter": counter, "stateVersion": 0, "timestamp": 1700000000000 + counter},
        "mappingDataVersion": {"counter": 0, "stateVersion": 0, "timestamp": 1700000000000},
        "topicConfigTable": table, "topicQueueMappingDetailMap": {}, "topicQueueMappingInfoMap": {}}})


def broker(name: str, n: int) -> dict[str, Any]:
    return {"clusterName": CLUSTER, "brokerName": name, "brokerId": 0, "brokerAddr": f"10.9.{n // 250}.{n % 250}:10911"}


def register_frame(name: str, n: int, topics: list[str], queues: int = 8, counter: int = 1, opaque: int = 1) -> bytes:
    """REGISTER_BROKER byte for byte as a stock 5.5.0 broker sends it (benchmarks/broker_frames.py, checked against
    a real broker's frame): its ~15 system topics (other queue data than `topics`'), these topics with `queues`
    read and write queues, data version `counter`, bodyCrc32, and the mapping data version's timestamp, which a
    stock broker renews at every registration."""
    b = broker(name, n)
    table = broker_frames.stock_topics(CLUSTER, name, dict.fromkeys(topics, queues))
    body = broker_frames.stock_body(table, counter, 1700000000000 + counter, 1700000000000 + counter)
    return broker_frames.stock_frame(CLUSTER, name, b["brokerAddr"], body, opaque)


def read_frames(topics: int, n: int = 4096, seed: int = 1) -> list[bytes]:
    import random

    rnd = random.Random(seed)
    return [frame(105, {"topic": f"T{rnd.randrange(topics)}"}, opaque=i + 1) for i in range(n)]


def workloads(size: dict) -> dict[str, list[bytes]]:
    """name → the frames rmqload sends in turn (the reads' seed broker is registered before each run)."""
    read_topics = [f"T{i}" for i in range(size["topics"])]
    out: dict[str, list[bytes]] = {"route read (105)": read_frames(size["topics"])}
    for n, label in ((size["small"], "small"), (size["big"], "big")):
        topics = [f"R{n}-{i}" for i in range(n)]
        out[f"register {n} topics, unchanged (103)"] = [register_frame(f"reg-{label}", 1 + (label == "big"), topics)]
        out[f"register {n} topics, changed (103)"] = [
            register_frame(f"chg-{label}", 3 + (label == "big"), topics, 4 if v % 2 else 8, counter=v)
            for v in range(1, 17)]
    out["heartbeat (904)"] = [frame(904, broker("bench-0", 0), opaque=i + 1) for i in range(64)]
    writes = [register_frame("mix-w", 5, read_topics[: size["small"]], 4 if v % 2 else 8, counter=v)
              for v in range(1, 17)]
    reads = read_frames(size["topics"], 2000, seed=2)
    out["mix 95 % read / 5 % register"] = [writes[(i // 20) % 16] if i % 20 == 19 else reads[i] for i in range(2000)]
    return out


def seed_frame(size: dict) -> bytes:
    return register_frame("bench-0", 0, [f"T{i}" for i in range(size["topics"])])


# ---------------------------------------------------------------------------- a blocking client

def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return bytes(buf)


def reply(sock: socket.socket, data: bytes) -> tuple[int, bytes]:
    """Send one frame, read one reply: its code and body."""
    sock.sendall(data)
    total = struct.unpack(">I", _recv_exact(sock, 4))[0]
    rest = _recv_exact(sock, total)
    hl = struct.unpack(">I", rest[:4])[0] & 0xFFFFFF
    header = rest[4:4 + hl]
    if rest[0] == 1:
        return struct.unpack(">h", header[:2])[0], rest[4 + hl:]
    return int(json.loads(header)["code"]), rest[4 + hl:]


def call(sock: socket.socket, data: bytes) -> int:
    """Send one frame, read one reply; its code."""
    return reply(sock, data)[0]


def connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


# ---------------------------------------------------------------------------- the servers

def pid_tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo += [int(c) for c in fh.read().split()]
        except OSError:
            continue
    return out


def rss_mb(pid: int) -> float:
    total = 0
    for p in pid_tree(pid):
        try:
            with open(f"/proc/{p}/status") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def wait_port(port: int, alive, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"the server for :{port} exited")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing listens on {port}")


class Server:
    name: str
    port: int
    pid: int
    redis_pid: int | None = None
    note: str = ""
    seed_sock: socket.socket | None = None

    def cpu(self) -> tuple[float, float]:
        """(own CPU s, its Redis's CPU s)."""
        return cpu_seconds(self.pid), cpu_seconds(self.redis_pid) if self.redis_pid else 0.0

    def stop(self) -> None:
        raise NotImplementedError


class Ours(Server):
    def __init__(self, workers: int, **env: object) -> None:
        self.name = f"rmq-namesrv, {workers} worker{'s' if workers > 1 else ''}"
        self.redis = RedisServer().start()
        self.redis_pid = self.redis.proc.pid
        self.port, self.http_port = free_port(), free_port()
        try:
            self.proc = start([sys.executable, "-m", "service.cli", "serve"],
                              worker_env(self.redis.url, self.http_port, workers, remoting_port=self.port, **env))
            wait_http(f"http://127.0.0.1:{self.http_port}/readyz", 90)  # a busy shared machine starts slowly
        except BaseException:
            if getattr(self, "proc", None) is not None:
                stop(self.proc)
            self.redis.cleanup()
            raise
        self.pid = self.proc.pid
        wait_port(self.port, lambda: self.proc.poll() is None)
        self.note = f"{workers} worker(s), redis-server of its own (its CPU counted as ours)"

    def stop(self) -> None:
        stop(self.proc)
        self.redis.cleanup()


class Java(Server):
    def __init__(self, root: Path, **config: object) -> None:
        from tests.interop import rocketmq as rmq

        self.name = "Apache Java 5.5.0"
        self.port = free_port()
        self.ns = rmq.ApacheNameServer(rmq.LINE5, root, self.port, **config)  # namesrv.properties
        # runserver.sh on JDK >= 9: -server, G1, metaspace 128m/320m, full tiered compilation (the interop
        # harness's C1-only, serial-GC flags are for start-up speed in tests, not for a benchmark).
        argv, jvm = self.ns.argv, []
        for a in argv[1:argv.index("-cp")]:
            if a.startswith(("-Xms", "-Xmx", "-XX:TieredStopAtLevel", "-XX:CICompilerCount", "-XX:+UseSerialGC")):
                continue
            jvm.append(a)
        self.ns.argv = [argv[0], "-server", f"-Xms{JAVA_HEAP}", f"-Xmx{JAVA_HEAP}", "-XX:MetaspaceSize=128m",
                        "-XX:MaxMetaspaceSize=320m", "-XX:+UseG1GC", "-XX:G1HeapRegionSize=16m",
                        "-XX:G1ReservePercent=25", "-XX:InitiatingHeapOccupancyPercent=30",
                        "-XX:SoftRefLRUPolicyMSPerMB=0", *jvm, *argv[argv.index("-cp"):]]
        self.ns.start().wait_listening(90)
        self.pid = self.ns.proc.pid
        self.note = f"G1, -Xms{JAVA_HEAP} -Xmx{JAVA_HEAP} (runserver.sh's flags, heap sized for a small host)"

    def stop(self) -> None:
        from tests.interop import rocketmq as rmq

        rmq.stop_all([self.ns])


class Rust(Server):
    def __init__(self, binary: str, home: Path) -> None:
        self.name = "rocketmq-rust 1.0.0"
        self.port = free_port()
        home.mkdir(parents=True, exist_ok=True)
        self.log = open(home / "rust.out", "ab")  # noqa: SIM115 - owned by the child for its life
        env = {**os.environ, "ROCKETMQ_HOME": str(home), "HOME": str(home), "RUST_LOG": "warn"}
        argv = [binary, "--listenPort", str(self.port), "--bindAddress", "127.0.0.1", "--rocketmqHome", str(home),
                "--kvConfigPath", str(home / "kvConfig.json")]
        self.proc = subprocess.Popen(argv, cwd=home, env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        self.pid = self.proc.pid
        try:
            wait_port(self.port, lambda: self.proc.poll() is None, 60)
        except BaseException:
            self.stop()
            raise
        self.note = "release build of crates.io rocketmq-namesrv 1.0.0"

    def stop(self) -> None:
        stop(self.proc)
        self.log.close()


# ---------------------------------------------------------------------------- measuring

def load(exe: str, server: Server, frames_path: Path, conns: tuple[int, int], seconds: float) -> dict:
    before = server.cpu()
    out = subprocess.run([exe, "127.0.0.1", str(server.port), str(conns[0]), str(conns[1]), str(seconds), "1"],
                         capture_output=True, text=True, timeout=seconds + 120,
                         env={**os.environ, "RMQLOAD_FRAMES": str(frames_path)})
    after = server.cpu()
    if out.returncode:
        return {"error": f"rmqload exited {out.returncode}: {out.stderr.strip()[-300:]}"}
    res = json.loads(out.stdout)
    served = res["ok"] + res["other"]
    own, redis = after[0] - before[0], after[1] - before[1]
    res["cpu_us_per_request"] = (own + redis) / served * 1e6 if served else None
    res["redis_cpu_us_per_request"] = redis / served * 1e6 if served and server.redis_pid else None
    return res


def seed(server: Server, data: bytes) -> None:
    """Register the read topics' broker on a connection kept open: like Java's, our NameServer drops a broker's
    routes when the connection it registered on closes."""
    if server.seed_sock is None:
        server.seed_sock = connect(server.port)
    code = call(server.seed_sock, data)
    if code != 0:
        raise RuntimeError(f"{server.name}: seed registration answered {code}")


def memory(server: Server, brokers: int, topics: int) -> dict:
    """Register `brokers` brokers each serving the same `topics` topics, then read resident memory."""
    base = rss_mb(server.pid), rss_mb(server.redis_pid) if server.redis_pid else 0.0
    names = [f"M{i}" for i in range(topics)]
    t0 = time.perf_counter()
    failed = 0
    with connect(server.port) as s:  # open until RSS is read: a closed connection drops its brokers
        for b in range(brokers):
            data = register_frame(f"mem-{b}", 1000 + b, names, opaque=b + 1)
            try:
                failed += call(s, data) != 0
            except OSError as exc:
                return {"error": f"the connection failed at broker {b + 1} of {brokers} ({exc!r}; "
                                 f"{failed} refused before)", "brokers": brokers, "topics": topics}
        took = time.perf_counter() - t0
        time.sleep(1)
        own, redis = rss_mb(server.pid), rss_mb(server.redis_pid) if server.redis_pid else 0.0
        live = java_live_heap_mb(server.pid) if isinstance(server, Java) else None
    return {"java_live_heap_mb": live, "brokers": brokers, "topics": topics, "failed": failed,
            "seconds": round(took, 2),
            "rss_mb": round(own + redis, 1), "own_rss_mb": round(own, 1), "redis_rss_mb": round(redis, 1),
            "rss_mb_before": round(base[0] + base[1], 1)}


def java_live_heap_mb(pid: int) -> float | None:
    """A JVM's RSS is its heap's high-water mark, not what it holds: the heap in use after a full GC (jcmd)."""
    jcmd = shutil.which("jcmd")
    if jcmd is None:
        return None
    try:
        subprocess.run([jcmd, str(pid), "GC.run"], capture_output=True, timeout=60, check=True)
        out = subprocess.run([jcmd, str(pid), "GC.heap_info"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    import re

    m = re.search(r"used (\d+)K", out)
    return round(int(m.group(1)) / 1024, 1) if m else None


def run(size: dict, tmp: Path, rust_bin: str | None, java: bool, only: list[str] | None = None,
        with_memory: bool = True) -> dict:
    exe = build_load_tool(str(tmp))
    every = workloads(size)
    loads = {name: f for name, f in every.items() if not only or any(w in name for w in only)}
    paths = {}
    for i, (name, frames) in enumerate(every.items()):
        paths[name] = tmp / f"w{i}.frames"
        paths[name].write_bytes(b"".join(frames))
    seed_data = seed_frame(size)
    conns = {"route read (105)": size["read"], "heartbeat (904)": size["heartbeat"],
             "mix 95 % read / 5 % register": size["mix"]}
    servers: list[Server] = []
    notes: list[str] = []
    try:
        if java:
            servers.append(Java(tmp / "java"))
        else:
            notes.append("Apache Java NameServer skipped: tests/interop/java is not built")
        if rust_bin:
            servers.append(Rust(rust_bin, tmp / "rust"))
        else:
            notes.append(RUST_HOWTO)
        servers += [Ours(1), Ours(2)]
        for s in servers:
            seed(s, seed_data)
        # warm-up: every workload on every server (JIT, caches), the JVM longer
        for s in servers:
            if isinstance(s, Java):
                load(exe, s, paths["route read (105)"], size["read"], size["java_warmup"])
            for name in loads:
                seed(s, seed_data)
                load(exe, s, paths[name], conns.get(name, size["register"]), size["warmup"])
        rounds: dict[str, dict[str, list[dict]]] = {n: {s.name: [] for s in servers} for n in loads}
        for r in range(size["rounds"]):
            for name in loads:
                order = servers if r % 2 == 0 else servers[::-1]
                for s in order:
                    seed(s, seed_data)  # keeps the read topics' broker alive (Java expires after 120 s)
                    rounds[name][s.name].append(load(exe, s, paths[name], conns.get(name, size["register"]),
                                                     size["duration"]))
        mem = {}
        for s in servers if with_memory else ():
            try:
                mem[s.name] = memory(s, size["mem_brokers"], size["mem_topics"])
            except Exception as exc:  # noqa: BLE001 - the others' numbers still count
                mem[s.name] = {"error": repr(exc), "brokers": size["mem_brokers"], "topics": size["mem_topics"]}
    finally:
        for s in servers:
            try:
                if s.seed_sock is not None:
                    s.seed_sock.close()
                s.stop()
            except Exception as exc:  # noqa: BLE001 - stop the others anyway
                notes.append(f"stopping {s.name}: {exc!r}")
    results = {}
    for name, per in rounds.items():
        results[name] = {}
        for sname, rs in per.items():
            good = [x for x in rs if "error" not in x and not x.get("other") and not x.get("errors")]
            if not good:
                bad = rs[0] if rs else {}
                results[name][sname] = {"error": bad.get("error") or
                                        f"{bad.get('other')} non-SUCCESS replies (first code "
                                        f"{bad.get('first_other_code')}), {bad.get('errors')} errors",
                                        "rounds": rs}
                continue
            med = sorted(good, key=lambda x: x["cpu_us_per_request"])[len(good) // 2]
            results[name][sname] = {**med, "rounds": rs}
    return {"servers": [{"name": s.name, "note": s.note} for s in servers], "results": results, "memory": mem,
            "notes": notes, "git": git_info(), "workload_connections": {n: conns.get(n, size["register"])
                                                                         for n in loads}}


def markdown(res: dict) -> str:
    names = [s["name"] for s in res["servers"]]
    lines = [f"Measured {res['date']} on {res['machine']['summary']}, git {res['git']['sha'][:10]}"
             f"{' (dirty tree)' if res['git']['dirty'] else ''}, mode {res['mode']} ({res['size']['rounds']} "
             f"alternating rounds of {res['size']['duration']} s per workload and server; the round with the median "
             "CPU per request shown). CPU µs/request: the server's own CPU (ours: workers + its redis-server, Redis's "
             "part in brackets) per request served.", ""]
    lines.append("| workload | " + " | ".join(names) + " |")
    lines.append("|---|" + "---|" * len(names))
    for wl, per in res["results"].items():
        cells = []
        for n in names:
            r = per[n]
            if "error" in r:
                cells.append(f"failed: {r['error']}")
                continue
            cpu = f"{r['cpu_us_per_request']:.1f}"
            if r.get("redis_cpu_us_per_request") is not None:
                cpu += f" ({r['redis_cpu_us_per_request']:.1f})"
            cells.append(f"{r['rps']:.0f}/s, p50 {r['p50_ms']:.2f} p99 {r['p99_ms']:.2f} ms, **{cpu} CPU-µs**")
        lines.append(f"| {wl} | " + " | ".join(cells) + " |")
    m = next(iter(res["memory"].values()), None)
    if m:
        cells = []
        for n in names:
            x = res["memory"][n]
            if "error" in x:
                cells.append(f"failed: {x['error']}")
                continue
            cell = f"{x['rss_mb']:.0f} MB" + (f" ({x['own_rss_mb']:.0f} + Redis {x['redis_rss_mb']:.0f})"
                                              if x["redis_rss_mb"] else "")
            if x.get("java_live_heap_mb"):
                cell += f" (heap in use after a full GC: {x['java_live_heap_mb']:.0f} MB)"
            cell += f", registered in {x['seconds']:.1f} s" + (f", {x['failed']} FAILED" if x["failed"] else "")
            cells.append(cell)
        lines.append(f"| resident memory, {m['brokers']} brokers × {m['topics']} topics | " + " | ".join(cells) + " |")
    lines.append("")
    lines += [f"- {s['name']}: {s['note']}" for s in res["servers"]]
    lines += [f"- {n}" for n in res["notes"]]
    bar = res["results"].get("route read (105)", {})
    java = next((n for n in names if n.startswith("Apache")), None)
    if java and "error" not in bar.get(java, {"error": 1}):
        for n in names:
            if n.startswith("rmq-namesrv") and "error" not in bar[n]:
                ratio = bar[java]["cpu_us_per_request"] / bar[n]["cpu_us_per_request"]
                lines.append(f"- route reads per CPU-second, {n} ÷ Java: **{ratio:.2f}** (quality bar: ≥ 1)")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="about 8 minutes (default)")
    g.add_argument("--full", action="store_true", help="longer rounds")
    g.add_argument("--tiny", action="store_true", help="well under a minute: the CI smoke test")
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    p.add_argument("--rust-bin", default=os.environ.get("RMQ_RUST_NAMESRV") or RUST_DEFAULT)
    p.add_argument("--no-java", action="store_true", help="skip Apache's Java NameServer")
    p.add_argument("--only", action="append", metavar="WORDS",
                   help="only the workloads whose name contains this (repeatable), e.g. --only heartbeat")
    p.add_argument("--no-memory", action="store_true", help="skip the resident-memory phase")
    args = p.parse_args(argv)
    mode = "tiny" if args.tiny else "full" if args.full else "quick"
    rust_bin = args.rust_bin if args.rust_bin and os.access(args.rust_bin, os.X_OK) else None
    if rust_bin is None:
        print(RUST_HOWTO, file=sys.stderr)
    java = False
    if not args.no_java:
        from tests.interop import rocketmq as rmq

        java = shutil.which("java") is not None and (rmq.JAVA_DIR / "server5" / "target" / "classpath.txt").is_file()
    size = SIZES[mode]
    tmp = Path(tempfile.mkdtemp(prefix="nsrv-peers-"))
    try:
        res = run(size, tmp, rust_bin, java, args.only, not args.no_memory)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res.update(run_header(mode, size))
    write_results(Path(args.out), "peers", res, markdown(res), mode == "tiny")
    return 0


if __name__ == "__main__":
    sys.exit(main())
