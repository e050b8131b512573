"""How many script calls one Redis primary sustains, per operation: the numbers behind the README's
"How far one Redis goes".

The exact EVALSHA each operation sends (captured from the store itself: same keys, same arguments) is replayed by
`redis-benchmark` (C client, pipelined, so the client is not the bottleneck) against a redis-server of the
bench's own; INFO commandstats gives the Redis-side execution time per call. Operations, in steady state:

- registerBroker with the data version unchanged, 100 and 1 000 topics, as a registration the worker cannot
  show unchanged runs (the full path: every topic checked);
- registerBroker of the same bytes again (what every stock broker sends every 30 s: the unchanged path, decided
  by digest), 100, 1 000 and 100 000 topics;
- heartbeat batches of 1 and 50 brokers (the workers coalesce concurrent heartbeats into one call);
- a touchLive batch of 2 000 brokers: how every BROKER_HEARTBEAT and every unchanged registration answered from
  memory reaches Redis (service/core/liveness.py), so what a broker's liveness costs Redis in a fleet;
- getRoute of a topic on 2 brokers (a route-cache miss: caches absorb repeated reads).

A registration whose topics all changed costs more (about 3 ms of Redis time for 1 000 topics): store_bench
measures it; it happens when a broker's topic config moves, not every 30 s.

    python -m benchmarks.redis_capacity            # about a minute → results/redis-capacity.json
    python -m benchmarks.redis_capacity --tiny     # seconds (the smoke test)
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import io
import shutil
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis

from benchmarks.harness import PREFIX, RESULTS, BenchRedis, environment, write_json
from service.models import DataVersion, RegisterBroker, TopicConfig
from service.store import RouteStore

SIZES = {"full": {"requests": 20_000, "topics": [100, 1000], "batch": [1, 50], "same_bytes": [100, 1000, 100_000],
                  "touch": 2000},
         "tiny": {"requests": 200, "topics": [10], "batch": [1, 5], "same_bytes": [10], "touch": 20}}
TOUCH_REQUESTS = 1 / 20  # of the requests: a touchLive call of 2 000 brokers takes milliseconds
BROKER_EVERY_S = 30  # RocketMQ brokers register (full topic table) every 30 s
TARGET_UTILIZATION = 0.5  # leave half the primary for bursts, expiry scans, snapshots, failover catch-up


class RecordingStore(RouteStore):
    """A store that remembers the last script call it sent, as the EVALSHA command Redis receives (so the bench
    replays exactly what the store sends, whichever way the store's calls reach the socket)."""

    last: tuple[Any, ...] = ()

    async def _evalsha(self, redis: Any, sha: str, keys: Sequence[str], args: Sequence[Any], replicas: int) -> Any:
        self.last = ("EVALSHA", sha, len(keys), *keys, *args)
        return await super()._evalsha(redis, sha, keys, args, replicas)


def broker(name: str, n: int, counter: int, addr: str, read: int = 8) -> RegisterBroker:
    return RegisterBroker(cluster="Cap", broker_name=name, broker_id=0, broker_addr=addr, ha_server_addr="",
                          topics={f"CapTopic{i:05d}": TopicConfig(read, read, 6, 0) for i in range(n)},
                          data_version=DataVersion(1_700_000_000_000, counter, 0))


def replay(port: int, args: Sequence[Any], requests: int, clients: int = 50, pipeline: int = 8) -> float:
    """requests/s redis-benchmark achieves with this command (replayed verbatim)."""
    cmd = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-n", str(requests), "-c", str(clients),
           "-P", str(pipeline), "--csv", *[str(a) for a in args]]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True).stdout
    rows = list(csv.reader(io.StringIO(out)))
    return float(rows[-1][1])


async def run(args: argparse.Namespace) -> dict[str, Any]:
    size = SIZES[args.size]
    requests = args.requests or size["requests"]
    results: list[dict[str, Any]] = []
    async with BenchRedis() as bench:
        port = bench.server.port
        client = aioredis.Redis(host="127.0.0.1", port=port, decode_responses=True)
        store = RecordingStore(client, PREFIX)
        await store.load_scripts()
        assert bench.client is not None
        await bench.client.config_set("slowlog-log-slower-than", -1)  # commandstats only: the slow log costs

        async def case(name: str, per_broker_every_s: float | None, prepare: Any, notes: str = "",
                       calls: int = requests) -> None:
            await prepare()
            captured = store.last
            await bench.client.config_resetstat()
            rps = replay(port, captured, calls)
            stats = await bench.client.info("commandstats")
            usec = float(stats["cmdstat_evalsha"]["usec_per_call"])
            row: dict[str, Any] = {"case": name, "calls_per_s": round(rps), "redis_usec_per_call": round(usec, 1),
                                   "requests": calls, "notes": notes}
            if per_broker_every_s:
                row["brokers_at_50pct"] = int(rps * TARGET_UTILIZATION * per_broker_every_s)
            results.append(row)
            print(f"{name}: {rps:.0f} calls/s, {usec:.1f} µs/call in Redis", flush=True)

        for n in size["topics"]:
            async def unchanged(n: int = n) -> None:
                await store.register_broker(broker(f"cap{n}", n, 1, f"10.8.0.{n % 250}:10911"))
                await store.register_broker(broker(f"cap{n}", n, 1, f"10.8.0.{n % 250}:10911"))

            await case(f"registerBroker, {n} topics, data version unchanged (the 30 s re-registration)",
                       BROKER_EVERY_S, unchanged)
        for n in size["same_bytes"]:
            async def same_bytes(n: int = n) -> None:
                req = broker(f"same{n}", n, 1, f"10.9.0.{n % 250}:10911")
                await store.register_broker(req, digest=f"bench-digest-{n}")
                assert await store.register_unchanged(f"bench-digest-{n}") is not None

            await case(f"registerBroker, {n} topics, the same bytes again (unchanged: decided by digest, no topic "
                       "touched)", BROKER_EVERY_S, same_bytes)
        fleet = [(f"hb{i}", f"10.6.{i // 250}.{i % 250}:10911") for i in range(max(size["batch"]))]
        for name, addr in fleet:
            await store.register_broker(RegisterBroker(cluster="Cap", broker_name=name, broker_id=0,
                                                       broker_addr=addr, ha_server_addr="", topics={}))
        for b in size["batch"]:
            async def beats(b: int = b) -> None:
                await store.heartbeat_many([("Cap", addr, None) for _, addr in fleet[:b]])

            await case(f"heartbeat, batch of {b}", BROKER_EVERY_S / b if b == 1 else None, beats,
                       notes="" if b == 1 else f"{b} brokers per call")
        touched = [f"10.7.{i // 250}.{i % 250}:10911" for i in range(size["touch"])]
        for i, addr in enumerate(touched):
            await store.register_broker(RegisterBroker(cluster="Cap", broker_name=f"tl{i}", broker_id=0,
                                                       broker_addr=addr, ha_server_addr="", topics={}))

        async def touch() -> None:  # ages spread over a flush period; replayed, each call dates them by Redis's TIME
            assert await store.touch_live([("Cap", addr, i % 1000) for i, addr in enumerate(touched)]) > 0

        await case(f"touchLive, batch of {len(touched)} (heartbeats and unchanged registrations, batched)", None,
                   touch, notes=f"{len(touched)} brokers per call",
                   calls=max(min(requests, 200), int(requests * TOUCH_REQUESTS)))
        await store.register_broker(broker("route-a", 10, 1, "10.5.0.1:10911"))
        await store.register_broker(broker("route-b", 10, 1, "10.5.0.2:10911"))

        async def route() -> None:
            assert await store.get_route("CapTopic00003") is not None

        await case("getRoute, topic on 2 brokers (route-cache miss)", None, route)
        version = await bench.version()
        await client.aclose()
    return {"benchmark": "redis-capacity", **environment(version),
            "params": {"size": args.size, "requests": requests, "clients": 50, "pipeline": 8,
                       "target_utilization": TARGET_UTILIZATION, "broker_every_s": BROKER_EVERY_S},
            "results": results}


def markdown(doc: dict[str, Any]) -> str:
    lines = ["| operation | calls/s, one primary | Redis µs/call | brokers at 50 % of the primary |",
             "|---|---|---|---|"]
    for r in doc["results"]:
        brokers = f"{r['brokers_at_50pct']:,}" if "brokers_at_50pct" in r else ""
        lines.append(f"| {r['case']} | {r['calls_per_s']:,} | {r['redis_usec_per_call']} | {brokers} |")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.redis_capacity", description=__doc__.split("\n\n")[0])
    p.add_argument("--tiny", dest="size", action="store_const", const="tiny", default="full")
    p.add_argument("--requests", type=int, default=0, help="calls replayed per operation")
    p.add_argument("--out", default="", help="JSON output path")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if shutil.which("redis-benchmark") is None:
        sys.exit("redis-benchmark is not installed (apt-get install -y redis-tools)")
    doc = asyncio.run(run(args))
    out = args.out or str(RESULTS / ("redis-capacity.json" if args.size == "full" else "redis-capacity-tiny.json"))
    from pathlib import Path

    write_json(Path(out), doc)
    print(markdown(doc))
    return doc


if __name__ == "__main__":
    main()
