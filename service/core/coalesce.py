"""Coalesce calls made in the same event-loop turn into one store call (a DataLoader for Redis).

Under load many brokers' heartbeats arrive together; one EVALSHA for all of them costs one client round trip
instead of N, and the redis client's per-call overhead dominated a heartbeat. Each caller still awaits its own
result (or the batch's exception), so an acknowledged heartbeat has really been applied.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Coalescer(Generic[T, R]):
    def __init__(self, run_batch: Callable[[Sequence[T]], Awaitable[Sequence[R]]], max_batch: int = 256) -> None:
        self._run_batch = run_batch
        self._max = max_batch
        self._pending: list[tuple[T, asyncio.Future[R]]] = []
        self._scheduled = False
        self._tasks: set[asyncio.Task] = set()
        self.batches = 0
        self.items = 0

    async def submit(self, item: T) -> R:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[R] = loop.create_future()
        self._pending.append((item, fut))
        if len(self._pending) >= self._max:
            self._flush()
        elif not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)
        return await fut

    def _flush(self) -> None:
        self._scheduled = False
        if not self._pending:
            return
        batch, self._pending = self._pending, []
        task = asyncio.get_running_loop().create_task(self._run(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, batch: list[tuple[T, asyncio.Future[R]]]) -> None:
        self.batches += 1
        self.items += len(batch)
        try:
            results = await self._run_batch([item for item, _ in batch])
        except BaseException as exc:  # every waiter sees the failure (e.g. Redis down -> 503)
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for (_, fut), res in zip(batch, results, strict=True):
            if not fut.done():
                fut.set_result(res)
