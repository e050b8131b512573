"""The steps of large registrations on a real Redis: how long each registration takes in all and how long its
longest single Redis command (step) runs, with the store called directly (no worker, no HTTP).

    python -m benchmarks.chunk_steps [--topics 100000] [--chunk-topics 2000] [--tiny] [--out benchmarks/results]

Cases, one broker, in order: its first registration; a registration with every queue count changed; one that
keeps 60 % of the topics changed and drops the rest (deleteTopicWithBrokerRegistration); the same bytes again
(the O(1) unchanged path). Redis' SLOWLOG (every command over 0.1 ms) is read after each case.
Issue 26 item 2: every step under ~20 ms at 100 000 topics.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import redis.asyncio as aioredis

from benchmarks.harness import git_info, machine_info, write_results
from service.models import DataVersion, RegisterBroker, TopicConfig
from service.store import RouteStore
from service.store.routes import StoreLimits
from tests.redis_server import RedisServer

ROOT = Path(__file__).resolve().parent


def broker(n: int, queues: int, counter: int) -> RegisterBroker:
    return RegisterBroker(cluster="C", broker_name="big", broker_id=0, broker_addr="10.0.0.1:10911",
                          ha_server_addr="", topics={f"T{i:06d}": TopicConfig(queues, queues, 6, 0) for i in range(n)},
                          data_version=DataVersion(1, counter, 0))


async def run(args: argparse.Namespace, url: str) -> list[dict]:
    r = aioredis.Redis.from_url(url, decode_responses=True)
    store = RouteStore(r, prefix="steps", limits=StoreLimits(chunk_topics=args.chunk_topics, bulk_deadline_s=60))
    await r.config_set("slowlog-log-slower-than", 100)
    await r.config_set("slowlog-max-len", 100_000)
    n, rows = args.topics, []
    cases = [("first registration", broker(n, 8, 1), ""),
             ("every queue count changed", broker(n, 4, 2), ""),
             ("60 % kept and changed, 40 % deleted", broker(n * 6 // 10, 2, 3), "d3"),
             ("the same bytes again (unchanged path)", None, "d3")]
    for name, req, digest in cases:
        await r.slowlog_reset()
        t0 = time.perf_counter()
        if req is None:
            res = await store.register_unchanged(digest, delete_topic_with_broker_registration=True)
            assert res is not None and res.unchanged
        else:
            res = await store.register_broker(req, delete_topic_with_broker_registration=True, digest=digest)
        took = time.perf_counter() - t0
        slow = await r.slowlog_get(100_000)
        rows.append({"case": name, "changed_topics": res.changed_topics, "total_s": took,
                     "commands_over_0_1ms": len(slow),
                     "longest_ms": max((e["duration"] for e in slow), default=0) / 1000})
    await r.aclose()
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--topics", type=int, default=100_000)
    p.add_argument("--chunk-topics", type=int, default=1000)
    p.add_argument("--tiny", action="store_true", help="the CI smoke test (5 000 topics)")
    p.add_argument("--out", default=str(ROOT / "results"))
    args = p.parse_args(argv)
    if args.tiny:
        args.topics = 5_000
    server = RedisServer().start()
    try:
        rows = asyncio.run(run(args, server.url))
    finally:
        server.cleanup()
    doc = {"date": time.strftime("%Y-%m-%d"), "git_sha": git_info()["sha"][:10], "machine": machine_info(),
           "topics": args.topics, "chunk_topics": args.chunk_topics, "results": rows}
    table = "\n".join([
        f"Measured {doc['date']} on {doc['machine']['summary']}, git {doc['git_sha']}: one broker of {args.topics} "
        f"topics, steps of {args.chunk_topics} topics, store called directly on a real redis-server.",
        "",
        "| case | topics changed | registration s | Redis commands over 0.1 ms | longest ms |",
        "|---|---|---|---|---|",
        *(f"| {r['case']} | {r['changed_topics']} | {r['total_s']:.3f} | {r['commands_over_0_1ms']} | "
          f"{r['longest_ms']:.2f} |" for r in rows),
    ]) + "\n"
    write_results(Path(args.out), "chunk-steps", doc, table, args.tiny)
    return 0


if __name__ == "__main__":
    sys.exit(main())
