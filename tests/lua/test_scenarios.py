"""RocketMQ's NameServer unit-test scenarios (reference §6) re-expressed against RouteStore.

Each test runs on fakeredis and on a real redis-server (the `store` fixture), with the reference's defaults:
Default_Cluster / Default_Broker / 127.0.0.1:10911 (ha :20911) at id 0, slave id 1 at :30911 (ha :40911),
`baseTopic` 16/16 perm 6 plus named topics 8/8 perm 6, enableActingMaster on, data-version counter 1.
Time is passed explicitly (`now=`), never slept. Our deliberate deviations (DESIGN.md §4) are tested too:
synchronous unregister, BrokerNameConflict, BrokerNotFound on registerTopic, no single-topic guard by default.
Every scenario ends with the structural invariants of tests/invariants.py.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from typing import Any

import pytest

from service.errors import BrokerNameConflict, BrokerNotFound, QueryNotFound, RegisterFailed
from service.models import BrokerIdentity, DataVersion, QueueData, RegisterBroker, TopicConfig, TopicRouteData
from service.store import RouteStore
from service.store.events import parse_event
from service.store.keys import ORDER_TOPIC_CONFIG, live_member
from tests.invariants import check_invariants, jsonable

CLUSTER, BROKER = "Default_Cluster", "Default_Broker"
MASTER, MASTER_HA = "127.0.0.1:10911", "127.0.0.1:20911"
SLAVE, SLAVE_HA = "127.0.0.1:30911", "127.0.0.1:40911"
CLUSTER1, BROKER1 = "Default_Cluster1", "Default_Broker1"
MASTER1, MASTER1_HA = "127.0.0.1:10912", "127.0.0.1:20912"
SLAVE1, SLAVE1_HA = "127.0.0.1:30912", "127.0.0.1:40912"
DV_TS = 1_700_000_000_000
T0 = 1_700_000_100_000  # "now" of the scenarios, ms
BASE = TopicConfig(16, 16, 6)
NAMED = TopicConfig(8, 8, 6)


# ---------------------------------------------------------------- helpers

def table(*names: str, base: bool = True, **configs: TopicConfig) -> dict[str, TopicConfig]:
    out = {"baseTopic": BASE} if base else {}
    out.update({n: NAMED for n in names})
    out.update(configs)
    return out


def broker(
    *,
    cluster: str = CLUSTER,
    name: str = BROKER,
    bid: int = 0,
    addr: str = MASTER,
    ha: str = MASTER_HA,
    topics: dict[str, TopicConfig] | Iterable[str] = ("TestTopic",),
    counter: int = 1,
    timestamp: int = DV_TS,
    state: int = 0,
    eam: bool | None = True,
    timeout: int | None = None,
    filters: list[str] | None = None,
    zone: str | None = None,
) -> RegisterBroker:
    return RegisterBroker(
        cluster=cluster, broker_name=name, broker_id=bid, broker_addr=addr, ha_server_addr=ha,
        topics=topics if isinstance(topics, dict) else table(*topics),
        data_version=DataVersion(timestamp, counter, state), zone_name=zone, enable_acting_master=eam,
        heartbeat_timeout_ms=timeout, filter_server_list=filters,
    )


def slave(**kw: Any) -> RegisterBroker:
    kw.setdefault("bid", 1)
    kw.setdefault("addr", SLAVE)
    kw.setdefault("ha", SLAVE_HA)
    return broker(**kw)


def ident(addr: str = MASTER, bid: int = 0, name: str = BROKER, cluster: str = CLUSTER) -> BrokerIdentity:
    return BrokerIdentity(cluster, name, bid, addr)


def addrs_of(route: TopicRouteData | None, name: str = BROKER) -> dict[int, str]:
    assert route is not None
    (bd,) = [b for b in route.broker_datas if b.broker_name == name]
    return bd.broker_addrs


def perm_of(route: TopicRouteData | None, name: str = BROKER) -> int:
    assert route is not None
    (qd,) = [q for q in route.queue_datas if q.broker_name == name]
    return qd.perm


def writable(perm: int) -> bool:
    return bool(perm & 2)


async def dump(store: RouteStore) -> dict[str, Any]:
    """Every key under the prefix with its type and value: equal dumps prove that nothing was written."""
    r = store.redis
    out: dict[str, Any] = {}
    async for key in r.scan_iter(match=store.keys.base + "*", count=1000):
        kind = await r.type(key)
        if kind == "hash":
            value: Any = await r.hgetall(key)
        elif kind == "set":
            value = set(await r.smembers(key))
        elif kind == "zset":
            value = await r.zrange(key, 0, -1, withscores=True)
        elif kind == "string":
            value = await r.get(key)
        else:
            value = kind
        out[key] = (kind, value)
    return out


class Changes:
    """A subscriber on `{prefix}:changes`. `take()` publishes a sentinel on the same channel and returns every
    message that arrived before it, so "nothing was published" is proven without sleeping."""

    def __init__(self, store: RouteStore) -> None:
        self.store = store
        self.pubsub = store.redis.pubsub()

    async def __aenter__(self) -> Changes:
        await self.pubsub.subscribe(self.store.keys.changes)
        msg = await self.pubsub.get_message(timeout=5)
        assert msg is not None and msg["type"] == "subscribe"
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.pubsub.unsubscribe()
        await self.pubsub.aclose()

    async def take(self) -> list[tuple[int, set[str] | str]]:
        sentinel = "sentinel-" + uuid.uuid4().hex
        await self.store.redis.publish(self.store.keys.changes, sentinel)
        out: list[tuple[int, set[str] | str]] = []
        for _ in range(1000):
            msg = await self.pubsub.get_message(ignore_subscribe_messages=True, timeout=5)
            assert msg is not None, "sentinel never arrived"
            if msg["data"] == sentinel:
                return out
            ev = parse_event(msg["data"])
            named = {*ev.topics, *(f"={t}" for _, _, ts in ev.updates for t in ts), *("@" + b for b in ev.brokers),
                     *("!" + b for b in ev.states), *(f"~{b}:{t}" for b, ts in ev.leaves for t in ts),
                     *(f"+{b}:{t}" for b, _, _, ts in ev.joins for t in ts)}
            out.append((ev.ver, "*" if ev.everything else named))
        raise AssertionError("too many messages")

    async def one(self) -> tuple[int, set[str] | str]:
        msgs = await self.take()
        assert len(msgs) == 1, msgs
        return msgs[0]


@pytest.fixture
async def ns(store):
    """The store, with the structural invariants checked once the scenario is over."""
    yield store
    await check_invariants(store.redis, store.keys.prefix)


async def inv(store: RouteStore) -> None:
    await check_invariants(store.redis, store.keys.prefix)


# ================================================================ RouteInfoManagerNewTest

async def test_get_all_cluster_info(ns):
    await ns.register_broker(broker(), now=T0)
    await ns.register_broker(broker(cluster=CLUSTER1, name=BROKER1, addr=MASTER1, ha=MASTER1_HA), now=T0)
    info = jsonable(await ns.cluster_info())
    assert info["clusterAddrTable"] == {CLUSTER: [BROKER], CLUSTER1: [BROKER1]}
    assert info["brokerAddrTable"] == {
        BROKER: {"brokerAddrs": {"0": MASTER}, "brokerName": BROKER, "cluster": CLUSTER,
                 "enableActingMaster": True},
        BROKER1: {"brokerAddrs": {"0": MASTER1}, "brokerName": BROKER1, "cluster": CLUSTER1,
                  "enableActingMaster": True},
    }


async def test_delete_topic(ns):
    await ns.register_broker(broker(), now=T0)
    assert await ns.get_route("TestTopic") is not None
    assert await ns.delete_topic("TestTopic") == 1
    assert await ns.get_route("TestTopic") is None
    assert await ns.topic_list() == ["baseTopic"]
    assert await ns.delete_topic("TestTopic") == 0  # already gone: a no-op


async def test_delete_topic_by_cluster(ns):
    await ns.register_broker(broker(topics=["TestTopic1"]), now=T0)
    await ns.register_broker(broker(cluster=CLUSTER1, name=BROKER1, addr=MASTER1, ha=MASTER1_HA,
                                    topics=["TestTopic1"]), now=T0)
    assert await ns.delete_topic("TestTopic1", CLUSTER) == 1
    route = await ns.get_route("TestTopic1")
    assert route is not None
    assert [q.broker_name for q in route.queue_datas] == [BROKER1]
    assert [(b.broker_name, b.cluster) for b in route.broker_datas] == [(BROKER1, CLUSTER1)]
    assert await ns.cluster_topics(CLUSTER) == ["baseTopic"]
    assert await ns.cluster_topics(CLUSTER1) == ["TestTopic1", "baseTopic"]
    # by an unknown cluster: a no-op that changes nothing
    before, ver = await dump(ns), await ns.version()
    assert await ns.delete_topic("TestTopic1", "No_Such_Cluster") == 0
    assert await dump(ns) == before and await ns.version() == ver


async def test_get_all_topic_list(ns):
    assert await ns.topic_list() == []
    await ns.register_broker(broker(topics=["TestTopic", "TestTopic1"]), now=T0)
    assert await ns.topic_list() == ["TestTopic", "TestTopic1", "baseTopic"]


async def test_register_broker_results(ns):
    res = await ns.register_broker(broker(), now=T0)
    assert (res.ha_server_addr, res.master_addr, res.fenced) == (None, None, False)
    assert res.register_first and res.changed_topics == 2
    res = await ns.register_broker(slave(), now=T0)
    assert (res.ha_server_addr, res.master_addr) == (MASTER_HA, MASTER)
    assert res.register_first and res.changed_topics == 0  # a slave with a master does not touch topics


async def test_unregister_broker(ns):
    await ns.register_broker(broker(topics=["TestTopic", "TestTopic1"]), now=T0)
    assert await ns.unregister_broker(ident()) == 1
    for t in ("baseTopic", "TestTopic", "TestTopic1"):
        assert await ns.get_route(t) is None
    assert jsonable(await ns.cluster_info()) == {"brokerAddrTable": {}, "clusterAddrTable": {}}
    assert await ns.topic_list() == []
    assert await ns.redis.zcard(ns.keys.live) == 0


async def test_register_slave_broker(ns):
    await ns.register_broker(broker(), now=T0)
    await ns.register_broker(slave(), now=T0)
    route = await ns.get_route("TestTopic", support_acting_master=True)
    assert addrs_of(route) == {0: MASTER, 1: SLAVE}
    assert perm_of(route) == 6


async def test_create_new_topic(ns):
    await ns.register_broker(broker(), now=T0)
    await ns.register_broker(slave(), now=T0)
    res = await ns.register_broker(broker(topics=["TestTopic", "TestTopic1"], counter=2), now=T0 + 1)
    assert res.changed_topics == 1  # the others are unchanged even though the data version moved
    route = await ns.get_route("TestTopic1", support_acting_master=True)
    assert addrs_of(route) == {0: MASTER, 1: SLAVE}
    assert [jsonable(q) for q in route.queue_datas] == [
        {"brokerName": BROKER, "perm": 6, "readQueueNums": 8, "topicSysFlag": 0, "writeQueueNums": 8}]


async def _switch_role(ns, master_leaves):
    await ns.register_broker(broker(eam=False, timeout=10_000), now=T0)
    await ns.register_broker(slave(eam=False, timeout=10_000), now=T0)
    await master_leaves()
    route = await ns.get_route("TestTopic", support_acting_master=True)
    assert addrs_of(route) == {1: SLAVE} and perm_of(route) == 6
    # the slave becomes master (same address, next data version)
    await ns.register_broker(slave(bid=0, eam=False, counter=2), now=T0 + 10_002)
    route = await ns.get_route("TestTopic", support_acting_master=True)
    assert addrs_of(route) == {0: SLAVE}
    # the old master comes back as a slave and learns its new master
    res = await ns.register_broker(broker(bid=1, eam=False, counter=2), now=T0 + 10_003)
    assert (res.master_addr, res.ha_server_addr) == (SLAVE, SLAVE_HA)
    route = await ns.get_route("TestTopic", support_acting_master=True)
    assert addrs_of(route) == {0: SLAVE, 1: MASTER}
    assert perm_of(route) == 6


async def test_switch_broker_role(ns):
    async def unregister():
        assert await ns.unregister_broker(ident()) == 2

    await _switch_role(ns, unregister)


async def test_switch_broker_role_channel_destroy(ns):
    """The master leaves by expiry (our stand-in for a closed channel) while the slave keeps heartbeating."""
    async def expire():
        assert (await ns.heartbeat(CLUSTER, SLAVE, now=T0 + 9_000)).data_version is not None
        res = await ns.expire(now=T0 + 10_001)
        assert res.expired == [(CLUSTER, MASTER, BROKER)] and not res.more

    await _switch_role(ns, expire)


async def test_unregister_slave_broker(ns):
    await ns.register_broker(broker(), now=T0)
    await ns.register_broker(slave(), now=T0)
    assert await ns.unregister_broker(ident(SLAVE, 1)) == 2
    route = await ns.get_route("TestTopic", support_acting_master=True)
    assert [b.broker_name for b in route.broker_datas] == [BROKER]
    assert addrs_of(route) == {0: MASTER} and perm_of(route) == 6


async def test_unregister_master_broker_acting_master(ns):
    await ns.register_broker(broker(), now=T0)
    await ns.register_broker(slave(), now=T0)
    assert await ns.unregister_broker(ident()) == 2
    route = await ns.get_route("TestTopic", support_acting_master=True)
    assert addrs_of(route) == {0: SLAVE}  # the slave stands in at id 0, in the reply only
    assert perm_of(route) == 4
    assert addrs_of(await ns.get_route("TestTopic")) == {1: SLAVE}  # supportActingMaster off
    assert await ns.member_group(BROKER) == {1: SLAVE}


@pytest.mark.parametrize("eam", [False, None], ids=["eam-off", "old-broker"])
async def test_unregister_master_broker_old_version(ns, eam):
    await ns.register_broker(broker(eam=eam), now=T0)
    await ns.register_broker(slave(eam=eam), now=T0)
    assert await ns.unregister_broker(ident()) == 2
    route = await ns.get_route("TestTopic", support_acting_master=True)
    assert addrs_of(route) == {1: SLAVE}
    assert perm_of(route) == 6
    assert route.broker_datas[0].enable_acting_master is False


async def test_submit_multi_unregister_requests(ns):
    await ns.register_broker(broker(topics=["TestTopic"]), now=T0)
    await ns.register_broker(broker(name=BROKER1, addr=MASTER1, ha=MASTER1_HA, topics=["TestTopic1"]), now=T0)
    assert await ns.unregister_broker(ident()) == 1
    assert await ns.get_route("TestTopic") is None
    assert (await ns.get_route("TestTopic1")) is not None
    assert await ns.unregister_broker(ident(MASTER1, name=BROKER1)) == 1
    assert await ns.get_route("TestTopic1") is None
    assert (await ns.cluster_info()).cluster_addr_table == {}


async def test_is_broker_topic_config_changed(ns):
    dv = DataVersion(DV_TS, 1, 0)
    assert (await ns.heartbeat(CLUSTER, MASTER, dv, now=T0)).changed  # unknown broker: register
    await ns.register_broker(broker(), now=T0)
    assert not (await ns.heartbeat(CLUSTER, MASTER, dv, now=T0)).changed
    assert (await ns.heartbeat(CLUSTER, MASTER, DataVersion(DV_TS + 1, 1, 0), now=T0)).changed
    assert (await ns.heartbeat(CLUSTER, MASTER, DataVersion(DV_TS, 2, 0), now=T0)).changed
    assert (await ns.heartbeat(CLUSTER, MASTER, DataVersion(DV_TS, 1, 1), now=T0)).changed
    assert not (await ns.heartbeat(CLUSTER, MASTER, None, now=T0)).changed  # plain heartbeat
    assert (await ns.heartbeat(CLUSTER1, MASTER, dv, now=T0)).changed  # liveness is per (cluster, addr)


async def test_is_topic_config_changed(ns):
    """With an unchanged data version only topics the broker does not serve yet are (re)built."""
    await ns.register_broker(broker(), now=T0)
    same_dv = broker(topics=table("TestTopic1", TestTopic=TopicConfig(8, 8, 4)))
    res = await ns.register_broker(same_dv, now=T0 + 1)
    assert res.changed_topics == 1 and not res.register_first
    assert perm_of(await ns.get_route("TestTopic")) == 6  # not rebuilt: the data version did not move
    assert perm_of(await ns.get_route("TestTopic1")) == 6
    res = await ns.register_broker(
        broker(topics=table("TestTopic1", TestTopic=TopicConfig(8, 8, 4)), counter=2), now=T0 + 2)
    assert res.changed_topics == 1
    assert perm_of(await ns.get_route("TestTopic")) == 4


async def test_query_broker_topic_config(ns):
    await ns.register_broker(broker(), now=T0)
    assert (await ns.heartbeat(CLUSTER, MASTER, now=T0)).data_version == DataVersion(DV_TS, 1, 0)
    await ns.register_broker(broker(counter=5, state=3), now=T0 + 1)
    assert (await ns.heartbeat(CLUSTER, MASTER, now=T0 + 1)).data_version == DataVersion(DV_TS, 5, 3)


async def test_wipe_write_perm_of_broker(ns):
    await ns.register_broker(broker(), now=T0)
    assert await ns.wipe_write_perm(BROKER) == 2
    assert perm_of(await ns.get_route("TestTopic")) == 4
    assert perm_of(await ns.get_route("baseTopic")) == 4
    assert await ns.wipe_write_perm(BROKER) == 2  # counted even when unchanged, as Java
    assert await ns.add_write_perm(BROKER) == 2
    assert perm_of(await ns.get_route("TestTopic")) == 6
    assert await ns.wipe_write_perm("No_Such_Broker") == 0


async def test_pickup_topic_route_data(ns):
    await ns.register_broker(broker(), now=T0)
    route = await ns.get_route("TestTopic", support_acting_master=True)
    assert jsonable(route) == {
        "brokerDatas": [{"brokerAddrs": {"0": MASTER}, "brokerName": BROKER, "cluster": CLUSTER,
                         "enableActingMaster": True}],
        "filterServerTable": {},
        "queueDatas": [{"brokerName": BROKER, "perm": 6, "readQueueNums": 8, "topicSysFlag": 0,
                        "writeQueueNums": 8}],
    }
    await ns.register_broker(broker(name=BROKER1, addr=MASTER1, ha=MASTER1_HA), now=T0)
    route = await ns.get_route("TestTopic", support_acting_master=True)
    # Java's HashMap order (a JVM lists [Default_Broker1, Default_Broker]); mqadmin topicClusterList takes the first
    assert [b.broker_name for b in route.broker_datas] == [BROKER1, BROKER]
    assert [q.broker_name for q in route.queue_datas] == [BROKER1, BROKER]
    base = await ns.get_route("baseTopic")
    assert {(q.read_queue_nums, q.write_queue_nums, q.perm) for q in base.queue_datas} == {(16, 16, 6)}


async def test_pickup_topic_route_data_with_slave(ns):
    await ns.register_broker(broker(), now=T0)
    await ns.register_broker(slave(), now=T0)
    route = await ns.get_route("TestTopic", support_acting_master=True)
    assert len(addrs_of(route)) == 2 and writable(perm_of(route))
    await ns.unregister_broker(ident())
    route = await ns.get_route("TestTopic", support_acting_master=True)
    assert addrs_of(route) == {0: SLAVE} and not writable(perm_of(route))
    await ns.register_broker(broker(counter=2), now=T0 + 1)
    route = await ns.get_route("TestTopic", support_acting_master=True)
    assert addrs_of(route) == {0: MASTER, 1: SLAVE} and writable(perm_of(route))


async def test_scan_not_active_broker(ns):
    await ns.register_broker(broker(timeout=30_000), now=T0)
    assert (await ns.expire(now=T0 + 29_999)).expired == []
    assert (await ns.expire(now=T0 + 30_000)).expired == []  # Java: last + timeout < now
    res = await ns.expire(now=T0 + 30_001)
    assert res.expired == [(CLUSTER, MASTER, BROKER)] and not res.more
    assert await ns.get_route("TestTopic") is None
    assert await ns.redis.zcard(ns.keys.live) == 0
    assert (await ns.expire(now=T0 + 90_000)).expired == []


async def test_scan_keeps_broker_that_heartbeated(ns):
    """RocketMQ #11043: a broker that heartbeated just before the scan is not wiped."""
    await ns.register_broker(broker(timeout=30_000), now=T0)
    await ns.heartbeat(CLUSTER, MASTER, now=T0 + 29_990)
    assert (await ns.expire(now=T0 + 30_001)).expired == []
    assert await ns.get_route("TestTopic") is not None
    assert (await ns.expire(now=T0 + 59_991)).expired == [(CLUSTER, MASTER, BROKER)]


async def test_scan_rechecks_live_score(ns):
    """A due deadline whose live score is newer (the heartbeat won the race) is repaired, not expired."""
    await ns.register_broker(broker(timeout=30_000), now=T0)
    await ns.heartbeat(CLUSTER, MASTER, now=T0 + 29_990)
    member = live_member(CLUSTER, MASTER)
    await ns.redis.zadd(ns.keys.deadlines, {member: T0 + 30_000})  # the deadline the scan saw
    assert (await ns.expire(now=T0 + 30_001)).expired == []
    assert await ns.redis.zscore(ns.keys.deadlines, member) == T0 + 59_990
    assert await ns.get_route("TestTopic") is not None


async def test_batched_heartbeats_alone_keep_a_broker_past_its_first_deadline(ns):
    """touchLive-1 moves only the live score (no deadline per heartbeat): a broker heartbeating only that way is
    found due at its registration's deadline, re-checked and kept, its deadline repaired to last + timeout; once
    it stops it expires exactly at its last heartbeat + timeout, not before."""
    await ns.register_broker(broker(timeout=30_000), now=T0)
    member = live_member(CLUSTER, MASTER)
    for at in range(T0 + 10_000, T0 + 100_001, 10_000):  # every 10 s, written 5 ms after acknowledged
        assert await ns.touch_live([(CLUSTER, MASTER, 5)], now=at + 5) == 1
        assert await ns.redis.zscore(ns.keys.live, member) == at
        assert await ns.redis.zscore(ns.keys.deadlines, member) <= at + 30_000  # a candidate, never later
        assert (await ns.expire(now=at + 5)).expired == []
    last = T0 + 100_000
    assert await ns.redis.zscore(ns.keys.deadlines, member) > T0 + 30_000  # repaired by the scans on the way
    assert (await ns.expire(now=last + 30_000)).expired == []  # Java: last + timeout < now
    assert await ns.get_route("TestTopic") is not None
    assert (await ns.expire(now=last + 30_001)).expired == [(CLUSTER, MASTER, BROKER)]
    assert await ns.get_route("TestTopic") is None


async def test_a_scan_long_after_the_deadline_keeps_a_broker_the_batches_kept_alive(ns):
    """No scan ran between the registration's deadline and now (one scan per tick, a lease moving, a pause):
    the stale deadline is only a candidate, the live score decides."""
    await ns.register_broker(broker(timeout=30_000), now=T0)
    await ns.touch_live([(CLUSTER, MASTER, 0)], now=T0 + 25_000)
    await ns.touch_live([(CLUSTER, MASTER, 0)], now=T0 + 50_000)
    member = live_member(CLUSTER, MASTER)
    assert await ns.redis.zscore(ns.keys.deadlines, member) == T0 + 30_000  # untouched by the batches
    assert (await ns.expire(now=T0 + 79_000)).expired == []
    assert await ns.redis.zscore(ns.keys.deadlines, member) == T0 + 80_000
    assert (await ns.expire(now=T0 + 80_001)).expired == [(CLUSTER, MASTER, BROKER)]


async def test_a_batch_of_many_heartbeats_goes_in_several_zadds(store):
    """More members than one ZADD of touchLive-1 takes (2 000: unpack's limit), live and gone ones mixed. The live
    table is filled directly (the script reads nothing else), so no invariants are checked here."""
    live = [f"10.1.{i // 250}.{i % 250}:10911" for i in range(2_500)]
    await store.redis.zadd(store.keys.live, {live_member(CLUSTER, a): T0 for a in live})
    gone = [f"10.9.{i // 250}.{i % 250}:10911" for i in range(2_000)]
    mixed = [a for pair in zip(live[:2_000], gone, strict=True) for a in pair] + live[2_000:]
    beats = [(CLUSTER, a, 100) for a in mixed]
    assert await store.touch_live(beats, now=T0 + 20_100) == 2_500
    scores = dict(await store.redis.zrange(store.keys.live, 0, -1, withscores=True))
    assert len(scores) == 2_500 and set(scores.values()) == {T0 + 20_000}
    assert await store.touch_live(beats, now=T0 + 20_100) == 0  # the same time again moves nothing
    assert await store.touch_live([(CLUSTER, live[0], 200)], now=T0 + 20_100) == 0  # nor an earlier one
    assert await store.redis.zscore(store.keys.live, live_member(CLUSTER, live[0])) == T0 + 20_000


async def test_scan_bounded_batches(ns):
    for i in range(5):
        await ns.register_broker(broker(name=f"B{i}", addr=f"127.0.0.{i + 1}:10911", timeout=1_000),
                                 now=T0 + i)
    res = await ns.expire(batch=2, now=T0 + 10_000)
    assert [a for _, a, _ in res.expired] == ["127.0.0.1:10911", "127.0.0.2:10911"] and res.more
    await inv(ns)
    res = await ns.expire_all(batch=2, now=T0 + 10_000)
    assert sorted(n for _, _, n in res.expired) == ["B2", "B3", "B4"] and not res.more
    assert await ns.topic_list() == []


async def _two_groups(ns):
    await ns.register_broker(broker(), now=T0)
    await ns.register_broker(slave(), now=T0)
    await ns.register_broker(broker(name=BROKER1, addr=MASTER1, ha=MASTER1_HA), now=T0)
    await ns.register_broker(slave(name=BROKER1, addr=SLAVE1, ha=SLAVE1_HA), now=T0)


@pytest.mark.parametrize("topic", ["TestTopic", "rmq_sys_SYNC_BROKER_MEMBER_Default_Broker"])
async def test_pickup_order_topic_route_data(ns, topic):
    """Partition / global order topics: a slave-only group shows its slave at id 0, not writable;
    RocketMQ's broker-member sync topics are never rewritten."""
    rewritten = not topic.startswith("rmq_sys_SYNC_BROKER_MEMBER_")
    await ns.register_broker(slave(topics=[topic]), now=T0)
    route = await ns.get_route(topic, support_acting_master=True)
    assert addrs_of(route) == ({0: SLAVE} if rewritten else {1: SLAVE})
    assert perm_of(route) == 4
    # master + slave, master removed: the same
    await ns.register_broker(broker(topics=[topic]), now=T0)
    assert writable(perm_of(await ns.get_route(topic, support_acting_master=True)))
    await ns.unregister_broker(ident())
    route = await ns.get_route(topic, support_acting_master=True)
    assert addrs_of(route) == ({0: SLAVE} if rewritten else {1: SLAVE}) and perm_of(route) == 4


async def test_pickup_order_topic_two_groups(ns):
    await _two_groups(ns)
    await ns.unregister_broker(ident())
    route = await ns.get_route("TestTopic", support_acting_master=True)
    assert len(route.broker_datas) == 2
    assert addrs_of(route, BROKER) == {0: SLAVE} and perm_of(route, BROKER) == 4
    assert addrs_of(route, BROKER1) == {0: MASTER1, 1: SLAVE1} and perm_of(route, BROKER1) == 6


async def test_register_only_slave_broker(ns):
    await ns.register_broker(slave(), now=T0)
    route = await ns.get_route("TestTopic", support_acting_master=True)
    assert route is not None and not writable(perm_of(route))
    await ns.register_broker(broker(), now=T0)
    assert writable(perm_of(await ns.get_route("TestTopic", support_acting_master=True)))
    await ns.unregister_broker(ident())
    assert not writable(perm_of(await ns.get_route("TestTopic", support_acting_master=True)))
    await ns.register_broker(broker(), now=T0 + 1)
    assert writable(perm_of(await ns.get_route("TestTopic", support_acting_master=True)))


async def test_on_channel_destroy_lone_broker(ns):
    """onChannelDestroy / onChannelDestroyByBrokerInfo: a broker that falls silent goes with its topics."""
    await ns.register_broker(broker(timeout=10_000), now=T0)
    assert (await ns.expire(now=T0 + 10_001)).expired == [(CLUSTER, MASTER, BROKER)]
    assert await ns.get_route("TestTopic") is None and await ns.get_route("baseTopic") is None


async def test_on_channel_destroy_master_then_slave(ns):
    await ns.register_broker(broker(timeout=10_000), now=T0)
    await ns.register_broker(slave(timeout=10_000), now=T0)
    await ns.heartbeat(CLUSTER, SLAVE, now=T0 + 9_000)
    assert (await ns.expire(now=T0 + 10_001)).expired == [(CLUSTER, MASTER, BROKER)]
    assert addrs_of(await ns.get_route("TestTopic")) == {1: SLAVE}
    await inv(ns)
    assert (await ns.expire(now=T0 + 19_001)).expired == [(CLUSTER, SLAVE, BROKER)]
    assert await ns.get_route("TestTopic") is None


async def test_keep_topic_with_broker_registration(ns):
    await ns.register_broker(broker(topics=["TestTopic", "TestTopic1"]), now=T0)
    await ns.register_broker(broker(topics=["TestTopic1"], counter=2), now=T0 + 1,
                             delete_topic_with_broker_registration=False)
    assert await ns.get_route("TestTopic") is not None


async def test_delete_topic_with_broker_registration(ns):
    await ns.register_broker(broker(topics=["TestTopic", "TestTopic1"]), now=T0)
    await ns.register_broker(broker(name=BROKER1, addr=MASTER1, ha=MASTER1_HA,
                                    topics=["TestTopic", "TestTopic1"]), now=T0)
    res = await ns.register_broker(broker(topics=["TestTopic1"], counter=2), now=T0 + 1,
                                   delete_topic_with_broker_registration=True)
    assert res.changed_topics == 1
    route = await ns.get_route("TestTopic")
    assert [q.broker_name for q in route.queue_datas] == [BROKER1]
    assert await ns.cluster_topics(CLUSTER) == ["TestTopic", "TestTopic1", "baseTopic"]
    # the deletion does not depend on the data version moving
    await ns.register_broker(broker(name=BROKER1, addr=MASTER1, ha=MASTER1_HA, topics=["TestTopic1"]),
                             now=T0 + 1, delete_topic_with_broker_registration=True)
    assert await ns.get_route("TestTopic") is None
    assert "TestTopic" not in await ns.topic_list()
    assert await ns.get_route("TestTopic1") is not None


async def test_register_single_topic_with_broker_registration(ns):
    qd = QueueData(BROKER, 8, 8, 6, 0)
    with pytest.raises(BrokerNotFound):  # Java ignores the call; we refuse it, and write nothing either way
        await ns.register_topic("TestTopic1", [qd])
    assert await dump(ns) == {}
    await ns.register_broker(broker(), now=T0)
    assert await ns.register_topic("TestTopic1", [qd]) == 1
    assert [jsonable(q) for q in (await ns.get_route("TestTopic1")).queue_datas] == [jsonable(qd)]
    await ns.register_broker(broker(counter=2), now=T0 + 1, delete_topic_with_broker_registration=True)
    assert await ns.get_route("TestTopic1") is None
    await ns.unregister_broker(ident())
    assert await ns.topic_list() == []


# ================================================================ RouteInfoManagerTest

RIM_CLUSTER, RIM_BROKER, RIM_ADDR = "default-cluster", "default-broker", "127.0.0.1:10911"


async def test_same_address_in_two_clusters(ns):
    dv_a, dv_b = DataVersion(100, 10, 0), DataVersion(200, 20, 0)
    await ns.register_broker(broker(cluster=RIM_CLUSTER, name=RIM_BROKER, bid=1234, addr=RIM_ADDR, eam=None,
                                    timestamp=100, counter=10, topics=["unit-test"]), now=T0)
    await ns.register_broker(broker(cluster=RIM_CLUSTER + "-1", name=RIM_BROKER + "-1", bid=1234,
                                    addr=RIM_ADDR, eam=None, timestamp=200, counter=20, topics=["unit-test"]),
                             now=T0)
    assert (await ns.heartbeat(RIM_CLUSTER, RIM_ADDR, now=T0)).data_version == dv_a
    assert (await ns.heartbeat(RIM_CLUSTER + "-1", RIM_ADDR, now=T0)).data_version == dv_b
    assert set(await ns.redis.zrange(ns.keys.live, 0, -1)) == {
        live_member(RIM_CLUSTER, RIM_ADDR), live_member(RIM_CLUSTER + "-1", RIM_ADDR)}
    # the same brokerName in the second cluster is refused (Java would merge it, RocketMQ #3991)
    with pytest.raises(BrokerNameConflict):
        await ns.register_broker(broker(cluster=RIM_CLUSTER + "-1", name=RIM_BROKER, bid=1234, addr=RIM_ADDR),
                                 now=T0)
    assert await ns.unregister_broker(ident(RIM_ADDR, 1234, RIM_BROKER + "-1", RIM_CLUSTER + "-1")) == 1
    assert (await ns.heartbeat(RIM_CLUSTER + "-1", RIM_ADDR, now=T0)).data_version is None
    assert (await ns.heartbeat(RIM_CLUSTER, RIM_ADDR, now=T0)).data_version == dv_a
    assert await ns.member_group(RIM_BROKER) == {1234: RIM_ADDR}


async def test_wipe_and_add_write_perm_counts(ns):
    await ns.register_broker(broker(cluster=RIM_CLUSTER, name=RIM_BROKER, addr=RIM_ADDR,
                                    topics=table("unit-test", base=False)), now=T0)
    assert await ns.wipe_write_perm(RIM_BROKER) == 1
    assert perm_of(await ns.get_route("unit-test"), RIM_BROKER) == 4
    assert await ns.add_write_perm(RIM_BROKER) == 1
    assert perm_of(await ns.get_route("unit-test"), RIM_BROKER) == 6


async def test_unknown_topic_and_empty_lists(ns):
    assert await ns.get_route("unit-test") is None
    assert await ns.topic_list() == []
    for mode in ("unit", "unitsub", "unitsub-ununit"):
        assert await ns.topic_list(mode) == []
    assert await ns.cluster_topics(RIM_CLUSTER) == []
    assert await ns.system_topic_list() == ([], None)
    assert jsonable(await ns.cluster_info()) == {"brokerAddrTable": {}, "clusterAddrTable": {}}
    assert await ns.member_group(RIM_BROKER) == {}


# ============================================================ static register / BrokerRegister / BrokerPerm

STATIC_NAMES = [f"Default_Broker{n}" for n in range(3)]
STATIC_TOPICS = [f"TestTopic{i}" for i in range(10)]


def static_addr(n: int, bid: int) -> str:
    return f"127.0.0.{n + 1}:{10911 + bid}"


async def _register_static(ns):
    for n, name in enumerate(STATIC_NAMES):
        for bid in range(3):
            await ns.register_broker(broker(name=name, bid=bid, addr=static_addr(n, bid),
                                            ha=f"127.0.0.{n + 1}:{20911 + bid}",
                                            topics=table(*STATIC_TOPICS, base=False)), now=T0)


async def test_static_register(ns):
    await _register_static(ns)
    info = await ns.cluster_info()
    assert info.cluster_addr_table == {CLUSTER: STATIC_NAMES}
    for n, name in enumerate(STATIC_NAMES):
        assert info.broker_addr_table[name].broker_addrs == {i: static_addr(n, i) for i in range(3)}
    assert await ns.topic_list() == sorted(STATIC_TOPICS)
    assert await ns.cluster_topics(CLUSTER) == sorted(STATIC_TOPICS)
    route = await ns.get_route("TestTopic3")
    java_order = ["Default_Broker1", "Default_Broker2", "Default_Broker0"]  # as a JVM's HashMap lists them
    assert [b.broker_name for b in route.broker_datas] == java_order
    assert all(len(b.broker_addrs) == 3 for b in route.broker_datas)
    assert [jsonable(q) for q in route.queue_datas] == [
        {"brokerName": n, "perm": 6, "readQueueNums": 8, "topicSysFlag": 0, "writeQueueNums": 8}
        for n in java_order]


async def test_static_delete_topic_and_master_change(ns):
    await _register_static(ns)
    assert await ns.delete_topic("TestTopic0") == 3
    assert await ns.get_route("TestTopic0") is None
    # master change: id 0 re-registered with the id-1 address (same data version) ...
    await ns.register_broker(broker(name=STATIC_NAMES[0], bid=0, addr=static_addr(0, 1),
                                    topics=table(*STATIC_TOPICS, base=False)), now=T0 + 1)
    route = await ns.get_route("TestTopic1")
    assert addrs_of(route, STATIC_NAMES[0]) == {0: static_addr(0, 1), 2: static_addr(0, 2)}
    # ... the replaced master loses its liveness; the topic it no longer served comes back for it alone
    assert (await ns.heartbeat(CLUSTER, static_addr(0, 0), now=T0 + 1)).data_version is None
    assert [q.broker_name for q in (await ns.get_route("TestTopic0")).queue_datas] == [STATIC_NAMES[0]]
    await inv(ns)
    assert await ns.unregister_broker(ident(static_addr(1, 2), 2, STATIC_NAMES[1])) == 2
    assert addrs_of(await ns.get_route("TestTopic1"), STATIC_NAMES[1]) == {0: static_addr(1, 0),
                                                                          1: static_addr(1, 1)}


async def test_static_perm_and_scan(ns):
    await _register_static(ns)
    assert await ns.wipe_write_perm(STATIC_NAMES[2]) == 10
    assert perm_of(await ns.get_route("TestTopic9"), STATIC_NAMES[2]) == 4
    assert perm_of(await ns.get_route("TestTopic9"), STATIC_NAMES[1]) == 6
    assert await ns.add_write_perm(STATIC_NAMES[2]) == 10
    assert perm_of(await ns.get_route("TestTopic9"), STATIC_NAMES[2]) == 6
    # 4.9.x testScanNotActiveBroker: everything silent since T0 is removed by a scan
    res = await ns.expire_all(now=T0 + 120_001)
    assert len(res.expired) == 9
    assert await ns.topic_list() == [] and (await ns.cluster_info()).cluster_addr_table == {}


# ================================================================ KV (RequestProcessorTest, KVConfigManager)

async def test_kv_config(ns):
    with pytest.raises(QueryNotFound) as e:
        await ns.kv_list("namespace")
    assert e.value.rocketmq_code == 22
    assert await ns.kv_delete("namespace", "key") is False  # deleting on a fresh manager
    with pytest.raises(QueryNotFound):
        await ns.kv_list("namespace")
    await ns.kv_put("namespace", "key", "value")
    assert await ns.kv_get("namespace", "key") == "value"
    assert await ns.kv_list("namespace") == {"key": "value"}
    with pytest.raises(QueryNotFound) as e:
        await ns.kv_get("namespace", "other")
    assert e.value.message == "No config item, Namespace: namespace Key: other"
    assert await ns.kv_delete("namespace", "key") is True
    with pytest.raises(QueryNotFound):
        await ns.kv_get("namespace", "key")
    assert await ns.kv_list("namespace") == {}  # the emptied namespace stays, as Java's empty map


async def test_register_result_kv_table(ns):
    res = await ns.register_broker(broker(), now=T0)
    assert res.kv_table is None and jsonable(res)["kvTable"] is None
    await ns.kv_put(ORDER_TOPIC_CONFIG, "TestTopic", "Default_Broker:4")
    res = await ns.register_broker(broker(), now=T0)
    assert res.kv_table == {"TestTopic": "Default_Broker:4"}
    assert jsonable(res)["kvTable"] == {"table": {"TestTopic": "Default_Broker:4"}}
    res = await ns.register_broker(broker(), now=T0, return_order_topic_config=False)
    assert res.kv_table is None
    await ns.kv_delete(ORDER_TOPIC_CONFIG, "TestTopic")
    assert (await ns.register_broker(broker(), now=T0)).kv_table == {}


async def test_route_order_topic_conf(ns):
    await ns.register_broker(broker(topics=["TestTopic", "TestTopic1"]), now=T0)
    await ns.kv_put(ORDER_TOPIC_CONFIG, "TestTopic", "Default_Broker:4")
    route = await ns.get_route("TestTopic", order_message_enable=True)
    assert route.order_topic_conf == "Default_Broker:4"
    assert jsonable(route)["orderTopicConf"] == "Default_Broker:4"
    assert (await ns.get_route("TestTopic")).order_topic_conf is None
    assert "orderTopicConf" not in jsonable(await ns.get_route("TestTopic"))
    assert (await ns.get_route("TestTopic1", order_message_enable=True)).order_topic_conf is None


# ================================================================ registration details

async def test_filter_servers(ns):
    fs = ["127.0.0.1:9999"]
    await ns.register_broker(broker(filters=fs), now=T0)
    await ns.register_broker(slave(), now=T0)
    assert (await ns.get_route("TestTopic")).filter_server_table == {MASTER: fs}
    await ns.register_broker(broker(filters=None), now=T0 + 1)  # None leaves them
    assert (await ns.get_route("TestTopic")).filter_server_table == {MASTER: fs}
    await ns.register_broker(slave(filters=["127.0.0.1:9998", "127.0.0.1:9997"]), now=T0 + 1)
    assert (await ns.get_route("TestTopic")).filter_server_table == {
        MASTER: fs, SLAVE: ["127.0.0.1:9998", "127.0.0.1:9997"]}
    await ns.register_broker(broker(filters=[]), now=T0 + 2)  # [] removes
    assert (await ns.get_route("TestTopic")).filter_server_table == {
        SLAVE: ["127.0.0.1:9998", "127.0.0.1:9997"]}
    await ns.unregister_broker(ident(SLAVE, 1))  # unregister drops them too
    assert (await ns.get_route("TestTopic")).filter_server_table == {}
    assert await ns.redis.exists(ns.keys.filter_servers) == 0


async def test_epoch_fencing(ns):
    new_addr = "127.0.0.1:10921"
    await ns.register_broker(broker(state=2), now=T0)
    res = await ns.register_broker(broker(addr=new_addr, state=1), now=T0 + 1)
    assert res.fenced and (res.ha_server_addr, res.master_addr, res.kv_table) == (None, None, None)
    assert addrs_of(await ns.get_route("TestTopic")) == {0: MASTER}
    assert (await ns.heartbeat(CLUSTER, new_addr, now=T0 + 1)).data_version is None
    await inv(ns)
    res = await ns.register_broker(broker(addr=new_addr, state=2), now=T0 + 2)  # equal: not newer, accepted
    assert not res.fenced
    assert addrs_of(await ns.get_route("TestTopic")) == {0: new_addr}
    assert (await ns.heartbeat(CLUSTER, MASTER, now=T0 + 2)).data_version is None


async def test_epoch_fencing_of_a_slave_address(ns):
    """Fenced after step 5: the address's old id is already gone, and so is its liveness (as Java)."""
    await ns.register_broker(broker(state=5), now=T0)
    await ns.register_broker(slave(state=1), now=T0)
    res = await ns.register_broker(slave(bid=0, state=1, counter=2), now=T0 + 1)
    assert res.fenced
    assert addrs_of(await ns.get_route("TestTopic")) == {0: MASTER}
    assert await ns.redis.zrange(ns.keys.live, 0, -1) == [live_member(CLUSTER, MASTER)]


async def test_single_topic_guard(ns):
    one = broker(topics=table(base=False, TestTopic=NAMED))
    async with Changes(ns) as changes:
        with pytest.raises(RegisterFailed):
            await ns.register_broker(one, now=T0, single_topic_guard=True)
        assert await changes.take() == []
    assert await dump(ns) == {}
    # no guard unless asked (DESIGN §4): a single-topic first registration is a registration
    assert (await ns.register_broker(one, now=T0)).register_first
    await ns.unregister_broker(ident())
    # two topics pass the guard; once the id is present a single-topic registration passes too
    await ns.register_broker(broker(), now=T0, single_topic_guard=True)
    res = await ns.register_broker(broker(topics=table(base=False, TestTopic1=NAMED), counter=2), now=T0 + 1,
                                   single_topic_guard=True)
    assert res.changed_topics == 1 and await ns.get_route("TestTopic1") is not None


async def test_broker_name_conflict_writes_nothing(ns):
    await ns.register_broker(broker(), now=T0)
    before = await dump(ns)
    async with Changes(ns) as changes:
        with pytest.raises(BrokerNameConflict) as e:
            await ns.register_broker(broker(cluster=CLUSTER1, addr=MASTER1, topics=["Other"]), now=T0 + 1)
        assert e.value.details == {"ownerCluster": CLUSTER}
        assert await changes.take() == []
    assert await dump(ns) == before


async def test_register_topic_unknown_broker_writes_nothing(ns):
    await ns.register_broker(broker(), now=T0)
    before = await dump(ns)
    good, bad = QueueData(BROKER, 4, 4, 6, 0), QueueData("No_Such_Broker", 4, 4, 6, 0)
    for topic in ("NewTopic", "TestTopic"):  # Java would merge `good` into the existing topic; we refuse
        with pytest.raises(BrokerNotFound) as e:
            await ns.register_topic(topic, [good, bad])
        assert e.value.details == {"brokerName": "No_Such_Broker"}
    assert await dump(ns) == before
    assert await ns.register_topic("TestTopic", [good]) == 1  # replaces this broker's queue data
    assert [jsonable(q) for q in (await ns.get_route("TestTopic")).queue_datas] == [jsonable(good)]


async def test_rename_leaves_old_broker_name(ns):
    """An address re-registered under a new brokerName (same cluster) leaves the old name (RocketMQ #1989)."""
    await ns.register_broker(broker(), now=T0)
    await ns.register_broker(slave(), now=T0)
    await ns.register_broker(broker(name="Renamed", topics=["Other"]), now=T0 + 1)
    info = await ns.cluster_info()
    assert info.cluster_addr_table == {CLUSTER: [BROKER, "Renamed"]}
    assert info.broker_addr_table[BROKER].broker_addrs == {1: SLAVE}
    assert info.broker_addr_table["Renamed"].broker_addrs == {0: MASTER}
    assert perm_of(await ns.get_route("TestTopic")) == 4  # reduced, acting master: no id 0 => WRITE cleared
    await ns.register_broker(slave(name="Renamed", topics=["Other"]), now=T0 + 2)
    assert BROKER not in (await ns.cluster_info()).broker_addr_table
    assert await ns.topic_list() == ["Other", "baseTopic"]
    assert [q.broker_name for q in (await ns.get_route("baseTopic")).queue_datas] == ["Renamed"]


async def test_replaced_address_loses_liveness(ns):
    other = "127.0.0.1:10931"
    await ns.register_broker(broker(filters=["127.0.0.1:9999"]), now=T0)
    await ns.register_broker(broker(addr=other), now=T0 + 1)
    assert await ns.redis.zrange(ns.keys.live, 0, -1) == [live_member(CLUSTER, other)]
    assert (await ns.heartbeat(CLUSTER, MASTER, now=T0 + 1)).changed
    assert (await ns.get_route("TestTopic")).filter_server_table == {}
    # and so the replaced master's expiry, or its late unregister, cannot touch the broker
    assert (await ns.expire(now=T0 + 120_001)).expired == []
    assert await ns.unregister_broker(ident()) == 0
    assert addrs_of(await ns.get_route("TestTopic")) == {0: other}


async def test_unregister_of_a_non_member_is_a_noop(ns):
    await ns.register_broker(broker(), now=T0)
    await ns.register_broker(slave(), now=T0)
    before = await dump(ns)
    async with Changes(ns) as changes:
        assert await ns.unregister_broker(ident(MASTER, 0, BROKER1)) == 0  # wrong broker name
        assert await ns.unregister_broker(ident(MASTER, 0, BROKER, CLUSTER1)) == 0  # wrong cluster
        assert await ns.unregister_broker(ident(MASTER1, 0)) == 0  # not an address of it
        assert await changes.take() == []
    assert await dump(ns) == before


# ================================================================ topic lists and member group

async def test_unit_topic_lists(ns):
    await ns.register_broker(broker(name="a-broker", topics=table(
        base=False, U=TopicConfig(topic_sys_flag=1), S=TopicConfig(topic_sys_flag=2),
        US=TopicConfig(topic_sys_flag=3),
        N=TopicConfig(), Mixed=TopicConfig(topic_sys_flag=1), Mixed2=TopicConfig())), now=T0)
    # "first queue data" in Java's HashMap order (found by tests/differential): b-broker's bucket comes before
    # a-broker's, so b-broker's flags decide where both have queues
    await ns.register_broker(broker(name="b-broker", addr=MASTER1, topics=table(
        base=False, Mixed=TopicConfig(topic_sys_flag=2), Mixed2=TopicConfig(topic_sys_flag=3),
        OnlyB=TopicConfig(topic_sys_flag=2))), now=T0)
    assert await ns.topic_list("unit") == ["Mixed2", "U", "US"]
    assert await ns.topic_list("unitsub") == ["Mixed", "Mixed2", "OnlyB", "S", "US"]
    assert await ns.topic_list("unitsub-ununit") == ["Mixed", "OnlyB", "S"]
    assert await ns.topic_list() == ["Mixed", "Mixed2", "N", "OnlyB", "S", "U", "US"]
    with pytest.raises(ValueError):
        await ns.topic_list("bogus")


async def test_topic_list_pages(ns):
    topics = [f"T{i:03d}" for i in range(150)]
    await ns.register_broker(broker(topics=table(*topics, base=False)), now=T0)
    assert await ns.topic_list(page=7) == topics
    assert await ns.topic_list("unit", page=7) == []


async def test_cluster_topics_and_system_topic_list(ns):
    await ns.register_broker(slave(name="a-broker", bid=2, addr="127.0.0.9:30911", topics=["A"]), now=T0)
    await ns.register_broker(slave(name="a-broker", bid=3, addr="127.0.0.8:30911", topics=["A"]), now=T0)
    await ns.register_broker(broker(name="b-broker", topics=["B"]), now=T0)
    await ns.register_broker(broker(cluster="Other", name="c-broker", addr=MASTER1, topics=["C"]), now=T0)
    assert await ns.cluster_topics(CLUSTER) == ["A", "B", "baseTopic"]
    assert await ns.cluster_topics("Other") == ["C", "baseTopic"]
    assert await ns.cluster_topics("No_Such_Cluster") == []
    names, addr = await ns.system_topic_list()
    assert names == [CLUSTER, "Other", "a-broker", "b-broker", "c-broker"]
    # the lowest id of the first broker in Java's HashMap order (c-broker, b-broker, a-broker), as Apache's
    # NameServer answers (found by tests/differential)
    assert addr == MASTER1


async def test_member_group(ns):
    await ns.register_broker(broker(), now=T0)
    await ns.register_broker(slave(), now=T0)
    assert await ns.member_group(BROKER) == {0: MASTER, 1: SLAVE}
    assert await ns.member_group("No_Such_Broker") == {}


async def test_heartbeat_refreshes_liveness(ns):
    await ns.register_broker(broker(timeout=10_000), now=T0)
    res = await ns.heartbeat(CLUSTER, MASTER, DataVersion(DV_TS, 1, 0), now=T0 + 9_000)
    assert not res.changed and res.data_version == DataVersion(DV_TS, 1, 0)
    assert await ns.redis.zscore(ns.keys.live, live_member(CLUSTER, MASTER)) == T0 + 9_000
    assert await ns.redis.zscore(ns.keys.deadlines, live_member(CLUSTER, MASTER)) == T0 + 19_000
    assert (await ns.expire(now=T0 + 10_001)).expired == []
    res = await ns.heartbeat(CLUSTER, MASTER, DataVersion(DV_TS, 2, 0), now=T0 + 9_500)
    assert res.changed and res.data_version == DataVersion(DV_TS, 1, 0)  # re-register, says the reply
    assert jsonable(await ns.heartbeat(CLUSTER, SLAVE, now=T0)) == {"changed": True, "dataVersion": None}


# ================================================================ change events

async def test_change_events(ns):
    async with Changes(ns) as changes:
        # "!<brokerName>": the broker's registration state changed (workers' unchanged answers end), routes not
        await ns.register_broker(broker(), now=T0)
        assert await changes.one() == (1, {"baseTopic", "TestTopic", "!" + BROKER})
        await ns.register_broker(broker(), now=T0 + 1)  # identical: nothing to tell
        await ns.heartbeat(CLUSTER, MASTER, now=T0 + 2)
        assert await changes.take() == [] and await ns.version() == 1
        await ns.register_broker(slave(), now=T0 + 2)  # new address: the broker's routes change
        assert await changes.one() == (2, {"baseTopic", "TestTopic", "!" + BROKER})
        await ns.register_broker(broker(topics=["TestTopic", "TestTopic1"], counter=2), now=T0 + 3)
        assert await changes.one() == (3, {"TestTopic1", "!" + BROKER})
        await ns.wipe_write_perm(BROKER)
        assert await changes.one() == (4, {"baseTopic", "TestTopic", "TestTopic1", "!" + BROKER})
        await ns.wipe_write_perm(BROKER)
        assert await changes.take() == []
        await ns.add_write_perm(BROKER)
        assert await changes.one() == (5, {"baseTopic", "TestTopic", "TestTopic1", "!" + BROKER})
        await ns.delete_topic("TestTopic1")
        assert await changes.one() == (6, {"TestTopic1", "!" + BROKER})
        await ns.delete_topic("TestTopic1")
        await ns.delete_topic("TestTopic", "No_Such_Cluster")
        await ns.unregister_broker(ident(MASTER, 0, BROKER1))
        assert await changes.take() == []
        await ns.register_topic("TestTopic2", [QueueData(BROKER, 1, 1, 6, 0)])
        assert await changes.one() == (7, {"TestTopic2", "!" + BROKER})
        await ns.kv_put(ORDER_TOPIC_CONFIG, "TestTopic", "Default_Broker:4")
        assert await changes.one() == (8, {"TestTopic", "!*"})  # every registration's answer carries it
        await ns.kv_put(ORDER_TOPIC_CONFIG, "TestTopic", "Default_Broker:4")
        await ns.kv_put("other-namespace", "TestTopic", "x")
        assert await changes.take() == []
        await ns.kv_delete(ORDER_TOPIC_CONFIG, "TestTopic")
        assert await changes.one() == (9, {"TestTopic", "!*"})
        await ns.kv_put(ORDER_TOPIC_CONFIG, "=Default_Broker", "x")  # KV keys are any text (issue 42): one that is
        assert await changes.one() == (10, {"!*"})  # no topic name is not published as one (it read as "=" line)
        await ns.kv_delete(ORDER_TOPIC_CONFIG, "=Default_Broker")
        assert await changes.one() == (11, {"!*"})
        await ns.put_runtime_config({"orderMessageEnable": "true"})
        assert await changes.one() == (12, "*")
        await ns.unregister_broker(ident(SLAVE, 1))
        assert await changes.one() == (13, {"baseTopic", "TestTopic", "TestTopic2", "!" + BROKER})
        await ns.expire(now=T0 + 120_004)
        assert await changes.one() == (14, {"baseTopic", "TestTopic", "TestTopic2", "!" + BROKER})
        assert await ns.version() == 14


async def test_change_events_say_which_broker_left_or_joined_topics_that_remain(ns):
    """A broker gone from topics other brokers still serve ("~"), or newly serving topics that existed ("+", with
    its BrokerData as the script left it): workers rebuild their cached routes rather than evict them. A topic it
    leaves empty, or creates, is named plainly; a broker shown with an acting master is named plainly too."""
    async with Changes(ns) as changes:
        await ns.register_broker(broker(topics=table("T1", "T2", base=False)), now=T0)
        assert await changes.one() == (1, {"T1", "T2", "!" + BROKER})
        await ns.register_broker(broker(name=BROKER1, addr=MASTER1, topics=table("T1", "T2", "T3", base=False)),
                                 now=T0)
        assert await changes.one() == (2, {f"+{BROKER1}:T1", f"+{BROKER1}:T2", "T3", "!" + BROKER1})
        await ns.unregister_broker(ident(MASTER1, name=BROKER1))
        assert await changes.one() == (3, {f"~{BROKER1}:T1", f"~{BROKER1}:T2", "T3", "!" + BROKER1})
        await ns.register_broker(broker(name=BROKER1, addr=MASTER1, bid=1, eam=True,
                                        topics=table("T1", base=False)), now=T0)  # no id 0: an acting master
        assert await changes.one() == (4, {"T1", "!" + BROKER1})


async def test_a_chunked_registration_that_moves_the_broker_says_so_at_its_first_step(ns):
    """The first step of a chunked registration that changes the broker's addresses publishes "@<brokerName>"
    (every route showing the broker changed) at once: its topics are named when it ends, which a worker dying
    mid-way never reaches, and until then other workers' cached routes kept the old address (found by the model
    test's route cache, tests/lua/test_model.py)."""
    async with Changes(ns) as changes:
        await ns.register_broker(broker(topics=table("T1", "T2", base=False)), now=T0)
        assert await changes.one() == (1, {"T1", "T2", "!" + BROKER})
        reg = ns.chunked_registration(broker(addr=MASTER1, topics=table("T1", "T2", base=False), counter=2), 1,
                                      now=T0 + 1)
        await reg.begin()
        ver, named = await changes.one()
        assert ver == 2 and "@" + BROKER in named, named
        assert addrs_of(await ns.get_route("T1")) == {0: MASTER1}


async def test_change_events_name_every_topic_of_a_big_broker(ns):
    """A broker with many topics is announced topic by topic, so other routes stay cached in every worker
    (100 000 on a real Redis; fakeredis' Lua is slower, 300 there)."""
    real = "FakeAsyncRedis" not in type(ns.redis).__name__
    n = 100_000 if real else 300
    many = [f"T{i:06d}" for i in range(n)]
    async with Changes(ns) as changes:
        await ns.register_broker(broker(name="A", topics=table(*many, base=False)), now=T0)
        ver, topics = await changes.one()
        assert ver == 1 and topics == {*many, "!A"}
        assert await ns.unregister_broker(ident(MASTER, name="A")) == 1
        assert await changes.one() == (2, {*many, "!A"})


async def test_change_events_collapse_to_star_past_the_bound(store):
    """includes/common.lua's accumulator, with its bound lowered to 3: a fourth topic turns the event into `*`."""
    from service.store.scripts import resolve_includes

    common = resolve_includes('--- @include "includes/common"\n')
    assert "local MAX_EVENT_TOPICS = 200000" in common
    script = "local rcall = redis.call\n" + common.replace("MAX_EVENT_TOPICS = 200000", "MAX_EVENT_TOPICS = 3") + """
local ch = changes_new()
for i = 1, tonumber(ARGV[1]) do changes_add(ch, "T" .. i) end
changes_publish(key_base(KEYS[1]), KEYS[1], ch)
return ch.all and "*" or ch.n
"""
    async with Changes(store) as changes:
        assert await store.redis.eval(script, 1, store.keys.version, 3) == 3
        assert await changes.one() == (1, {"T1", "T2", "T3"})
        assert await store.redis.eval(script, 1, store.keys.version, 4) == "*"
        assert await changes.one() == (2, "*")


async def test_the_store_subscription_delivers_events_with_the_quiet_push_handler(ns):
    """change_events replaces redis-py's hiredis push handler (it formats every message for a debug line) with
    one returning the message as is; the events still arrive, whole and in order. With the pure-Python parser
    (fakeredis) nothing is replaced."""
    from service.store import events as store_events

    replaced = []
    real_quiet = store_events.quiet_push_handler

    def spy(pubsub):
        replaced.append(real_quiet(pubsub))
        return replaced[-1]

    store_events.quiet_push_handler = spy
    try:
        subscribed = asyncio.Event()
        stream = ns.change_events(subscribed.set)
        first = asyncio.ensure_future(stream.__anext__())
        await asyncio.wait_for(subscribed.wait(), 5)
        await ns.register_broker(broker(), now=T0)
        await ns.register_broker(broker(topics=["TestTopic", "TestTopic1"], counter=2), now=T0 + 1)
        got = [await asyncio.wait_for(first, 5), await asyncio.wait_for(stream.__anext__(), 5)]
        await stream.aclose()
    finally:
        store_events.quiet_push_handler = real_quiet
    events = [parse_event(g) for g in got]
    assert [e.ver for e in events] == [1, 2]
    assert events[1].topics == ["TestTopic1"] and events[1].states == [BROKER]
    real = "FakeAsyncRedis" not in type(ns.redis).__name__
    assert replaced == [True] if real else len(replaced) == 1  # hiredis is a dependency: real Redis uses it
