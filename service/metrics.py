"""Prometheus metrics of one worker process (each worker exposes its own; scrape every pod)."""

from __future__ import annotations

import collections
import gc
import time
from bisect import bisect_left
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest  # noqa: I001
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

if TYPE_CHECKING:
    from service.core.route_cache import RouteCache

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Metrics:
    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.http = RequestStats()
        r.register(self.http)
        self.remoting = RemotingStats()
        r.register(self.remoting)
        self.loop_lag = LoopLag(r)
        self.gc_pauses = GcPauses()
        r.register(self.gc_pauses)
        self.registrations = Counter("namesrv_broker_registrations_total", "broker registrations",
                                     ["result"], registry=r)
        self.heartbeats = Counter("namesrv_broker_heartbeats_total", "broker heartbeats", ["known"], registry=r)
        self.unregistrations = Counter("namesrv_broker_unregistrations_total", "broker unregistrations",
                                       registry=r)
        self.expirations = Counter("namesrv_broker_expirations_total", "brokers expired by the scan", registry=r)
        self.scan_seconds = Histogram("namesrv_expiry_scan_seconds", "expiry scan duration",
                                      buckets=LATENCY_BUCKETS, registry=r)
        r.register(RedisErrors())
        self.turns = BulkTurns()
        r.register(self.turns)
        self.ready = Gauge("namesrv_ready", "1 when this worker is ready (Redis reachable, scripts loaded, every door "
                           "listening), as /readyz answers; checked at every scrape", registry=r)
        self.connection_drops = Counter("namesrv_broker_connection_drops_total", "brokers removed because the "
                                        "native connection they registered on closed", registry=r)
        self.live_brokers = Gauge("namesrv_live_brokers", "live broker entries (cluster, addr)", registry=r)
        self.topics = Gauge("namesrv_topics", "topics with routes", registry=r)
        self.cache_hits = Gauge("namesrv_route_cache_hits", "route cache hits since start", registry=r)
        self.cache_misses = Gauge("namesrv_route_cache_misses", "route cache misses since start", registry=r)
        self.cache_hit_ratio = Gauge("namesrv_route_cache_hit_ratio", "route cache hit ratio since start",
                                     registry=r)
        self.cache_entries = Gauge("namesrv_route_cache_entries", "routes (and absent topics) cached in this "
                                   "worker", registry=r)
        self.cache_bytes = Gauge("namesrv_route_cache_bytes", "bytes the route cache accounts for", registry=r)
        self.cache_evictions = Gauge("namesrv_route_cache_evictions", "entries evicted by the cache bounds since "
                                     "start", registry=r)
        self._hb_known = self.heartbeats.labels(known="true")
        self._hb_unknown = self.heartbeats.labels(known="false")
        self._hb_deferred = self.heartbeats.labels(known="deferred")  # 904: acknowledged, written in a batch
        self.snapshots = Counter("namesrv_snapshots_total", "snapshots taken by this worker", registry=r)
        self.watches = WatchStats()
        r.register(self.watches)
        self.writes = WriteShortcuts()
        r.register(self.writes)
        self.cluster_info_reads = ClusterInfoReads()
        r.register(self.cluster_info_reads)

    def heartbeat(self, known: bool) -> None:
        (self._hb_known if known else self._hb_unknown).inc()

    def heartbeat_deferred(self) -> None:
        self._hb_deferred.inc()

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        self.http.observe(route, method, status, seconds)

    def render(self, cache: RouteCache | None = None, ns: Any = None) -> bytes:
        """The exposition; `ns` (the NameServer) adds its batched liveness and memory answers."""
        if ns is not None:
            self.writes.ns = ns
            self.cluster_info_reads.ns = ns
        if cache is not None:
            self.cache_hits.set(cache.hits)
            self.cache_misses.set(cache.misses)
            total = cache.hits + cache.misses
            self.cache_hit_ratio.set(cache.hits / total if total else 0.0)
            self.cache_entries.set(len(cache))
            self.cache_bytes.set(cache.bytes)
            self.cache_evictions.set(cache.evictions)
            self.watches.feed = cache.feed
        return generate_latest(self.registry)


def latency_family(name: str, help_text: str, label: str, buckets: Mapping[Any, list[int]],
                   sums: Mapping[Any, float]) -> HistogramMetricFamily:
    """A latency histogram from plain per-label bucket counts (LATENCY_BUCKETS plus +Inf)."""
    h = HistogramMetricFamily(name, help_text, labels=[label])
    for key, counts in sorted(buckets.items()):
        cumulative, acc = [], 0
        for bound, n in zip((*LATENCY_BUCKETS, float("inf")), counts, strict=True):
            acc += n
            cumulative.append((str(bound) if bound != float("inf") else "+Inf", acc))
        h.add_metric([str(key)], cumulative, sum_value=sums[key])
    return h


def errors_family(name: str, help_text: str, errors: Mapping[str, int]) -> CounterMetricFamily:
    c = CounterMetricFamily(name, help_text, labels=["code"])
    for code, n in sorted(errors.items()):
        c.add_metric([code], n)
    return c


class RedisErrors:
    """Redis calls that failed, by kind (service/store/calls.py counts them where redis-py's errors are translated:
    every request, scan, readiness check and scrape of this process)."""

    def collect(self) -> Iterator[Metric]:
        from service.store.calls import FAILURES

        c = CounterMetricFamily("namesrv_redis_errors", "Redis calls that failed, by kind: deadline (no answer "
                                "within the call's deadline), connection, not_ready (LOADING, READONLY, "
                                "NOREPLICAS, ...), resharding, error", labels=["kind"])
        for kind, n in sorted(FAILURES.items()):
            c.add_metric([kind], n)
        yield c


class BulkTurns:
    """The worker's bulk Redis work in turns (service/store/admission.py): calls waiting for a turn now, turns
    waited for and how long in all, and calls answered at once because Redis was known to be down; and the size of
    its steps (service/store/steps.py). `gate` and `steps` are set by the core (the route store's)."""

    def __init__(self) -> None:
        self.gate: Any = None
        self.steps: Any = None  # a callable answering the store's step sizers (service/store/steps.py)

    def collect(self) -> Iterator[Metric]:
        steps = self.steps() if self.steps is not None else None
        if steps is not None:
            size = GaugeMetricFamily("namesrv_store_step_topics", "topics (kind touch: heartbeats) the next bulk "
                                     "step of each kind takes (sized by what steps cost on this Redis, or fixed)",
                                     labels=["kind"])
            cost = GaugeMetricFamily("namesrv_store_step_cost_microseconds", "Redis time per topic the steps of "
                                     "each kind measured (running estimate; absent before any)", labels=["kind"])
            for kind, sizer in steps.kinds():
                size.add_metric([kind], sizer.topics())
                if sizer.us_per_topic is not None:
                    cost.add_metric([kind], sizer.us_per_topic)
            yield size
            yield cost
        g = self.gate
        yield GaugeMetricFamily("namesrv_redis_turns_queued", "bulk Redis calls (registrations, unregisters, expiry) "
                                "waiting for a turn now", value=g.queued if g else 0)
        yield CounterMetricFamily("namesrv_redis_turns_waited", "bulk Redis calls that waited for a turn",
                                  value=g.waited if g else 0)
        yield CounterMetricFamily("namesrv_redis_turn_wait_seconds", "time bulk Redis calls waited for a turn, in all",
                                  value=g.wait_seconds if g else 0.0)
        yield CounterMetricFamily("namesrv_redis_failed_fast", "bulk Redis calls answered at once (503) because "
                                  "Redis was known to be unavailable", value=g.failed_fast if g else 0)


class LoopLag:
    """How late the event loop runs a timer: a stall (a long parse, a blocking call) shows up here first.

    A task sleeps `interval` seconds in a loop and records how much later than asked it woke up."""

    BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)

    def __init__(self, registry: CollectorRegistry, interval: float = 0.05) -> None:
        self.interval = interval
        self.hist = Histogram("namesrv_event_loop_lag_seconds", "event-loop lag: how late a timer fired",
                              buckets=self.BUCKETS, registry=registry)
        self.max = Gauge("namesrv_event_loop_lag_max_seconds", "largest event-loop lag since start",
                         registry=registry)
        self.worst = 0.0

    async def run(self) -> None:
        import asyncio
        import time

        while True:
            asked = time.perf_counter()
            await asyncio.sleep(self.interval)
            lag = max(0.0, time.perf_counter() - asked - self.interval)
            self.hist.observe(lag)
            if lag > self.worst:
                self.worst = lag
                self.max.set(lag)


class GcPauses:
    """How long the cyclic garbage collector stopped this worker, by generation (gc.callbacks): a full collection
    walks every tracked object the worker holds (cached routes, connections' memos), and a loop lag it explains is
    not Redis's. Plain ints and floats: the callback runs at every collection. `start()` hooks it while a worker
    runs, `stop()` unhooks it."""

    BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25)

    def __init__(self) -> None:
        self.counts = [[0] * (len(self.BUCKETS) + 1) for _ in range(3)]
        self.sums = [0.0, 0.0, 0.0]
        self.worst = [0.0, 0.0, 0.0]
        self._began = 0.0

    def start(self) -> None:
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)

    def stop(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
            return
        took = time.perf_counter() - self._began
        gen = info["generation"]
        self.counts[gen][bisect_left(self.BUCKETS, took)] += 1
        self.sums[gen] += took
        if took > self.worst[gen]:
            self.worst[gen] = took

    def collect(self) -> Iterator[Metric]:
        h = HistogramMetricFamily("namesrv_gc_pause_seconds", "cyclic garbage collections of this worker by "
                                  "generation (2: full) and how long each stopped it", labels=["generation"])
        worst = GaugeMetricFamily("namesrv_gc_pause_max_seconds", "longest collection of each generation since "
                                  "start", labels=["generation"])
        for gen in range(3):
            running, buckets = 0, []
            for le, n in zip((*self.BUCKETS, float("inf")), self.counts[gen], strict=True):
                running += n
                buckets.append(("+Inf" if le == float("inf") else repr(le), running))
            h.add_metric([str(gen)], buckets, self.sums[gen])
            worst.add_metric([str(gen)], self.worst[gen])
        yield h
        yield worst


class CountsAndLatency:
    """Requests counted by a key and timed by a label into a latency histogram, as plain ints: one event loop per
    process needs no lock, and prometheus_client's labelled metrics cost ~6% of a cached route read."""

    def __init__(self) -> None:
        self.counts: dict[tuple, int] = {}
        self.buckets: dict[Any, list[int]] = {}
        self.sums: dict[Any, float] = {}
        self.errors: collections.Counter[str] = collections.Counter()  # error replies by the error's code

    def count(self, key: tuple, label: Any, seconds: float) -> None:
        self.counts[key] = self.counts.get(key, 0) + 1
        b = self.buckets.get(label)
        if b is None:
            b = self.buckets[label] = [0] * (len(LATENCY_BUCKETS) + 1)
            self.sums[label] = 0.0
        b[bisect_left(LATENCY_BUCKETS, seconds)] += 1
        self.sums[label] += seconds


class RemotingStats(CountsAndLatency):
    """Remoting requests by request code and response code, latency by request code, connections.

    Plain ints like RequestStats: the route read on this door is answered inside data_received."""

    def __init__(self) -> None:
        super().__init__()
        self.opened = 0
        self.closes: collections.Counter[str] = collections.Counter()
        self.frame_errors = 0
        self.busy = 0
        self.paused = 0  # times a connection stopped being read because its peer did not read its replies
        self.fast_routes = 0  # cached route reads answered by the decoder's hot path (code 105, SUCCESS)
        self.fast_heartbeats = 0  # BROKER_HEARTBEATs acknowledged by the decoder's hot path (code 904, SUCCESS)
        self.open_now = lambda: 0  # set by the server: connections open now
        self.partial_now = lambda: 0  # set by the server: bytes held for incomplete frames (declared lengths)
        self.handling_now = lambda: 0  # set by the server: bytes held by requests in progress (their bodies)
        self.waiting_now = lambda: 0  # set by the server: connections not read until the worker has room
        self.waits = 0  # times a connection stopped being read until the worker had room

    def observe(self, code: int, result: int, seconds: float) -> None:
        self.count((code, result), code, seconds)

    def collect(self) -> Iterator[Metric]:
        from service.remoting.codes import NAMES

        c = CounterMetricFamily("namesrv_remoting_requests", "remoting requests by request code and response code",
                                labels=["code", "request", "result"])
        counts = dict(self.counts)
        fast = {105: self.fast_routes, 904: self.fast_heartbeats}
        for code, n in fast.items():
            if n:
                counts[(code, 0)] = counts.get((code, 0), 0) + n
        for (code, result), n in sorted(counts.items()):
            c.add_metric([str(code), NAMES.get(code, "UNKNOWN"), str(result)], n)
        yield c
        buckets = {k: list(v) for k, v in self.buckets.items()}
        for code, n in fast.items():
            if n:
                buckets.setdefault(code, [0] * (len(LATENCY_BUCKETS) + 1))[0] += n
                self.sums.setdefault(code, 0.0)
        yield latency_family("namesrv_remoting_request_seconds", "remoting request latency (hot-path route reads "
                             "and heartbeats count in the first bucket)", "code", buckets, self.sums)
        yield GaugeMetricFamily("namesrv_remoting_connections", "remoting connections open now",
                                value=self.open_now())
        yield GaugeMetricFamily("namesrv_remoting_partial_frame_bytes", "bytes held for incomplete frames, at "
                                "their declared lengths (with the next gauge, bounded by "
                                "NAMESRV_REMOTING_MAX_PARTIAL_BYTES)", value=self.partial_now())
        yield GaugeMetricFamily("namesrv_remoting_handling_bytes", "bytes held by requests in progress (their "
                                "bodies)", value=self.handling_now())
        yield GaugeMetricFamily("namesrv_remoting_waiting_connections", "connections not read until the worker "
                                "has room for their frames (TCP backpressure)", value=self.waiting_now())
        yield CounterMetricFamily("namesrv_remoting_waits", "times a connection stopped being read until the "
                                  "worker had room for its frame or requests", value=self.waits)
        yield CounterMetricFamily("namesrv_remoting_connections_opened", "remoting connections accepted",
                                  value=self.opened)
        closes = CounterMetricFamily("namesrv_remoting_connections_closed", "remoting connections closed, by reason",
                                     labels=["reason"])
        for reason, n in sorted(self.closes.items()):
            closes.add_metric([reason], n)
        yield closes
        yield CounterMetricFamily("namesrv_remoting_frame_errors", "connections closed for an oversize or "
                                  "undecodable frame", value=self.frame_errors)
        yield CounterMetricFamily("namesrv_remoting_busy", "requests answered SYSTEM_BUSY (a connection's in-flight "
                                  "bound)",
                                  value=self.busy)
        yield errors_family("namesrv_remoting_errors", "remoting error replies by error code (STORE_UNAVAILABLE, "
                            "UNAUTHORIZED, ...)", self.errors)
        yield CounterMetricFamily("namesrv_remoting_read_paused", "times a connection was not read because its "
                                  "peer did not read its replies", value=self.paused)


class RequestStats(CountsAndLatency):
    """HTTP requests by route, method and status; latency by route; requests in handlers now."""

    def __init__(self) -> None:
        super().__init__()
        self.in_flight = 0  # requests inside a handler now (the guard counts them)

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        self.count((route, method, status), route, seconds)

    def collect(self) -> Iterator[Metric]:
        c = CounterMetricFamily("namesrv_http_requests", "HTTP requests", labels=["route", "method", "status"])
        for (route, method, status), n in sorted(self.counts.items()):
            c.add_metric([route, method, str(status)], n)
        yield c
        yield latency_family("namesrv_http_request_seconds", "HTTP request latency", "route", self.buckets,
                             self.sums)
        yield errors_family("namesrv_http_errors", "HTTP error replies by error code (STORE_UNAVAILABLE, "
                            "UNAUTHORIZED, ...)", self.errors)
        yield GaugeMetricFamily("namesrv_http_in_flight", "HTTP requests being handled now", value=self.in_flight)


class WriteShortcuts:
    """What the write path answers without a Redis call per request (issue 33): heartbeats acknowledged in memory
    and written in batches (service/core/liveness.py), unchanged registrations answered from memory
    (service/core/unchanged.py), and the route cache's in-place updates, flushes and missed events."""

    def __init__(self) -> None:
        self.ns: Any = None

    def collect(self) -> Iterator[Metric]:
        ns = self.ns
        live = ns.liveness if ns is not None else None
        routes = ns.routes if ns is not None else None
        yield GaugeMetricFamily("namesrv_heartbeats_pending", "heartbeats acknowledged and not yet written to Redis "
                                "(written every heartbeat_flush_ms)", value=len(live) if live is not None else 0)
        yield CounterMetricFamily("namesrv_heartbeats_flushed", "broker liveness entries written to Redis by the "
                                  "batched heartbeat writer", value=live.written if live is not None else 0)
        yield CounterMetricFamily("namesrv_heartbeat_flush_failures", "batched liveness writes that failed (kept "
                                  "pending and retried)", value=live.failures if live is not None else 0)
        yield CounterMetricFamily("namesrv_registrations_answered_from_memory", "unchanged registrations this "
                                  "worker answered without Redis", value=ns.unchanged.hits if ns is not None else 0)
        yield CounterMetricFamily("namesrv_registrations_not_tried_unchanged", "registrations sent straight to the "
                                  "full path while few recent ones were unchanged (a fleet's cold start)",
                                  value=ns.unchanged_odds.skipped if ns is not None else 0)
        deltas = CounterMetricFamily("namesrv_registration_deltas", "changed registrations sent to Redis as what "
                                     "they change against the connection's last one (refused: the store no longer "
                                     "held that one's table; sent in full then)", labels=["result"])
        for result in ("applied", "refused"):
            deltas.add_metric([result], getattr(ns.bases, result) if ns is not None else 0)
        yield deltas
        yield CounterMetricFamily("namesrv_route_cache_updates", "cached routes updated in place by change events",
                                  value=routes.updates if routes is not None else 0)
        yield CounterMetricFamily("namesrv_route_cache_flushes", "whole route-cache flushes (a '*' event, a version "
                                  "gap, a resubscription, a missed event)",
                                  value=routes.flushes if routes is not None else 0)
        yield CounterMetricFamily("namesrv_route_cache_missed_events", "change events the version poll found "
                                  "missing (each one flushed the cache)",
                                  value=routes.missed_events if routes is not None else 0)


class ClusterInfoReads:
    """Cluster info reads of this worker (service/core/cluster_infos.py): from its copy, or of the tables in Redis
    (in bounded steps, or whole when changes kept disturbing the steps)."""

    def __init__(self) -> None:
        self.ns: Any = None

    def collect(self) -> Iterator[Metric]:
        copies = self.ns.cluster_infos if self.ns is not None else None
        reads = CounterMetricFamily("namesrv_cluster_info_reads", "cluster info reads (106, GET /v1/cluster-info, "
                                    "the console): answered from the worker's copy after one GET of its version, "
                                    "or reads of the tables in Redis (concurrent misses share one): in bounded "
                                    "steps, in steps that re-read the brokers changed meanwhile (caught_up), or "
                                    "whole after 3 reads disturbed by changes the log could not account for",
                                    labels=["result"])
        reads.add_metric(["copy"], copies.hits if copies is not None else 0)
        for how in ("steps", "caught_up", "whole"):
            reads.add_metric([how], copies.reads[how] if copies is not None else 0)
        yield reads


class WatchStats:
    """Long-polls and route streams of this worker (service/core/watch.py's ChangeFeed)."""

    def __init__(self) -> None:
        self.feed: Any = None

    def collect(self) -> Iterator[Metric]:
        f = self.feed
        yield GaugeMetricFamily("namesrv_watchers", "long-polls and route streams open now",
                                value=len(f) if f is not None else 0)
        yield GaugeMetricFamily("namesrv_watch_clients", "client addresses with a long-poll or stream open now",
                                value=f.clients() if f is not None else 0)
        yield CounterMetricFamily("namesrv_watch_opened", "long-polls and route streams accepted",
                                  value=f.opened if f is not None else 0)
        yield CounterMetricFamily("namesrv_watch_refused", "long-polls and route streams refused (429: caps)",
                                  value=f.refused if f is not None else 0)
        yield CounterMetricFamily("namesrv_watch_dropped", "route streams closed because their client did not "
                                  "read (a full write buffer)", value=f.dropped if f is not None else 0)
        fanouts = HistogramMetricFamily("namesrv_watch_fanout_seconds", "route streams: from a change's event "
                                        "reaching this worker to its event written to every stream of the topic")
        if f is not None:
            cumulative, acc = [], 0
            for bound, n in zip((*f.fanout_buckets, float("inf")), f.fanout_counts, strict=True):
                acc += n
                cumulative.append((str(bound) if bound != float("inf") else "+Inf", acc))
            fanouts.add_metric([], cumulative, sum_value=f.fanout_sum)
        yield fanouts
        yield CounterMetricFamily("namesrv_watch_events", "route changes sent to watchers (stream events, "
                                  "long-polls answered with a change)", value=f.events if f is not None else 0)
