"""Registrations of many topics in bounded steps (service/store/chunked.py), beyond what the model-based test
covers: the split itself, a registration abandoned half-way, and (embedded mode, issue 25 item 3) heartbeats of
other brokers answered while a large registration is under way."""

from __future__ import annotations

import asyncio

import fakeredis
import pytest

from service.config import load_settings
from service.core import ADMIN, NameServer
from service.models import DataVersion, RegisterBroker, TopicConfig
from service.store import RouteStore
from service.store.chunked import split_lines
from service.store.connect import connect_store
from service.store.routes import StoreLimits


@pytest.mark.parametrize("n, per", [(0, 3), (1, 3), (3, 3), (7, 3), (9, 1), (5, 100)])
def test_split_lines_keeps_every_line_once_in_order(n, per):
    lines = "".join(f"T{i}\t1\t1\t6\t0\n" for i in range(n))
    parts = list(split_lines(lines, per))
    assert "".join(parts) == lines
    assert all(p.endswith("\n") and 1 <= p.count("\n") <= per for p in parts)
    assert len(parts) == -(-n // per)


def broker(n: int, queues: int, counter: int, name: str = "big") -> RegisterBroker:
    return RegisterBroker(cluster="C", broker_name=name, broker_id=0, broker_addr=f"10.0.0.{len(name)}:10911",
                          ha_server_addr="", topics={f"T{i:04d}": TopicConfig(queues, queues, 6, 0)
                                                     for i in range(n)},
                          data_version=DataVersion(1, counter, 0))


async def queue_counts(store: RouteStore, n: int) -> set[int]:
    out = set()
    for i in range(n):
        route = await store.get_route(f"T{i:04d}")
        out |= {q.read_queue_nums for q in route.queue_datas} if route else {0}
    return out


async def test_a_registration_abandoned_half_way_is_completed_by_the_next_with_the_same_data_version():
    store = RouteStore(fakeredis.FakeAsyncRedis(decode_responses=True), prefix="a",
                       limits=StoreLimits(chunk_topics=10))
    await store.register_broker(broker(30, 8, counter=1))
    reg = store.chunked_registration(broker(30, 4, counter=2), 10)
    await reg.begin()
    assert not await reg.step()  # one chunk of three, then the worker "dies"
    assert await queue_counts(store, 30) == {4, 8}  # each topic either as before or as registered
    # The broker sends the same data version again (a whole registration would skip topics already there):
    # the unfinished one's mark makes it write every topic.
    res = await store.register_broker(broker(30, 4, counter=2))
    assert res.changed_topics == 20
    assert await queue_counts(store, 30) == {4}
    await store.redis.aclose()


async def test_a_second_registration_of_the_broker_fences_the_first_off():
    store = RouteStore(fakeredis.FakeAsyncRedis(decode_responses=True), prefix="b")
    first = store.chunked_registration(broker(30, 4, counter=2), 10)
    await first.begin()
    assert not await first.step()
    second = store.chunked_registration(broker(20, 2, counter=3), 10)
    await second.run()
    assert await first.step() and first.fenced_midway  # its next chunk writes nothing
    assert await queue_counts(store, 30) == {2, 0}  # T0020-T0029 of the first never arrive
    await store.redis.aclose()


async def test_embedded_mode_answers_heartbeats_while_a_large_registration_is_under_way():
    """Issue 25 item 3: in the embedded default a heartbeat waited 13.65 s behind another broker's 100 000-topic
    registration (one Lua script runs on the event loop itself in fakeredis). In steps, the loop is free between
    them: heartbeats of another broker are answered before the registration ends."""
    settings = load_settings(env={})
    assert settings.embedded
    ns = NameServer(connect_store(settings), settings)
    await ns.store.load_scripts()
    small = {"clusterName": "C", "brokerName": "small", "brokerId": 0, "brokerAddr": "10.0.0.5:10911"}
    await ns.register_broker(ADMIN, {**small, "topicConfigTable": {"S": {"readQueueNums": 8, "writeQueueNums": 8,
                                                                        "perm": 6}}})
    big = {"clusterName": "C", "brokerName": "big", "brokerId": 0, "brokerAddr": "10.0.0.3:10911",
           "topicConfigTable": {f"T{i:04d}": {"readQueueNums": 8, "writeQueueNums": 8, "perm": 6}
                                for i in range(4000)}}
    registering = asyncio.create_task(ns.register_broker(ADMIN, big))
    answered_meanwhile = 0
    while not registering.done():
        res = await ns.heartbeat(ADMIN, small)
        assert res.data_version is not None
        answered_meanwhile += not registering.done()
    assert (await registering).changed_topics == 4000
    assert answered_meanwhile > 0
    assert len(await ns.store.topic_list()) == 4001
    await ns.stop()


async def test_steps_sized_by_time_shrink_when_a_step_costs_more_than_its_share(store):
    """With steps sized by time (service/store/steps.py), a registration's chunks, its finish walk and the sweep
    of its removal follow what their steps cost on this Redis: here a target of 0.05 ms, which a first step of
    300 topics overruns, so the next ones are smaller; every topic arrives, and goes, all the same."""
    store.limits = StoreLimits(chunk_topics=300, adaptive_steps=True)
    for sizer in (store.steps.write, store.steps.finish, store.steps.sweep):
        sizer.target_us = 50
    sizes: dict[str, list[int]] = {"registerChunk": [], "sweepBroker": []}
    run = store._run

    async def spy(name, keys, *args, **kw):
        res = await run(name, keys, *args, **kw)
        if name == "registerChunk":
            sizes[name].append(args[-1].count("\n"))
        elif name == "sweepBroker" and args[0]:
            sizes[name].append(int(res[2]))
        return res

    store._run = spy
    await store.register_broker(broker(300, 8, counter=1))  # not past the first threshold: whole
    assert sizes["registerChunk"] == []
    await store.register_broker(broker(900, 4, counter=2))
    chunks = sizes["registerChunk"]
    assert chunks[0] == 300 and max(chunks[1:]) < 300 and sum(chunks) == 900, chunks
    assert store.steps.chunked_past() < 300  # and the threshold of whole registrations fell with them
    assert await queue_counts(store, 900) == {4}
    from service.models import BrokerIdentity

    assert await store.unregister_broker(BrokerIdentity("C", "big", 0, "10.0.0.3:10911")) == 1
    sweeps = sizes["sweepBroker"]
    assert sweeps[0] == 300 and max(sweeps[1:]) < 300 and sum(sweeps) == 900, sweeps
    assert await queue_counts(store, 900) == {0}
