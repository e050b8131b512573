"""A worker's route reads from Redis, coalesced: the cache misses that come in together go to Redis as one
getRoutes call, which looks each broker up once for all of them.

A cold cache (a fleet's cold start, a new worker, a flush) is read topic by topic by every client at once, and the
topics of a cluster name the same brokers: read one at a time, a 100-broker route cost Redis ~200 lookups
(the topic's queue data, then each broker's data and addresses; its membership too while a removal of it is swept)
and the worker as many objects to decode and order. Read together, the brokers are looked up and decoded once per
call, and topics whose replies are the same (a cluster's topics created alike) are sent once and share one route
object, across calls too, which the route cache then encodes once per door (route_cache.py).

Each route is still one atomic read at the version the call returns (the route cache's fencing is per topic and
unchanged). A read waits for nothing but the calls already under way: when none is, it goes at the end of the
event loop's turn, with whatever other reads that turn brought.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import orjson

from service.javaorder import hash_order
from service.models import ReadAt, TopicRouteData

Fetch = Callable[[list[str], bool, bool, int], Awaitable[list[Any]]]


def _pairs(flat: list[Any]) -> Iterable[tuple[Any, Any]]:
    return zip(flat[0::2], flat[1::2], strict=True)


def acting_master(addr_flat: list[str]) -> list[str]:
    """A broker group's addresses (id, addr, ...) with its lowest id shown as 0 (the acting master)."""
    low = min(range(0, len(addr_flat), 2), key=lambda i: int(addr_flat[i]))
    out = list(addr_flat)
    out[low] = "0"
    return out


class RouteReads:
    """Route reads coalesced into getRoutes calls: at most `max_calls` under way, each of at most `max_topics`
    topics, a call leaving the rest to the next once its topics cost `budget` (lua/getRoutes-2.lua: a queue data
    walked 1, a broker looked up 2 more, a queue data of a topic answered as an earlier one 1/16; reading
    500-broker routes, a walked route is ~1.5 ms of Redis on a quiet 2-core host, so a call stays near 5 ms where
    20 000 queue data a call took up to 36 ms in a storm, past DESIGN §9's 20 ms; benchmarks/README.md, "A fleet's
    cold start")."""

    ORDERS_MAX = 4096  # remembered hash orders of broker-name lists
    ROUTES_MAX = 256  # remembered routes, by what getRoutes sent of them

    def __init__(self, fetch: Fetch, shared: Any, *, max_calls: int = 2, max_topics: int = 64,
                 budget: int = 5_000) -> None:
        self._fetch = fetch
        self._shared = shared
        self.max_calls = max_calls
        self.max_topics = max_topics
        self.budget = budget
        self._queued: dict[tuple[bool, bool], dict[str, list[asyncio.Future[ReadAt]]]] = {}
        self._calls = 0
        self._tasks: set[asyncio.Task[None]] = set()  # the calls under way (the loop keeps only weak references)
        self._scheduled = False
        self._orders: dict[tuple[tuple[str, ...], bool], list[int]] = {}
        self._routes: dict[tuple[Any, ...], TopicRouteData] = {}
        self.calls = 0  # getRoutes calls made, and the topics they read (the metrics' view of coalescing)
        self.topics = 0

    async def read(self, topic: str, support_acting_master: bool, order_message_enable: bool) -> ReadAt:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[ReadAt] = loop.create_future()
        self._queued.setdefault((support_acting_master, order_message_enable), {}).setdefault(topic, []).append(fut)
        if not self._scheduled and self._calls < self.max_calls:
            self._scheduled = True
            loop.call_soon(self._start)
        return await fut

    def _start(self) -> None:
        self._scheduled = False
        loop = asyncio.get_running_loop()
        while self._calls < self.max_calls and self._queued:
            flags, waiting = next(iter(self._queued.items()))
            batch: dict[str, list[asyncio.Future[ReadAt]]] = {}
            for topic in list(waiting)[:self.max_topics]:
                batch[topic] = waiting.pop(topic)
            if not waiting:
                del self._queued[flags]
            self._calls += 1
            task = loop.create_task(self._call(flags, batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _call(self, flags: tuple[bool, bool], batch: dict[str, list[asyncio.Future[ReadAt]]]) -> None:
        try:
            todo = [t for t, futs in batch.items() if not all(f.done() for f in futs)]
            while todo:
                res = await self._fetch(todo, flags[0], flags[1], self.budget)
                self.calls += 1
                done = self.decode(todo, res)
                self.topics += len(done)
                for topic, read in done.items():
                    for fut in batch[topic]:
                        if not fut.done():
                            fut.set_result(read)
                todo = todo[len(done):]
        except BaseException as exc:
            for futs in batch.values():
                for fut in futs:
                    if not fut.done():
                        if isinstance(exc, asyncio.CancelledError):
                            fut.cancel()
                        else:
                            fut.set_exception(exc)
                            fut.exception()  # retrieved: a waiter that gave up must not be logged
            if not isinstance(exc, Exception):
                raise
        finally:
            self._calls -= 1
            if self._queued and not self._scheduled:
                self._scheduled = True
                asyncio.get_running_loop().call_soon(self._start)

    def decode(self, topics: list[str], res: list[Any]) -> dict[str, ReadAt]:
        """getRoutes' reply (lua/getRoutes-2.lua) as a ReadAt per topic read: routes in Java's hash order, one
        object per distinct reply (the script sends a reply again as the position of its first topic)."""
        ver, n, brokers, routes, filt = int(res[0]), int(res[1]), res[2], res[3], res[4]
        lines = {line[:line.index("\t")]: line for line in brokers}
        filters: dict[str, list[tuple[str, str]]] = {}
        for name, addr, f in zip(filt[0::3], filt[1::3], filt[2::3], strict=True):
            filters.setdefault(name, []).append((addr, f))
        reads: list[ReadAt] = []
        for reply in routes:
            if isinstance(reply, int):  # the same as the reply of the topic at that position (1-based)
                reads.append(reads[reply - 1])
            elif not reply:
                reads.append(ReadAt(None, ver))
            else:
                reads.append(ReadAt(self._route(*reply, lines, filters), ver))
        return dict(zip(topics[:n], reads, strict=True))

    def _route(self, qline: str, acting: list[str], order: str, lines: dict[str, str],
               filt: dict[str, list[tuple[str, str]]]) -> TopicRouteData:
        """One route object per distinct reply across calls too: the same object is encoded once per door
        (route_cache.py), where the calls of a cold cache's readers, each reading a few topics of several
        clusters, built and encoded each cluster's route again per call."""
        qflat = qline.split("\t")
        names = qflat[0::2]
        key = (qline, *acting, "", order, *[lines[n] for n in names],
               *[p for n in names for pair in filt.get(n, ()) for p in pair])
        route = self._routes.get(key)
        if route is None:
            if len(self._routes) >= self.ROUTES_MAX:
                del self._routes[next(iter(self._routes))]
            route = self._routes[key] = self._build(qflat, names, acting, order, lines, filt)
        return route

    def _build(self, qflat: list[str], names: list[str], acting: list[str], order: str, lines: dict[str, str],
               filt: dict[str, list[tuple[str, str]]]) -> TopicRouteData:
        shared = self._shared
        queue_datas = [shared.queue_data(n, e) for n, e in _pairs(qflat)]
        broker_datas = []
        filters: dict[str, list[str]] = {}
        for name in names:
            if acting and name in acting:
                _, cluster, eam, zone, addrs = lines[name].split("\t")
                broker_datas.append(shared.broker_data(name, cluster, eam, zone, acting_master(addrs.split(","))))
            else:
                broker_datas.append(shared.broker_line(lines[name]))
            for addr, f in filt.get(name, ()):
                filters[addr] = orjson.loads(f)
        key = tuple(names)
        return TopicRouteData(queue_datas=self._ordered(queue_datas, key, False),
                              broker_datas=self._ordered(broker_datas, key, True),
                              filter_server_table=filters, order_topic_conf=order or None)

    def _ordered(self, items: list[Any], names: tuple[str, ...], copied: bool) -> list[Any]:
        """`items` (one per name, in `names`' order) in Java's hash order of their names, the order remembered
        per list of names (the topics of a cluster list the same brokers)."""
        perm = self._orders.get((names, copied))
        if perm is None:
            if len(self._orders) >= self.ORDERS_MAX:
                self._orders.clear()
            perm = self._orders[(names, copied)] = [i for i, _ in hash_order(enumerate(names), lambda p: p[1],
                                                                               copied)]
        return [items[i] for i in perm]
