"""Unchanged registrations answered from the worker's memory (service/core/unchanged.py): after the store confirmed
the same bytes on a connection, the worker answers them again without Redis, until a change to that broker made
through any worker ("!<brokerName>" events) sends the next one to the store, which applies it in full. Two workers
(two doors on one fake Redis server, each with its route cache subscribed)."""

from __future__ import annotations

import asyncio

import fakeredis

from service.core.unchanged import Answer, UnchangedAnswers
from service.models import BrokerIdentity, RegisterBrokerResult
from service.remoting import codes
from tests.remoting.test_door import SUCCESS, register_body, register_ext


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
