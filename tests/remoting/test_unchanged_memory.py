"""Unchanged registrations answered from the worker's memory (service/core/unchanged.py): after the store confirmed
the same bytes on a connection, the worker answers them again without Redis, until a change to that broker made
through any worker ("!<brokerName>" events) sends the next one to the store, which applies it in full; a change the
worker makes itself does so before it is acknowledged, whenever its event comes back (a slow subscriber, held back
here). Two workers (two doors on one fake Redis server, each with its route cache subscribed)."""

from __future__ import annotations

import asyncio

import fakeredis

from service.core.unchanged import Answer, UnchangedAnswers
from service.models import BrokerIdentity, RegisterBrokerResult
from service.remoting import codes
from tests.remoting.test_door import BROKER, SUCCESS, register_body, register_ext


def script_calls(door) -> list[str]:
    store, calls = door.ns.store, []
    run = store._run

    async def spy(name, keys, *args, **kw):
        calls.append(name)
        return await run(name, keys, *args, **kw)

    store._run = spy
    return calls


async def until(check, what: str) -> None:
    for _ in range(250):  # 5 s
        if await check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(what)


async def fresh(door) -> bool:
    return door.ns.routes.fresh


async def two_workers(make_door):
    server = fakeredis.FakeServer()
    a = await make_door(server, heartbeat_flush_ms=10_000)
    b = await make_door(server, heartbeat_flush_ms=10_000)
    for d in (a, b):
        await until(lambda d=d: fresh(d), "route cache never fresh")
    return a, b


async def registered(client) -> None:
    reply = await client.request(codes.REGISTER_BROKER, register_ext(), register_body())
    assert reply.code == SUCCESS, reply.remark


async def test_the_same_bytes_again_are_answered_from_memory_and_refresh_liveness(make_door):
    a, _ = await two_workers(make_door)
    c = await a.client()
    await registered(c)  # full
    await registered(c)  # unchanged, confirmed by the store
    store = a.ns.store
    member = "C1|10.0.0.1:10911"
    before = await store.redis.zscore(store.keys.live, member)

    async def later() -> bool:
        return await store.redis_time_ms() > before + 1

    await until(later, "the Redis clock never moved")
    calls = script_calls(a)
    for _ in range(3):
        await registered(c)
    assert calls == [] and a.ns.unchanged.hits == 3
    assert await store.redis.zscore(store.keys.live, member) == before  # acknowledged, not yet written
    await a.ns.liveness.flush()
    assert await store.redis.zscore(store.keys.live, member) > before


async def test_a_change_made_through_another_worker_sends_the_next_one_to_the_store(make_door):
    a, b = await two_workers(make_door)
    c = await a.client()
    await registered(c)
    await registered(c)
    assert len(a.ns.unchanged) == 1
    # another worker deletes one of its topics: the broker's next registration must bring it back, as in Java
    await b.ns.store.delete_topic("TopicA")
    await until(lambda: _empty(a), "the change never reached worker A")
    calls = script_calls(a)
    await registered(c)
    assert "registerBroker" in calls
    assert (await a.http.get("/v1/topics/TopicA/route")).status == 200
    # and an unregistration through the other worker: the next registration registers it again
    await registered(c)  # confirmed unchanged again
    assert len(a.ns.unchanged) == 1
    await b.ns.store.unregister_broker(BrokerIdentity("C1", "broker-a", 0, "10.0.0.1:10911"))
    await until(lambda: _empty(a), "the unregistration never reached worker A")
    await registered(c)
    info = await (await b.http.get("/v1/cluster-info")).json()
    assert "broker-a" in info["brokerAddrTable"]


async def _empty(door) -> bool:
    return len(door.ns.unchanged) == 0


async def test_a_closed_connection_forgets_its_answers(make_door):
    a, _ = await two_workers(make_door)
    c = await a.client()
    await registered(c)
    await registered(c)
    assert len(a.ns.unchanged) == 1
    await c.close()
    await until(lambda: _empty(a), "the closed connection's answer was kept")


def test_an_answer_confirmed_across_an_invalidation_is_not_kept():
    answers = UnchangedAnswers()
    result = RegisterBrokerResult(None, None, None, unchanged=True)
    epoch = answers.epoch
    answers.invalidate(["other-broker"])  # arrived while the store was being asked
    answers.put(epoch, "d1", "conn-1", Answer("b", "C", "10.0.0.1:1", result))
    assert answers.get("d1", "conn-1") is None
    answers.put(answers.epoch, "d1", "conn-1", Answer("b", "C", "10.0.0.1:1", result))
    answers.put(answers.epoch, "d2", "conn-2", Answer("c", "C", "10.0.0.2:1", result))
    answers.invalidate(["b"])
    assert answers.get("d1", "conn-1") is None and answers.get("d2", "conn-2") is not None
    answers.invalidate(None)
    assert len(answers) == 0


async def test_other_bytes_than_the_connections_last_go_straight_to_a_full_registration(make_door):
    """A changed registration is not first tried as unchanged (a Redis round trip the store would only refuse):
    one registerBroker call, in full; the same bytes again are tried as unchanged."""
    door = await make_door()
    c = await door.client()
    await registered(c)
    calls = script_calls(door)
    reply = await c.request(codes.REGISTER_BROKER, register_ext(), register_body(counter=2))
    assert reply.code == SUCCESS
    assert calls == ["registerBroker"]
    store = door.ns.store
    assert await store.redis.hget(store.keys.base + "l:C1|10.0.0.1:10911", "dv") == "1700000000000,2,0"
    calls.clear()
    reply = await c.request(codes.REGISTER_BROKER, register_ext(), register_body(counter=2))
    assert reply.code == SUCCESS and calls == ["registerBroker"]
    assert door.ns.metrics.registrations.labels(result="unchanged")._value.get() == 1


def metric(text: str, name: str) -> float:
    values = [float(line.split()[-1]) for line in text.splitlines() if line.split(" ")[0] == name]
    assert len(values) == 1, (name, values)
    return values[0]


async def test_metrics_say_what_was_answered_from_memory_and_what_the_batches_wrote(make_door):
    """/metrics of the worker: registrations answered from memory, heartbeats pending and flushed, in-place route
    updates, read back from the exposition (not from the objects)."""
    a, b = await two_workers(make_door)
    c = await a.client()
    await registered(c)
    await registered(c)  # confirmed by the store
    for _ in range(2):
        await registered(c)  # from memory
    text = await (await a.http.get("/metrics")).text()
    assert metric(text, "namesrv_registrations_answered_from_memory_total") == 2
    assert metric(text, "namesrv_heartbeats_pending") == 1 and metric(text, "namesrv_heartbeats_flushed_total") == 0
    await a.ns.liveness.flush()
    text = await (await a.http.get("/metrics")).text()
    assert metric(text, "namesrv_heartbeats_pending") == 0 and metric(text, "namesrv_heartbeats_flushed_total") == 1
    assert metric(text, "namesrv_heartbeat_flush_failures_total") == 0
    # worker B caches the route, then a registration through A changes only this broker's queue counts
    assert (await b.http.get("/v1/topics/TopicA/route")).status == 200
    before = metric(await (await b.http.get("/metrics")).text(), "namesrv_route_cache_updates_total")
    reply = await c.request(codes.REGISTER_BROKER, register_ext(), register_body({"TopicA": 2, "TopicB": 4}, counter=9))
    assert reply.code == SUCCESS, reply.remark

    async def updated() -> bool:
        return metric(await (await b.http.get("/metrics")).text(), "namesrv_route_cache_updates_total") > before

    await until(updated, "worker B never updated its cached route in place")
    text = await (await b.http.get("/metrics")).text()
    assert metric(text, "namesrv_route_cache_missed_events_total") == 0


# ---------------------------------------------------------------- this worker's own changes

async def slow_subscriber(make_door, **env):
    """One worker whose change events are held back (a slow subscriber: its own changes' events have not come back
    yet) while its route cache stays fresh (a long staleness bound: no poll flushes it meanwhile)."""
    door = await make_door(**{"heartbeat_flush_ms": 10_000, "route_cache_staleness_ms": 60_000, **env})
    await until(lambda: fresh(door), "route cache never fresh")
    held: list[str] = []
    door.ns.routes.apply_event = held.append  # what the subscription delivers from now on waits here
    return door, held


async def member_registered(door) -> bool:
    return "broker-a" in (await door.ns.store.cluster_info()).broker_addr_table


async def unregistered_natively(door, client) -> None:
    reply = await client.request(codes.UNREGISTER_BROKER, dict(BROKER))
    assert reply.code == SUCCESS, reply.remark


async def test_its_own_unregistration_ends_the_brokers_answers_at_once(make_door):
    """The worker that unregisters a broker does not wait for that change's event to stop answering the broker's
    unchanged registrations from memory: the broker registering the same bytes right after its unregistration was
    acknowledged is registered again (before, it was acknowledged from memory and never applied)."""
    door, held = await slow_subscriber(make_door)
    c = await door.client()
    await registered(c)
    await registered(c)  # confirmed by the store: answered from memory from now on
    assert len(door.ns.unchanged) == 1
    await unregistered_natively(door, c)
    assert not await member_registered(door)
    assert len(door.ns.unchanged) == 0
    await registered(c)
    assert await member_registered(door)
    assert held  # the events were indeed held back: the answers ended without them


async def test_its_own_drop_of_a_closed_connection_ends_the_brokers_answers_on_its_other_connections(make_door):
    """A broker confirmed on two connections of one worker, the later one recorded as its connection: when that
    one closes and the worker drops the broker, the answer kept for the other connection ends too."""
    door, held = await slow_subscriber(make_door)
    first, second = await door.client(), await door.client()
    await registered(first)
    await registered(first)  # an answer for the first connection
    await registered(second)  # confirmed unchanged on the second: its close is the one that removes the broker
    assert len(door.ns.unchanged) == 2
    await second.close()

    async def dropped() -> bool:
        return not await member_registered(door)

    await until(dropped, "the close never removed the broker")
    await registered(first)
    assert await member_registered(door)
    assert held


async def test_its_own_expiry_ends_the_brokers_answers_at_once(make_door):
    """The worker whose expiry scan removes a silent broker ends that broker's answers on the spot: the broker's
    next registration (the same bytes on the same connection) registers it again."""
    door, held = await slow_subscriber(make_door, heartbeat_flush_ms=20)
    c = await door.client()
    for _ in range(2):
        reply = await c.request(codes.REGISTER_BROKER, register_ext(heartbeatTimeoutMillis="1000"), register_body())
        assert reply.code == SUCCESS, reply.remark
    assert len(door.ns.unchanged) == 1

    async def expired() -> bool:
        return bool(await door.ns.expire_due())

    await until(expired, "the broker never expired")
    assert len(door.ns.unchanged) == 0
    reply = await c.request(codes.REGISTER_BROKER, register_ext(heartbeatTimeoutMillis="1000"), register_body())
    assert reply.code == SUCCESS
    assert await member_registered(door)


async def test_its_own_changed_registration_ends_the_brokers_answers_on_its_other_connections(make_door):
    """Other bytes of the broker through another connection of the same worker change what the store holds: the
    old bytes again on the first connection are applied (they change it back), not answered from memory."""
    door, held = await slow_subscriber(make_door)
    first, second = await door.client(), await door.client()
    await registered(first)
    await registered(first)
    reply = await second.request(codes.REGISTER_BROKER, register_ext(), register_body({"TopicA": 16}, counter=2))
    assert reply.code == SUCCESS, reply.remark
    await registered(first)  # {"TopicA": 8, "TopicB": 4}, data version 1 again
    route = (await door.ns.store.get_route_at("TopicA")).route
    assert route is not None and route.queue_datas[0].read_queue_nums == 8
    assert held


async def test_its_own_admin_changes_end_the_answers_they_affect(make_door):
    """A topic deletion (the broker's next registration brings the topic back, as in Java), write permission and
    the order-topic table (which every answer carries), made through this worker: the answers they affect end
    before the change is acknowledged."""
    door, held = await slow_subscriber(make_door)
    c = await door.client()

    async def confirmed() -> None:
        await registered(c)
        await registered(c)
        assert len(door.ns.unchanged) == 1

    await confirmed()
    assert (await door.http.delete("/v1/topics/TopicA")).status == 200
    assert len(door.ns.unchanged) == 0
    await registered(c)
    assert (await door.ns.store.get_route_at("TopicA")).route is not None
    for change in (lambda: door.http.post("/v1/brokers/broker-a/wipe-write-perm"),
                   lambda: door.http.post("/v1/brokers/broker-a/add-write-perm"),
                   lambda: door.http.put("/v1/kv/ORDER_TOPIC_CONFIG/TopicB", json={"value": "broker-a:4"})):
        await confirmed()
        assert (await change()).status == 200
        assert len(door.ns.unchanged) == 0
    await confirmed()
    assert (await door.http.put("/v1/kv/OTHER_NS/k", json={"value": "v"})).status == 200
    assert len(door.ns.unchanged) == 1  # a KV key no answer carries: they stay


async def test_no_answer_from_memory_while_its_own_expiry_scan_is_under_way(make_door):
    """The broker registering while this worker's scan may be expiring it goes to the store: answered from memory, it
    could be acknowledged in the instant between its expiry in Redis and the scan's reply."""
    door, _ = await slow_subscriber(make_door)
    c = await door.client()
    await registered(c)
    await registered(c)
    store, gate = door.ns.store, asyncio.Event()
    expire = store.expire

    async def held_back(*args, **kw):
        await gate.wait()
        return await expire(*args, **kw)

    store.expire = held_back
    scan = asyncio.create_task(door.ns.expire_due())
    await asyncio.sleep(0.05)
    calls, hits = script_calls(door), door.ns.unchanged.hits
    await asyncio.wait_for(registered(c), 5)  # in a turn of its own (the worker has several)
    assert calls and door.ns.unchanged.hits == hits  # asked the store
    gate.set()
    assert await scan == []
    calls.clear()
    await registered(c)
    assert calls == []  # from memory again
