"""A worker's copy of a value that is O(registry) to read, kept while a registry counter holds: the cluster info at
`{P}:civer` (cluster_infos.py), all topics at `{P}:tlver` (topic_lists.py).

The scripts renew the counter exactly when what the value shows changes, and a read of the value returns the
counter it reflects, so a copy is exactly the registry as of its version: a read GETs the counter (one command)
and, while it is the copy's, answers the copy and the bytes each door encoded of it. Concurrent misses share one
read; a read joins only a read that began after it did, or one that read the very version its GET saw, so it
never answers a state older than one acknowledged before it began. A copy older than MAX_AGE_S is read again:
during a rolling upgrade, workers of a release before a counter change the registry without renewing it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Generic, TypeVar

V = TypeVar("V")
T = TypeVar("T")


class VersionedCopy(Generic[V]):
    """A value at one registry counter value (None: never renewed, never reused) and its encodings by door."""

    __slots__ = ("value", "version", "taken", "_encoded")

    def __init__(self, value: V, version: str | None, taken: float) -> None:
        self.value = value
        self.version = version
        self.taken = taken
        self._encoded: dict[Hashable, Any] = {}

    def encoding(self, door: Hashable, encode: Callable[[V], T]) -> T:
        """What `door` makes of the value (its body bytes, with a tag), made once per copy."""
        if door not in self._encoded:
            self._encoded[door] = encode(self.value)
        return self._encoded[door]


class VersionedCopies(Generic[V]):
    """The latest copy of a value `read_at` returns with the counter it reflects; `read_version` GETs the counter."""

    MAX_AGE_S = 60.0

    def __init__(self, read_version: Callable[[], Awaitable[str | None]],
                 read_at: Callable[[], Awaitable[tuple[V, str | None]]],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._read_version = read_version
        self._read_at = read_at
        self._clock = clock
        self._copy: VersionedCopy[V] | None = None
        self._call: tuple[int, asyncio.Task[VersionedCopy[V]]] | None = None  # the read under way, by number
        self._calls = 0  # reads begun
        self.hits = 0
        self.calls = 0  # reads of the value made (misses, shared)

    async def get(self) -> VersionedCopy[V]:
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

    def _begin(self) -> asyncio.Task[VersionedCopy[V]]:
        self._calls += 1
        number = self._calls
        task = asyncio.get_running_loop().create_task(self._read(number))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # a failure no reader waited for
        self._call = (number, task)
        return task

    async def _read(self, number: int) -> VersionedCopy[V]:
        try:
            self.calls += 1
            value, version = await self._read_at()
            copy = VersionedCopy(value, version, self._clock())
            self._copy = copy
            return copy
        finally:
            if self._call is not None and self._call[0] == number:
                self._call = None
