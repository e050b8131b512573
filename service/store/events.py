"""The change events the route scripts publish: their format (parse_event), and a subscription that follows the
deployment: on any Cluster node (PUBLISH reaches them all), or on the Sentinel master, given up when a sentinel
announces a switch. The subscription is a mixin of RouteStore (routes.py), whose ScriptRunner (script_runner.py)
holds the clients, the keys and the Sentinel.

An event (lua/includes/common.lua, changes_publish) is "<ver>\t2\n" then one line per change:
  <topic>                             the topic's route changed: evict it
  =<brokerName>\t<enc>\t<t1>\t<t2>...  these topics changed only in that broker's queue data, now <enc>
                                      ("r,w,perm,sysFlag"): update cached routes in place (grouped by queue data,
                                      so a worker checks a registration's topics against its cache in one C-level
                                      pass, most of them not cached there)
  @<brokerName>                       every route naming the broker changed (too many topics to name at once)
  !<brokerName>                       the broker's registration state changed (no route did); "!*": every broker
and, in format 3 ("<ver>\t3\n", only when it holds them: a worker of a release before them flushes on it):
  ~<brokerName>\t<t1>...              the broker is gone from these topics (its queue data and BrokerData), which
                                      remain: take it out of cached routes
  +<brokerName>\t<enc>\t<cluster>\t<enableActingMaster>\t<zone>\t<id>,<addr>,...\t<t1>...
                                      the broker now serves these topics, which existed before, with queue data
                                      <enc> and that BrokerData: add it to cached routes
or "<ver>\t2\n*": anything may have changed. The format before (no "\t2"; "=<topic>\t<brokerName>\t<enc>" lines,
one per topic) is still read, from workers of the version before during a rolling upgrade; a format this version
does not know is refused (ValueError), and the route cache flushes on it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, NamedTuple

from service.errors import StoreUnavailable
from service.models import BrokerData
from service.store.calls import REDIS_ERRORS, translate
from service.store.outage import OUTAGE

log = logging.getLogger(__name__)


class ChangeEvent(NamedTuple):
    ver: int
    everything: bool  # "*"
    topics: list[str]
    updates: list[tuple[str, str, list[str]]]  # (brokerName, queue data, topics)
    brokers: list[str]  # "@"
    states: list[str]  # "!" ("*": all)
    leaves: list[tuple[str, list[str]]]  # "~": (brokerName, topics)
    joins: list[tuple[str, str, BrokerData, list[str]]]  # "+": (brokerName, queue data, its BrokerData, topics)


def parse_event(payload: str) -> ChangeEvent:
    """One published change event (the module docstring says the format); ValueError for one it does not know."""
    head, _, rest = payload.partition("\n")
    ver_text, tab, fmt = head.partition("\t")
    ver = int(ver_text)
    if tab and fmt not in ("2", "3"):
        raise ValueError(f"change event format {fmt!r} unknown to this version")
    topics: list[str] = []
    updates: list[tuple[str, str, list[str]]] = []
    brokers: list[str] = []
    states: list[str] = []
    leaves: list[tuple[str, list[str]]] = []
    joins: list[tuple[str, str, BrokerData, list[str]]] = []
    if rest == "*":
        return ChangeEvent(ver, True, topics, updates, brokers, states, leaves, joins)
    for line in rest.split("\n") if rest else ():
        kind = line[:1]
        if kind == "~" and fmt == "3":
            parts = line[1:].split("\t")
            if len(parts) < 2:
                raise ValueError(f"change event line {line[:80]!r} names no topic")
            leaves.append((parts[0], parts[1:]))
        elif kind == "+" and fmt == "3":
            parts = line[1:].split("\t")
            if len(parts) < 7:
                raise ValueError(f"change event line {line[:80]!r} is no join")
            name, enc, cluster, eam, zone, addrs = parts[:6]
            flat = addrs.split(",")
            if len(flat) % 2:
                raise ValueError(f"change event line {line[:80]!r}: addresses not in pairs")
            data = BrokerData(cluster=cluster, broker_name=name,
                              broker_addrs={int(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)},
                              enable_acting_master=eam == "1", zone_name=zone or None)
            joins.append((name, enc, data, parts[6:]))
        elif kind == "=":
            parts = line[1:].split("\t")
            if len(parts) < 3:
                raise ValueError(f"change event line {line[:80]!r} is no in-place update")
            if tab:
                updates.append((parts[0], parts[1], parts[2:]))
            else:  # the format before: "=<topic>\t<brokerName>\t<enc>"
                updates.append((parts[1], parts[2], parts[:1]))
        elif kind == "!":
            states.append(line[1:])
        elif kind == "@":
            brokers.append(line[1:])
        else:
            topics.append(line)
    return ChangeEvent(ver, False, topics, updates, brokers, states, leaves, joins)


async def _as_is(response: Any) -> Any:
    return response


def quiet_push_handler(pubsub: Any) -> bool:
    """redis-py's hiredis parser hands every pub/sub message to a handler that formats it for a debug log line
    (`"Push response: " + str(response)`) whether or not debug is on: for a 100-topic change event, 6 of the
    ~14 CPU-us a worker spends receiving it (benchmarks/README.md). Every worker receives every event, so the
    handler is replaced with one that returns the message as is. Where the parser has no such handler (the pure
    Python parser, other redis-py versions) nothing changes; whether it was replaced is returned."""
    parser = getattr(getattr(pubsub, "connection", None), "_parser", None)
    if parser is None or not hasattr(parser, "pubsub_push_handler_func"):
        return False
    parser.pubsub_push_handler_func = _as_is
    return True


class ChangeEvents:
    """`change_events` for a store with `redis`, `bulk_redis`, `keys`, `cluster`, `sentinel`, `master_name` and
    `_sub_cursor`."""

    redis: Any
    bulk_redis: Any
    keys: Any
    cluster: bool
    sentinel: Any
    master_name: str
    _sub_cursor: int

    async def change_events(self, on_subscribed: Callable[[], None] | None = None) -> AsyncIterator[str]:
        """The change events the scripts publish (the module docstring says the format), until the connection
        drops or the Sentinel master switches (then StoreUnavailable: the caller flushes and subscribes again).
        `on_subscribed` runs once the subscription is in place.

        Cluster: a script's PUBLISH reaches every node, so the subscription sits on any node, the next one in the
        client's list after each loss (a subscription never follows a failover by itself: C5). Sentinel: on the
        master; a sentinel's +switch-master ends it, since after SENTINEL FAILOVER the old master keeps serving
        its clients, silently, for ~10 s (S3)."""
        switched = asyncio.Event()
        watcher = None
        if self.sentinel is not None:
            watcher = asyncio.get_running_loop().create_task(self._watch_master_switch(switched))
        try:
            if self.cluster:
                await self.redis.initialize()
                nodes = self.redis.get_nodes()
                if not nodes:
                    raise StoreUnavailable("no Redis Cluster node known yet; subscribing again shortly")
                self._sub_cursor += 1
                pubsub = self.redis.pubsub(node=nodes[self._sub_cursor % len(nodes)])
            else:
                pubsub = self.redis.pubsub()
        except REDIS_ERRORS as exc:
            if watcher is not None:
                watcher.cancel()
            raise translate(exc) from exc
        try:
            await pubsub.subscribe(self.keys.changes)  # written, not answered: Redis may be gone already
            quiet_push_handler(pubsub)
            confirmed = False
            while True:
                msg = await pubsub.get_message(timeout=0.25 if watcher else 1.0)
                if msg is not None:
                    if msg.get("type") == "message":
                        yield msg["data"]
                    elif not confirmed and msg.get("type") == "subscribe":  # Redis answered: subscribed now
                        confirmed = True
                        OUTAGE.answered()
                        if on_subscribed is not None:
                            on_subscribed()
                if switched.is_set():
                    raise StoreUnavailable("the Redis master switched (Sentinel); subscribing on the new one")
        except REDIS_ERRORS as exc:
            raise translate(exc) from exc
        finally:
            if watcher is not None:
                watcher.cancel()
            try:
                await pubsub.aclose()
            except REDIS_ERRORS:
                pass

    async def _watch_master_switch(self, switched: asyncio.Event) -> None:
        """Sentinel mode: follow one sentinel's `+switch-master` announcements (any sentinel will do; the next
        one if it fails). On a switch of our master, connections still open to the old one are dropped — idle
        ones now, busy ones when they return to the pool — so new calls ask the sentinels for the new master."""
        assert self.sentinel is not None
        backoff = 0.05
        while True:
            for sentinel in list(self.sentinel.sentinels):
                pubsub = sentinel.pubsub()
                try:
                    await pubsub.subscribe("+switch-master")
                    backoff = 0.05
                    while True:
                        msg = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                        if msg is None or msg.get("type") != "message":
                            continue
                        name, _, addrs = str(msg["data"]).partition(" ")
                        if name != self.master_name:
                            continue
                        log.warning("Sentinel: master %s switched (%s); dropping connections to the old one",
                                    name, addrs)
                        await self._drop_master_connections()
                        switched.set()
                except REDIS_ERRORS as exc:
                    log.info("sentinel watch lost (%s); trying the next sentinel", exc)
                finally:
                    try:
                        await pubsub.aclose()
                    except REDIS_ERRORS:
                        pass
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 2.0)

    async def _drop_master_connections(self) -> None:
        for client in {id(c): c for c in (self.redis, self.bulk_redis)}.values():
            pool = client.connection_pool
            await pool.update_active_connections_for_reconnect()
            await pool.disconnect(inuse_connections=False)
