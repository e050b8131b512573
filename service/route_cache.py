"""Worker-local cache of encoded route replies, kept honest by the change events the Lua scripts publish.

Correctness rules:
- an event `<ver>\\n<topics>` evicts those topics; `*`, a gap in versions, or a reconnect flushes everything;
- a fill is stored only if no eviction happened while it was being fetched (epoch check), so a reply read
  before a change can never be cached after that change's event;
- the safety net: a poll of `{P}:ver` every half staleness bound flushes on versions the events missed, and if
  neither an event nor a poll has confirmed freshness within the bound, the cache is bypassed.
The same watcher refreshes the runtime switches that all workers share (`{P}:config`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from service.store import RouteStore

log = logging.getLogger(__name__)


class RouteCache:
    def __init__(self, store: RouteStore, staleness_ms: int = 1000, enabled: bool = True,
                 on_config: Callable[[dict[str, str]], None] | None = None, max_entries: int = 200_000) -> None:
        self.store = store
        self.enabled = enabled
        self.staleness = staleness_ms / 1000
        self.max_entries = max_entries
        self._entries: dict[str, tuple[int, bytes]] = {}
        self._epoch = 0
        self._ver_seen = -1
        self._confirmed_at = 0.0
        self._on_config = on_config
        self._tasks: list[asyncio.Task] = []
        self.hits = 0
        self.misses = 0
        self.flushes = 0

    # ---------------------------------------------------------------- reads
    @property
    def fresh(self) -> bool:
        return self.enabled and (time.monotonic() - self._confirmed_at) < self.staleness

    def lookup(self, topic: str) -> tuple[int, bytes] | None:
        """The synchronous fast path: a fresh cached reply, or None."""
        if self.enabled and (time.monotonic() - self._confirmed_at) < self.staleness:
            hit = self._entries.get(topic)
            if hit is not None:
                self.hits += 1
                return hit
        return None

    async def fill(self, topic: str, fetch: Callable[[], Awaitable[tuple[int, bytes]]]) -> tuple[int, bytes]:
        """Read through `fetch` and cache the reply unless an eviction raced with the read."""
        self.misses += 1
        epoch = self._epoch
        value = await fetch()
        if self.fresh and epoch == self._epoch:
            if len(self._entries) >= self.max_entries:
                self._entries.clear()
            self._entries[topic] = value
        return value

    def __len__(self) -> int:
        return len(self._entries)

    # ---------------------------------------------------------------- invalidation
    def flush(self) -> None:
        self._entries.clear()
        self._epoch += 1
        self.flushes += 1

    def _evict(self, topics: list[str]) -> None:
        for t in topics:
            self._entries.pop(t, None)
        self._epoch += 1

    def apply_event(self, payload: str) -> None:
        head, _, rest = payload.partition("\n")
        try:
            ver = int(head)
        except ValueError:
            self.flush()
            return
        if rest == "*" or (self._ver_seen >= 0 and ver != self._ver_seen + 1):
            self.flush()
        else:
            self._evict(rest.split("\n") if rest else [])
        if rest == "*":
            self._schedule_config_refresh()
        self._ver_seen = max(self._ver_seen, ver)
        self._confirmed_at = time.monotonic()

    def _schedule_config_refresh(self) -> None:
        if self._on_config is not None:
            self._tasks.append(asyncio.get_running_loop().create_task(self._refresh_config()))
            self._tasks = [t for t in self._tasks if not t.done()]

    async def _refresh_config(self) -> None:
        with contextlib.suppress(Exception):
            cfg = await self.store.get_runtime_config()
            if self._on_config:
                self._on_config(cfg)

    async def poll_once(self) -> None:
        """Safety net: compare the registry version with what the events told us."""
        ver = await self.store.version()
        if ver != self._ver_seen:
            self.flush()
            self._ver_seen = ver
            if self._on_config:
                self._on_config(await self.store.get_runtime_config())
        self._confirmed_at = time.monotonic()

    # ---------------------------------------------------------------- background tasks
    async def start(self) -> None:
        self._tasks = [asyncio.create_task(self._listen(), name="route-cache-listen"),
                       asyncio.create_task(self._poll(), name="route-cache-poll")]

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks = []

    async def _poll(self) -> None:
        interval = max(self.staleness / 2, 0.005)
        while True:
            try:
                await self.poll_once()
            except Exception as exc:  # Redis down: entries go stale by themselves after the bound
                log.debug("route cache poll failed: %s", exc)
            await asyncio.sleep(interval)

    async def _listen(self) -> None:
        backoff = 0.05
        while True:
            pubsub = self.store.redis.pubsub()
            try:
                await pubsub.subscribe(self.store.keys.changes)
                self.flush()  # anything cached before this subscription may have missed events
                backoff = 0.05
                while True:
                    msg = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                    if msg is not None and msg.get("type") == "message":
                        self.apply_event(msg["data"])
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("change-event subscription lost (%s); cache flushed, retrying", exc)
                self.flush()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()
