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
