"""Benchmark harness: a redis-server of its own on loopback, warm-up, percentiles, Redis-side time, JSON out.

Redis-side time comes from the server itself: SLOWLOG with `slowlog-log-slower-than 0` gives every command's
execution time in µs (a Lua script is one entry: its whole run, which is also how long it blocks Redis), and
`INFO commandstats` gives usec_per_call. Client time (perf_counter around the call) is reported beside it.
Results record versions, machine, git sha and date. Never FLUSHALL: the server is ours and thrown away.
"""

from __future__ import annotations

import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import orjson
import redis.asyncio as aioredis

from tests.redis_server import RedisServer

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
PREFIX = "bench"


# ---------------------------------------------------------------- statistics

def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); q in [0, 100]."""
    if not values:
        return math.nan
    s = sorted(values)
    pos = (len(s) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summarize(values: Sequence[float], digits: int = 3) -> dict[str, float]:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "mean": round(sum(values) / len(values), digits),
        "p50": round(percentile(values, 50), digits),
        "p95": round(percentile(values, 95), digits),
        "p99": round(percentile(values, 99), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
    }


def percentiles(values: Sequence[float], suffix: str = "", digits: int = 3) -> dict[str, float]:
    """{"p50<suffix>": …, "p95…", "p99…", "mean…", "max…"}: the flat form the HTTP bench reports."""
    if not values:
        return {}
    return {f"{k}{suffix}": round(v, digits) for k, v in (
        ("p50", percentile(values, 50)), ("p95", percentile(values, 95)), ("p99", percentile(values, 99)),
        ("mean", sum(values) / len(values)), ("max", max(values)))}


# ---------------------------------------------------------------- environment

def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def git_info() -> dict[str, Any]:
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    sha = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"sha": sha or "none (no commit yet)", "dirty": bool(status) if status is not None else None}


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def redis_server_version() -> str:
    try:
        out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    for part in out.split():
        if part.startswith("v="):
            return part[2:]
    return out.strip()


def machine_info() -> dict[str, Any]:
    cpu, n = cpu_model(), os.cpu_count()
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": cpu,
        "cpu_count": n,
        "cpus": n,
        "summary": f"{cpu} ×{n}, {platform.system()} {platform.release()}",
        "redis_server": redis_server_version(),
    }


def environment(redis_version: str) -> dict[str, Any]:
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "git": git_info(),
        "machine": machine_info(),
        "versions": {
            "python": sys.version.split()[0],
            "redis-server": redis_version,
            "redis-py": _version("redis"),
            "orjson": _version("orjson"),
            "rmq-namesrv": _version("rmq-namesrv"),
        },
    }


# ---------------------------------------------------------------- the bench's own Redis

@dataclass
class BenchRedis:
    """A throwaway redis-server on loopback with every command in the slow log."""

    server: RedisServer = field(default_factory=RedisServer)
    client: aioredis.Redis | None = None

    async def __aenter__(self) -> BenchRedis:
        self.server.start()
        self.client = aioredis.Redis.from_url(self.server.url, decode_responses=True)
        await self.client.config_set("slowlog-log-slower-than", 0)
        await self.client.config_set("slowlog-max-len", 100_000)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.client is not None:
            await self.client.aclose()
        self.server.cleanup()

    async def version(self) -> str:
        assert self.client is not None
        return str((await self.client.info("server"))["redis_version"])

    async def reset(self) -> None:
        assert self.client is not None
        await self.client.slowlog_reset()
        await self.client.config_resetstat()

    async def script_times_us(self) -> list[int]:
        """Durations (µs) of the EVALSHA/EVAL entries logged since the last reset, oldest first."""
        assert self.client is not None
        entries = await self.client.slowlog_get(100_000)
        out = []
        for e in reversed(entries):
            cmd = e.get("command", "")
            if isinstance(cmd, bytes):
                cmd = cmd.decode(errors="replace")
            if cmd.split(" ", 1)[0].upper() in ("EVALSHA", "EVAL", "EVALSHA_RO", "EVAL_RO"):
                out.append(int(e["duration"]))
        return out

    async def evalsha_usec_per_call(self) -> float | None:
        assert self.client is not None
        stats = await self.client.info("commandstats")
        row = stats.get("cmdstat_evalsha")
        return float(row["usec_per_call"]) if row else None


# ---------------------------------------------------------------- measuring

Op = Callable[[], Awaitable[Any]]


async def measure(
    bench: BenchRedis,
    case: str,
    op: Op,
    *,
    repeat: int,
    warmup: int = 3,
    setup: Op | None = None,
    target_ms: float | None = None,
    notes: str = "",
) -> dict[str, Any]:
    """Run `op` warmup + repeat times (`setup` before each, unmeasured). Reports per op the client time and
    the Redis time (sum of its script calls), per script call the Redis time, and the longest single call."""
    for _ in range(warmup):
        if setup:
            await setup()
        await op()
    client_ms: list[float] = []
    op_redis_ms: list[float] = []
    call_ms: list[float] = []
    usec_per_call: list[float] = []
    for _ in range(repeat):
        if setup:
            await setup()
        await bench.reset()
        t0 = time.perf_counter()
        await op()
        client_ms.append((time.perf_counter() - t0) * 1000)
        calls = [us / 1000 for us in await bench.script_times_us()]
        call_ms.extend(calls)
        op_redis_ms.append(sum(calls))
        upc = await bench.evalsha_usec_per_call()
        if upc is not None:
            usec_per_call.append(upc)
    redis_op = summarize(op_redis_ms)
    row: dict[str, Any] = {
        "case": case,
        "repeat": repeat,
        "script_calls_per_op": round(len(call_ms) / repeat, 2),
        "redis_ms_per_op": redis_op,
        "redis_ms_per_call": summarize(call_ms),
        "longest_block_ms": round(max(call_ms), 3) if call_ms else None,
        "commandstats_evalsha_usec_per_call": round(sum(usec_per_call) / len(usec_per_call), 1)
        if usec_per_call else None,
        "client_ms_per_op": summarize(client_ms),
    }
    if target_ms is not None:
        row["target_ms"] = target_ms
        row["meets_target_p99"] = redis_op["p99"] <= target_ms
    if notes:
        row["notes"] = notes
    return row


# ---------------------------------------------------------------- command line

RESULTS = Path(__file__).resolve().parent / "results"


def parse_size(description: str, argv: list[str] | None, quick: str, full: str) -> tuple[str, Path]:
    """The sized benchmarks' command line: `--quick` (the default) | `--full` | `--tiny` (the CI smoke test),
    and `--out DIR` (benchmarks/results). Returns the size's name and the output directory."""
    import argparse

    p = argparse.ArgumentParser(description=description)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help=f"{quick} (default)")
    g.add_argument("--full", action="store_true", help=full)
    g.add_argument("--tiny", action="store_true", help="seconds to a minute: the CI smoke test")
    p.add_argument("--out", default=str(RESULTS))
    args = p.parse_args(argv)
    return ("tiny" if args.tiny else "full" if args.full else "quick"), Path(args.out)


def tools_missing(*tools: str, package: str) -> bool:
    """True (and says what to install) when one of the command-line tools a benchmark drives is not installed."""
    import shutil

    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        print(f"{', '.join(missing)} not installed: apt-get install -y {package}", file=sys.stderr)
    return bool(missing)


def run_header(mode: str, size: dict[str, Any]) -> dict[str, Any]:
    """What every sized result starts with: size, date, git sha, machine."""
    return {"mode": mode, "size": size, "date": time.strftime("%Y-%m-%d"), "git_sha": git_info()["sha"][:10],
            "machine": machine_info()}


# ---------------------------------------------------------------- output

def write_json(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
                     + b"\n")


def write_results(out_dir: Path, name: str, doc: dict[str, Any], table: str, tiny: bool = False) -> Path:
    """`<name>[-tiny].json` and `.md` in `out_dir`, the table printed; returns the path without its suffix (the
    tiny run's files stay apart from the published ones)."""
    base = Path(out_dir) / (name + ("-tiny" if tiny else ""))
    write_json(base.with_suffix(".json"), doc)
    base.with_suffix(".md").write_text(table)
    print(table)
    return base


def markdown_table(rows: Iterable[dict[str, Any]]) -> str:
    head = ("| case | n | calls/op | Redis ms/op p50 | p95 | p99 | longest block ms | evalsha µs/call "
            "| client ms p50 | client p99 | target |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        red, cli = r["redis_ms_per_op"], r["client_ms_per_op"]
        target = ""
        if "target_ms" in r:
            target = f"≤ {r['target_ms']:g} ms: {'met' if r['meets_target_p99'] else 'MISSED'}"
        lines.append(
            f"| {r['case']} | {r['repeat']} | {r['script_calls_per_op']:g} "
            f"| {red['p50']:.3f} | {red['p95']:.3f} "
            f"| {red['p99']:.3f} | {r['longest_block_ms']:.3f} | {r['commandstats_evalsha_usec_per_call']} "
            f"| {cli['p50']:.3f} | {cli['p99']:.3f} | {target} |"
        )
    return "\n".join(lines)
