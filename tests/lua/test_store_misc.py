"""Costs of the scripts, counted on a real redis-server, and the smaller RouteStore operations.

Costs are counted, not timed: `INFO commandstats` counts every command a script runs, so "unregister costs
O(that broker's topics)" becomes "about 10 HDELs while 5 000 other topics exist" (DESIGN.md §3).
"""

from __future__ import annotations

import asyncio
import uuid

import fakeredis
import pytest
import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from service.models import BrokerIdentity, DataVersion, RegisterBroker, TopicConfig
from service.store import RouteStore
from service.store.calls import LeanScripts, leanable
from service.store.keys import live_member
from service.store.routes import StoreLimits
from tests.invariants import check_invariants, jsonable

T0 = 1_700_000_100_000
HOUR = 3_600_000
OVERHEAD = ("info", "config", "client", "hello", "ping", "select", "script")


def reg(name: str, addr: str, topics: list[str], *, bid: int = 0, cluster: str = "C", counter: int = 1,
        timeout: int | None = None, eam: bool | None = True, zone: str | None = None,
        filters: list[str] | None = None) -> RegisterBroker:
    return RegisterBroker(cluster, name, bid, addr, "", {t: TopicConfig(8, 8, 6) for t in topics},
                          DataVersion(1, counter, 0), zone_name=zone, enable_acting_master=eam,
                          heartbeat_timeout_ms=timeout, filter_server_list=filters)


# ---------------------------------------------------------------- costs (real Redis)

class Counter:
    """Commands executed by the server between `reset()` and `read()` (scripts' inner calls included)."""

    def __init__(self, client: aioredis.Redis) -> None:
        self.client = client

    async def reset(self) -> None:
        await self.client.config_resetstat()

    async def read(self) -> dict[str, int]:
        stats = await self.client.info("commandstats")
        out = {}
        for name, row in stats.items():
            cmd = name.removeprefix("cmdstat_")
            if cmd.split("|")[0] not in OVERHEAD:
                out[cmd] = row["calls"]
        return out


@pytest.fixture
async def real(redis_server):
    client = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
    await client.ping()
    s = RouteStore(client, prefix="cost" + uuid.uuid4().hex[:8])
    await s.load_scripts()
    yield s, Counter(client)
    await check_invariants(client, s.keys.prefix)
    await client.aclose()


BIG = [f"Big{i:05d}" for i in range(5000)]
SMALL = [f"Small{i}" for i in range(5)] + BIG[:5]  # 10 topics, half of them shared with the big broker


async def _big_and_small(s: RouteStore, small_timeout: int = HOUR) -> None:
    await s.register_broker(reg("big", "10.0.0.1:10911", BIG, timeout=24 * HOUR), now=T0)
    await s.register_broker(reg("small", "10.0.0.2:10911", SMALL, timeout=small_timeout,
                                filters=["10.0.0.2:1"]), now=T0)


@pytest.mark.redis
async def test_unregister_costs_the_brokers_topics_only(real):
    s, counter = real
    await _big_and_small(s)
    await counter.reset()
    assert await s.unregister_broker(BrokerIdentity("C", "small", 0, "10.0.0.2:10911")) == 1
    calls = await counter.read()
    assert calls["evalsha"] == 1
    assert 10 <= calls["hdel"] <= 14  # 10 queue data, the address, the filter servers, the broker's line
    assert sum(calls.values()) < 80, calls  # O(10), not O(5 000)
    assert max(v for k, v in calls.items() if k != "evalsha") <= 14, calls
    assert await s.topic_list() == BIG


@pytest.mark.redis
async def test_expiry_costs_the_expired_brokers_topics_only(real):
    s, counter = real
    await _big_and_small(s, small_timeout=10_000)
    await counter.reset()
    res = await s.expire(now=T0 + 10_001)
    assert res.expired == [("C", "10.0.0.2:10911", "small")]
    calls = await counter.read()
    assert calls["zrangebyscore"] == 1 and 10 <= calls["hdel"] <= 14  # as unregister
    assert sum(calls.values()) < 90, calls


@pytest.mark.redis
async def test_empty_expiry_scan_is_one_range_query(real):
    s, counter = real
    await _big_and_small(s)
    for i in range(200):
        await s.register_broker(reg(f"b{i}", f"10.1.{i // 250}.{i % 250}:10911", []), now=T0)
    await counter.reset()
    res = await s.expire(now=T0 + 60_000)
    assert res.expired == [] and not res.more
    # and the TIME at its start and end that measure the step (service/store/steps.py)
    assert await counter.read() == {"evalsha": 1, "zrangebyscore": 1, "time": 2}


@pytest.mark.redis
async def test_wipe_write_perm_costs_the_brokers_topics_only(real):
    s, counter = real
    await _big_and_small(s)
    await counter.reset()
    assert await s.wipe_write_perm("small") == 10
    calls = await counter.read()
    assert calls["hset"] == 10 + 1 and calls["hget"] == 10 and calls["smembers"] == 1  # + the topic generation
    assert calls["hincrby"] == 1
    assert sum(calls.values()) < 40, calls


@pytest.mark.redis
async def test_route_reads_take_brokers_from_their_lines_and_look_up_each_once_without(real):
    """A cold cache's misses of a cluster's topics (route_reads.py): 16 routes of 100 brokers. The brokers' lines
    ({P}:bl, current at the registry's civer) answer them in one HMGET a call; read one at a time that is 8
    commands a route, read together 23 for all, and a route the topics share is sent once. When a writer that keeps
    no lines (a worker of an earlier release) has renewed civer since, each broker is looked up instead (2 commands
    a broker, once per call), with the same answers; the next change made by this release starts the lines over."""
    s, counter = real
    topics = [f"Wide{i:02d}" for i in range(16)]
    for i in range(100):
        await s.register_broker(reg(f"w{i:03d}", f"10.2.{i // 250}.{i % 250}:10911", topics), now=T0)
    await counter.reset()
    alone = [await s.get_route(t) for t in topics]
    calls = await counter.read()
    # each: the EVALSHA, the version, the sweeps under way, the topic's queue data, the filter servers, civer, the
    # lines' civer and the lines
    assert calls["evalsha"] == 16 and calls["hmget"] == 16 and sum(calls.values()) == 16 * 8, calls
    await counter.reset()
    together = await asyncio.gather(*(s.get_route(t) for t in topics))
    calls = await counter.read()
    assert calls["evalsha"] == 1 and calls["hmget"] == 1 and calls["hgetall"] == 16, calls
    assert sum(calls.values()) == 1 + 22, calls
    assert all(r is together[0] for r in together)  # one object for the topics answered alike
    assert [jsonable(r) for r in together] == [jsonable(r) for r in alone] and len(alone[0].broker_datas) == 100

    await s.redis.set(s.keys.cluster_info_version, str(int(await s.redis.get(s.keys.cluster_info_version)) + 1))
    await counter.reset()
    looked_up = await asyncio.gather(*(s.reads.read(t, False, False) for t in topics))
    calls = await counter.read()
    assert calls["hmget"] == 100 and calls["hgetall"] == 16 + 100 and sum(calls.values()) == 1 + 221, calls
    assert [jsonable(r.route) for r in looked_up] == [jsonable(r) for r in alone]
    await s.register_broker(reg("w100", "10.2.9.9:10911", topics), now=T0)
    assert set(await s.redis.hkeys(s.keys.broker_lines)) == {"#", "w100"}  # started over: the others looked up
    await check_invariants(s.redis, s.keys.prefix)


@pytest.mark.redis
async def test_route_reads_ask_only_swept_brokers_membership(real):
    """A removal past the sweep bound leaves the broker's fields for sweepBroker's steps (here a worker died before
    any); the broker registers again with a third of its topics. Its leftover fields stay hidden, and its membership
    is the only one asked: one SMISMEMBER, of the swept broker."""
    s, counter = real
    s.limits = StoreLimits(chunk_topics=5)
    old = [f"Old{i:02d}" for i in range(15)]
    await s.register_broker(reg("other", "10.0.0.9:10911", old), now=T0)
    await s.register_broker(reg("big", "10.0.0.1:10911", old), now=T0)
    left: list[str] = []

    async def worker_dies(sweep_ids):  # the removal script ran, its sweep did not
        left.extend(sweep_ids)

    s.run_sweeps = worker_dies
    assert await s.unregister_broker(BrokerIdentity("C", "big", 0, "10.0.0.1:10911")) == 1 and len(left) == 1
    del s.run_sweeps
    await s.register_broker(reg("big", "10.0.0.1:10911", old[:5] + ["New0"]), now=T0 + 1)
    await counter.reset()
    routes = await asyncio.gather(*(s.get_route(t) for t in old + ["New0"]))
    calls = await counter.read()
    assert calls["smismember"] == 1, calls
    shown = {t: sorted(q.broker_name for q in r.queue_datas) for t, r in zip(old + ["New0"], routes, strict=True)}
    assert shown == {**{t: ["big", "other"] for t in old[:5]}, **{t: ["other"] for t in old[5:]}, "New0": ["big"]}
    assert await s.finish_sweeps() > 0
    await check_invariants(s.redis, s.keys.prefix)


@pytest.mark.redis
async def test_register_with_unchanged_data_version_checks_membership_in_bulk(real):
    s, counter = real
    await _big_and_small(s)
    await counter.reset()
    res = await s.register_broker(reg("big", "10.0.0.1:10911", BIG, timeout=24 * HOUR), now=T0 + 1)
    assert res.changed_topics == 0
    calls = await counter.read()
    assert calls["smismember"] == 2  # 5 000 names in chunks of 4 000
    assert calls.get("hset", 0) == 1  # the live info only: no queue data rewritten
    assert calls.get("sadd", 0) <= 3  # cluster, cluster members, broker set
    assert sum(calls.values()) < 40, calls


@pytest.mark.redis
async def test_register_with_changed_data_version_writes_only_changed_topics(real):
    s, counter = real
    await _big_and_small(s)
    await counter.reset()
    res = await s.register_broker(reg("small", "10.0.0.2:10911", SMALL, counter=2, timeout=HOUR), now=T0 + 1)
    assert res.changed_topics == 0
    calls = await counter.read()
    assert calls["hget"] >= 10 and calls.get("hset", 0) == 1  # compared, not rewritten (only live info)
    assert sum(calls.values()) < 60, calls


@pytest.mark.redis
async def test_route_read_cost_does_not_depend_on_other_topics(real):
    s, counter = real
    await _big_and_small(s)
    await counter.reset()
    route = await s.get_route("Small0")
    assert route is not None and [b.broker_name for b in route.broker_datas] == ["small"]
    calls = await counter.read()
    assert sum(calls.values()) < 10, calls


@pytest.mark.redis
async def test_delete_topic_costs_the_topics_brokers(real):
    s, counter = real
    await _big_and_small(s)
    await counter.reset()
    assert await s.delete_topic(BIG[0], "C") == 2
    calls = await counter.read()
    assert calls["hdel"] == 2 and sum(calls.values()) < 20, calls


@pytest.mark.redis
async def test_scripts_survive_a_script_flush(real):
    """After a Redis restart or SCRIPT FLUSH the store reloads its scripts by itself (NOSCRIPT fallback)."""
    s, _ = real
    await s.register_broker(reg("small", "10.0.0.2:10911", SMALL), now=T0)
    await s.redis.script_flush()
    assert await s.get_route("Small0") is not None
    assert await s.unregister_broker(BrokerIdentity("C", "small", 0, "10.0.0.2:10911")) == 1


# ---------------------------------------------------------------- smaller operations (both backends)

async def test_expire_more_flag_and_default_timeout(store):
    await store.register_broker(reg("a", "10.0.0.1:1", ["T"]), now=T0)  # default timeout 120 s
    await store.register_broker(reg("b", "10.0.0.2:1", ["T"]), now=T0, default_timeout_ms=1_000)
    assert await store.redis.zscore(store.keys.deadlines, live_member("C", "10.0.0.1:1")) == T0 + 120_000
    assert await store.redis.zscore(store.keys.deadlines, live_member("C", "10.0.0.2:1")) == T0 + 1_000
    res = await store.expire(batch=1, now=T0 + 120_001)
    assert res.expired == [("C", "10.0.0.2:1", "b")] and res.more  # a full batch: call again
    res = await store.expire(batch=1, now=T0 + 120_001)
    assert res.expired == [("C", "10.0.0.1:1", "a")] and res.more
    res = await store.expire(batch=1, now=T0 + 120_001)
    assert res.expired == [] and not res.more
    await check_invariants(store.redis, store.keys.prefix)


async def test_live_brokers_and_stats(store):
    assert await store.live_brokers() == []
    await store.register_broker(reg("a", "10.0.0.1:1", ["T", "U"]), now=T0)
    await store.register_broker(reg("a", "10.0.0.2:1", ["T"], bid=1, timeout=5_000), now=T0 + 5)
    live = await store.live_brokers()
    assert [b.to_snapshot_dict() for b in live] == [
        {"cluster": "C", "brokerName": "a", "brokerId": 0, "brokerAddr": "10.0.0.1:1", "lastHeartbeat": T0,
         "heartbeatTimeoutMillis": 120_000},
        {"cluster": "C", "brokerName": "a", "brokerId": 1, "brokerAddr": "10.0.0.2:1",
         "lastHeartbeat": T0 + 5, "heartbeatTimeoutMillis": 5_000},
    ]
    # topics are counted per brokerName (the group), as the route tables hold them
    assert [(b.topic_count, b.data_version) for b in live] == [(2, DataVersion(1, 1, 0))] * 2
    assert live[0].to_dict(now_ms=T0 + 1000)["ageMillis"] == 1000
    assert await store.stats() == {"liveBrokers": 2, "topics": 2, "brokerNames": 1, "clusters": 1}
    assert await store.broker_exists("a") and not await store.broker_exists("b")
    assert await store.ping()


async def test_snapshot_pages_cover_every_row(store):
    topics = [f"T{i:03d}" for i in range(120)]
    await store.register_broker(reg("a", "10.0.0.1:1", topics), now=T0)
    await store.register_broker(reg("b", "10.0.0.2:1", topics[:30], cluster="D"), now=T0)
    rows, pages = [], 0
    async for page in store.snapshot_pages(target_rows=25):
        pages += 1
        rows += [(c, b, t, jsonable(q)) for c, b, t, q in page]
    assert pages >= 2
    want = [("C", "a", t) for t in topics] + [("D", "b", t) for t in topics[:30]]
    assert sorted((c, b, t) for c, b, t, _ in rows) == sorted(want)  # each row exactly once
    assert all(q == {"brokerName": b, "perm": 6, "readQueueNums": 8, "topicSysFlag": 0, "writeQueueNums": 8}
               for _, b, _, q in rows)


async def test_runtime_config_and_version(store):
    assert await store.get_runtime_config() == {} and await store.version() == 0
    assert await store.put_runtime_config({"orderMessageEnable": "true", "x": "1"}) == 1
    assert await store.get_runtime_config() == {"orderMessageEnable": "true", "x": "1"}
    await store.register_broker(reg("a", "10.0.0.1:1", ["T"]), now=T0)
    assert await store.version() == 2


async def test_zone_name_is_overwritten_on_every_registration(store):
    await store.register_broker(reg("a", "10.0.0.1:1", ["T"], zone="zone1"), now=T0)
    route = await store.get_route("T")
    assert route.broker_datas[0].zone_name == "zone1"
    assert jsonable(route)["brokerDatas"][0]["zoneName"] == "zone1"
    await store.register_broker(reg("a", "10.0.0.1:1", ["T"]), now=T0 + 1)  # no zone: Java sets null
    assert "zoneName" not in jsonable(await store.get_route("T"))["brokerDatas"][0]
    assert (await store.cluster_info()).broker_addr_table["a"].zone_name is None


async def test_old_broker_slave_never_registers_topics(store):
    """isPrimeSlave needs the enableActingMaster header: a 4.x slave alone publishes no routes."""
    await store.register_broker(reg("a", "10.0.0.2:1", ["T"], bid=1, eam=None), now=T0)
    assert await store.get_route("T") is None
    assert await store.member_group("a") == {1: "10.0.0.2:1"}
    await store.register_broker(reg("a", "10.0.0.3:1", ["T"], bid=1, eam=True), now=T0)  # a 5.x one does
    assert (await store.get_route("T")).queue_datas[0].perm == 4  # prime slave with acting master: no WRITE
    await check_invariants(store.redis, store.keys.prefix)


async def test_acting_master_flag_change_publishes_routes(store):
    await store.register_broker(reg("a", "10.0.0.1:1", ["T"]), now=T0)
    ver = await store.version()
    await store.register_broker(reg("a", "10.0.0.1:1", ["T"], eam=False), now=T0 + 1)
    assert await store.version() == ver + 1
    assert (await store.get_route("T")).broker_datas[0].enable_acting_master is False


@pytest.mark.redis
async def test_script_calls_skip_redis_pys_wrappers_and_leave_nothing_unread(real):
    """Script calls on a plain redis-py client go through calls.evalsha (no retry wrapper, no task per write, no
    timeout per read). A call cut off by its deadline while Redis still runs the script drops its connection:
    the reply that comes later is never read as the answer to another call."""
    s, _ = real
    assert leanable(s.redis) and not leanable(fakeredis.FakeAsyncRedis())
    lean = LeanScripts(s.redis)
    sha = await s.redis.script_load("local t = redis.call('TIME') local n = 0 "
                                    "while true do n = n + 1 local u = redis.call('TIME') "
                                    "if (u[1] - t[1]) * 1000000 + (u[2] - t[2]) > tonumber(ARGV[1]) then break end "
                                    "end return ARGV[2]")
    assert await lean.call(sha, [], [0, "kept"]) == "kept" and len(lean.idle) == 1
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await lean.call(sha, [], [300_000, "late"])
    assert not lean.idle  # the connection cut off is dropped, not kept
    assert await lean.call(sha, [], [0, "on time"]) == "on time"  # waits out the busy script, then its own
    for _ in range(5):  # every connection answers its own call
        assert await lean.call(sha, [], [0, "again"]) == "again"
    with pytest.raises(ResponseError):
        await lean.call("0" * 40, [], [])
    kept = lean.idle[-1]
    await s.redis.client_kill_filter(_id=await _client_id(kept))
    assert await lean.call(sha, [], [0, "after a kill"]) == "after a kill"  # the closed one is not used again
    kept = lean.idle[-1]
    before = await _client_id(kept)
    kept.mark_for_reconnect()  # what a Sentinel failover does to every connection in use
    assert await lean.call(sha, [], [0, "reconnected"]) == "reconnected"
    assert kept.is_connected and not kept.should_reconnect() and await _client_id(kept) != before
    await s.register_broker(reg("small", "10.0.0.2:10911", SMALL), now=T0)
    assert await s.get_route("Small0") is not None


async def _client_id(conn) -> int:
    await conn.send_command("CLIENT", "ID")
    return int(await conn.read_response())


async def test_cluster_info_version_starts_on_a_registry_written_before_it(store):
    """A registry an earlier release wrote has brokers and no {P}:civer: clusterInfo starts the counter, so workers
    keep copies from the first read; an empty registry's read writes nothing."""
    key = store.keys.cluster_info_version
    assert (await store.cluster_info_at()) == ((await store.cluster_info()), None)
    assert await store.redis.exists(key) == 0
    await store.register_broker(reg("a", "10.0.0.1:1", ["T"]), now=T0)
    renewed = await store.redis.get(key)
    await store.redis.delete(key)  # as an earlier release left it
    info, version = await store.cluster_info_at()
    assert list(info.broker_addr_table) == ["a"] and version == await store.cluster_info_version()
    assert int(version) > int(renewed)  # above the value it had: a copy kept at that one is not taken for this
    assert (await store.cluster_info_at())[1] == version  # and read, not renewed, from then on
    await store.redis.delete(key)
    info, version, how = await store.cluster_info_read()  # the stepped read starts it alike, in its first step
    assert (list(info.broker_addr_table), how) == (["a"], "steps") and version == await store.cluster_info_version()


async def stepped_registry(store, brokers: int = 130) -> None:
    """`brokers` brokers (past 128, so that no Redis keeps the set in a compact encoding SSCAN returns whole) and
    cluster info steps of 16 of them."""
    await asyncio.gather(*(store.register_broker(reg(f"b{i:03}", f"10.0.1.{i}:1", []), now=T0)
                           for i in range(brokers)))
    store.steps.cluster_info.fixed = 16


def disturb_steps(store, reads: int, unlogged: bool = False) -> list[str]:
    """After the first step of each of the next `reads` stepped reads, a new broker registers (a change cluster info
    shows, made before the read's next step); `unlogged`: and the change log goes, as if a worker of a release
    before it had made the change. The cursors of the steps taken."""
    steps, taken = store.cluster_info_step, []

    async def step(cursor: str, count: int, since: str = ""):
        res = await steps(cursor, count, since)
        taken.append(cursor)
        if cursor == "0" and taken.count("0") <= reads:
            await store.register_broker(reg(f"new{len(taken)}", f"10.0.2.{len(taken)}:1", []), now=T0)
            if unlogged:
                await store.redis.delete(store.keys.cluster_info_log)
        return res

    store.cluster_info_step = step
    return taken


async def test_cluster_info_read_in_steps_catches_up_with_changes_between_them(store):
    """Brokers registering, leaving and moving between two steps of a cluster info read renew {P}:civer, so the
    next step reads another value, and returns with it those brokers as they are now ({P}:cilog): the read
    replaces them and goes on, no start over, and answers the registry at the new version."""
    await stepped_registry(store)
    steps, taken = store.cluster_info_step, []

    async def step(cursor: str, count: int, since: str = ""):
        res = await steps(cursor, count, since)
        taken.append(cursor)
        if len(taken) == 1:
            await store.register_broker(reg("new", "10.0.2.1:1", []), now=T0)
            await store.unregister_broker(BrokerIdentity("C", "b007", 0, "10.0.1.7:1"))
            await store.register_broker(reg("b008", "10.0.3.8:1", []), now=T0)  # a new address
        return res

    store.cluster_info_step = step
    info, version, how = await store.cluster_info_read()
    assert how == "caught_up" and taken.count("0") == 1 and len(taken) > 4, taken
    assert "new" in info.broker_addr_table and "b007" not in info.broker_addr_table
    assert info.broker_addr_table["b008"].broker_addrs == {0: "10.0.3.8:1"}
    assert version == await store.cluster_info_version()
    assert (info, version) == await store.cluster_info_at()
    del store.cluster_info_step


async def test_cluster_info_read_starts_over_after_a_change_the_log_cannot_account_for(store):
    """A change between two steps that left no trace in {P}:cilog (a worker of a release before it): the read starts
    over and answers the registry with the new broker, at its version."""
    await stepped_registry(store)
    taken = disturb_steps(store, 1, unlogged=True)
    info, version, how = await store.cluster_info_read()
    assert how == "steps" and taken.count("0") == 2  # the disturbed read, then a whole new one
    assert len(taken) - taken.index("0", 1) > 4, taken  # several steps
    assert len(info.broker_addr_table) == 131 and "new1" in info.broker_addr_table
    assert version == await store.cluster_info_version()
    assert (info, version) == await store.cluster_info_at()


async def test_cluster_info_read_whole_after_three_disturbed_reads(store):
    """Changes the log cannot account for between the steps of three reads in a row: then one clusterInfo call,
    correct at once."""
    await stepped_registry(store)
    taken = disturb_steps(store, 3, unlogged=True)
    info, version, how = await store.cluster_info_read()
    assert how == "whole" and taken.count("0") == 3
    assert len(info.broker_addr_table) == 133 and version == await store.cluster_info_version()
    del store.cluster_info_step
    assert await store.cluster_info_read() == (info, version, "steps")  # undisturbed: in steps again, the same


async def test_topic_list_version_starts_on_a_registry_written_before_it(store):
    """A registry an earlier release wrote has topics and no {P}:tlver: the all-topics read starts the counter, so
    workers keep copies from the first read; an empty registry's read writes nothing."""
    key = store.keys.topic_list_version
    assert (await store.topic_list_at()) == ([], None)
    assert await store.redis.exists(key) == 0
    await store.register_broker(reg("a", "10.0.0.1:1", ["T"]), now=T0)
    renewed = await store.redis.get(key)
    await store.redis.delete(key)  # as an earlier release left it
    names, version = await store.topic_list_at()
    assert names == ["T"] and version == await store.topic_list_version()
    assert int(version) > int(renewed)  # above the value it had: a copy kept at that one is not taken for this
    assert (await store.topic_list_at())[1] == version  # and read, not renewed, from then on
    assert (await store.topic_list_at("unit"))[1] is None  # only the plain list is versioned
