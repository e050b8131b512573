"""A worker's copy of the cluster info (GET_BROKER_CLUSTER_INFO), kept while the registry's `{P}:civer` holds.

Reading it is O(brokers): at 10 000 brokers one read ran ~21 000 Redis commands and took ~300 ms, and every
admin read (mqadmin clusterList, dashboards, the console) ran it again (benchmarks/README.md, "Cluster info").
Every script that changes what it shows — a broker's addresses, its name or cluster, its acting-master flag or
zone — renews `{P}:civer` (`cluster_info_changed` in lua/includes/common.lua), and a read of the tables returns the
value they reflect (the store's cluster_info_read: bounded steps fenced by that value, or one clusterInfo call
when changes kept disturbing the steps). So a copy is exactly the registry as of its version: a read GETs the
counter (one command) and, while it is the copy's, answers the copy and the bytes each door encoded of it.

Concurrent misses share one read of the tables. A read joins only a call that began after the read did, or one that
read the very version the read's GET saw: it never answers a state older than one acknowledged before it began.
A copy is also dropped past MAX_AGE_S: workers of a release before the counter, sharing a Redis with newer ones
during a rolling upgrade, change brokers without renewing it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, TypeVar

from service.models import ClusterInfo

T = TypeVar("T")


class Copy:
    """The cluster info at one `{P}:civer` value (None: never renewed, never reused) and its encodings by door."""

    __slots__ = ("info", "version", "taken", "_encoded")

    def __init__(self, info: ClusterInfo, version: str | None, taken: float) -> None:
        self.info = info
        self.version = version
        self.taken = taken
        self._encoded: dict[Hashable, Any] = {}

    def encoding(self, door: Hashable, encode: Callable[[ClusterInfo], T]) -> T:
        """What `door` makes of the info (its body bytes, with a tag), made once per copy."""
        if door not in self._encoded:
            self._encoded[door] = encode(self.info)
        return self._encoded[door]


class ClusterInfos:
    MAX_AGE_S = 60.0

    def __init__(self, read_version: Callable[[], Awaitable[str | None]],
                 read_at: Callable[[], Awaitable[tuple[ClusterInfo, str | None, str]]],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._read_version = read_version
        self._read_at = read_at
        self._clock = clock
        self._copy: Copy | None = None
        self._call: tuple[int, asyncio.Task[Copy]] | None = None  # the read of the tables under way, by number
        self._calls = 0  # calls begun
        self.hits = 0
        self.calls = 0  # reads of the tables made (misses, shared)
        self.reads = {"steps": 0, "whole": 0}  # those that ended, by how (read_at's third value)

    async def get(self) -> Copy:
        began = self._calls
        version = await self._read_version()
        copy = self._copy
        if (copy is not None and version is not None and copy.version == version
                and self._clock() - copy.taken < self.MAX_AGE_S):
            self.hits += 1
            return copy
        while True:
            call = self._call
            if call is None:
                return await asyncio.shield(self._begin())
            number, task = call
            if number > began:  # began after this read did: it reads a state at least as new
                return await asyncio.shield(task)
            done = await asyncio.shield(task)
            if version is not None and done.version == version:
                return done

    def _begin(self) -> asyncio.Task[Copy]:
        self._calls += 1
        number = self._calls
        task = asyncio.get_running_loop().create_task(self._read(number))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # a failure no reader waited for
        self._call = (number, task)
        return task

    async def _read(self, number: int) -> Copy:
        try:
            self.calls += 1
            info, version, how = await self._read_at()
            self.reads[how] = self.reads.get(how, 0) + 1
            copy = Copy(info, version, self._clock())
            self._copy = copy
            return copy
        finally:
            if self._call is not None and self._call[0] == number:
                self._call = None
