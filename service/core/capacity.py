"""Sizing: what a fleet costs one registry (its workers and its Redis primary), and how far a running registry is
from the limits (README, "Sizing"; issue 40 item 5).

One formula for both uses: `python -m benchmarks.sizing` evaluates it for the README's table, and
`namesrv admin capacity` for the registry it talks to. Its parameters are measured costs, written by
benchmarks.sizing from benchmarks/results/*.json into service/core/capacity_model.py: CPU per request from the
native-door benchmark (benchmarks.peers), Redis time per call (benchmarks.redis_capacity), bytes per (topic,
broker) entry and per cached route, and a factor per side that makes the formula give what a whole fleet measured
(benchmarks.fleet). Per-request costs are given at 100 and at 1 000 topics per broker; other sizes go linearly.

The fleet assumed, per broker: one registration (the same bytes) every 30 s on one NameServer address (a broker
that lists N addresses registers N times), a tenth of the brokers with enableSlaveActingMaster heart-beating every
second, 1 % changing their topic table a minute; 5 clients per broker reading 2 routes every 30 s; for the peak, a
rolling restart of 10 % of the brokers in 2 minutes. Limits: half a core of the Redis primary (the rest for bursts,
expiry, snapshots, catching up after a failover), half a core per worker, every worker applying every change to
its cached routes within a quarter of a core, each worker caching every route its clients read (the route cache's
bounds), a registration stream within half of a 1 Gbit/s link per worker.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

PERIOD_S = 30.0  # brokers register, clients poll routes, every 30 s
REDIS_CORE_TARGET = 0.5
WORKER_CORE_TARGET = 0.5
EVENT_CORE_LIMIT = 0.25
LINK_BYTES_PER_S = 125_000_000 * 0.5  # half of 1 Gbit/s
REDIS_MEMORY_MB = 8192.0  # a primary with 8 GB for data, unless the registry's Redis has a maxmemory
MEMO_MAX_BYTES = 1024 * 1024  # the native door keeps a connection's last registration body up to this size


@dataclass(frozen=True)
class Model:
    """Measured costs (µs of CPU; bytes). Pairs are at 100 and at 1 000 topics per broker."""

    reg_same_worker_us: tuple[float, float]  # a registration of the same bytes again, answered by the worker
    reg_changed_worker_us: tuple[float, float]  # a registration that changes its topics (or a first one)
    reg_changed_redis_us: tuple[float, float]
    liveness_redis_us: float  # one broker's liveness in the worker's batch (a registration or a heartbeat)
    heartbeat_worker_us: float
    read_worker_us: float  # a route read from the worker's cache
    event_worker_us_per_topic: float  # a change applied to one cached route, on every worker
    redis_bytes_per_entry: float  # a (topic, broker) entry
    redis_bytes_per_topic: float
    redis_base_mb: float
    worker_base_mb: float
    worker_bytes_per_broker: float  # a broker's connection, beyond the last body the native door keeps of it
    worker_bytes_per_route: float  # one cached route's resident memory (at `brokers_per_topic_measured` brokers)
    brokers_per_topic_measured: float
    body_bytes_per_topic: float  # a plain (5.x default) registration body
    cache_bytes_per_route: float = 2400.0  # what the route cache counts of a route against its byte bound
    restart_worker_us_per_topic: float = 0.0  # a restarted broker (unregister, reconnect, first registration and
    restart_redis_us_per_topic: float = 0.0  # the readers' cache misses it causes), per topic it serves; 0: chg(T)
    worker_factor: float = 1.0  # measured fleet ÷ the formula at the fleet's point
    redis_factor: float = 1.0
    extra_worker_cores: float = 0.0  # what a second worker added to the fleet's CPU (its own events, caches, polls)
    basis: dict[str, str] = field(default_factory=dict)  # what each number was measured with


@dataclass(frozen=True)
class Fleet:
    brokers: int
    topics_per_broker: float
    topics: int  # in all
    clients_per_broker: float = 5.0
    client_topics: int = 2
    acting_share: float = 0.1
    change_per_minute: float = 0.01
    restart_share: float = 0.1  # in `restart_minutes`, for the peak
    restart_minutes: float = 2.0

    @property
    def entries(self) -> float:
        return self.brokers * self.topics_per_broker

    @property
    def brokers_per_topic(self) -> float:
        return self.entries / self.topics if self.topics else 0.0


@dataclass(frozen=True)
class Load:
    worker_cores: float  # all workers together, steady
    worker_cores_peak: float  # during the rolling restart
    redis_cores: float
    redis_cores_peak: float
    redis_mb: float
    worker_mb: float  # each worker: its share of the brokers' connections, every read route cached
    event_cores_per_worker: float  # at the peak
    registration_bytes_per_s: float
    workers: int  # to keep each at WORKER_CORE_TARGET at the peak, and the stream within the link
    route_cache_mb: float  # what caching every route takes per worker
    breaks_first: str
    utilisation: dict[str, float]  # of each limit that adding workers does not lift (1.0 = at the limit)


def at(pair: tuple[float, float], topics: float) -> float:
    """Linear through (100, a) and (1 000, b), never below zero."""
    a, b = pair
    return max(0.0, a + (b - a) * (topics - 100) / 900)


def predict(m: Model, f: Fleet, route_cache_entries: int = 100_000, route_cache_mb: float = 256.0,
            redis_memory_mb: float = REDIS_MEMORY_MB) -> Load:
    t = f.topics_per_broker
    regs = f.brokers / PERIOD_S
    beats = f.brokers * f.acting_share
    reads = f.brokers * f.clients_per_broker * f.client_topics / PERIOD_S
    changes = f.brokers * f.change_per_minute / 60
    restarts = f.brokers * f.restart_share / (f.restart_minutes * 60)  # each: an unregister and a first registration

    worker_us = (regs * at(m.reg_same_worker_us, t) + beats * m.heartbeat_worker_us + reads * m.read_worker_us
                 + changes * at(m.reg_changed_worker_us, t))
    redis_us = (regs + beats) * m.liveness_redis_us + changes * at(m.reg_changed_redis_us, t)
    worker = worker_us * m.worker_factor / 1e6
    redis = redis_us * m.redis_factor / 1e6
    if m.restart_worker_us_per_topic:  # what the fleet's rolling restart measured, per topic of a restarted broker
        worker_peak = worker + restarts * t * m.restart_worker_us_per_topic / 1e6
        redis_peak = redis + restarts * t * m.restart_redis_us_per_topic / 1e6
    else:  # a first registration each, and its unregister sweeping as many topics
        worker_peak = worker + restarts * at(m.reg_changed_worker_us, t) * m.worker_factor / 1e6
        redis_peak = redis + restarts * 2 * at(m.reg_changed_redis_us, t) * m.redis_factor / 1e6
    event_cores = (changes + 2 * restarts) * t * m.event_worker_us_per_topic / 1e6

    per_topic = max(1.0, f.brokers_per_topic) / m.brokers_per_topic_measured  # a route grows with its brokers
    cached = min(f.topics, f.brokers * f.clients_per_broker * f.client_topics)
    cache_mb = cached * m.worker_bytes_per_route * per_topic / 2**20
    counted_mb = cached * m.cache_bytes_per_route * per_topic / 2**20
    stream = regs * t * m.body_bytes_per_topic
    workers = max(1, math.ceil(stream / LINK_BYTES_PER_S))
    while workers < 10_000 and worker_peak + (workers - 1) * m.extra_worker_cores > workers * WORKER_CORE_TARGET:
        workers += 1
    worker = worker + (workers - 1) * m.extra_worker_cores
    worker_peak = worker_peak + (workers - 1) * m.extra_worker_cores
    body = min(t * m.body_bytes_per_topic, MEMO_MAX_BYTES)  # the native door keeps each connection's last body
    connections_mb = f.brokers * (m.worker_bytes_per_broker + body) / 2**20
    redis_mb = m.redis_base_mb + (f.entries * m.redis_bytes_per_entry + f.topics * m.redis_bytes_per_topic) / 2**20
    util = {"Redis CPU": redis_peak / REDIS_CORE_TARGET,
            "Redis memory": redis_mb / redis_memory_mb,
            "a worker's event application": event_cores / EVENT_CORE_LIMIT,
            "the route cache's bounds": max(cached / route_cache_entries, counted_mb / route_cache_mb)}
    first = max(util, key=lambda k: util[k])
    return Load(worker_cores=worker, worker_cores_peak=worker_peak, redis_cores=redis, redis_cores_peak=redis_peak,
                redis_mb=redis_mb, worker_mb=m.worker_base_mb + connections_mb / workers + cache_mb,
                event_cores_per_worker=event_cores,
                registration_bytes_per_s=stream, workers=workers, route_cache_mb=cache_mb, breaks_first=first,
                utilisation=util)


@dataclass(frozen=True)
class Headroom:
    load: Load
    max_brokers: int  # at this fleet's shape, before the first limit
    limit: str
    redis_memory_limit_mb: float | None


def headroom(m: Model, f: Fleet, *, redis_maxmemory_mb: float | None = None, route_cache_entries: int = 100_000,
             route_cache_mb: float = 256.0) -> Headroom:
    """The load this fleet puts on the model, and how many brokers of the same shape (topics per broker, brokers
    per topic) fit before the first limit that adding workers does not lift: Redis CPU, Redis memory (80 % of its
    maxmemory when one is set, else an 8 GB primary), a worker's event application, the route cache's bounds.
    Every figure grows in proportion to the brokers at a fixed shape (memory from its base), so each bound is
    brokers ÷ utilisation."""
    memory = redis_maxmemory_mb * 0.8 if redis_maxmemory_mb else REDIS_MEMORY_MB
    load = predict(m, f, route_cache_entries, route_cache_mb, memory)
    brokers = max(f.brokers, 1)
    bounds = {name: brokers / u for name, u in load.utilisation.items() if u > 0}
    per_broker_mb = (load.redis_mb - m.redis_base_mb) / brokers
    if per_broker_mb > 0:
        bounds["Redis memory"] = (memory - m.redis_base_mb) / per_broker_mb
    limit = min(bounds, key=lambda k: bounds[k]) if bounds else ""
    return Headroom(load=load, max_brokers=max(0, int(bounds[limit])) if bounds else 0, limit=limit,
                    redis_memory_limit_mb=memory)


def report(m: Model, stats: dict, workers: int, *, route_cache: dict) -> dict:
    """The registry's standing, for `namesrv admin capacity` (GET /v1/capacity): its counts, Redis's own memory
    and CPU, the model's load for a fleet of its shape, and the brokers that fit before the first limit."""
    brokers = int(stats.get("liveBrokers", 0))  # every live address registers (slaves too)
    names = int(stats.get("brokerNames", 0))
    topics = int(stats.get("topics", 0))
    entries = int(stats.get("entries", 0))  # queue data per (topic, broker name): a slave adds none
    per_broker = entries / names if names else 0.0
    redis = stats.get("redis", {})
    mb = 2**20
    maxmemory = float(redis["maxmemory"]) / mb if redis.get("maxmemory") else None
    out: dict = {
        "brokers": brokers, "brokerNames": names, "clusters": int(stats.get("clusters", 0)),
        "topics": topics, "entries": entries, "topicsPerBroker": round(per_broker, 1),
        "brokersPerTopic": round(entries / topics, 2) if topics else 0.0,
        "workers": workers, "routeCache": route_cache,
        "redis": {"usedMemoryMb": round(float(redis["used_memory"]) / mb, 1) if "used_memory" in redis else None,
                  "rssMb": round(float(redis["used_memory_rss"]) / mb, 1) if "used_memory_rss" in redis else None,
                  "maxmemoryMb": round(maxmemory, 1) if maxmemory else None,
                  "cpuSecondsSinceStart": round(float(redis["used_cpu_sys"]) + float(redis["used_cpu_user"]), 1)
                  if "used_cpu_sys" in redis else None,
                  "uptimeSeconds": int(redis["uptime_in_seconds"]) if "uptime_in_seconds" in redis else None,
                  "version": redis.get("redis_version")},
        "basis": m.basis,
    }
    if not brokers:
        out["headroom"] = None
        return out
    fleet = Fleet(brokers=brokers, topics_per_broker=per_broker, topics=max(topics, 1))
    h = headroom(m, fleet, redis_maxmemory_mb=maxmemory, route_cache_entries=int(route_cache["maxEntries"]),
                 route_cache_mb=route_cache["maxBytes"] / mb)
    load = h.load
    out["model"] = {"workerCores": round(load.worker_cores, 6), "workerCoresPeak": round(load.worker_cores_peak, 6),
                    "redisCores": round(load.redis_cores, 6), "redisCoresPeak": round(load.redis_cores_peak, 6),
                    "redisMb": round(load.redis_mb, 1), "workerMb": round(load.worker_mb, 1),
                    "eventCoresPerWorker": round(load.event_cores_per_worker, 6),
                    "registrationMbPerS": round(load.registration_bytes_per_s / mb, 3),
                    "workersNeeded": load.workers, "utilisation": {k: round(v, 6) for k, v in
                                                                   load.utilisation.items()},
                    "breaksFirst": load.breaks_first}
    out["headroom"] = {"maxBrokers": h.max_brokers, "moreBrokers": max(0, h.max_brokers - brokers),
                       "limit": h.limit, "workersShort": max(0, load.workers - workers)}
    return out
