"""Stepped cluster-info reads while brokers keep changing (issue 40 item 2): 10 000 brokers on a redis-server of its
own, one broker unregistering or registering again about every 20 ms, 20 reads through the store; how each read
ended (steps, caught_up, whole), its wall time, and the Redis commands over 1 ms (SLOWLOG).

    python -m benchmarks.cluster_info_churn                   # this checkout
    SRC=/path/to/other/checkout python -m benchmarks.cluster_info_churn   # another one's code (its service/lua
                                                              # must resolve: `ln -s ../lua service/lua` there)
"""

from __future__ import annotations

import asyncio
import collections
import os
import sys
import time

if os.environ.get("SRC"):
    sys.path.insert(0, os.environ["SRC"])

import redis.asyncio as aioredis  # noqa: E402

from service.models import BrokerIdentity, DataVersion, RegisterBroker  # noqa: E402
from service.store import RouteStore  # noqa: E402
from tests.redis_server import RedisServer  # noqa: E402

BROKERS, READS, EVERY_S = 10_000, 20, 0.012


def registration(i: int) -> RegisterBroker:
    return RegisterBroker(cluster=f"C{i % 10}", broker_name=f"b{i:05}", broker_id=0,
                          broker_addr=f"10.{i // 250}.{i % 250}.1:10911", ha_server_addr="", topics={},
                          data_version=DataVersion(1, 1, 0))


async def churn(store: RouteStore, stop: asyncio.Event) -> int:
    """Unregister a broker, register it again, the next one...: the changes made."""
    i = 0
    while not stop.is_set():
        b = (i // 2) * 7 % BROKERS
        reg = registration(b)
        if i % 2 == 0:
            await store.unregister_broker(BrokerIdentity(reg.cluster, reg.broker_name, 0, reg.broker_addr))
        else:
            await store.register_broker(reg)
        i += 1
        await asyncio.sleep(EVERY_S)
    return i


async def run(url: str) -> None:
    r = aioredis.Redis.from_url(url, decode_responses=True)
    store = RouteStore(r, prefix="churn")
    for k in range(0, BROKERS, 200):
        await asyncio.gather(*(store.register_broker(registration(i)) for i in range(k, k + 200)))
    await r.config_set("slowlog-log-slower-than", 1000)
    await r.config_set("slowlog-max-len", 100_000)
    await r.slowlog_reset()
    stop = asyncio.Event()
    task = asyncio.create_task(churn(store, stop))
    hows: collections.Counter[str] = collections.Counter()
    walls = []
    for _ in range(READS):
        t = time.perf_counter()
        _, _, how = await store.cluster_info_read()
        walls.append((time.perf_counter() - t) * 1000)
        hows[how] += 1
    stop.set()
    changes = await task
    slow: dict[str, list[float]] = collections.defaultdict(list)
    for e in await r.slowlog_get(100_000):
        parts = e["command"].split() if isinstance(e["command"], str) else e["command"].decode().split()
        name = "EVALSHA on " + parts[3] if parts[0].upper() == "EVALSHA" and len(parts) > 3 else parts[0]
        slow[name].append(e["duration"] / 1000)
    walls.sort()
    print(f"reads: {dict(hows)}; wall p50 {walls[len(walls) // 2]:.1f} ms, max {walls[-1]:.1f} ms; "
          f"{changes} changes meanwhile")
    for name, d in sorted(slow.items(), key=lambda kv: -max(kv[1]))[:6]:
        over = sum(x > 20 for x in d)
        print(f"  {name[:56]:56s} {len(d):6d} over 1 ms, longest {max(d):7.2f} ms, over 20 ms: {over}")
    await r.aclose()


def main() -> None:
    srv = RedisServer().start()
    try:
        asyncio.run(run(srv.url))
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
