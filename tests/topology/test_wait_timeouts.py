"""WAIT with the default timeouts (socket 500 ms, wait 1 000 ms): a write whose replica does not confirm answers
REPLICATION_UNCONFIRMED, with a message that reads as a sentence, in every mode — not STORE_UNAVAILABLE because
the socket gave up on WAIT before WAIT answered (single, Sentinel) or "only an error of 1" (Cluster)."""

from __future__ import annotations

import uuid

import pytest

from service.config import load_settings
from service.store import connect_store
from service.store.routes import ReplicationUnconfirmed
from tests.topology.test_store_modes import replica_node, settings_for

pytestmark = pytest.mark.redis
SENTENCE = ("The change was written, but 0 of 1 Redis replica confirmed it within 1000 ms, so a failover may "
            "lose it: check it, then retry.")


async def unconfirmed_write(settings) -> ReplicationUnconfirmed:
    assert (settings.redis_socket_timeout_ms, settings.redis_wait_timeout_ms) == (500, 1000)  # the defaults
    store = connect_store(settings)
    try:
        await store.load_scripts()
        with pytest.raises(ReplicationUnconfirmed) as err:
            await store.kv_put("NS", "k", "v")
        assert await store.kv_get("NS", "k") == "v"  # written on the primary all the same
        return err.value
    finally:
        await store.close()


async def test_single_server_without_its_replica(redis_server):
    # a lone redis-server: WAIT 1 1000 can only time out, as when the only replica is down
    env = {"NAMESRV_REDIS_URL": redis_server.url, "NAMESRV_KEY_PREFIX": "w" + uuid.uuid4().hex[:6],
           "NAMESRV_REDIS_WAIT_REPLICAS": "1"}
    err = await unconfirmed_write(load_settings(env=env))
    assert (err.code, err.message) == ("REPLICATION_UNCONFIRMED", SENTENCE)


@pytest.fixture(params=["sentinel", "cluster"])
def topology(request, make_sentinel_topology, make_cluster_topology):
    return make_sentinel_topology() if request.param == "sentinel" else make_cluster_topology()


async def test_sentinel_and_cluster_with_the_replica_frozen(topology):
    prefix = "w" + uuid.uuid4().hex[:6]
    settings = settings_for(topology, key_prefix=prefix, redis_wait_replicas=1)
    store = connect_store(settings)
    try:
        await store.load_scripts()
        await store.kv_put("NS", "warm", "v")  # the replica confirms while it runs
    finally:
        await store.close()
    replica = replica_node(topology, prefix)
    replica.freeze()
    try:
        err = await unconfirmed_write(settings)
    finally:
        replica.thaw()
    assert (err.code, err.message) == ("REPLICATION_UNCONFIRMED", SENTENCE)


async def test_controller_transitions_wait_for_the_replica_heartbeats_do_not(topology):
    """Issue 23 with NAMESRV_REDIS_WAIT_REPLICAS: a transition a broker acts on (ids, an election) is acknowledged
    only once the replica has it, so a Redis failover cannot roll a master epoch back under the broker told of it;
    a heartbeat (liveness, rewritten every second or two) does not wait."""
    from service.store.controller import ControllerStore

    prefix = "w" + uuid.uuid4().hex[:6]
    settings = settings_for(topology, key_prefix=prefix, redis_wait_replicas=1)
    store = connect_store(settings)
    ctl = ControllerStore.beside(store)
    try:
        await store.load_scripts()
        assert (await ctl.apply_broker_id("C", "g", 1, "127.0.0.1:1;1")).code == 0  # the replica confirms
        assert (await ctl.register_broker("C", "g", 1, "127.0.0.1:1")).code == 0
        replica = replica_node(topology, prefix)
        replica.freeze()
        try:
            assert await ctl.heartbeat("C", "g", 1, "127.0.0.1:1", timeout_ms=60_000) in (True, False)
            with pytest.raises(ReplicationUnconfirmed):
                await ctl.elect_master("g", 1)
        finally:
            replica.thaw()
        view = await ctl.group("g")
        assert view is not None and view.master == 1  # written on the primary all the same, as routes are
    finally:
        await store.close()
