"""Route-store benchmark: Redis time of the heavy scripts, on a redis-server of its own (loopback, keys under
`{bench}`).

- register of one broker with 1 000 (and 10 000) topics, all changed (data version moved, every queue
  data differs), and with the data version unchanged (the SMISMEMBER fast path);
- expiry scan over 10 000 live brokers (5 topics each) with 0 due, with 200 due (one call of batch 200) and
  with 2 000 due (expire_all: several bounded calls; the longest single call is the longest Redis block);
- expiry of 20 due brokers of 1 000 topics each (a batch bounds brokers, not topics).

Redis-side time comes from SLOWLOG (`slowlog-log-slower-than 0`) and INFO commandstats, client time from
perf_counter; see benchmarks/harness.py.

    python -m benchmarks.store_bench [--full | --quick | --tiny] [--out PATH] [--topics 1000,10000]
                                     [--brokers 10000] [--expired 0,200,2000] [--wide 20,1000]
                                     [--batch 200] [--repeat N] [--warmup N]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness import PREFIX, RESULTS, BenchRedis, environment, markdown_table, measure, write_json
from service.models import DataVersion, RegisterBroker, TopicConfig
from service.store import RouteStore

log = logging.getLogger("benchmarks.store_bench")

T1 = 1_700_000_000_000  # the bench's clock (explicit `now`), ms
DAY = 86_400_000
TOPICS_PER_BROKER = 5
TOPIC_POOL = 2_000
REGISTER_TARGET_MS = 10.0  # DESIGN.md §9: 1 000 changed topics <= 10 ms of Redis time


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def big_broker(n_topics: int, counter: int) -> RegisterBroker:
    """Queue counts alternate with the data-version counter, so a new counter changes every queue data."""
    queues = 8 + 8 * (counter % 2)
    topics = {f"R{n_topics}-{i:06d}": TopicConfig(queues, queues, 6) for i in range(n_topics)}
    return RegisterBroker("bench-reg", f"reg{n_topics}", 0, f"10.255.{n_topics % 250}.1:10911", "", topics,
                          DataVersion(T1, counter, 0), enable_acting_master=True, heartbeat_timeout_ms=DAY)


def fleet_broker(i: int) -> RegisterBroker:
    topics = {f"BT{(i * TOPICS_PER_BROKER + k) % TOPIC_POOL:05d}": TopicConfig(8, 8, 6)
              for k in range(TOPICS_PER_BROKER)}
    addr = f"10.{i // 65536}.{(i // 256) % 256}.{i % 256}:10911"
    return RegisterBroker(f"bench-c{i % 4}", f"bn{i:05d}", 0, addr, "", topics, DataVersion(T1, 1, 0),
                          enable_acting_master=True, heartbeat_timeout_ms=120_000)


async def register_many(store: RouteStore, reqs: Sequence[RegisterBroker], now: int, chunk: int = 50) -> None:
    for i in range(0, len(reqs), chunk):
        await asyncio.gather(*(store.register_broker(r, now=now) for r in reqs[i:i + chunk]))


async def register_cases(bench: BenchRedis, store: RouteStore, sizes: Sequence[int], repeat: int,
                         warmup: int) -> list[dict[str, Any]]:
    rows = []
    for n in sizes:
        state = {"counter": 1}
        await store.register_broker(big_broker(n, 1), now=T1)

        async def changed(n: int = n, state: dict[str, int] = state) -> None:
            state["counter"] += 1
            res = await store.register_broker(big_broker(n, state["counter"]), now=T1)
            assert res.changed_topics == n, res

        async def unchanged(n: int = n, state: dict[str, int] = state) -> None:
            res = await store.register_broker(big_broker(n, state["counter"]), now=T1)
            assert res.changed_topics == 0, res

        reps = repeat if n <= 1000 else max(min(repeat, 10), repeat // (n // 1000))
        rows.append(await measure(bench, f"register, {n:,} topics, all changed", changed, repeat=reps,
                                  warmup=warmup, target_ms=REGISTER_TARGET_MS if n == 1000 else None))
        rows.append(await measure(bench, f"register, {n:,} topics, data version unchanged", unchanged,
                                  repeat=reps, warmup=warmup))
        log.info("register %d topics done", n)
    return rows


async def expiry_cases(bench: BenchRedis, store: RouteStore, n_brokers: int, expired: Sequence[int],
                       batch: int, repeat: int, warmup: int) -> list[dict[str, Any]]:
    fleet = [fleet_broker(i) for i in range(n_brokers)]
    await register_many(store, fleet, now=T1)
    log.info("%d live brokers registered", n_brokers)
    scan_now = T1 + 60_000  # nothing registered at T1 (timeout 120 s) is due
    rows = []
    for k in expired:
        due = fleet[:k]

        async def setup(due: Sequence[RegisterBroker] = due) -> None:
            await register_many(store, due, now=T1 - 200_000)  # deadline T1 - 80 s: due at scan_now

        async def scan(k: int = k) -> None:
            res = await store.expire_all(batch=batch, now=scan_now)
            assert len(res.expired) == k and not res.more, (len(res.expired), k)

        reps = repeat * 10 if k == 0 else max(2, repeat // max(1, k // 200))
        label = (f"expiry scan, {n_brokers:,} live, none due" if k == 0 else
                 f"expiry, {n_brokers:,} live, {k:,} due (batch {batch})")
        rows.append(await measure(bench, label, scan, repeat=reps, warmup=warmup if k == 0 else 1,
                                  setup=setup if k else None,
                                  notes=f"{TOPICS_PER_BROKER} topics per broker; "
                                        "expire_all until a call is not full"))
        log.info("expiry with %d due done", k)
    return rows


async def wide_expiry_case(bench: BenchRedis, store: RouteStore, n_brokers: int, n_topics: int, batch: int,
                           repeat: int) -> dict[str, Any]:
    """Brokers with many topics: a batch bounds the broker count, so its block grows with their topics."""
    wide = [RegisterBroker("bench-wide", f"wide{i:03d}", 0, f"10.254.{i // 250}.{i % 250}:10911", "",
                           {f"W{i:03d}-{j:05d}": TopicConfig(8, 8, 6) for j in range(n_topics)},
                           DataVersion(T1, 1, 0), enable_acting_master=True, heartbeat_timeout_ms=120_000)
            for i in range(n_brokers)]

    async def setup() -> None:
        await register_many(store, wide, now=T1 - 200_000, chunk=5)

    async def scan() -> None:
        res = await store.expire_all(batch=batch, now=T1 + 60_000)
        assert len(res.expired) == n_brokers and not res.more, len(res.expired)

    return await measure(bench, f"expiry, {n_brokers:,} due × {n_topics:,} topics each (batch {batch})", scan,
                         repeat=max(2, repeat // 10), warmup=1, setup=setup,
                         notes="the batch bounds brokers, not topics")


async def run(args: argparse.Namespace) -> dict[str, Any]:
    async with BenchRedis() as bench:
        assert bench.client is not None
        store = RouteStore(bench.client, prefix=PREFIX)
        await store.load_scripts()
        rows = await register_cases(bench, store, args.topics, args.repeat, args.warmup)
        rows += await expiry_cases(bench, store, args.brokers, args.expired, args.batch, args.repeat,
                                   args.warmup)
        if args.wide and args.wide[0]:
            n, t = args.wide
            rows.append(await wide_expiry_case(bench, store, n, t, args.batch, args.repeat))
        doc = environment(await bench.version())
    doc.update({
        "benchmark": "store",
        "params": {"mode": args.mode, "topics": args.topics, "brokers": args.brokers,
                   "expired": args.expired, "wide": args.wide, "batch": args.batch, "repeat": args.repeat,
                   "warmup": args.warmup, "topics_per_broker": TOPICS_PER_BROKER},
        "results": rows,
    })
    return doc


SIZES = {  # mode -> (register sizes, live brokers, due brokers per expiry case, repeat, wide expiry)
    "full": ([1000, 10_000], 10_000, [0, 200, 2_000], 50, [20, 1000]),
    "quick": ([1000], 2_000, [0, 200], 10, [20, 1000]),
    "tiny": ([20], 60, [0, 5], 2, [2, 20]),
}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.store_bench", description=__doc__.split("\n")[0])
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--full", action="store_true", help="DESIGN.md §9 sizes (default; about a minute)")
    mode.add_argument("--quick", action="store_true", help="small sizes, a few repeats (seconds)")
    mode.add_argument("--tiny", action="store_true", help="smoke-test sizes (about a second)")
    p.add_argument("--out", type=Path,
                   help="JSON results (default benchmarks/results/store.json, store-<mode>.json otherwise)")
    p.add_argument("--topics", type=_ints, help="register sizes, comma-separated (default 1000,10000)")
    p.add_argument("--brokers", type=int, help="live brokers for the expiry scan (default 10000)")
    p.add_argument("--expired", type=_ints, help="due brokers per expiry case (default 0,200,2000)")
    p.add_argument("--wide", type=_ints,
                   help="N,T: also expire N due brokers of T topics each (default 20,1000; 0,0 skips)")
    p.add_argument("--batch", type=int, default=200, help="expiry batch per script call (default 200)")
    p.add_argument("--repeat", type=int, help="measured repetitions per case (scaled down for big cases)")
    p.add_argument("--warmup", type=int, default=3)
    args = p.parse_args(argv)
    args.mode = "tiny" if args.tiny else "quick" if args.quick else "full"
    topics, brokers, expired, repeat, wide = SIZES[args.mode]
    args.topics = args.topics or topics
    args.brokers = args.brokers or brokers
    args.expired = args.expired if args.expired is not None else expired
    args.repeat = args.repeat or repeat
    args.wide = wide if args.wide is None else args.wide
    if args.tiny:
        args.batch = min(args.batch, 4)
        args.warmup = min(args.warmup, 1)
    args.out = args.out or RESULTS / ("store.json" if args.mode == "full" else f"store-{args.mode}.json")
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    args = parse_args(argv)
    doc = asyncio.run(run(args))
    write_json(args.out, doc)
    m = doc["machine"]
    print(f"\nstore bench, {doc['date']}, git {doc['git']['sha'][:12]}, {m['cpu']} ×{m['cpu_count']}, "
          f"redis-server {doc['versions']['redis-server']}\n")
    print(markdown_table(doc["results"]))
    print(f"\nJSON: {args.out}")
    return doc


if __name__ == "__main__":
    main()
