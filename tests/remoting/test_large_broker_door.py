"""A large broker on the native door, framed as stock brokers frame it (issue 32 items 1 and 2): its registration
goes in bounded steps whatever the body's form (plain JSON, zipped and flagged as 4.9.x flags it, zipped with
compressed=false as 5.x sends it), and its unregistration, expiry and connection drop go in bounded sweeps; routes
on both doors never show a half-removed broker. The store's script calls are recorded (the store itself runs)."""

from __future__ import annotations

import asyncio

import pytest

from benchmarks import broker_frames as frames
from service.remoting import codes
from tests.invariants import check_invariants

CHUNK = 10
TOPICS = 35  # four registration chunks, four sweep steps
BIG = ("C1", "big", "10.0.0.7:10911")


def record_scripts(door) -> list[tuple[str, tuple]]:
    """Every script the worker's store calls from now on, with its ARGV."""
    store = door.ns.store
    calls: list[tuple[str, tuple]] = []
    run = store._run

    async def spy(name, keys, *args, **kw):
        calls.append((name, args))
        return await run(name, keys, *args, **kw)

    store._run = spy
    return calls


def topics(queues: int = 8) -> dict[str, int]:
    return {f"Big{i:03d}": queues for i in range(TOPICS)}


async def register(client, kind: str, queues: int = 8, counter: int = 1, timeout_ms: int | None = None):
    body = frames.register_body(topics(queues), counter, kind)
    reply = await client.request(codes.REGISTER_BROKER, frames.register_header(*BIG, kind, body, timeout_ms), body,
                                 version=frames.VERSION)
    assert reply.code == 0, reply.remark
    return reply


async def route_queues(door, client, topic: str) -> tuple[int | None, int | None]:
    """The big broker's read queue count of `topic` on both doors (None: not routed)."""
    native = await client.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, version=frames.VERSION)
    http = await door.http.get(f"/v1/topics/{topic}/route")
    got = []
    for body in ((await http.json()) if http.status == 200 else None,
                 frames_json(native.body) if native.code == 0 else None):
        qds = [q for q in (body or {}).get("queueDatas", []) if q["brokerName"] == BIG[1]]
        got.append(qds[0]["readQueueNums"] if qds else None)
    return got[0], got[1]


def frames_json(body: bytes) -> dict:
    from service.remoting import fastjson

    return fastjson.loads(body)


@pytest.mark.parametrize("kind", frames.BODIES)
async def test_a_large_registration_goes_in_steps_on_the_native_door(make_door, kind):
    door = await make_door(registration_chunk_topics=CHUNK)
    c = await door.client()
    calls = record_scripts(door)
    await register(c, kind)
    names = [name for name, _ in calls]
    # guard off (open mode): begin, four chunks of at most CHUNK topics, the finish walk
    assert names.count("registerChunk") == 4, names
    assert all(args[-1].count("\n") <= CHUNK for name, args in calls if name == "registerChunk")
    assert "registerFinish" in names
    assert not any(name == "registerBroker" and args[20] in ("0", "") for name, args in calls), \
        "a whole registerBroker of every topic"
    assert await route_queues(door, c, "Big034") == (8, 8)
    calls.clear()
    await register(c, kind, queues=4, counter=2)  # every topic changed: in steps again
    assert [n for n, _ in calls].count("registerChunk") == 4
    assert await route_queues(door, c, "Big000") == (4, 4)
    await check_invariants(door.ns.store.redis, door.ns.store.keys.prefix)


async def test_the_single_topic_guard_still_refuses_a_first_one_topic_registration(make_door):
    door = await make_door(registration_chunk_topics=CHUNK)
    c = await door.client()
    body = frames.register_body({"Only": 8}, 1)
    reply = await c.request(codes.REGISTER_BROKER, frames.register_header(*BIG, "plain", body), body,
                            version=frames.VERSION)
    assert reply.code != 0  # Java's REGISTER_FAILED path (reference §2.3 step 7)
    assert (await door.http.get("/v1/topics/Only/route")).status == 404


def sweep_calls(calls) -> list[tuple]:
    return [args for name, args in calls if name == "sweepBroker" and args[0] != ""]


async def test_unregistering_a_large_broker_goes_in_bounded_sweeps(make_door):
    door = await make_door(registration_chunk_topics=CHUNK)
    c = await door.client()
    await register(c, "plain")
    calls = record_scripts(door)
    reply = await c.request(codes.UNREGISTER_BROKER, frames.unregister_header(*BIG), version=frames.VERSION)
    assert reply.code == 0
    (unregister,) = [args for name, args in calls if name == "unregisterBroker"]
    assert unregister[-1] == str(CHUNK)  # the sweep bound
    steps = sweep_calls(calls)
    assert len(steps) == 4 and all(int(args[1]) == CHUNK for args in steps)
    for t in ("Big000", "Big034"):
        assert await route_queues(door, c, t) == (None, None)
    assert (await (await door.http.get("/v1/topics")).json())["topicList"] == []
    await check_invariants(door.ns.store.redis, door.ns.store.keys.prefix)


async def test_a_large_broker_whose_connection_closes_is_swept(make_door):
    door = await make_door(registration_chunk_topics=CHUNK)
    broker = await door.client()
    await register(broker, "zipped")
    calls = record_scripts(door)
    await broker.close()
    reader = await door.client()
    store = door.ns.store
    for _ in range(250):  # the close is handled in the background: poll, 5 s at most
        if any(name == "dropConnection" for name, _ in calls) and set(await store.redis.hkeys(store.keys.sweeps)) \
                <= {"#"}:
            break
        await asyncio.sleep(0.02)
    assert await route_queues(door, reader, "Big010") == (None, None)
    assert any(name == "dropConnection" for name, _ in calls)
    assert len(sweep_calls(calls)) == 4
    assert (await (await door.http.get("/v1/topics")).json())["topicList"] == []
    await check_invariants(door.ns.store.redis, door.ns.store.keys.prefix)


async def test_a_large_broker_that_falls_silent_expires_in_bounded_sweeps(make_door):
    door = await make_door(registration_chunk_topics=CHUNK)
    c = await door.client()
    await register(c, "compressed", timeout_ms=1000)
    calls = record_scripts(door)
    store = door.ns.store
    res = await store.expire_all(now=await store.redis_time_ms() + 1001)  # the scan, a timeout later
    assert [name for _, _, name in res.expired] == [BIG[1]]
    assert len(sweep_calls(calls)) == 4
    assert await route_queues(door, c, "Big020") == (None, None)
    await check_invariants(door.ns.store.redis, door.ns.store.keys.prefix)
