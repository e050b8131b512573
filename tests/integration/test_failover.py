"""Failover under load: real `namesrv serve` workers on a real Sentinel topology (primary + replica + 3 sentinels)
and a real Redis Cluster (3 primaries + 3 replicas), serving route reads, registrations and admin writes while
the primary is failed over, killed, restarted, or the registry's slot migrates.

What is asserted is correctness, not speed: every worker keeps running (same process, no restart) and serves
again after each event; with NAMESRV_REDIS_WAIT_REPLICAS=1 no acknowledged write is missing on the new primary;
after a migration the tables are consistent and hold every acknowledged registration. The deadlines below only
bound the tests. How long the 503s last is measured by benchmarks/failover_bench.py.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
import redis
import redis.asyncio as aioredis
from redis.exceptions import RedisClusterException

from service.config import load_settings
from service.store.keys import Keys
from service.store.snapshot_reader import RedisSpec
from tests.conftest import need
from tests.integration.conftest import Namesrv
from tests.invariants import check_invariants
from tests.namesrv_load import CLUSTER, Load, topology_env, topology_url
from tests.redis_topology import HOST, ClusterTopology, RedisNode, SentinelTopology

pytestmark = [pytest.mark.redis, pytest.mark.integration]

RECOVERY_BOUND_S = 20.0  # bounds the test only; the measured windows are a few seconds (benchmarks/README.md)


@pytest.fixture
def start_workers() -> Iterator[Callable[..., list[Namesrv]]]:
    started: list[Namesrv] = []

    def start(topo: SentinelTopology | ClusterTopology, prefix: str, n: int = 2, **env: object) -> list[Namesrv]:
        ws = [Namesrv(topology_url(topo), prefix, 1, **{**topology_env(topo), **env}) for _ in range(n)]
        started.extend(ws)
        return [w.wait_ready(30) for w in ws]

    yield start
    for w in started:
        w.stop()


def pids(workers: list[Namesrv]) -> list[int | None]:
    return [w.proc.pid if w.proc.poll() is None else None for w in workers]


async def recovers(load: Load, after: float, kinds: tuple[str, ...] = ("read", "register")) -> dict[str, float]:
    return {k: await load.wait_success(k, after, RECOVERY_BOUND_S) for k in kinds}


async def failover_followed(s: SentinelTopology, load: Load, workers: list[Namesrv]) -> None:
    """SENTINEL FAILOVER left to the sentinels under `load` (the old master stays writable ~10 s): reads and
    registrations come back, and every worker dropped its connections to the old master on +switch-master."""
    await load.wait_success("register", time.monotonic(), 10)
    await asyncio.to_thread(s.failover, None, False)
    await recovers(load, time.monotonic())
    for w in workers:
        deadline = time.monotonic() + 10
        while "switched" not in w.output():
            assert time.monotonic() < deadline, w.output()
            await asyncio.sleep(0.1)


def acked_missing(load: Load, node: RedisNode, prefix: str, before: float | None = None) -> list[str]:
    """Acknowledged KV writes and registrations (ended before `before`) that `node` does not hold."""
    k = Keys(prefix)
    missing = []
    kv = node.cmd("HGETALL", k.kv("LoadNS")) or {}
    kv = dict(zip(kv[0::2], kv[1::2], strict=True)) if isinstance(kv, list) else kv
    best: dict[str, int] = {}
    for r in load.ok():
        if before is not None and r.end > before:
            continue
        if r.kind == "kv":
            key, value = r.detail
            if kv.get(key) != value:
                missing.append(f"kv {key}={value}")
        elif r.kind == "register":  # a broker's data version only grows: the highest acknowledged must be there
            i, counter = r.detail
            best[i] = max(best.get(i, 0), counter)
    for i, want in sorted(best.items()):
        stored = node.cmd("HGET", k.live_info(CLUSTER, f"10.9.0.{i}:10911"), "dv") or "0,0,0"
        if int(stored.split(",")[1]) < want:
            missing.append(f"broker lb{i}: stored data version {stored}, acknowledged counter {want}")
    return missing


# ------------------------------------------------------------------------------------------------ Sentinel


async def test_sentinel_failover_and_kill_under_load(make_sentinel_topology, start_workers):
    """SENTINEL FAILOVER left to the sentinels (the old master stays writable ~10 s: the workers leave it on
    +switch-master), then the new master SIGKILLed: reads and registrations come back, nobody restarts."""
    s: SentinelTopology = make_sentinel_topology(password="data-pw-1", sentinel_password="sentinel-pw-1")
    workers = start_workers(s, "f" + uuid.uuid4().hex[:6])
    before = pids(workers)
    async with Load([w.url for w in workers], readers=2, writers=2) as load:
        await failover_followed(s, load, workers)  # +switch-master read with the sentinel password
        await asyncio.to_thread(s.wait_settled, None, 20.0, False)  # the sentinels demote the old master

        await asyncio.to_thread(s.kill_master)
        elected = time.monotonic()
        await recovers(load, elected)
    assert pids(workers) == before


async def test_sentinel_no_acknowledged_write_lost_with_wait(make_sentinel_topology, start_workers):
    """WAIT_REPLICAS=1 for admin writes and registrations: a failover and then a SIGKILL of the primary under
    load lose none of the writes that were acknowledged. (With one replica, writes answer 503 from the kill until
    the killed node is back as a replica: WAIT needs a replica to confirm.)"""
    s: SentinelTopology = make_sentinel_topology()
    prefix = "w" + uuid.uuid4().hex[:6]
    workers = start_workers(s, prefix, redis_wait_replicas=1, redis_wait_registrations="true",
                            redis_wait_timeout_ms=500)
    before = pids(workers)
    async with Load([w.url for w in workers], readers=1, writers=2, admin_writers=2) as load:
        await load.wait_success("kv", time.monotonic(), 10)
        await asyncio.to_thread(s.failover)  # settled: the old master replicates from the new one
        elected = time.monotonic()
        await recovers(load, elected, ("read", "register", "kv"))
        await asyncio.sleep(0.5)

        killed_at = time.monotonic()
        old = s.master_node()
        new = await asyncio.to_thread(s.kill_master)
        assert acked_missing(load, new, prefix, before=killed_at) == []
        await recovers(load, time.monotonic(), ("read",))
        await asyncio.to_thread(s.restart, old)  # a replica again: WAIT can be satisfied
        await recovers(load, time.monotonic(), ("register", "kv"))
    assert load.ok("kv") and load.failed("kv", since=killed_at)  # writes were refused while unconfirmable
    assert acked_missing(load, s.master_node(), prefix) == []
    assert pids(workers) == before


async def test_sentinel_over_tls_failover_under_load(make_sentinel_topology, start_workers):
    """Sentinels and data nodes on TLS only (no plain port), replicating over TLS: workers given
    redis_sentinel_tls and the CA serve, follow +switch-master through a failover, and nobody restarts; the Spark
    job's reader reaches the master with the same settings, and without the CA it cannot connect at all."""
    need("openssl")
    # TLS handshakes make the promotion slower: a clean-clone CI run on a loaded machine saw the sentinels abort
    # it at the default 1 s failover-timeout (-failover-abort-slave-timeout)
    s: SentinelTopology = make_sentinel_topology(tls=True, password="data-pw-tls", failover_timeout_ms=5000)
    workers = start_workers(s, "t" + uuid.uuid4().hex[:6])
    before = pids(workers)
    async with Load([w.url for w in workers], readers=2, writers=2) as load:
        await failover_followed(s, load, workers)  # +switch-master read over TLS too
    assert pids(workers) == before

    env = {f"NAMESRV_{k.upper()}": v for k, v in topology_env(s).items()}
    settings = load_settings(env=env)
    assert settings.sentinel_tls_options == {"ssl": True, "ssl_ca_certs": s.tls_ca_file}
    reader = RedisSpec.from_settings(settings).client()
    try:
        assert reader.ping() and reader.connection_pool.get_master_address() == s.master_addr()
    finally:
        reader.close()
    unverified = RedisSpec.from_settings(settings.replace(redis_tls_ca_file="")).client()
    try:
        with pytest.raises(redis.ConnectionError):  # the system CAs do not know the topology's CA
            unverified.ping()
    finally:
        unverified.close()


# ------------------------------------------------------------------------------------------------- Cluster


async def test_cluster_failover_and_kill_under_load(make_cluster_topology, start_workers):
    c: ClusterTopology = make_cluster_topology(password="cluster-pw-1")
    await failover_and_kill_under_load(c, "c" + uuid.uuid4().hex[:6], start_workers, restart_old=True)


async def failover_and_kill_under_load(c: ClusterTopology, prefix: str, start_workers, restart_old: bool) -> None:
    """Workers under load through a CLUSTER FAILOVER of the registry's slot and a kill of its primary (and, with
    `restart_old`, that primary's return): every step recovers and no worker restarts."""
    slot = c.slot_of(f"{{{prefix}}}:ver")
    workers = start_workers(c, prefix)
    before = pids(workers)
    async with Load([w.url for w in workers], readers=2, writers=2) as load:
        await load.wait_success("register", time.monotonic(), 10)
        await asyncio.to_thread(c.failover, slot)
        await recovers(load, time.monotonic())
        old = c.node_for_slot(slot)
        await asyncio.to_thread(c.kill_primary, slot)
        await recovers(load, time.monotonic())
        if restart_old:
            await asyncio.to_thread(c.restart, old)
            await recovers(load, time.monotonic())
    assert pids(workers) == before


async def test_cluster_over_tls_failover_and_kill_under_load(make_cluster_topology, start_workers):
    """A Redis Cluster on TLS only (clients, replication and the cluster bus; no plain port): workers given a
    rediss:// seed with the CA serve, follow a CLUSTER FAILOVER and a kill of the registry's primary, and nobody
    restarts; the Spark job's reader reaches the cluster with the same settings, and without the CA it cannot."""
    need("openssl")
    c: ClusterTopology = make_cluster_topology(password="cluster-pw-tls", tls=True)
    await failover_and_kill_under_load(c, "s" + uuid.uuid4().hex[:6], start_workers, restart_old=False)

    env = {f"NAMESRV_{k.upper()}": v for k, v in {**topology_env(c), "redis_url": topology_url(c)}.items()}
    settings = load_settings(env=env)
    assert settings.redis_url.startswith("rediss://") and settings.redis_mode == "cluster"
    reader = RedisSpec.from_settings(settings).client()
    try:
        assert reader.ping()
    finally:
        reader.close()
    no_ca = settings.replace(redis_url=settings.redis_url.split("?", 1)[0])
    with pytest.raises(RedisClusterException, match="CERTIFICATE_VERIFY_FAILED"):  # the system CAs do not know it
        RedisSpec.from_settings(no_ca).client()


async def test_cluster_no_acknowledged_write_lost_with_wait(make_cluster_topology, start_workers):
    c: ClusterTopology = make_cluster_topology()
    prefix = "x" + uuid.uuid4().hex[:6]
    slot = c.slot_of(f"{{{prefix}}}:ver")
    workers = start_workers(c, prefix, redis_wait_replicas=1, redis_wait_registrations="true",
                            redis_wait_timeout_ms=500)
    before = pids(workers)
    async with Load([w.url for w in workers], readers=1, writers=2, admin_writers=2) as load:
        await load.wait_success("kv", time.monotonic(), 10)
        await asyncio.to_thread(c.failover, slot)
        await recovers(load, time.monotonic(), ("read", "register", "kv"))
        await asyncio.sleep(0.5)
        killed_at = time.monotonic()
        old = c.node_for_slot(slot)
        new = await asyncio.to_thread(c.kill_primary, slot)
        assert acked_missing(load, new, prefix, before=killed_at) == []
        await recovers(load, time.monotonic(), ("read",))
        await asyncio.to_thread(c.restart, old)
        await recovers(load, time.monotonic(), ("register", "kv"))
    assert acked_missing(load, c.node_for_slot(slot), prefix) == []
    assert pids(workers) == before


async def test_cluster_registry_slot_migrates_while_serving(make_cluster_topology, start_workers):
    """The operator recipe (docs/redis-topologies.md): every key of the registry's slot in ONE MIGRATE. Held in
    the half-migrated state (keys on the target, slot still MIGRATING/IMPORTING) while the workers serve, so their
    calls are ASK-redirected; then SETSLOT NODE everywhere (MOVED). Meanwhile single-key reads (the route cache's
    version poll, which keeps cached routes servable) and scripts whose declared keys all exist (heartbeats) are
    served through ASK; a script declaring a key that does not exist (here: registrations) gets TRYAGAIN from
    Redis (C3) and answers 503, never a wrong result. Registrations are paused while the window opens, so the
    route cache is not flushed by a change it could not refill. Afterwards everything is served again by the same
    workers and the tables are consistent."""
    c: ClusterTopology = make_cluster_topology()
    prefix = "g" + uuid.uuid4().hex[:6]
    slot = c.slot_of(f"{{{prefix}}}:ver")
    source = c.node_for_slot(slot)
    target = next(p for p in c.primaries() if p is not source)
    workers = start_workers(c, prefix)
    before = pids(workers)
    async with Load([w.url for w in workers], readers=2, writers=2, heartbeaters=1) as load:
        await load.wait_success("register", time.monotonic(), 10)
        load.writes_paused = True
        await asyncio.sleep(1.5)  # the route cache confirms the last version (poll every 0.5 s)
        asking_before = _asking(target)
        held, resume = threading.Event(), threading.Event()

        def hold(migration, keys) -> None:  # after the one MIGRATE: every key is on the target
            assert migration.keys_left() == []
            held.set()
            assert resume.wait(30)

        mover = asyncio.create_task(asyncio.to_thread(c.migrate_slot, slot, target, 100_000, hold))
        try:
            assert await asyncio.to_thread(held.wait, 30)
            half = time.monotonic()
            await asyncio.sleep(1.5)  # serving through ASK redirections
            assert _asking(target) > asking_before
            window = load.window(half)
            assert window["requests"] > 20 and window["failed"] == 0, window
            assert {r.kind for r in load.records if r.start >= half} == {"read", "read_stable", "heartbeat"}
            load.writes_paused = False
            await asyncio.sleep(0.5)
            assert all(r.status == 503 and r.code == "STORE_UNAVAILABLE" for r in load.failed(since=half)), \
                load.window(half)
        finally:
            load.writes_paused = False
            resume.set()
        assert await mover is target
        await recovers(load, time.monotonic())
        await asyncio.sleep(0.5)
    assert c.node_for_slot(slot) is target and source.cmd("CLUSTER", "COUNTKEYSINSLOT", slot) == 0
    direct = aioredis.Redis(host=HOST, port=target.port, decode_responses=True)
    try:
        await check_invariants(direct, prefix)
    finally:
        await direct.aclose()
    assert acked_missing(load, target, prefix) == []
    assert pids(workers) == before


def _asking(node: RedisNode) -> int:
    stats = node.info("commandstats")
    return int(stats.get("cmdstat_asking", {}).get("calls", 0))
