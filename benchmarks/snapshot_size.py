"""Snapshot bytes per row with realistic topic names: `python -m benchmarks.snapshot_size`.

40 brokers in 4 clusters, 20 000 topics named like `order-payment-audit-x7k2q9`, 2 500 topics per broker with
mixed queue counts (100 000 rows); prints rows, bytes and bytes per row of one snapshot.
"""

from __future__ import annotations

import asyncio
import random
import string

import redis.asyncio as aioredis

from service.models import RegisterBroker, TopicConfig
from service.store import RouteStore, SnapshotStore
from tests.redis_server import RedisServer


async def take_snapshot(store, retention_s=86_400, **kw) -> str:
    return (await SnapshotStore(store).take(retention_s, **kw)).snap_id

WORDS = ["order", "payment", "user", "inventory", "audit", "event", "click", "log", "shipment", "refund",
         "notify", "risk", "search", "cart", "price"]


def topic_name(rng: random.Random) -> str:
    words = "-".join(rng.choice(WORDS) for _ in range(rng.randint(2, 4)))
    return words + "-" + "".join(rng.choices(string.ascii_lowercase + string.digits, k=6))


async def measure(url: str) -> tuple[int, int]:
    rng = random.Random(7)
    store = RouteStore(aioredis.Redis.from_url(url, decode_responses=True), "sz")
    topics = [topic_name(rng) for _ in range(20_000)]
    for b in range(40):
        table = {t: TopicConfig(rng.choice([4, 8, 16]), rng.choice([4, 8, 16]), 6, 0)
                 for t in rng.sample(topics, 2500)}
        await store.register_broker(RegisterBroker(f"cluster-{b % 4}", f"broker-{b:03d}", 0, f"10.0.{b}.1:10911",
                                                   "", table))
    snap_id = await take_snapshot(store, 3600)
    rows, nbytes = await store.redis.hmget(store.keys.snapshot(snap_id), "rows", "bytes")
    await store.redis.aclose()
    return int(rows), int(nbytes)


def main() -> None:
    server = RedisServer().start()
    try:
        rows, nbytes = asyncio.run(measure(server.url))
    finally:
        server.cleanup()
    print(f"{rows} rows, {nbytes} bytes, {nbytes / rows:.2f} bytes per row")


if __name__ == "__main__":
    main()
