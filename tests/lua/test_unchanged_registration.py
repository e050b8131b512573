"""The unchanged registration (registerBroker in unchanged mode): the same bytes as a broker's last registration
are applied without their topics, and anything that could make the full path answer or write differently sends
them back to the full path. The model-based test (test_model.py) covers the same by random sequences; these are
the cases one by one, each ending with the structural invariants.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from service.errors import CrossClusterRefused
from service.models import QueueData, RegisterBroker, RegisterBrokerResult, TopicConfig
from service.store import RouteStore
from service.store.keys import ORDER_TOPIC_CONFIG, live_member
from tests.lua.test_scenarios import (
    BROKER,
    CLUSTER,
    MASTER,
    SLAVE,
    T0,
    broker,
    dump,
    ident,
    inv,
    perm_of,
    slave,
)
from tests.lua.test_store_misc import Counter, real  # noqa: F401  (fixture)


def digest(req: RegisterBroker) -> str:
    """Stands in for NameServer.registration_digest: equal requests, equal digests."""
    return hashlib.sha256(repr(req).encode()).hexdigest()


async def full(store: RouteStore, req: RegisterBroker, now: int = T0, **kw: Any) -> RegisterBrokerResult:
    return await store.register_broker(req, digest=digest(req), now=now, **kw)


async def again(store: RouteStore, req: RegisterBroker, now: int = T0, **kw: Any) -> RegisterBrokerResult | None:
    return await store.register_unchanged(digest(req), now=now, **kw)


async def send(store: RouteStore, req: RegisterBroker, now: int = T0, **kw: Any) -> RegisterBrokerResult:
    """As a door's raw body goes: unchanged if the store can show it, in full otherwise."""
    guard = kw.pop("cross_cluster_topics", None)
    res = await store.register_unchanged(digest(req), now=now, cross_cluster=guard is not None,
                                         cross_cluster_topics=bool(guard), **kw)
    return res if res is not None else await full(store, req, now, cross_cluster_topics=guard, **kw)


async def score(store: RouteStore, addr: str = MASTER, cluster: str = CLUSTER) -> float | None:
    return await store.redis.zscore(store.keys.live, live_member(cluster, addr))


async def test_same_bytes_again_refresh_liveness_and_answer_as_the_full_path(store):
    req = broker(topics=["A", "B"])
    first = await full(store, req)
    assert not first.unchanged and first.changed_topics == 3
    before = await dump(store)
    res = await again(store, req, now=T0 + 30_000)
    assert res is not None and res.unchanged and res.changed_topics == 0 and not res.register_first
    assert (res.ha_server_addr, res.master_addr, res.kv_table) == (first.ha_server_addr, first.master_addr,
                                                                  first.kv_table)
    assert await score(store) == T0 + 30_000
    after = await dump(store)
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    assert changed == {store.keys.live, store.keys.deadlines}  # only the liveness scores moved
    await inv(store)


async def test_a_slave_learns_its_master_and_the_order_topic_config_as_it_is_now(store):
    await full(store, broker())
    s = slave()
    assert (await full(store, s)).master_addr == MASTER
    await store.kv_put(ORDER_TOPIC_CONFIG, "TestTopic", f"{BROKER}:4")
    await full(store, broker(ha="127.0.0.1:29999"))  # the master's HA address moved
    res = await again(store, s, now=T0 + 1)
    assert res is not None and res.unchanged
    assert (res.ha_server_addr, res.master_addr) == ("127.0.0.1:29999", MASTER)
    assert res.kv_table == {"TestTopic": f"{BROKER}:4"}
    await store.unregister_broker(ident())
    res = await send(store, s, now=T0 + 2)  # in full: it is the prime slave now
    assert (res.ha_server_addr, res.master_addr) == (None, None)  # no live master
    await inv(store)


async def test_unknown_digest_and_other_bytes_since_fall_back(store):
    req = broker(topics=["A"])
    assert await again(store, req) is None
    await full(store, req)
    await full(store, broker(topics=["A", "B"], counter=2))
    assert await again(store, req) is None  # the member registered other bytes since
    await full(store, req)
    await store.register_broker(broker(topics=["A"], counter=3), now=T0)  # bytes unknown (no digest) ...
    assert await again(store, req) is None  # ... leave no digest to match
    await inv(store)


@pytest.mark.parametrize("how", ["unregister", "expire"])
async def test_a_broker_gone_meanwhile_registers_in_full(store, how):
    req = broker(topics=["A"], timeout=10_000)
    await full(store, req)
    if how == "unregister":
        await store.unregister_broker(ident())
    else:
        await store.expire_all(now=T0 + 10_001)
    assert await again(store, req, now=T0 + 20_000) is None
    res = await send(store, req, now=T0 + 20_000)
    assert res.register_first and res.changed_topics == 2
    assert (await store.get_route("A")) is not None
    await inv(store)


async def test_a_topic_deleted_by_admin_comes_back(store):
    req = broker(topics=["A", "B"])
    await full(store, req)
    await store.delete_topic("A")
    assert await again(store, req) is None
    res = await send(store, req)
    assert res.changed_topics == 1 and (await store.get_route("A")) is not None
    await inv(store)


async def test_a_topic_added_by_admin_is_deleted_with_broker_registration(store):
    req = broker(topics=["A"])
    await full(store, req, delete_topic_with_broker_registration=True)
    await store.register_topic("Extra", [QueueData(BROKER, 4, 4, 6, 0)])
    assert await again(store, req, delete_topic_with_broker_registration=True) is None
    await send(store, req, delete_topic_with_broker_registration=True)
    assert await store.get_route("Extra") is None
    await inv(store)


async def test_switching_delete_topic_with_broker_registration_on_falls_back(store):
    req = broker(topics=["A"])
    await full(store, req)
    assert await again(store, req, delete_topic_with_broker_registration=True) is None
    assert await again(store, req) is not None
    await inv(store)


async def test_wiped_write_perm_stays_wiped_either_way(store):
    req = broker(topics=["A"])
    await full(store, req)
    assert await store.wipe_write_perm(BROKER) == 2
    await send(store, req)  # same data version: the full path keeps the wiped perm too (Java's rule)
    assert perm_of(await store.get_route("A")) == 4
    await inv(store)


async def test_a_slave_that_became_prime_slave_registers_its_topics_in_full(store):
    await full(store, broker(topics=["A"]))
    s = slave(topics=["A", "FromSlave"])
    await full(store, s)
    assert await again(store, s) is not None  # a slave's topics are not registered: nothing to redo
    await store.unregister_broker(ident())  # the master leaves: the slave (acting master on) is prime slave now
    assert await again(store, s) is None
    await send(store, s)
    assert perm_of(await store.get_route("FromSlave")) == 4  # registered by the prime slave, write bit wiped
    await inv(store)


async def test_another_id_changing_the_broker_data_is_undone_as_in_full(store):
    req = broker(topics=["A"], zone="z1")
    await full(store, req)
    await full(store, slave(zone="z2"))
    assert await store.redis.hget(store.keys.broker_data(BROKER), "zoneName") == "z2"
    res = await again(store, req)
    assert res is not None and res.unchanged
    assert await store.redis.hget(store.keys.broker_data(BROKER), "zoneName") == "z1"
    await inv(store)


async def test_a_credential_of_other_clusters_falls_back(store):
    req = broker(topics=["A"])
    await full(store, req)
    assert await again(store, req, clusters=["OtherCluster"]) is None
    assert await again(store, req, clusters=[]) is None
    assert await again(store, req, clusters=["OtherCluster", CLUSTER]) is not None
    await inv(store)


async def test_cross_cluster_guard(store):
    await full(store, broker(topics=["A"]))
    s = slave(topics=["A", "Elsewhere"])
    await full(store, s)
    # A slave's payload topics are not in its broker's topics: the guard must see them, so in full.
    assert await again(store, s, cross_cluster=True, cross_cluster_topics=True) is None
    assert await again(store, s, cross_cluster=True, cross_cluster_topics=False) is not None
    # The master's are all in place: nothing for the guard to refuse but the address rule, which still applies.
    assert await again(store, broker(topics=["A"]), cross_cluster=True, cross_cluster_topics=True) is not None
    await full(store, broker(cluster="Other", name="OtherBroker", addr=SLAVE, topics=["X"]))  # takes the address
    with pytest.raises(CrossClusterRefused):
        await again(store, s, cross_cluster=True, cross_cluster_topics=False)
    await inv(store)


async def test_fenced_registration_records_nothing(store):
    await full(store, broker(addr=MASTER, state=2))
    old = broker(addr="127.0.0.1:11111", state=1)
    assert (await full(store, old)).fenced
    assert await again(store, old) is None
    await inv(store)


@pytest.mark.redis
async def test_unchanged_runs_the_same_commands_for_10_and_5000_topics(real):  # noqa: F811
    """O(1) in the broker's topics: the unchanged path's commands (INFO commandstats, the script's inner calls
    included) are the same for a broker of 10 topics as for one of 5 000."""
    s, counter = real
    seen = []
    for n in (10, 5000):
        topics = {f"T{i:05d}": TopicConfig() for i in range(n)}
        req = broker(name=f"b{n}", addr=f"10.0.0.{n % 250}:10911", topics=topics)
        await full(s, req)
        await counter.reset()
        res = await again(s, req, now=T0 + 1)
        assert res is not None and res.unchanged
        seen.append(await counter.read())
    assert seen[0] == seen[1]
    assert sum(seen[0].values()) < 30, seen[0]
