"""A changed registration made through one worker updates the other worker's cached routes in place ("=" lines of
the change events): its readers stay cache hits, read no route from Redis, and see exactly what Redis holds."""

from __future__ import annotations

import asyncio

import fakeredis

from service.remoting import codes, fastjson
from tests.invariants import jsonable
from tests.remoting.test_door import SUCCESS, register_body, register_ext
from tests.remoting.test_unchanged_memory import script_calls, until

TOPICS = {f"T{i}": 8 for i in range(20)}


async def test_readers_of_a_changed_registrations_topics_stay_hits(make_door):
    a, b = await two_workers(make_door)
    broker = await b.client()
    reply = await broker.request(codes.REGISTER_BROKER, register_ext(), register_body(TOPICS, counter=1))
    assert reply.code == SUCCESS
    reader = await a.client()
    for t in TOPICS:  # cached on worker A
        assert (await reader.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": t})).code == SUCCESS
    updates = a.ns.routes.updates
    changed = {t: 4 for t in TOPICS}
    reply = await broker.request(codes.REGISTER_BROKER, register_ext(), register_body(changed, counter=2))
    assert reply.code == SUCCESS

    async def updated() -> bool:
        return a.ns.routes.updates == updates + len(TOPICS)

    await until(updated, "worker A never updated its cached routes")
    calls = script_calls(a)
    for t in TOPICS:
        r = await reader.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": t})
        assert r.code == SUCCESS
        assert [q["readQueueNums"] for q in fastjson.loads(r.body)["queueDatas"]] == [4]
        assert jsonable(a.ns.routes.lookup(t).route) == jsonable(await a.ns.store.get_route(t))
    assert calls == ["getRoutes"] * len(TOPICS)  # the comparisons' own reads: the door's were all hits


async def two_workers(make_door):
    """Two doors (workers) on one registry, their route caches fresh."""
    server = fakeredis.FakeServer()
    a = await make_door(server)
    b = await make_door(server)
    for d in (a, b):
        await until(lambda d=d: _fresh(d), "route cache never fresh")
    return a, b


async def _fresh(door) -> bool:
    await asyncio.sleep(0)
    return door.ns.routes.fresh


async def test_readers_stay_hits_while_a_broker_leaves_and_comes_back(make_door):
    """A rolling restart through the door real brokers use: a cluster's second broker unregisters on worker B, then
    registers again; worker A takes it out of, then puts it back into, its cached routes ("~" and "+" lines), so
    the readers on A read no route from Redis and see exactly what Redis holds after each step."""
    a, b = await two_workers(make_door)
    first = await b.client()
    assert (await first.request(codes.REGISTER_BROKER, register_ext(), register_body(TOPICS))).code == SUCCESS
    second_id = {"brokerName": "broker-b", "brokerAddr": "10.0.0.2:10911"}
    second = await b.client()
    reply = await second.request(codes.REGISTER_BROKER, register_ext(**second_id), register_body(TOPICS))
    assert reply.code == SUCCESS
    reader = await a.client()
    for t in TOPICS:  # cached on worker A, both brokers in every route
        r = await reader.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": t})
        assert len(fastjson.loads(r.body)["brokerDatas"]) == 2
    for step, brokers in (("leaves", ["broker-a"]), ("comes back", ["broker-a", "broker-b"])):
        updates = a.ns.routes.updates
        if step == "leaves":
            reply = await second.request(codes.UNREGISTER_BROKER, {"clusterName": "C1", "brokerId": 0, **second_id})
        else:
            reply = await second.request(codes.REGISTER_BROKER, register_ext(**second_id), register_body(TOPICS))
        assert reply.code == SUCCESS

        async def updated(before: int = updates) -> bool:
            return a.ns.routes.updates == before + len(TOPICS)

        await until(updated, f"worker A never updated its cached routes when the broker {step}")
        calls = script_calls(a)
        for t in TOPICS:
            r = await reader.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": t})
            assert sorted(d["brokerName"] for d in fastjson.loads(r.body)["brokerDatas"]) == brokers, step
            assert jsonable(a.ns.routes.lookup(t).route) == jsonable(await a.ns.store.get_route(t))
        assert calls == ["getRoutes"] * len(TOPICS)  # the comparisons' own reads: the door's were all hits
        del a.ns.store._run  # the spy goes: the next step spies afresh
