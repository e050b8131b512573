"""Where a write's microseconds go: py-spy on one worker while the peers harness's load tool drives one workload.

    python -m benchmarks.write_profiles [--seconds 12] [--only WORDS] [--out benchmarks/results]

For each write workload of benchmarks/peers.py (registrations unchanged and changed, heartbeats, the 95/5 mix) it
starts `namesrv serve` with one worker on a redis-server of its own (peers' `Ours(1)`), seeds and warms it as
peers does, then records `py-spy record -r 200 --subprocesses -f raw` while rmqload sends the workload, and sorts
every sample into the first category one of its frames matches (table below). The CPU per request is measured in
the same round, under the profiler (py-spy's sampling costs the worker a little). Writes write-profiles.json and
write-profiles.md. Needs py-spy (`pip install -e '.[bench]'`; it reads the worker's memory: root, or
ptrace_scope 0).
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import peers
from benchmarks.harness import run_header, write_results
from benchmarks.remoting_bench import build_load_tool

# (category, frame substrings): a sample counts for the first category any of its frames matches
CATEGORIES: list[tuple[str, tuple[str, ...]]] = [
    ("reply write", ("send (service/remoting/server.py",)),
    ("registration decode", ("parse_registration", "plain_registration", "digest_of")),
    ("registration delta", ("between (service/models/broker_requests.py", "sent (service/core/deltas.py")),
    ("store call", ("call_loaded", "_evalsha", "get_route_at")),
    ("change events received", ("_listen (service/core/route_cache.py",)),
    ("route cache fill", ("fill (service/core/route_cache.py",)),
    ("frame decoding (hot replies included)", ("data_received (service/remoting/server.py",)),
]
LOOP_ONLY = ("asyncio/runners.py", "run_worker")  # a leaf here: uvloop's own C code (epoll, sockets, callbacks)
# Threads that only wait in a system call py-spy does not see as idle: left out of every share
IDLE_THREADS = ("_serve (service/portclaim.py",)  # the port-claims thread, in select() (service/portclaim.py)


def classify(raw: str) -> tuple[collections.Counter[str], collections.Counter[str], int]:
    """Samples by category, the leading 'other Python' stacks (last three frames), and the total."""
    cats: collections.Counter[str] = collections.Counter()
    others: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        if any(k in stack for k in IDLE_THREADS):
            continue
        total += n
        frames = stack.split(";")
        for label, keys in CATEGORIES:
            if any(k in f for f in frames for k in keys):
                cats[label] += n
                break
        else:
            if any(k in frames[-1] for k in LOOP_ONLY):
                cats["event loop (uvloop C code)"] += n
            else:
                cats["other Python"] += n
                others[" > ".join(re.sub(r"\(/.*/", "(", f) for f in frames[-3:])] += n
    return cats, others, total


def profile(exe: str, name: str, frames: list[bytes], size: dict, seconds: int, tmp: Path) -> dict[str, Any]:
    path = tmp / "workload.frames"
    path.write_bytes(b"".join(frames))
    conns = {"heartbeat (904)": size["heartbeat"], "mix 95 % read / 5 % register": size["mix"]}.get(
        name, size["register"])
    server = peers.Ours(1)
    raw = tmp / "samples.txt"
    try:
        peers.seed(server, peers.seed_frame(size))
        peers.load(exe, server, path, conns, size["warmup"])
        spy = subprocess.Popen(["py-spy", "record", "-r", "200", "-d", str(seconds), "-f", "raw", "-o", str(raw),
                                "--subprocesses", "-p", str(server.pid)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(1)
        res = peers.load(exe, server, path, conns, max(seconds - 2, 1))
        _, err = spy.communicate(timeout=seconds + 60)
    finally:
        if server.seed_sock is not None:
            server.seed_sock.close()
        server.stop()
    if not raw.exists():
        raise RuntimeError(f"py-spy wrote nothing: {err.strip()[-300:]}")
    cats, others, total = classify(raw.read_text())
    return {"rps": res.get("rps"), "cpu_us_per_request": res.get("cpu_us_per_request"),
            "redis_cpu_us_per_request": res.get("redis_cpu_us_per_request"), "samples": total,
            "shares_pct": {k: round(v / total * 100, 1) for k, v in cats.most_common()},
            "other_python_top": {k: round(v / total * 100, 1) for k, v in others.most_common(5)}}


def markdown(doc: dict[str, Any]) -> str:
    lines = [f"Measured {doc['date']} on {doc['machine'].get('summary', '?')}, git {doc['git_sha']}: py-spy at 200 Hz "
             f"for {doc['seconds']} s on one worker per workload (shares of its samples; CPU per request measured "
             "under the profiler, Redis's part in brackets).", ""]
    for name, r in doc["results"].items():
        if "error" in r:
            lines.append(f"- **{name}**: {r['error']}")
            continue
        shares = ", ".join(f"{k} {v} %" for k, v in r["shares_pct"].items())
        lines.append(f"- **{name}**: {r['cpu_us_per_request']:.1f} ({r['redis_cpu_us_per_request']:.1f}) CPU-µs, "
                     f"{r['rps']:.0f} req/s: {shares}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=int, default=12, help="profiled seconds per workload")
    p.add_argument("--only", action="append", metavar="WORDS", help="workloads whose name contains WORDS")
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    args = p.parse_args(argv)
    if shutil.which("py-spy") is None:
        print("py-spy not found: pip install -e '.[bench]'", file=sys.stderr)
        return 2
    size = peers.SIZES["quick"]
    tmp = Path(tempfile.mkdtemp(prefix="nsrv-profiles-"))
    results: dict[str, Any] = {}
    try:
        exe = build_load_tool(str(tmp))
        for name, frames in peers.workloads(size).items():
            if name == "route read (105)" or (args.only and not any(w in name for w in args.only)):
                continue
            try:
                results[name] = profile(exe, name, frames, size, args.seconds, tmp)
            except Exception as exc:  # noqa: BLE001 - the other rows still count
                results[name] = {"error": repr(exc)}
            print(name, results[name], flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    doc = {**run_header("quick", size), "seconds": args.seconds, "results": results}
    write_results(Path(args.out), "write-profiles", doc, markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
