"""Prometheus metrics of one worker process (each worker exposes its own; scrape every pod)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Metrics:
    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.requests = Counter("namesrv_http_requests_total", "HTTP requests", ["route", "method", "status"],
                                registry=r)
        self.latency = Histogram("namesrv_http_request_seconds", "HTTP request latency", ["route"],
                                 buckets=LATENCY_BUCKETS, registry=r)
        self.registrations = Counter("namesrv_broker_registrations_total", "broker registrations",
                                     ["result"], registry=r)
        self.heartbeats = Counter("namesrv_broker_heartbeats_total", "broker heartbeats", ["known"], registry=r)
        self.unregistrations = Counter("namesrv_broker_unregistrations_total", "broker unregistrations",
                                       registry=r)
        self.expirations = Counter("namesrv_broker_expirations_total", "brokers expired by the scan", registry=r)
        self.scan_seconds = Histogram("namesrv_expiry_scan_seconds", "expiry scan duration",
                                      buckets=LATENCY_BUCKETS, registry=r)
        self.redis_errors = Counter("namesrv_redis_errors_total", "Redis calls that failed", ["kind"], registry=r)
        self.live_brokers = Gauge("namesrv_live_brokers", "live broker entries (cluster, addr)", registry=r)
        self.topics = Gauge("namesrv_topics", "topics with routes", registry=r)
        self.cache_hits = Gauge("namesrv_route_cache_hits", "route cache hits since start", registry=r)
        self.cache_misses = Gauge("namesrv_route_cache_misses", "route cache misses since start", registry=r)
        self.cache_hit_ratio = Gauge("namesrv_route_cache_hit_ratio", "route cache hit ratio since start",
                                     registry=r)
        self.cache_entries = Gauge("namesrv_route_cache_entries", "routes cached in this worker", registry=r)
        self.snapshots = Counter("namesrv_snapshots_total", "snapshots taken by this worker", registry=r)

    def render(self) -> bytes:
        return generate_latest(self.registry)
