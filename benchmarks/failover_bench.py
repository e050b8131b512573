"""The window of 503s when Redis fails over under load, in Sentinel and Cluster mode.

Two real `namesrv serve` workers on a real topology (Sentinel: primary + replica + 3 sentinels; Cluster: 3 + 3)
serve a paced load — route reads (cached and not), registrations, heartbeats — while the registry's primary is
failed over (SENTINEL FAILOVER left to the sentinels / CLUSTER FAILOVER) and then SIGKILLed (restarted after).
Per event: how long the topology took to elect the new primary, the failed requests, the first and last failure
(relative to the event and to the election), and whether any worker restarted. Acknowledged registrations are then
checked on the new primary (asynchronous replication can lose them on a kill; NAMESRV_REDIS_WAIT_REPLICAS=1 with
`--wait` must not).

    python -m benchmarks.failover_bench              # 1 round per scenario → results/failover.json
    python -m benchmarks.failover_bench --rounds 3
    python -m benchmarks.failover_bench --wait       # registrations wait for 1 replica → results/failover-wait.json
    python -m benchmarks.failover_bench --tiny       # the smoke test (first event per mode, short)
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness import RESULTS, environment, write_json
from service.store.keys import Keys
from tests.integration.conftest import Namesrv
from tests.namesrv_load import CLUSTER, Load, topology_env, topology_url
from tests.redis_topology import ClusterTopology, RedisNode, SentinelTopology

SETTLE_S = 8.0  # load kept running after each election, to see the end of the window (--tiny: 1 s)


def acked_registrations_missing(load: Load, node: RedisNode, prefix: str, until: float) -> int:
    k, best = Keys(prefix), {}
    for r in load.ok("register"):
        if r.end <= until:
            i, counter = r.detail
            best[i] = max(best.get(i, 0), counter)
    missing = 0
    for i, want in best.items():
        stored = node.cmd("HGET", k.live_info(CLUSTER, f"10.9.0.{i}:10911"), "dv") or "0,0,0"
        missing += int(stored.split(",")[1]) < want
    return missing


async def event(load: Load, name: str, inject: Any, new_primary: Any, prefix: str, settle_s: float
                ) -> dict[str, Any]:
    started = time.monotonic()
    await asyncio.to_thread(inject)
    elected = time.monotonic()
    await asyncio.sleep(settle_s)
    w = load.window(started)
    after = load.last_failure_after(elected)
    row = {"event": name, "elect_s": round(elected - started, 2), "requests": w["requests"], "failed": w["failed"],
           "first_failure_s": w.get("first_failure_s"), "last_failure_s": w.get("last_failure_s"),
           "last_failure_after_election_s": round(after, 2) if after is not None else None,
           "failed_by_kind": w["by_kind"],
           "acked_registrations_missing": acked_registrations_missing(load, new_primary(), prefix, started)}
    print(f"{name}: elected in {row['elect_s']} s, {row['failed']}/{row['requests']} failed, last failure "
          f"{row['last_failure_after_election_s']} s after the election, {row['failed_by_kind']}", flush=True)
    return row


async def sentinel_round(wait: bool, tiny: bool = False) -> list[dict[str, Any]]:
    with SentinelTopology(password="bench-data-pw", sentinel_password="bench-sentinel-pw") as s:
        return await _round(s, wait, lambda: s.master_node(), [
            ("Sentinel: SENTINEL FAILOVER", lambda: s.failover(None, False)),
            ("Sentinel: primary SIGKILLed", s.kill_master)][:1 if tiny else 2],
            settle=lambda: s.wait_settled(None, 30.0, False), restart=lambda old: s.restart(old), tiny=tiny)


async def cluster_round(wait: bool, tiny: bool = False) -> list[dict[str, Any]]:
    with ClusterTopology(password="bench-cluster-pw") as c:
        holder: dict[str, int] = {}

        def owner() -> RedisNode:
            return c.node_for_slot(holder["slot"])

        return await _round(c, wait, owner, [
            ("Cluster: CLUSTER FAILOVER", lambda: c.failover(holder["slot"])),
            ("Cluster: primary SIGKILLed", lambda: c.kill_primary(holder["slot"]))][:1 if tiny else 2],
            settle=lambda: c.wait_settled(), restart=lambda old: c.restart(old), holder=holder, tiny=tiny)


async def _round(topo: Any, wait: bool, owner: Any, events: list[tuple[str, Any]], settle: Any, restart: Any,
                 holder: dict[str, int] | None = None, tiny: bool = False) -> list[dict[str, Any]]:
    prefix = "fb" + uuid.uuid4().hex[:6]
    if holder is not None:
        holder["slot"] = topo.slot_of(f"{{{prefix}}}:ver")
    extra = {"redis_wait_replicas": 1, "redis_wait_registrations": "true"} if wait else {}
    workers = [Namesrv(topology_url(topo), prefix, 1, **topology_env(topo), **extra) for _ in range(2)]
    rows = []
    try:
        for w in workers:
            w.wait_ready(30)
        pids = [w.proc.pid for w in workers]
        async with Load([w.url for w in workers], readers=2, writers=2, heartbeaters=1) as load:
            await load.wait_success("register", time.monotonic(), 10)
            await asyncio.sleep(1.0)
            for name, inject in events:
                old = owner()
                rows.append(await event(load, name, inject, owner, prefix, 1.0 if tiny else SETTLE_S))
                if not old.alive:
                    await asyncio.to_thread(restart, old)
                else:
                    await asyncio.to_thread(settle)
                await asyncio.sleep(1.0)
        restarted = sum(w.proc.poll() is not None or w.proc.pid != p for w, p in zip(workers, pids, strict=True))
        for r in rows:
            r["worker_restarts"] = restarted
    finally:
        for w in workers:
            w.stop()
    return rows


async def run(args: argparse.Namespace) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    for _ in range(args.rounds):
        if "sentinel" in args.modes:
            rows += await sentinel_round(args.wait, args.tiny)
        if "cluster" in args.modes:
            rows += await cluster_round(args.wait, args.tiny)
    version = _redis_version()
    return {"benchmark": "failover", **environment(version),
            "params": {"rounds": args.rounds, "wait_replicas": 1 if args.wait else 0, "workers": 2,
                       "tiny": args.tiny, "settle_s": 1.0 if args.tiny else SETTLE_S, "down_after_ms": 1000,
                       "cluster_node_timeout_ms": 1000,
                       "redis_deadline_ms": 1000},
            "results": rows}


def _redis_version() -> str:
    import subprocess

    out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout
    return next((p[2:] for p in out.split() if p.startswith("v=")), "")


def markdown(doc: dict[str, Any]) -> str:
    lines = ["| event | elected after, s | failed / requests | failures from … to …, s after the event "
             "| last failure after the election, s | acked registrations missing | worker restarts |",
             "|---|---|---|---|---|---|---|"]
    for r in doc["results"]:
        span = (f"{r['first_failure_s']} … {r['last_failure_s']}" if r["failed"] else "none")
        after = r["last_failure_after_election_s"]
        lines.append(f"| {r['event']} | {r['elect_s']} | {r['failed']} / {r['requests']} | {span} "
                     f"| {after if after is not None else 'none'} | {r['acked_registrations_missing']} "
                     f"| {r['worker_restarts']} |")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.failover_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--wait", action="store_true", help="NAMESRV_REDIS_WAIT_REPLICAS=1 for registrations too")
    p.add_argument("--modes", default="sentinel,cluster")
    p.add_argument("--tiny", action="store_true", help="the smoke test: the first event of each mode, 1 s after")
    p.add_argument("--out", default="")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    for exe in ("redis-server", "redis-cli"):
        if shutil.which(exe) is None:
            sys.exit(f"{exe} is not installed")
    doc = asyncio.run(run(args))
    name = "failover-tiny.json" if args.tiny else "failover-wait.json" if args.wait else "failover.json"
    write_json(Path(args.out or RESULTS / name), doc)
    print(markdown(doc))
    return doc


if __name__ == "__main__":
    main()
