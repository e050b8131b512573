"""Real Redis Sentinel and Redis Cluster topologies on loopback (see tests/redis_topology.py).

Function-scoped: the tests fail nodes over and kill them, so every test gets a fresh topology (about 2 s to
start either one). The `make_*` factories take the constructor's keywords (passwords, timeouts) and clean up
whatever they started, also when the test fails.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.conftest import need
from tests.redis_topology import ClusterTopology, SentinelTopology


def _factory(cls: type) -> Iterator[Callable[..., Any]]:
    need("redis-server")
    need("redis-cli")
    started: list[Any] = []

    def make(**kwargs: Any) -> Any:
        topo = cls(**kwargs)
        started.append(topo)  # registered before start(): a failed start is cleaned up too
        return topo.start()

    try:
        yield make
    finally:
        for topo in started:
            topo.cleanup()


@pytest.fixture(autouse=True)
def _cluster_ask_as_found() -> Iterator[None]:
    """connect_store applies service/store/cluster_ask.py process-wide; the findings pin redis-py's own
    behaviour, so every test here ends with the state it started with."""
    from service.store import cluster_ask

    before = cluster_ask.applied()
    yield
    (cluster_ask.apply if before else cluster_ask.revert)()


@pytest.fixture
def make_sentinel_topology() -> Iterator[Callable[..., SentinelTopology]]:
    """`make_sentinel_topology(password=..., sentinel_password=..., down_after_ms=..., ...)` → started topology."""
    yield from _factory(SentinelTopology)


@pytest.fixture
def make_cluster_topology() -> Iterator[Callable[..., ClusterTopology]]:
    """`make_cluster_topology(password=..., node_timeout_ms=..., ...)` → started 3 + 3 cluster."""
    yield from _factory(ClusterTopology)


@pytest.fixture
def sentinel_topology(make_sentinel_topology) -> SentinelTopology:
    """1 primary + 1 replica + 3 sentinels (service `mymaster`), no passwords."""
    return make_sentinel_topology()


@pytest.fixture
def cluster_topology(make_cluster_topology) -> ClusterTopology:
    """3 primaries + 3 replicas, no password."""
    return make_cluster_topology()
