"""The store on real Sentinel and Cluster topologies, built by `connect_store` from settings as a worker builds it:
every script, the change events, WAIT, leases, snapshots and the Spark job's snapshot reader work in each mode;
the mode-specific repairs (readiness after a failover, the Sentinel master switch, the Cluster subscription moving
off a dead node) do what docs/redis-topologies.md says they must."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import pickle
import time
import uuid

import pytest
import redis.asyncio as aioredis

from service.config import load_settings
from service.errors import StoreUnavailable
from service.models import DataVersion, QueueData, RegisterBroker, TopicConfig
from service.store import RouteStore, SnapshotStore, connect_store
from service.store.events import parse_event
from service.store.routes import ReplicationUnconfirmed
from service.store.snapshot_reader import RedisSpec, SnapshotReader
from tests.conftest import need
from tests.invariants import check_invariants
from tests.namesrv_load import topology_url
from tests.redis_topology import HOST, ClusterTopology, SentinelTopology

pytestmark = pytest.mark.redis

DATA_PW, SENTINEL_PW = "data-pw-0123", "sentinel-pw-0123"


def settings_for(topo, **extra):
    env = {f"NAMESRV_{k.upper()}": str(v) for k, v in extra.items()}
    if isinstance(topo, SentinelTopology):
        env |= {"NAMESRV_REDIS_SENTINELS": ",".join(f"{h}:{p}" for h, p in topo.sentinel_addrs()),
                "NAMESRV_REDIS_MASTER_NAME": topo.service_name}
        if topo.password:
            env["NAMESRV_REDIS_PASSWORD"] = topo.password
        if topo.sentinel_password:
            env["NAMESRV_REDIS_SENTINEL_PASSWORD"] = topo.sentinel_password
    else:
        env |= {"NAMESRV_REDIS_URL": topology_url(topo), "NAMESRV_REDIS_CLUSTER": "true"}
        if topo.password:
            env["NAMESRV_REDIS_PASSWORD"] = topo.password
    return load_settings(env=env)


def broker(name: str, n: int, addr: str = "10.0.0.1:10911", counter: int = 1) -> RegisterBroker:
    return RegisterBroker(cluster="C", broker_name=name, broker_id=0, broker_addr=addr, ha_server_addr="",
                          topics={f"T{i}": TopicConfig(8, 8, 6, 0) for i in range(n)},
                          data_version=DataVersion(1_700_000_000_000, counter, 0))


@contextlib.asynccontextmanager
async def listening(store: RouteStore):
    """The route cache's listener loop in miniature: resubscribe after every loss. Yields the payloads list."""
    got: list[str] = []
    subscribed = asyncio.Event()

    async def loop() -> None:
        while True:
            try:
                async for payload in store.change_events(subscribed.set):
                    got.append(payload)
            except StoreUnavailable:
                subscribed.clear()
                await asyncio.sleep(0.05)

    task = asyncio.create_task(loop())
    try:
        await asyncio.wait_for(subscribed.wait(), 10)
        yield got
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def eventually(what, pred, timeout=15.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            if await pred():
                return
        except StoreUnavailable as exc:
            last = exc
        await asyncio.sleep(0.05)
    cause = last.__cause__ if last is not None else None
    raise AssertionError(f"{what}: not within {timeout}s (last error {last!r}, from {cause!r})")


def owner_node(topo, prefix: str):
    if isinstance(topo, SentinelTopology):
        return topo.master_node()
    return topo.node_for_slot(topo.slot_of(f"{{{prefix}}}:ver"))


def replica_node(topo, prefix: str):
    if isinstance(topo, SentinelTopology):
        return topo.replica_node()
    return topo.replica_of(owner_node(topo, prefix))


@pytest.fixture(params=["sentinel", "cluster", "cluster-tls"])
def topology(request, make_sentinel_topology, make_cluster_topology):
    if request.param == "sentinel":
        return make_sentinel_topology(password=DATA_PW, sentinel_password=SENTINEL_PW)
    if request.param == "cluster-tls":  # TLS only, the cluster bus and replication too (rediss:// with the CA)
        need("openssl")
        return make_cluster_topology(password=DATA_PW, tls=True)
    return make_cluster_topology(password=DATA_PW)


async def test_every_operation_in_each_mode(topology):
    prefix = "m" + uuid.uuid4().hex[:6]
    settings = settings_for(topology, key_prefix=prefix, redis_wait_replicas=1, redis_wait_timeout_ms=300)
    assert settings.redis_mode == ("sentinel" if isinstance(topology, SentinelTopology) else "cluster")
    store = connect_store(settings)
    try:
        await store.load_scripts()
        await store.load_scripts_if_missing()
        assert await store.ping()
        async with listening(store) as events:
            res = await store.register_broker(broker("b1", 3))
            assert res.register_first and res.changed_topics == 3
            route = await store.get_route("T1")
            assert route is not None and route.broker_datas[0].broker_addrs == {0: "10.0.0.1:10911"}
            assert not (await store.heartbeat("C", "10.0.0.1:10911", DataVersion(1_700_000_000_000, 1, 0))).changed
            # admin writes wait for the replica (WAIT in the script's pipeline)
            await store.kv_put("NS", "k", "v")
            assert await store.kv_get("NS", "k") == "v"
            assert await store.wipe_write_perm("b1") == 3 and await store.add_write_perm("b1") == 3
            assert await store.register_topic("T9", [QueueData("b1", 4, 4, 6, 0)]) == 1
            assert await store.delete_topic("T0") == 1
            await store.put_runtime_config({"orderMessageEnable": "true"})
            assert (await store.get_runtime_config())["orderMessageEnable"] == "true"
            assert sorted(await store.topic_list()) == ["T1", "T2", "T9"]
            assert (await store.cluster_info()).cluster_addr_table == {"C": ["b1"]}
            assert (await store.stats())["topics"] == 3
            assert [b.broker_name for b in await store.live_brokers()] == ["b1"]
            await eventually("change events arrive", lambda: _async(any(_names(e, "T0") for e in events)))

        # snapshots, leases, the Redis clock
        snaps = SnapshotStore(store)
        assert await snaps.acquire_lease("snapshot", 60_000, "w1") and not await snaps.acquire_lease(
            "snapshot", 60_000, "w2")
        now = await store.redis_time_ms()
        assert abs(now - time.time() * 1000) < 5000
        info = await snaps.take(retention_s=3600)
        assert info.rows == 3

        # the Spark job's synchronous reader, pickled as executors get it
        reader = pickle.loads(pickle.dumps(SnapshotReader(RedisSpec.from_settings(settings), prefix)))
        with reader:
            reader.ping()
            assert abs(reader.now_ms() - now) < 5000
            (manifest,) = reader.list_snapshots(now - 60_000)
            rows = list(reader.fetch_parts([(manifest.taken_at, manifest.snap_id, 0)]))
            assert sorted(r[3] for r in rows) == ["T1", "T2", "T9"]
            assert reader.acquire_lease("skew", 10_000, "a") and not reader.acquire_lease("skew", 10_000, "b")
            assert reader.renew_lease("skew", 10_000, "a") and not reader.renew_lease("skew", 10_000, "b")
            assert reader.release_lease("skew", "a")
            assert reader.push_history({"run": 1}, keep=2) == 1 and reader.history() == [{"run": 1}]
            reader.store_summary({"ok": True})
            assert reader.load_summary() == {"ok": True}
        assert await snaps.skew_summary() == '{"ok":true}'

        # expiry: everything is due 10 minutes from now
        expired = await store.expire_all(now=now + 600_000)
        assert [e[2] for e in expired.expired] == ["b1"] and await store.topic_list() == []
        owner = owner_node(topology, prefix)
        direct = aioredis.Redis(host=HOST, port=owner.port, password=DATA_PW, decode_responses=True,
                                **owner.client_kwargs)
        try:
            await check_invariants(direct, prefix)
        finally:
            await direct.aclose()

        # a replica that stops acknowledging: admin writes answer 503 instead of a false success
        replica = replica_node(topology, prefix)
        replica.freeze()
        try:
            started = time.monotonic()
            with pytest.raises(ReplicationUnconfirmed, match="0 of 1"):
                await store.kv_put("NS", "k2", "v2")
            assert 0.25 < time.monotonic() - started < 0.3 + settings.redis_deadline_ms / 1000
            await store.heartbeat("C", "10.0.0.9:1")  # heartbeats never wait
        finally:
            replica.thaw()
        await eventually("writes confirmed again", lambda: _ok(store.kv_put("NS", "k3", "v3")))
    finally:
        await store.close()


async def _async(value):
    return value


def _names(event: str, topic: str) -> bool:
    """The change event names `topic`, to evict or to update in place: queue data ("="), a broker leaving ("~") or
    joining ("+"), besides "!broker" lines, which tell whose registration state changed."""
    ev = parse_event(event)
    return (topic in ev.topics or any(topic in ts for _, _, ts in ev.updates)
            or any(topic in ts for _, ts in ev.leaves) or any(topic in ts for _, _, _, ts in ev.joins))


async def _ok(coro) -> bool:
    await coro
    return True


async def test_cluster_readiness_loads_scripts_on_the_new_primary(make_cluster_topology):
    """After CLUSTER FAILOVER the promoted replica has none of the scripts (SCRIPT LOAD is not replicated) while
    the client's slot map still names the old primary, which has them: readiness must look at the new owner."""
    c: ClusterTopology = make_cluster_topology()
    prefix = "r" + uuid.uuid4().hex[:6]
    store = connect_store(settings_for(c, key_prefix=prefix))
    try:
        await store.load_scripts()
        await store.register_broker(broker("b1", 2))
        slot = c.slot_of(f"{{{prefix}}}:ver")
        promoted = await asyncio.to_thread(c.failover, slot)
        shas = list(store._shas.values())
        assert promoted.cmd("SCRIPT", "EXISTS", *shas) == [0] * len(shas)
        await store.load_scripts_if_missing()
        assert promoted.cmd("SCRIPT", "EXISTS", *shas) == [1] * len(shas)
        assert (await store.get_route("T1")) is not None
    finally:
        await store.close()


async def test_sentinel_master_switch_moves_writes_and_events_at_once(make_sentinel_topology):
    """SENTINEL FAILOVER leaves the old master writable for ~10 s and pooled connections on it (S3): the store
    watches +switch-master and drops them, so writes and the subscription reach the new master within a second
    or two — well before the sentinels demote the old one."""
    s: SentinelTopology = make_sentinel_topology(password=DATA_PW, sentinel_password=SENTINEL_PW)
    prefix = "s" + uuid.uuid4().hex[:6]
    store = connect_store(settings_for(s, key_prefix=prefix))
    old = s.master_node()
    try:
        await store.load_scripts()
        async with listening(store) as events:
            # several pooled connections to the old master
            await asyncio.gather(*(store.heartbeat("C", f"10.0.0.{i}:1") for i in range(8)))
            await store.register_broker(broker("b0", 1))
            new = await asyncio.to_thread(s.failover, None, False)  # old master left alone: still writable
            switched_at = time.monotonic()

            async def writes_reach_new() -> bool:
                await store.register_broker(broker("late", 1, "10.0.1.1:1", counter=int(time.time() * 1000)))
                return new.cmd("EXISTS", f"{{{prefix}}}:ba:late") == 1

            await eventually("writes reach the new master", writes_reach_new, timeout=5)
            n, names = len(events), itertools.count()

            async def event_arrives() -> bool:  # events published before the resubscription are lost: repeat
                i = next(names)
                await store.register_broker(broker(f"later{i}", 1, f"10.0.2.{i}:1"))
                return any(_names(e, "T0") for e in events[n:])

            await eventually("the subscription moved to the new master", event_arrives, timeout=5)
            assert time.monotonic() - switched_at < 6.0  # the sentinels would demote the old master after ~10 s
            assert old.info("replication")["role"] == "master"  # nobody demoted it yet: it was our doing
    finally:
        await store.close()


async def test_cluster_subscription_moves_off_a_dead_node(make_cluster_topology):
    c: ClusterTopology = make_cluster_topology()
    prefix = "c" + uuid.uuid4().hex[:6]
    store = connect_store(settings_for(c, key_prefix=prefix))
    try:
        await store.load_scripts()
        async with listening(store) as events:
            pubsub_clients = {n.name: n.cmd("CLIENT", "LIST", "TYPE", "pubsub") for n in c.live()}
            subscribed_on = [n for n in c.live() if "sub=1" in pubsub_clients[n.name]]
            assert len(subscribed_on) == 1, pubsub_clients
            victim = subscribed_on[0]
            slot = c.slot_of(f"{{{prefix}}}:ver")
            if victim is c.node_for_slot(slot):
                await asyncio.to_thread(c.kill_primary, slot)
            else:
                victim.kill()
            n, names = len(events), itertools.count()

            async def event_arrives() -> bool:
                i = next(names)
                await store.register_broker(broker(f"b{i}", 1, f"10.0.2.{i}:1"))
                return any(_names(e, "T0") for e in events[n:])

            await eventually("events arrive through another node", event_arrives, timeout=30)
    finally:
        await store.close()


async def test_cluster_seed_node_dying_after_start_is_survived_by_both_clients(make_cluster_topology):
    """The URL names one seed node. Once started, neither client needs it: registrations (the bulk client, not
    used before) and reads still find the cluster after the seed is killed and its slots fail over."""
    c: ClusterTopology = make_cluster_topology()
    seed = c.live()[0]
    prefix = "c" + uuid.uuid4().hex[:6]
    store = connect_store(settings_for(c, key_prefix=prefix))
    try:
        await store.load_scripts()
        assert store.bulk_redis is not store.redis
        slot = c.slot_of(f"{{{prefix}}}:ver")
        if seed is c.node_for_slot(slot):
            await asyncio.to_thread(c.kill_primary, slot)
        else:
            seed.kill()
        names = itertools.count()

        async def registered() -> bool:
            i = next(names)
            await store.register_broker(broker(f"b{i}", 1, f"10.0.3.{i}:1"))
            return (await store.get_route("T0")) is not None

        await eventually("a registration after the seed died", registered, timeout=30)
    finally:
        await store.close()


async def test_cluster_starts_through_any_of_several_seed_nodes(make_cluster_topology):
    """redis_url's node down at start (a seed list exists for that): the workers' clients and the Spark job's
    reader start through redis_cluster_nodes instead."""
    from tests.redis_server import free_port

    c: ClusterTopology = make_cluster_topology()
    prefix = "c" + uuid.uuid4().hex[:6]
    dead = free_port()  # nothing listens there
    live = c.live()[1]
    env = {"NAMESRV_REDIS_URL": f"redis://127.0.0.1:{dead}", "NAMESRV_REDIS_CLUSTER": "true",
           "NAMESRV_REDIS_CLUSTER_NODES": f"127.0.0.1:{free_port()},127.0.0.1:{live.port}",
           "NAMESRV_KEY_PREFIX": prefix}
    if c.password:
        env["NAMESRV_REDIS_PASSWORD"] = c.password
    settings = load_settings(env=env)
    store = connect_store(settings)
    try:
        await store.load_scripts()
        await store.register_broker(broker("b0", 2))
        assert (await store.get_route("T1")) is not None
        await SnapshotStore(store).take(retention_s=3600)
    finally:
        await store.close()
    with SnapshotReader(RedisSpec.from_settings(settings), prefix) as reader:
        reader.ping()
        assert len(reader.list_snapshots(0)) == 1
    only_url = load_settings(env={k: v for k, v in env.items() if k != "NAMESRV_REDIS_CLUSTER_NODES"})
    store = connect_store(only_url)
    try:
        with pytest.raises(StoreUnavailable):
            await store.load_scripts()  # the seed list is what made the difference
    finally:
        await store.close()


async def test_single_mode_over_tls_with_a_ca_file(tmp_path):
    """One server over TLS (rediss:// with the CA file in the URL): scripts and the change events work."""
    import os
    import shutil

    from tests.conftest import need
    from tests.redis_topology import RedisNode, make_certs

    need("redis-server")
    need("openssl")
    d = str(tmp_path)
    make_certs(d)
    ca = os.path.join(d, "ca.crt")
    node = RedisNode("tls", d)
    node.client_kwargs = {"ssl": True, "ssl_ca_certs": ca}
    node.start([shutil.which("redis-server"), "--port", "0", "--tls-port", str(node.port), "--bind", HOST,
                "--tls-cert-file", os.path.join(d, "ip.crt"), "--tls-key-file", os.path.join(d, "ip.key"),
                "--tls-ca-cert-file", ca, "--tls-auth-clients", "no", "--save", "", "--appendonly", "no",
                "--dir", node.dir, "--logfile", node.log])
    prefix = "t" + uuid.uuid4().hex[:6]
    try:
        settings = load_settings(env={"NAMESRV_REDIS_URL": f"rediss://{HOST}:{node.port}/0?ssl_ca_certs={ca}",
                                      "NAMESRV_KEY_PREFIX": prefix})
        assert settings.redis_mode == "single"
        store = connect_store(settings)
        try:
            await store.load_scripts_if_missing()
            async with listening(store) as events:
                await store.register_broker(broker("b1", 2))
                assert (await store.get_route("T1")) is not None
                await eventually("an event over TLS", lambda: _async(bool(events)))
        finally:
            await store.close()
        without_ca = connect_store(load_settings(env={"NAMESRV_REDIS_URL": f"rediss://{HOST}:{node.port}/0"}))
        try:
            with pytest.raises(StoreUnavailable):
                await without_ca.ping()
        finally:
            await without_ca.close()
    finally:
        node.kill()
