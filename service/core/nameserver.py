"""The NameServer's operations, transport-neutral: every door (HTTP, RocketMQ remoting, admin CLI, console)
parses its wire, calls these methods with a Principal and typed values, and encodes what comes back.

Every rule that is not about a wire lives here: validation (through service.models), role and cluster
decisions, wait-for-service, the topic-list switches, the rules for changing config at run time, heartbeat
coalescing and the route cache. Failures are service.errors classes; nothing here imports a web framework or
a wire format.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ProcessPoolExecutor
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from typing import Any

from service.config import (
    ANY_CLUSTER,
    BY_NAME,
    CONFIG_BLACKLIST,
    RUNTIME_NAMES,
    ConfigError,
    Settings,
    canonical_name,
    parse_value,
)
from service.core import capacity as sizing
from service.core import capacity_model
from service.core.access import Access, Principal, Role
from service.core.coalesce import Coalescer
from service.core.deltas import RegistrationBases
from service.core.liveness import LivenessBatch
from service.core.route_cache import RouteCache, RouteEntry
from service.core.unchanged import Answer, UnchangedAnswers
from service.errors import ConfigBlacklisted, Disabled, InvalidArgument, NotReady, ReportNotFound
from service.metrics import Metrics
from service.models import (
    UNREGISTER_RESULTS,
    BrokerIdentity,
    BrokerMemberGroup,
    ClusterInfo,
    DataVersion,
    HeartbeatResult,
    KvImportResult,
    KvTable,
    LiveBroker,
    ReadAt,
    RegisterBroker,
    RegisterBrokerResult,
    TopicDelta,
    TopicList,
    TopicRouteData,
    address,
    boolean,
    entity_name,
    is_system_topic,
    kv_config,
    kv_name,
    kv_value,
    obj,
    parse_queue_datas,
    topic_name,
)
from service.store import RouteStore, SnapshotStore
from service.store.keys import ORDER_TOPIC_CONFIG
from service.store.members import MemberStore
from service.store.outage import cause_unplaced

log = logging.getLogger(__name__)
EXPIRE_CALLS = 1000  # bounded expiry script calls per scan (each at most expire_batch brokers)
OFFLOAD_BYTES = 256 * 1024  # registration bodies from this size on (about 2 000 topics) are parsed in a process
TOPIC_LIST_KINDS = ("all", "cluster", "system", "unit", "unitsub", "unitsub-ununit")


def registration_digest(door_key: bytes, default_timeout_ms: int, raw: bytes) -> str:
    """What decides that a registration is unchanged without decoding it: SHA-256 of the door's key (its header
    fields and how it decodes), the default heartbeat timeout, and the raw body as received.

    Why this and not the data version or the broker's bodyCrc32: SHA-256 is collision-resistant, so equal digests
    mean byte-identical input, hence the same identity, data version, topic table and filter servers whatever
    the door makes of the bytes (a zipped body sent with `compressed=false`, as stock 5.x brokers do, is the
    same bytes each time: Deflater is deterministic). Different bytes of the same table only cost a full
    registration. The data version is the broker's claim, not the table: HTTP clients and old brokers may keep
    it while the table changes, and a broker may restart with another table at the same version. CRC32 (32
    bits, linear) is made to catch transmission errors, not to tell tables apart: about one changed
    registration in four billion would be taken for unchanged and its routes would stay stale. Hashing costs
    the worker ~0.5 ms per MB (sha256 with SHA extensions), far less than decoding."""
    return _sha256(digest_key(door_key, default_timeout_ms), raw)


def digest_key(door_key: bytes, default_timeout_ms: int) -> bytes:
    return door_key + b"\0%d\0" % default_timeout_ms


class RegistrationMemo:
    """The last registration body seen on one connection, its digest and the bodyCrc32 it was checked against.

    A stock broker re-sends the same bytes on the same connection every 30 s: comparing them with the last ones
    (memcmp, ~15 µs for the 250 kB of a compressed 100 000-topic body) costs a fraction of hashing them again
    (~125 µs) or of their CRC32 (~40 µs). Equal bytes have equal digests and CRCs, so nothing is assumed. Bodies
    over MAX_BYTES are not kept (a plain 100 000-topic body is ~17 MB per connection)."""

    MAX_BYTES = 1024 * 1024
    __slots__ = ("key", "body", "digest", "crc")

    def __init__(self) -> None:
        self.key: bytes | None = None
        self.body: bytes | None = None
        self.digest = ""
        self.crc = 0  # a bodyCrc32 that `body` was verified against (0 = none)

    def crc_known(self, body: bytes, crc: int) -> bool:
        """`body` is the kept body and was verified against this very bodyCrc32."""
        return self.body is not None and self.crc == crc and self.body == body

    def holds(self, key: bytes, body: bytes) -> bool:
        """The same header and bytes as the last registration kept: `digest` is theirs."""
        return self.body is not None and self.key == key and self.body == body

    def other_than_last(self, key: bytes, body: bytes) -> bool:
        """This connection's last registration was kept, came with the same header (the same broker) and had other
        bytes: a changed registration, which the unchanged path would only refuse (a Redis round trip for
        nothing). Another broker's registration in between (one connection carrying several) says nothing."""
        return self.body is not None and self.key == key and self.body != body

    def digest_of(self, key: bytes, body: bytes) -> str:
        if self.holds(key, body):
            return self.digest
        digest = _sha256(key, body)
        if len(body) <= self.MAX_BYTES:
            self.key, self.body, self.digest, self.crc = key, bytes(body), digest, 0
        return digest


def _sha256(key: bytes, body: bytes) -> str:
    h = hashlib.sha256(key)
    h.update(body)
    return h.hexdigest()


def parse_registration(decode: Callable[[bytes], Mapping[str, Any] | RegisterBroker], raw: bytes) -> RegisterBroker:
    """A door's decode, then RegisterBroker's validation (a door may hand back a RegisterBroker already)."""
    decoded = decode(raw)
    return decoded if isinstance(decoded, RegisterBroker) else RegisterBroker.parse(decoded)


def prepare_registration(decode: Callable[[bytes], Mapping[str, Any] | RegisterBroker], raw: bytes
                         ) -> RegisterBroker:
    """Decode and validate a registration body, topics compacted: what a parser process sends back."""
    return parse_registration(decode, raw).compact()


def parser_pool() -> ProcessPoolExecutor:
    """The worker's parser process for large bodies (spawned, so it holds none of the worker's state), which ends
    with the worker however the worker ends."""
    return ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), initializer=_end_with_parent,
                               initargs=(os.getpid(),))


def _end_with_parent(parent: int) -> None:
    """In the parser process: exit once the worker that started it is gone. A worker SIGKILLed (the OOM killer, a
    fault test) left it waiting for good on a pipe whose other end it holds itself, with multiprocessing's
    resource tracker beside it."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="end-with-worker", daemon=True).start()


def parse_kv_import(decode: Callable[[bytes], Any], raw: bytes) -> tuple[dict[str, dict[str, str]], bool, bool]:
    """A KV import body, {configTable, replace?, dryRun?}, decoded and checked entry by entry (kv_config): the
    table, replace, dry run. Large ones are parsed in a parser process, as large registrations are."""
    body = obj(decode(raw), "body")
    return (kv_config(body.get("configTable")), bool(boolean(body.get("replace"), "replace")),
            bool(boolean(body.get("dryRun"), "dryRun")))


class NameServer:
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
        self.liveness = LivenessBatch(store.touch_live, settings.heartbeat_flush_ms, clock)
        self.routes = RouteCache(store.change_events, store.version, staleness_ms=settings.route_cache_staleness_ms,
                                 enabled=settings.route_cache, on_config=self.reload_shared_config, clock=clock,
                                 max_entries=settings.route_cache_max_entries,
                                 max_bytes=settings.route_cache_max_bytes,
                                 max_missing=settings.route_cache_max_absent)
        self.unchanged = UnchangedAnswers()  # unchanged registrations this worker may answer from memory
        self._registered: dict[str, Any] = {}  # the registration counter's children, made on first use
        self.bases = RegistrationBases()  # the last table sent per broker: what a changed one is a delta of
        self.routes.state_listeners.append(self.unchanged.invalidate)
        self._expiring = 0  # this worker's expiry scans under way
        self._parsers: ProcessPoolExecutor | None = None  # large registration bodies are parsed there
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
        if self._parsers is not None:
            self._parsers.shutdown(wait=False, cancel_futures=True)
            self._parsers = None

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
                        digest = _sha256(key, body)
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
            if unchanged_first and not changed:
                epoch = self.unchanged.epoch
                res = await self._register_unchanged(who, digest, single_topic_guard, connection)
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

    def _changed_kv(self, namespaces: Iterable[str]) -> None:
        """A KV write: the order-topic table is in every answer to a registration."""
        if ORDER_TOPIC_CONFIG in namespaces:
            self._changed(None)

    async def _parse_registration(self, decode: Callable[[bytes], Mapping[str, Any] | RegisterBroker], raw: bytes,
                                  cost: int | None = None) -> RegisterBroker:
        if (len(raw) if cost is None else cost) < OFFLOAD_BYTES:
            return parse_registration(decode, raw)
        if self._parsers is None:
            self._parsers = parser_pool()
        return await asyncio.get_running_loop().run_in_executor(self._parsers, prepare_registration, decode, raw)

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

    # ------------------------------------------------------------------ routes

    def cached_route(self, who: Principal, topic: str) -> RouteEntry | None:
        """The hot path, synchronous: the cached entry, or None (then call `route`)."""
        if self._not_ready_until and self._clock() < self._not_ready_until:
            raise NotReady("name server not ready")
        if self.access.reads_protected:
            self.access.require(who, Role.READ)
        return self.routes.lookup(topic)

    async def route(self, who: Principal, topic: str) -> RouteEntry:
        """The topic's route entry (`route` None: no such topic), through the cache."""
        entry = self.cached_route(who, topic)
        if entry is not None:
            return entry
        topic_name(topic)
        return await self.routes.fill(topic, lambda: self._read_route(topic))

    @staticmethod
    def zone_filter(zone_mode: str | bool | None, zone_name: str | None) -> str | None:
        """ZoneRouteRPCHook's condition: zone mode on and a non-blank zone name; the zone to filter by."""
        on = zone_mode is True or (isinstance(zone_mode, str) and zone_mode.lower() == "true")
        if not on or zone_name is None or not zone_name.strip():
            return None
        return zone_name.strip()

    def encoded_route(self, topic: str, entry: RouteEntry, door: str,
                      encode: Callable[[TopicRouteData], bytes], zone: str | None = None) -> bytes:
        """The route as `door` encodes it, optionally filtered to a zone; cached with the entry."""
        if zone is None:
            return self.routes.encoding(topic, entry, door, encode)
        return self.routes.encoding(topic, entry, (door, zone.lower()), lambda r: encode(r.in_zone(zone)))

    async def _read_route(self, topic: str) -> ReadAt:
        s = self.settings
        return await self.store.get_route_at(topic, support_acting_master=s.support_acting_master,
                                             order_message_enable=s.order_message_enable)

    async def cluster_info(self, who: Principal) -> ClusterInfo:
        self.access.require(who, Role.READ)
        return await self.store.cluster_info()

    async def topic_list(self, who: Principal, kind: str = "all", cluster: str | None = None) -> TopicList:
        """RocketMQ 206 (all), 224 (cluster), 304 (system), 311-313 (unit kinds), with their switches."""
        self.access.require(who, Role.READ)
        if kind == "all":
            if not self.settings.enable_all_topic_list:
                raise Disabled("disable: the all-topic list is switched off (enableAllTopicList=false)")
            return TopicList(await self.store.topic_list("all"))
        if kind == "system":
            names, addr = await self.store.system_topic_list()
            return TopicList(names, addr)
        if kind not in TOPIC_LIST_KINDS:
            raise InvalidArgument(f"unknown topic list {kind!r}")
        if not self.settings.enable_topic_list:
            raise Disabled("disable: topic lists are switched off (enableTopicList=false)")
        if kind == "cluster":
            return TopicList(await self.store.cluster_topics(entity_name(cluster, "cluster")))
        return TopicList(await self.store.topic_list(kind))

    async def member_group(self, who: Principal, cluster: str, broker_name: str) -> BrokerMemberGroup:
        """GET_BROKER_MEMBER_GROUP: the requested cluster is echoed, not checked (as Java)."""
        self.access.require(who, Role.READ)
        cluster, broker_name = entity_name(cluster, "cluster"), entity_name(broker_name, "brokerName")
        return BrokerMemberGroup(cluster, broker_name, await self.store.member_group(broker_name))

    # ------------------------------------------------------------------ admin

    async def delete_topic(self, who: Principal, topic: str, cluster: str | None = None) -> int:
        self.access.require(who, Role.ADMIN)
        topic_name(topic)
        if cluster is not None:
            entity_name(cluster, "cluster")
        try:  # a broker's next registration brings the topic back: not answered from memory
            return await self.store.delete_topic(topic, cluster)
        finally:
            self._changed(None)  # which brokers served it, the store knows

    async def register_topic(self, who: Principal, topic: str, body: Mapping[str, Any]) -> int:
        """REGISTER_TOPIC_IN_NAMESRV: `body` holds `queueDatas`; all or nothing (an unknown broker: nothing)."""
        self.access.require(who, Role.ADMIN)
        topic_name(topic)
        queue_datas = parse_queue_datas(body)
        try:
            return await self.store.register_topic(topic, queue_datas)
        finally:
            self._changed([q.broker_name for q in queue_datas])

    async def wipe_write_perm(self, who: Principal, broker_name: str) -> int:
        self.access.require(who, Role.ADMIN)
        name = entity_name(broker_name, "brokerName")
        try:
            return await self.store.wipe_write_perm(name)
        finally:
            self._changed([name])

    async def add_write_perm(self, who: Principal, broker_name: str) -> int:
        self.access.require(who, Role.ADMIN)
        name = entity_name(broker_name, "brokerName")
        try:
            return await self.store.add_write_perm(name)
        finally:
            self._changed([name])

    # ------------------------------------------------------------------ KV config

    async def kv_put(self, who: Principal, namespace: str, key: str, value: str) -> None:
        self.access.require(who, Role.ADMIN)
        ns, k, v = kv_name(namespace, "namespace"), kv_name(key, "key"), kv_value(value)
        try:
            await self.store.kv_put(ns, k, v)
        finally:
            self._changed_kv([ns])

    async def kv_get(self, who: Principal, namespace: str, key: str) -> str:
        self.access.require(who, Role.READ)
        return await self.store.kv_get(kv_name(namespace, "namespace"), kv_name(key, "key"))

    async def kv_delete(self, who: Principal, namespace: str, key: str) -> bool:
        self.access.require(who, Role.ADMIN)
        ns, k = kv_name(namespace, "namespace"), kv_name(key, "key")
        try:
            return await self.store.kv_delete(ns, k)
        finally:
            self._changed_kv([ns])

    async def kv_list(self, who: Principal, namespace: str) -> KvTable:
        self.access.require(who, Role.READ)
        return KvTable(await self.store.kv_list(kv_name(namespace, "namespace")))

    async def kv_import(self, who: Principal, raw: bytes, decode: Callable[[bytes], Any]) -> KvImportResult:
        """A whole KV config written in one step (every namespace, or nothing: one entry that breaks a rule refuses
        the import, naming each such entry), or only compared with what is stored (`dryRun`, read role). The
        answer comes from the same script as the write: what the import changed, not what a read before it saw."""
        self.access.require(who, Role.READ)
        if len(raw) < OFFLOAD_BYTES:
            table, replace, dry_run = parse_kv_import(decode, raw)
        else:
            if self._parsers is None:
                self._parsers = parser_pool()
            table, replace, dry_run = await asyncio.get_running_loop().run_in_executor(
                self._parsers, parse_kv_import, decode, raw)
        if not dry_run:
            self.access.require(who, Role.ADMIN)
        try:
            before = await self.store.kv_import(table, replace=replace, dry_run=dry_run)
        finally:
            if not dry_run:
                self._changed_kv(table)
        return KvImportResult.of(table, before, dry_run=dry_run, replace=replace)

    async def kv_export(self, who: Principal, namespaces: list[str]) -> dict[str, dict[str, str]]:
        """The whole KV config at one instant, as Java's kvConfig.json holds it (emptied namespaces too), or only
        the namespaces named (those that exist)."""
        self.access.require(who, Role.READ)
        return await self.store.kv_export([kv_name(n, "namespace") for n in namespaces])

    async def kv_namespaces(self, who: Principal) -> list[str]:
        """The KV namespaces, sorted (no RocketMQ code: Java has no way to list them)."""
        self.access.require(who, Role.READ)
        return await self.store.kv_namespaces()

    # ------------------------------------------------------------------ NameServer config

    def config_view(self, who: Principal) -> dict[str, Any]:
        """Every setting in force (secrets and URL passwords masked), sorted by name."""
        self.access.require(who, Role.ADMIN)
        return dict(sorted(self.settings.masked().items()))

    async def update_config(self, who: Principal, changes: Mapping[str, Any]) -> dict[str, str]:
        """Change runtime switches for every worker (kept in Redis). Blacklisted keys (paths, secrets; cf.
        CVE-2023-37582) are refused as a whole; start-up settings and unknown names are refused too."""
        self.access.require(who, Role.ADMIN)
        if not changes:
            raise InvalidArgument("at least one setting")
        parsed: dict[str, str] = {}
        for key, raw in changes.items():
            flat = key.replace("_", "").replace("-", "").lower()
            if flat.removeprefix("namesrv") in CONFIG_BLACKLIST or flat in CONFIG_BLACKLIST:
                raise ConfigBlacklisted(f"Can not update config in black list: {key}")
            name = canonical_name(key)
            if name is None:
                raise InvalidArgument(f"unknown setting {key!r}", field=key)
            setting = BY_NAME[name]
            if setting.secret or "path" in name:
                raise ConfigBlacklisted(f"Can not update config in black list: {key}")
            if not setting.runtime:
                raise InvalidArgument(f"{key!r} is a start-up setting; change it in the deployment", field=key)
            if isinstance(raw, dict | list) or raw is None:
                raise InvalidArgument(f"{key}: a scalar value", field=key)
            try:
                value = parse_value(setting, raw)
            except ConfigError as exc:
                raise InvalidArgument(str(exc), field=key) from None
            parsed[name] = str(value).lower() if isinstance(value, bool) else str(value)
        await self.store.put_runtime_config(parsed)
        await self.reload_shared_config()
        self.routes.flush()
        return parsed

    @property
    def runtime_names(self) -> tuple[str, ...]:
        return RUNTIME_NAMES

    # ------------------------------------------------------------------ reports, maintenance

    async def skew_summary(self, who: Principal) -> str:
        """The latest skew summary JSON, as the Spark job stored it."""
        self.access.require(who, Role.READ)
        raw = await self.snapshots.skew_summary()
        if raw is None:
            raise ReportNotFound("no skew report yet: run `namesrv skew-report` (see docs/skew-report.md)")
        return raw

    SKEW_HISTORY_MAX = 1000

    async def skew_history(self, who: Principal, limit: int | str | None = None) -> list[dict[str, Any]]:
        """The kept skew runs, newest first, without their broker and topic lists: when each ran, on which
        snapshot, its totals and its clusters' metrics."""
        self.access.require(who, Role.READ)
        n = self.SKEW_HISTORY_MAX
        if limit is not None:
            try:
                n = int(limit)
            except (TypeError, ValueError):
                raise InvalidArgument("limit: an integer", field="limit") from None
            if not 1 <= n <= self.SKEW_HISTORY_MAX:
                raise InvalidArgument(f"limit: 1..{self.SKEW_HISTORY_MAX}", field="limit")
        runs = await self.snapshots.skew_history(n)
        return [{k: v for k, v in r.items() if k not in ("brokers", "topics")} for r in runs]

    async def skew_trend(self, who: Principal) -> dict[str, Any]:
        """The latest report's comparison with the runs before it (topics and brokers whose skew grew, newly
        flagged topics, each cluster's Gini run after run)."""
        self.access.require(who, Role.READ)
        trend = await self.snapshots.skew_trend()
        if trend is None:
            raise ReportNotFound("no skew report with a trend yet: run `namesrv skew-report` (see "
                                 "docs/skew-report.md)")
        return trend

    async def capacity(self, who: Principal) -> dict[str, Any]:
        """Where the registry stands against the sizing model (service/core/capacity.py): its brokers, topics and
        entries, its Redis's memory and CPU, the load the model gives a fleet of its shape, and the headroom."""
        self.access.require(who, Role.READ)
        stats = await self.store.capacity_stats()
        workers = len(await MemberStore(self.store).live())
        s = self.settings
        cache = {"entries": len(self.routes), "bytes": self.routes.bytes, "maxEntries": s.route_cache_max_entries,
                 "maxBytes": s.route_cache_max_bytes}  # this worker's
        return sizing.report(capacity_model.MODEL, stats, workers, route_cache=cache)

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
