"""Snapshot bytes per row with realistic topic names: `python -m benchmarks.snapshot_size` (one-off measurement)."""
import asyncio
import random
import string

import redis.asyncio as aioredis

from service.models import RegisterBroker, TopicConfig
from service.snapshot import take_snapshot
from service.store import RouteStore
from tests.redis_server import RedisServer

random.seed(7)
words = ["order","payment","user","inventory","audit","event","click","log","shipment","refund","notify","risk","search","cart","price"]
def name():
    return "-".join(random.choice(words) for _ in range(random.randint(2,4))) + "-" + "".join(random.choices(string.ascii_lowercase+string.digits, k=6))
async def main(url):
    store = RouteStore(aioredis.Redis.from_url(url, decode_responses=True), "sz")
    topics = [name() for _ in range(20000)]
    for b in range(40):
        mine = random.sample(topics, 2500)
        await store.register_broker(RegisterBroker(f"cluster-{b%4}", f"broker-{b:03d}", 0, f"10.0.{b}.1:10911", "", {t: TopicConfig(random.choice([4,8,16]), random.choice([4,8,16]), 6, 0) for t in mine}))
    sid = await take_snapshot(store, 3600)
    rows, nbytes = await store.redis.hmget(store.keys.snapshot(sid), "rows", "bytes")
    print(rows, nbytes, int(nbytes)/int(rows))
srv = RedisServer().start()
try: asyncio.run(main(srv.url))
finally: srv.cleanup()
