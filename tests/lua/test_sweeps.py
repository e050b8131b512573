"""Removing a broker past the sweep bound (service/store/sweeps.py, lua/sweepBroker-3.lua), beyond what the
model-based test covers: a sweep a dead worker left half-done is invisible to readers and finished by the expiry
tick, a re-registration in the middle keeps what it wrote, and a reduced broker's acting-master wipe goes in steps.
On fakeredis and on a real redis-server (the `store` fixture)."""

from __future__ import annotations

from service.models import BrokerIdentity, DataVersion, RegisterBroker, TopicConfig
from service.store.routes import StoreLimits
from tests.invariants import check_invariants

CHUNK = 10


def broker(name: str, addr: str, topics: list[str], bid: int = 0, eam: bool | None = None,
           timeout: int | None = None) -> RegisterBroker:
    return RegisterBroker(cluster="C", broker_name=name, broker_id=bid, broker_addr=addr, ha_server_addr="",
                          topics={t: TopicConfig(8, 8, 6, 0) for t in topics}, data_version=DataVersion(1, 1, 0),
                          enable_acting_master=eam, heartbeat_timeout_ms=timeout)


def names(n: int) -> list[str]:
    return [f"T{i:03d}" for i in range(n)]


async def brokers_of(store, topic: str) -> set[str]:
    route = await store.get_route(topic)
    return {q.broker_name for q in route.queue_datas} if route else set()


async def test_a_half_done_sweep_is_invisible_fenced_by_a_new_registration_and_finished_by_the_tick(store):
    store.limits = StoreLimits(chunk_topics=CHUNK)
    await store.register_broker(broker("big", "10.0.0.1:1", names(35)))
    await store.register_broker(broker("small", "10.0.0.2:1", ["T000"]))
    left: list[str] = []

    async def worker_dies(sweep_ids):  # the removal script ran, its sweep did not
        left.extend(sweep_ids)

    store.run_sweeps = worker_dies
    assert await store.unregister_broker(BrokerIdentity("C", "big", 0, "10.0.0.1:1")) == 1
    assert len(left) == 1
    assert await brokers_of(store, "T000") == {"small"}
    assert await store.get_route("T020") is None
    assert "T020" in await store.topic_list()  # listed until its step
    await check_invariants(store.redis, store.keys.prefix)

    # The broker comes back with a third of its topics before anything is swept: what it writes stays.
    del store.run_sweeps
    await store.register_broker(broker("big", "10.0.0.1:1", names(12)))
    assert await brokers_of(store, "T005") == {"big"}
    await check_invariants(store.redis, store.keys.prefix)

    calls = await store.finish_sweeps()  # what NameServer.expire_due does first on every tick
    assert calls == -(-35 // CHUNK)
    assert await brokers_of(store, "T000") == {"small", "big"}
    assert [await brokers_of(store, t) for t in names(12)[1:]] == [{"big"}] * 11
    assert await store.topic_list() == names(12)
    assert await store.finish_sweeps() == 0  # nothing left under way
    await check_invariants(store.redis, store.keys.prefix)


async def test_a_reduced_broker_loses_write_in_steps_under_the_acting_master_rule(store):
    store.limits = StoreLimits(chunk_topics=CHUNK)
    topics = names(300)  # past Redis's small-set encoding, so SSCAN walks in steps there
    await store.register_broker(broker("g", "10.0.0.1:1", topics, eam=True))
    await store.register_broker(broker("g", "10.0.0.2:1", topics, bid=1, eam=True))
    steps: list[list[str]] = []
    run = store.run_sweeps

    async def counted(sweep_ids):
        steps.append(list(sweep_ids))
        await run(sweep_ids)

    store.run_sweeps = counted
    assert await store.unregister_broker(BrokerIdentity("C", "g", 0, "10.0.0.1:1")) == 2  # reduced: the slave stays
    assert len(steps) == 1 and len(steps[0]) == 1
    for t in topics:
        route = await store.get_route(t, support_acting_master=True)
        (qd,) = route.queue_datas
        assert qd.perm == 4, (t, qd)  # WRITE cleared
        assert route.broker_datas[0].broker_addrs == {0: "10.0.0.2:1"}  # the slave acts as master
    assert await store.finish_sweeps() == 0
    await check_invariants(store.redis, store.keys.prefix)


async def test_expiring_large_brokers_counts_each_as_the_bound_against_the_topic_budget(store):
    store.limits = StoreLimits(chunk_topics=CHUNK)
    for i in range(3):
        await store.register_broker(broker(f"big{i}", f"10.0.0.{i}:1", [f"B{i}-{t}" for t in names(40)],
                                           timeout=1000), now=1_000)
    first = await store.expire(batch=10, now=10_000, topic_budget=2 * (CHUNK + 1))
    assert len(first.expired) == 2 and first.more  # 40 topics each, counted as 10 (+1 for the entry)
    rest = await store.expire_all(now=10_000)
    assert len(rest.expired) == 1
    assert await store.topic_list() == []
    await check_invariants(store.redis, store.keys.prefix)
