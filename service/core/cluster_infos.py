"""A worker's copy of the cluster info (GET_BROKER_CLUSTER_INFO), kept while the registry's `{P}:civer` holds.

Reading it is O(brokers): at 10 000 brokers one read ran ~21 000 Redis commands and took ~300 ms, and every
admin read (mqadmin clusterList, dashboards, the console) ran it again (benchmarks/README.md, "Cluster info").
Every script that changes what it shows — a broker's addresses, its name or cluster, its acting-master flag or
zone — renews `{P}:civer` (`cluster_info_changed` in lua/includes/common.lua), and a read of the tables returns the
value they reflect (the store's cluster_info_read: bounded steps fenced by that value, or one clusterInfo call
when changes kept disturbing the steps). So a copy is exactly the registry as of its version: a read GETs the
counter (one command) and, while it is the copy's, answers the copy and the bytes each door encoded of it.

The copy's rules (shared misses, read-your-writes, MAX_AGE_S for rolling upgrades) are
service/core/versioned_copies.py's, as the all-topics copy's are.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from service.core.versioned_copies import VersionedCopies
from service.models import ClusterInfo


class ClusterInfos(VersionedCopies[ClusterInfo]):
    """The cluster info at `{P}:civer`; `read_at` returns it, the version and how it was read ("steps",
    "caught_up" or "whole")."""

    def __init__(self, read_version: Callable[[], Awaitable[str | None]],
                 read_at: Callable[[], Awaitable[tuple[ClusterInfo, str | None, str]]],
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(read_version, self._read_counted, clock)
        self._read_tables = read_at
        self.reads = {"steps": 0, "caught_up": 0, "whole": 0}  # the reads of the tables that ended, by how

    async def _read_counted(self) -> tuple[ClusterInfo, str | None]:
        info, version, how = await self._read_tables()
        self.reads[how] = self.reads.get(how, 0) + 1
        return info, version
