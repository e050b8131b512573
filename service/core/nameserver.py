"""The NameServer's operations, transport-neutral: every door (HTTP, RocketMQ remoting, admin CLI, console)
parses its wire, calls these methods with a Principal and typed values, and encodes what comes back.

Every rule that is not about a wire lives here: validation (through service.models), role and cluster
decisions, wait-for-service, the topic-list switches, the rules for changing config at run time, heartbeat
coalescing and the route cache. Failures are service.errors classes; nothing here imports a web framework or
a wire format. The operations are split by concern, as Apache's NameServer splits its processors: the brokers'
here, routes and topics in route_ops.py, the KV and NameServer config in config_ops.py, reports in reports.py;
raw bodies are digested and decoded by bodies.py.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from typing import Any

from service.config import ANY_CLUSTER, BY_NAME, ConfigError, Settings, parse_value
from service.core.access import Access, Principal, Role
from service.core.bodies import (
    OFFLOAD_BYTES,
    ParserPool,
    RegistrationMemo,
    _sha256,
    digest_key,
    over_body,
    parse_registration,
    prepare_registration,
)
from service.core.cluster_infos import ClusterInfos
from service.core.coalesce import Coalescer
from service.core.config_ops import ConfigOps
from service.core.deltas import RegistrationBases
from service.core.liveness import LivenessBatch
from service.core.reports import ReportOps
from service.core.route_cache import RouteCache
from service.core.route_ops import RouteOps
from service.core.topic_lists import TopicLists
from service.core.unchanged import Answer, UnchangedAnswers, UnchangedOdds
from service.metrics import Metrics
from service.models import (
    UNREGISTER_RESULTS,
    BrokerIdentity,
    DataVersion,
    HeartbeatResult,
    LiveBroker,
    RegisterBroker,
    RegisterBrokerResult,
    TopicDelta,
    address,
    entity_name,
    is_system_topic,
)
from service.store import RouteStore, SnapshotStore
from service.store.outage import cause_unplaced

log = logging.getLogger(__name__)
EXPIRE_CALLS = 1000  # bounded expiry script calls per scan (each at most expire_batch brokers)


class NameServer(RouteOps, ConfigOps, ReportOps):
    """One worker's view of the shared registry: the store, the switches in force, the route cache."""

    def __init__(self, store: RouteStore, settings: Settings, metrics: Metrics | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.snapshots = SnapshotStore(store)
        self.base_settings = settings
        self.settings = settings  # start-up settings overlaid by the shared runtime switches
        self.metrics = metrics or Metrics()
        self.metrics.turns.gate = store.gate
        self.metrics.turns.steps = lambda: store.steps
        self.access = Access(settings)
        self._clock = clock
        self.started = clock()
        self._not_ready_until = 0.0
        self._heartbeats: Coalescer[tuple[str, str, DataVersion | None], HeartbeatResult] = Coalescer(
            store.heartbeat_many)
        self.liveness = LivenessBatch(store.touch_live, settings.heartbeat_flush_ms, clock, store.touch_live_step)
        self.routes = RouteCache(store.change_events, store.version, staleness_ms=settings.route_cache_staleness_ms,
                                 enabled=settings.route_cache, on_config=self.reload_shared_config, clock=clock,
                                 max_entries=settings.route_cache_max_entries,
                                 max_bytes=settings.route_cache_max_bytes,
                                 max_missing=settings.route_cache_max_absent)
        self.unchanged = UnchangedAnswers()  # unchanged registrations this worker may answer from memory
        self.unchanged_odds = UnchangedOdds()  # whether trying the store's unchanged path first is worth a call
        self.cluster_infos = ClusterInfos(store.cluster_info_version, store.cluster_info_read, clock)
        self.topic_lists = TopicLists(store, clock)
        self._registered: dict[str, Any] = {}  # the registration counter's children, made on first use
        self.bases = RegistrationBases()  # the last table sent per broker: what a changed one is a delta of
        self.routes.state_listeners.append(self.unchanged.invalidate)
        self._expiring = 0  # this worker's expiry scans under way
        self._parsers = ParserPool()  # large registration bodies are parsed there
        self._apply_switches({})

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Load the scripts and the shared switches (Redis down: serve errors and recover later), start the
        route cache's listener."""
        try:
            await self.store.load_scripts()
            await self.reload_shared_config()
        except Exception as exc:
            log.warning("Redis is not reachable at start (%s); /readyz fails until it is", exc)
        await self.routes.start()
        await self.liveness.start()

    async def stop(self) -> None:
        await self.liveness.stop()
        await self.routes.stop()
        self._parsers.shutdown()

    async def ready(self, timeout_s: float = 1.0) -> None:
        """Redis reachable and scripts loaded (loads them again after a Redis restart); raises otherwise."""
        await asyncio.wait_for(self.store.load_scripts_if_missing(), timeout=timeout_s)

    async def unready(self, timeout_s: float = 1.0) -> str | None:
        """Why Redis keeps this worker from being ready (`ready` failed), in words anyone may read (/readyz): what
        Redis or the OS said, not where Redis is (the worker's log names it); None when ready."""
        try:
            await self.ready(timeout_s)
        except TimeoutError:
            return f"redis: no answer within {timeout_s:g} s"
        except Exception as exc:  # the store's error names only its class; what redis-py said is its cause
            return f"redis: {cause_unplaced(exc.__cause__ or exc)}"
        return None

    # ------------------------------------------------------------------ runtime switches

    async def reload_shared_config(self) -> None:
        self._apply_switches(await self.store.get_runtime_config())

    def _apply_switches(self, shared: Mapping[str, str]) -> None:
        changes: dict[str, Any] = {}
        for name, raw in shared.items():
            setting = BY_NAME.get(name)
            if setting is None or not setting.runtime:
                continue
            try:
                changes[name] = parse_value(setting, raw)
            except ConfigError as exc:
                log.warning("ignoring shared config %s=%r: %s", name, raw, exc)
        base = self.base_settings
        self.settings = replace(base, **changes) if changes else base
        s = self.settings
        self._not_ready_until = self.started + s.wait_seconds_for_service if s.need_wait_for_service else 0.0

    def turn(self) -> AbstractAsyncContextManager[None]:
        """A turn of this worker's bulk Redis work (service/store/admission.py), for a door whose own per-byte work
        on a registration (a body checksum) should wait with it."""
        return self.store.turn()

    # ------------------------------------------------------------------ brokers

    async def register_broker(self, who: Principal, body: Mapping[str, Any] | bytes, *,
                              decode: Callable[[bytes], Mapping[str, Any] | RegisterBroker] | None = None,
                              door_key: bytes | None = None, memo: RegistrationMemo | None = None,
                              single_topic_guard: bool = False, connection: str = "",
                              decode_cost: int | None = None) -> RegisterBrokerResult:
        """REGISTER_BROKER. `body` is RegisterBroker's JSON shape with typed values, or the raw wire body with the
        door's `decode` (a picklable function) turning it into that shape. It is validated here, after the
        caller's role and before its cluster binding; a large raw body is decoded and validated in a parser
        process, so a broker with 100 000 topics does not stall this worker's event loop. A cluster-bound
        credential may not take an address a live broker of another cluster holds, nor add its broker to a topic
        whose queues live only on other clusters (unless allow_cross_cluster_topics; system topics are exempt).
        `connection`: the native connection it came on, whose close unregisters it.

        `door_key` (raw bodies only): what the door's header says and how it decodes, as bytes. With it the
        registration is first tried as unchanged (not when the connection's last body was other bytes: a changed
        registration, which would only be refused): the same bytes as the one this broker registered last
        (registration_digest) are applied without decoding and without touching a topic, if the store can show
        that nothing that could change the answer happened since; otherwise it is decoded and applied in full.
        `memo`: the connection's RegistrationMemo, which spares hashing the same bytes again. `decode_cost`: what
        decoding the raw body costs in bytes of plain body (a zipped one inflates first), default its size."""
        self.access.require(who, Role.BROKER)
        s = self.settings
        digest = ""
        key = b""
        changed = False
        try:
            if isinstance(body, bytes | bytearray):
                if decode is None:
                    raise TypeError("a raw registration body needs its door's decode function")
                if door_key is not None:
                    key = digest_key(door_key, s.broker_timeout_ms)
                    if memo is None or len(body) > memo.MAX_BYTES:
                        digest = await over_body(body, _sha256, key, body)
                    elif memo.holds(key, body):
                        digest = memo.digest  # the same bytes again on this connection: nothing to hash
                    else:
                        changed = memo.other_than_last(key, body)
                    if digest:
                        known = self._unchanged_from_memory(who, digest, connection)
                        if known is not None:
                            return known
            # One turn of the worker's bulk Redis work for all the rest, hashing and decoding included
            # (service/store/admission.py): a fleet registering at once is applied a few at a time, in arrival
            # order, and waits for its turn rather than timing out behind the others.
            async with self.store.turn():
                if key and not digest:
                    digest = memo.digest_of(key, body)  # type: ignore[union-attr, arg-type]
                res = await self._register_in_turn(who, body, decode, key, digest, changed, door_key is not None,
                                                   single_topic_guard, connection, decode_cost)
        except Exception as exc:
            self.metrics.registrations.labels(result=getattr(exc, "code", "error")).inc()
            raise
        return res

    async def _register_in_turn(self, who: Principal, body: Mapping[str, Any] | bytes,
                                decode: Callable[[bytes], Mapping[str, Any] | RegisterBroker] | None, key: bytes,
                                digest: str, changed: bool, unchanged_first: bool, single_topic_guard: bool,
                                connection: str, decode_cost: int | None) -> RegisterBrokerResult:
        """register_broker's Redis part, in the caller's turn: the unchanged path first when it may apply, else
        the body decoded, validated and applied in full (as a delta against this broker's last registration
        through this worker when its store can: service/core/deltas.py)."""
        s = self.settings
        if isinstance(body, bytes | bytearray):
            assert decode is not None
            if unchanged_first and not changed and self.unchanged_odds.worth_trying(len(body)):
                epoch = self.unchanged.epoch
                res = await self._register_unchanged(who, digest, single_topic_guard, connection)
                self.unchanged_odds.tried(res is not None)
                if res is not None:
                    if res.who is not None and not who.cluster_bound:
                        self.unchanged.put(epoch, digest, connection, Answer(*res.who, res))
                    self._count_registration("unchanged")
                    return res
            req = await self._parse_registration(decode, bytes(body), decode_cost)
        else:
            req = RegisterBroker.parse(body)
        self.access.require(who, Role.BROKER, req.cluster)
        guarded = None  # None: no cross-cluster guard; a list: the address rule plus these topics
        if who.cluster_bound:
            guarded = ([] if s.allow_cross_cluster_topics
                       else [t for t in req.topic_names() if not is_system_topic(t)])
        delta = None
        if key and req.table is not None and self.store.applies_whole(req.table.count):
            base = self.bases.get(key)
            if base is not None and base[0] != digest:
                delta = TopicDelta.between(base[0], base[1], req.table)
            self.bases.sent(key, digest, req.table)
        try:
            res = await self.store.register_broker(
                req, default_timeout_ms=s.broker_timeout_ms,
                delete_topic_with_broker_registration=s.delete_topic_with_broker_registration,
                return_order_topic_config=s.return_order_topic_config_to_broker,
                single_topic_guard=single_topic_guard, connection=connection, cross_cluster_topics=guarded,
                digest=digest, delta=delta)
        finally:  # other bytes of the broker (or its address under another brokerName, which leaves that one)
            self._changed([req.broker_name, *self.unchanged.holding(req.cluster, req.broker_addr)])
        if delta is not None:
            if res.delta:
                self.bases.applied += 1
            else:
                self.bases.refused += 1
        self._count_registration("fenced" if res.fenced else "ok")
        return res

    def _count_registration(self, result: str) -> None:
        """namesrv_broker_registrations_total{result}; a child looked up once (a result never seen is not shown)."""
        counter = self._registered.get(result)
        if counter is None:
            counter = self._registered[result] = self.metrics.registrations.labels(result=result)
        counter.inc()

    def _unchanged_from_memory(self, who: Principal, digest: str, connection: str) -> RegisterBrokerResult | None:
        """The store's answer to the same bytes on this connection, while no change to that broker was heard of
        and the change events are fresh (service/core/unchanged.py), and no expiry scan of this worker is under
        way; the broker's liveness goes with the next heartbeat batch. None: ask the store. Not for a cluster-bound
        credential (the store checks its guard)."""
        if who.cluster_bound or self.liveness.interval <= 0 or self._expiring or not self.routes.fresh:
            return None
        answer = self.unchanged.get(digest, connection)
        if answer is None:
            return None
        self.access.require(who, Role.BROKER, answer.cluster)
        self.liveness.record(answer.cluster, answer.broker_addr)
        self._count_registration("unchanged")
        return answer.result

    async def _register_unchanged(self, who: Principal, digest: str, single_topic_guard: bool,
                                  connection: str) -> RegisterBrokerResult | None:
        """The unchanged path: None when the store cannot show the registration unchanged (nothing written).
        The credential's clusters go with it: the recorded registration's cluster must be one of them (the
        full path decides the error otherwise), as `require(who, BROKER, cluster)` would."""
        s = self.settings
        a = self.access
        limited = not (a.open_mode or a.writes_open) and who.role == "broker" and ANY_CLUSTER not in who.clusters
        return await self.store.register_unchanged(
            digest, delete_topic_with_broker_registration=s.delete_topic_with_broker_registration,
            return_order_topic_config=s.return_order_topic_config_to_broker,
            single_topic_guard=single_topic_guard, connection=connection, cross_cluster=who.cluster_bound,
            cross_cluster_topics=who.cluster_bound and not s.allow_cross_cluster_topics,
            clusters=sorted(who.clusters) if limited else None)

    def _changed(self, broker_names: Iterable[str] | None) -> None:
        """This worker changed, or may have changed, these brokers' registration state (None: any broker's): its
        answers from memory to their unchanged registrations end now, before the change is acknowledged, not when
        the change's event comes back (service/core/unchanged.py; docs/deviations.md)."""
        self.unchanged.invalidate(None if broker_names is None else list(broker_names))

    async def _parse_registration(self, decode: Callable[[bytes], Mapping[str, Any] | RegisterBroker], raw: bytes,
                                  cost: int | None = None) -> RegisterBroker:
        if (len(raw) if cost is None else cost) < OFFLOAD_BYTES:
            return parse_registration(decode, raw)
        return await self._parsers.run(prepare_registration, decode, raw)

    async def heartbeat(self, who: Principal, body: Mapping[str, Any]) -> HeartbeatResult:
        """QUERY_DATA_VERSION / BROKER_HEARTBEAT (`dataVersion` optional): concurrent ones share one script
        call; `changed` tells the broker to register again."""
        self.access.require(who, Role.BROKER)
        ident = BrokerIdentity.parse(body)
        raw_dv = body.get("dataVersion")
        dv = DataVersion.parse(raw_dv) if raw_dv is not None else None
        self.access.require(who, Role.BROKER, ident.cluster)
        res = await self._heartbeats.submit((ident.cluster, ident.broker_addr, dv))
        self.metrics.heartbeat(res.data_version is not None)
        return res

    def heartbeat_from_memory(self, who: Principal, cluster: str, broker_addr: str) -> bool:
        """BROKER_HEARTBEAT (904) acknowledged from memory, with no await (a door's hot path): False when this
        worker writes each heartbeat before its reply (heartbeat_flush_ms 0), then broker_heartbeat does."""
        if self.liveness.interval <= 0:
            return False
        self.access.require(who, Role.BROKER, cluster)
        self.liveness.record(cluster, broker_addr)
        self.metrics.heartbeat_deferred()
        return True

    async def broker_heartbeat(self, who: Principal, cluster: str, broker_addr: str) -> None:
        """BROKER_HEARTBEAT (904): refresh the liveness of (cluster, brokerAddr), as Java does whether or not it
        is registered. Acknowledged from memory and written with the next batch (service/core/liveness.py);
        with heartbeat_flush_ms 0, written before this returns."""
        self.access.require(who, Role.BROKER)
        cluster, broker_addr = entity_name(cluster, "clusterName"), address(broker_addr, "brokerAddr")
        if self.heartbeat_from_memory(who, cluster, broker_addr):
            return
        self.access.require(who, Role.BROKER, cluster)
        res = await self._heartbeats.submit((cluster, broker_addr, None))
        self.metrics.heartbeat(res.data_version is not None)

    async def unregister_broker(self, who: Principal, body: Mapping[str, Any]) -> str:
        """'removed', 'reduced' or 'unknown' (the address was not a member: nothing changed)."""
        self.access.require(who, Role.BROKER)
        ident = BrokerIdentity.parse(body)
        self.access.require(who, Role.BROKER, ident.cluster)
        try:
            res = await self.store.unregister_broker(ident)
        finally:
            self._changed([ident.broker_name])
        self.metrics.unregistrations.inc()
        return UNREGISTER_RESULTS[res]

    async def connection_closed(self, connection: str, members: Iterable[tuple[str, str]]) -> list[str]:
        """A native connection closed (RocketMQ onChannelDestroy): unregister the brokers that registered on it
        and have not registered again since through another connection, worker or door."""
        self.unchanged.connection_closed(connection)
        members = list(members)
        try:
            removed = await self.store.drop_connection(connection, members)
        except BaseException:  # it may have dropped any of them
            self._changed([n for cluster, addr in members for n in self.unchanged.holding(cluster, addr)])
            raise
        self._changed([name for _, _, name, _ in removed])
        for cluster, addr, name, _ in removed:
            log.warning("broker removed, its connection closed: cluster=%s brokerName=%s brokerAddr=%s",
                        cluster, name, addr)
        self.metrics.unregistrations.inc(len(removed))
        self.metrics.connection_drops.inc(len(removed))
        return [f"{c}|{a}" for c, a, _, _ in removed]

    async def live_brokers(self, who: Principal, cluster: str | None = None) -> tuple[int, list[LiveBroker]]:
        """(Redis time ms, live entries), optionally of one cluster: the operator's view of brokerLiveTable."""
        self.access.require(who, Role.READ)
        if cluster is not None:
            entity_name(cluster, "cluster")
        now = await self.store.redis_time_ms()
        brokers = await self.store.live_brokers()
        if cluster is not None:
            brokers = [b for b in brokers if b.cluster == cluster]
        return now, sorted(brokers, key=lambda b: (b.cluster, b.broker_name, b.broker_id, b.broker_addr))
    # ------------------------------------------------------------------ maintenance

    async def expire_due(self) -> list[tuple[str, str, str]]:
        """Expire every broker past its timeout, one bounded script call after another; first finish the removals
        of large brokers that a worker left half-swept (it died mid-way)."""
        started = time.perf_counter()
        await self.store.finish_sweeps()
        expired: list[tuple[str, str, str]] = []
        try:
            for _ in range(EXPIRE_CALLS):
                # in the worker's turn (the store's call takes no other), and no answer from memory meanwhile: the
                # broker it would answer may be expiring right now
                async with self.store.turn():
                    self._expiring += 1
                    try:
                        res = await self.store.expire(self.base_settings.expire_batch,
                                                      grace_ms=self.base_settings.heartbeat_flush_ms)
                        self._changed([name for _, _, name in res.expired])
                    finally:
                        self._expiring -= 1
                expired += res.expired
                if not res.more:
                    break
        except BaseException:  # it may have expired brokers it could not say
            self._changed(None)
            raise
        self.metrics.scan_seconds.observe(time.perf_counter() - started)
        for cluster, addr, name in expired:
            log.warning("broker expired: cluster=%s brokerName=%s brokerAddr=%s", cluster, name, addr)
        self.metrics.expirations.inc(len(expired))
        return expired
