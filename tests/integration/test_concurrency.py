"""Several OS processes hammer one real Redis (one prefix) with random route operations at once.

Each worker is a separate process (multiprocessing, spawn) with its own RouteStore and event loop (half of them
apply registrations of more than two topics in steps), running register / heartbeat / unregister / expire /
delete topic / register topic / wipe and add write perm / KV for a bounded time and op count. Liveness uses an
explicit `now` on a shared clock (ms since a common start, sped up, with per-call jitter so workers disagree a
little) and short timeouts, so expiry really fires while other workers re-register. Afterwards the structural
invariants hold, and once every broker has fallen silent a far-future expiry leaves only the version counter, KV
config, runtime config and snapshots.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import random
import time
import uuid
from collections import Counter

import pytest
import redis.asyncio as aioredis

from service.errors import BrokerNameConflict, BrokerNotFound
from service.models import BrokerIdentity, DataVersion, QueueData, RegisterBroker, TopicConfig
from service.store import RouteStore
from service.store.keys import ORDER_TOPIC_CONFIG
from service.store.routes import StoreLimits
from tests.invariants import check_invariants, read_tables

pytestmark = [pytest.mark.redis, pytest.mark.integration]

WORKERS = 4
SECONDS = 4.0
MAX_OPS = 4000
SPEEDUP = 20  # clock ms per wall ms: timeouts of 1-8 s pass many times within the run
CLUSTERS = ["C0", "C1", "C2"]
NAMES = [f"b{i}" for i in range(6)]
HOME = {n: CLUSTERS[i % 3] for i, n in enumerate(NAMES)}  # brokerName -> its usual cluster
ADDRS = [f"10.0.0.{i}:10911" for i in range(1, 9)]
TOPICS = [f"T{i}" for i in range(10)]
T_BASE = 1_700_000_000_000


async def _work(url: str, prefix: str, seed: int, start_wall: float) -> dict[str, int]:
    rng = random.Random(seed)
    client = aioredis.Redis.from_url(url, decode_responses=True)
    # Half the workers apply every registration of more than 2 topics in steps (service/store/chunked.py).
    store = RouteStore(client, prefix=prefix, limits=StoreLimits(chunk_topics=2 if seed % 2 else 0))
    await store.load_scripts()
    counts: Counter[str] = Counter()
    counter = 0

    def now() -> int:
        return T_BASE + int((time.time() - start_wall) * 1000 * SPEEDUP) + rng.randint(-300, 300)

    deadline = time.monotonic() + SECONDS
    try:
        for _ in range(MAX_OPS):
            if time.monotonic() > deadline:
                break
            op = rng.choices(["register", "heartbeat", "unregister", "expire", "delete", "register_topic",
                              "perm", "kv"], weights=[30, 25, 8, 10, 5, 8, 6, 2])[0]
            name = rng.choice(NAMES)
            cluster = HOME[name] if rng.random() < 0.95 else rng.choice(CLUSTERS)  # rare conflicts
            addr = rng.choice(ADDRS)
            if op == "register":
                counter += 1
                topics = {t: TopicConfig(rng.choice([4, 8]), rng.choice([4, 8]), rng.choice([6, 4, 7]),
                                         rng.choice([0, 1, 2]))
                          for t in rng.sample(TOPICS, rng.randint(0, 5))}
                req = RegisterBroker(
                    cluster, name, rng.choice([0, 0, 1, 2]), addr, addr.replace("10911", "10912"), topics,
                    DataVersion(seed, counter, rng.randint(0, 2)),
                    enable_acting_master=rng.choice([None, True, False]),
                    heartbeat_timeout_ms=rng.choice([1_000, 3_000, 8_000]),
                    filter_server_list=rng.choice([None, [], ["10.9.0.1:1"]]))
                try:
                    res = await store.register_broker(
                        req, delete_topic_with_broker_registration=rng.random() < 0.3, now=now())
                    counts["fenced" if res.fenced else "registered"] += 1
                except BrokerNameConflict:
                    counts["conflict"] += 1
            elif op == "heartbeat":
                res = await store.heartbeat(cluster, addr, None, now=now())
                counts["heartbeat_hit" if res.data_version else "heartbeat_miss"] += 1
            elif op == "unregister":
                res = await store.unregister_broker(BrokerIdentity(cluster, name, 0, addr))
                counts[f"unregister_{res}"] += 1
            elif op == "expire":
                # a scan may also run "late" (up to 5 s of clock ahead), racing re-registrations
                late = rng.choice([0, 0, 1_500, 5_000])
                res = await store.expire(batch=rng.choice([1, 3, 100]), now=now() + late)
                counts["expired"] += len(res.expired)
            elif op == "delete":
                await store.delete_topic(rng.choice(TOPICS), rng.choice([None, *CLUSTERS]))
                counts["delete"] += 1
            elif op == "register_topic":
                qds = [QueueData(n, 4, 4, 6, 0) for n in rng.sample(NAMES, rng.randint(1, 2))]
                try:
                    await store.register_topic(rng.choice(TOPICS), qds)
                    counts["topic_registered"] += 1
                except BrokerNotFound:
                    counts["topic_refused"] += 1
            elif op == "perm":
                if rng.random() < 0.5:
                    await store.wipe_write_perm(name)
                else:
                    await store.add_write_perm(name)
                counts["perm"] += 1
            else:
                await store.kv_put(ORDER_TOPIC_CONFIG, rng.choice(TOPICS), f"{name}:8")
                counts["kv"] += 1
            counts["ops"] += 1
    finally:
        await client.aclose()
    return dict(counts)


def worker(args: tuple[str, str, int, float]) -> dict[str, int]:
    """Process entry point (module level, so the spawn context can import it)."""
    return asyncio.run(_work(*args))


async def test_concurrent_workers_keep_the_tables_consistent(redis_server):
    prefix = "conc" + uuid.uuid4().hex[:8]
    ctx = mp.get_context("spawn")
    start_wall = time.time() + 1.0  # the shared clock starts once the workers are up (spawn takes a moment)
    loop = asyncio.get_running_loop()
    with ctx.Pool(WORKERS) as pool:
        jobs = [(redis_server.url, prefix, seed, start_wall) for seed in range(WORKERS)]
        pending = pool.map_async(worker, jobs)
        results = await loop.run_in_executor(None, pending.get, 60)
    total: Counter[str] = Counter()
    for r in results:
        assert r["ops"] > 50, r  # every worker really ran
        total.update(r)
    # the mix did what it is for: expiry fired, registrations and refusals happened
    assert total["registered"] > 100 and total["expired"] > 0 and total["heartbeat_hit"] > 0, total
    assert total["conflict"] + total["topic_refused"] > 0, total

    client = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
    try:
        await check_invariants(client, prefix)
        store = RouteStore(client, prefix=prefix)
        await store.put_runtime_config({"orderMessageEnable": "true"})
        # every broker falls silent
        res = await store.expire_all(batch=3, now=T_BASE + 10 * 86_400_000)
        assert not res.more
        await check_invariants(client, prefix)
        tables = await read_tables(client, prefix)
        assert not tables["topics"] and not tables["brokers"] and not tables["live"]
        base = store.keys.base
        left = {key[len(base):] async for key in client.scan_iter(match=base + "*", count=1000)}
        allowed = {"ver", "civer", "tlver", "kvns", "config",  # the counters outlive the data, as ver does,
                   "cilog",  # and the cluster-info change log keeps the last 10 minutes' changes,
                   "bl"}  # and the brokers' lines the civer they are current at
        assert set(await client.hkeys(base + "bl")) <= {"#"}
        stray = {k for k in left if k not in allowed and not k.startswith(("kv:", "snap"))}
        assert stray == set(), stray
        assert {"ver", "kvns", "config", "kv:" + ORDER_TOPIC_CONFIG} <= left
        assert await store.topic_list() == [] and (await store.cluster_info()).cluster_addr_table == {}
    finally:
        await client.aclose()


async def _register_until(url: str, prefix: str, seed: int, start_wall: float, seconds: float) -> int:
    """Register broker `big` (one address) again and again from `start_wall` for `seconds`, each time with this
    process's own queue count on every one of its 60 topics and a new data version, in steps of 7 topics."""
    client = aioredis.Redis.from_url(url, decode_responses=True)
    store = RouteStore(client, prefix=prefix, limits=StoreLimits(chunk_topics=7))
    queues = seed + 1
    topics = {f"T{i:02d}": TopicConfig(queues, queues, 6, 0) for i in range(60)}
    await asyncio.sleep(max(0.0, start_wall - time.time()))  # all at once: their last registrations overlap
    rounds = 0
    try:
        while time.time() < start_wall + seconds:
            await store.register_broker(RegisterBroker("C", "big", 0, "10.0.0.1:10911", "", topics,
                                                       DataVersion(seed, rounds, 0)),
                                        delete_topic_with_broker_registration=True)
            rounds += 1
    finally:
        await client.aclose()
    return rounds


def register_until(args: tuple[str, str, int, float, float]) -> int:
    return asyncio.run(_register_until(*args))


async def test_chunked_registrations_of_one_broker_from_several_processes_never_mix(redis_server):
    """Three processes re-register one broker, each with its own queue count on every topic, in steps: chunks of
    one interleave with the others' in Redis, but a registration that another began after is fenced off, so once
    they are all done every topic carries the queue count of one and the same registration."""
    prefix = "mix" + uuid.uuid4().hex[:8]
    ctx = mp.get_context("spawn")
    loop = asyncio.get_running_loop()
    start_wall = time.time() + 1.5  # once every process is up (spawn takes a moment)
    with ctx.Pool(3) as pool:
        pending = pool.map_async(register_until, [(redis_server.url, prefix, seed, start_wall, 2.0)
                                                  for seed in range(3)])
        rounds = await loop.run_in_executor(None, pending.get, 120)
    assert min(rounds) > 10, rounds
    client = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
    try:
        await check_invariants(client, prefix)
        store = RouteStore(client, prefix=prefix)
        counts = set()
        for i in range(60):
            route = await store.get_route(f"T{i:02d}")
            counts |= {q.read_queue_nums for q in route.queue_datas}
        assert len(counts) == 1, counts
        left = {key async for key in client.scan_iter(match=store.keys.base + "rs:*")}
        assert left == set()  # staged names of fenced registrations are gone with them
    finally:
        await client.aclose()
