"""The Grafana dashboard: panels as data, rendered to the JSON Grafana imports (helm/monitoring/grafana-dashboard.json,
also what the chart's dashboard ConfigMap carries). Queries use the workers' own metrics, not the recording rules,
so the dashboard works on a Prometheus without them. docs/operating.md describes each panel by its title."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

SEL = 'job=~"$job"'
RATE = "$__rate_interval"


@dataclass(frozen=True)
class Panel:
    title: str
    description: str
    targets: tuple[tuple[str, str], ...]  # (PromQL, legend)
    unit: str = "short"
    kind: str = "timeseries"
    width: int = 12


def q(*pairs: tuple[str, str]) -> tuple[tuple[str, str], ...]:
    return pairs


def quantiles(metric: str, by: str) -> tuple[tuple[str, str], ...]:
    return tuple((f"histogram_quantile({p}, sum by ({by}le) (rate({metric}_bucket{{{SEL}}}[{RATE}])))",
                  f"p{round(p * 100)}" + (f" {{{{{by.rstrip(', ')}}}}}" if by else ""))
                 for p in (0.5, 0.95, 0.99))


ROWS: tuple[tuple[str, tuple[Panel, ...]], ...] = (
    ("Workers", (
        Panel("Ready workers", "Workers whose readiness check passes (Redis reachable, scripts loaded, every door "
              "listening), out of the workers scraped.",
              q((f"sum(namesrv_ready{{{SEL}}})", "ready"), (f"count(namesrv_ready{{{SEL}}})", "scraped")),
              kind="stat", width=6),
        Panel("Readiness by worker", "1 ready, 0 not ready, one line per worker (instance).",
              q((f"namesrv_ready{{{SEL}}}", "{{instance}}")), width=18),
    )),
    ("Requests", (
        Panel("HTTP requests by route and status", "Requests per second on the HTTP door, by route and status.",
              q((f"sum by (route, status) (rate(namesrv_http_requests_total{{{SEL}}}[{RATE}]))",
                 "{{route}} {{status}}")), unit="reqps"),
        Panel("Remoting requests by request and result", "Requests per second on the native door (9876), by "
              "RocketMQ request code and response code (0 success, 16 no permission, 17 topic not exist, ...).",
              q((f"sum by (request, result) (rate(namesrv_remoting_requests_total{{{SEL}}}[{RATE}]))",
                 "{{request}} {{result}}")), unit="reqps"),
        Panel("Error replies by code", "Error replies per second on both doors by the error's code "
              "(STORE_UNAVAILABLE, UNAUTHORIZED, TOPIC_NOT_EXIST, ...).",
              q((f'sum by (code) (rate({{__name__=~"namesrv_(http|remoting)_errors_total", {SEL}}}[{RATE}]))',
                 "{{code}}")), unit="reqps"),
        Panel("HTTP latency", "p50, p95 and p99 of HTTP request latency, all routes together.",
              quantiles("namesrv_http_request_seconds", ""), unit="s"),
        Panel("HTTP latency p99 by route", "p99 of HTTP request latency per route.",
              q((f"histogram_quantile(0.99, sum by (route, le) (rate(namesrv_http_request_seconds_bucket{{{SEL}}}"
                 f"[{RATE}])))", "{{route}}")), unit="s"),
        Panel("Remoting latency p99 by request code", "p99 of native-door request latency per request code "
              "(route reads and heartbeats answered on the hot path count in the first bucket).",
              q((f"histogram_quantile(0.99, sum by (code, le) (rate(namesrv_remoting_request_seconds_bucket"
                 f"{{{SEL}}}[{RATE}])))", "{{code}}")), unit="s"),
    )),
    ("Registry", (
        Panel("Live brokers and topics", "Live broker entries (cluster, address) and topics with routes in the "
              "registry (every worker reports the whole registry's count; the highest is shown).",
              q((f"max(namesrv_live_brokers{{{SEL}}})", "live brokers"), (f"max(namesrv_topics{{{SEL}}})", "topics"))),
        Panel("Registrations and heartbeats", "Broker registrations per second by result (ok, unchanged, fenced, "
              "or the error code) and heartbeats by whether the broker was known.",
              q((f"sum by (result) (rate(namesrv_broker_registrations_total{{{SEL}}}[{RATE}]))", "register {{result}}"),
                (f"sum by (known) (rate(namesrv_broker_heartbeats_total{{{SEL}}}[{RATE}]))", "heartbeat {{known}}")),
              unit="reqps"),
        Panel("Expiries, drops and unregistrations", "Brokers removed per interval: expired by the scan (no "
              "heartbeat within their timeout), dropped because their native connection closed, and all "
              "unregistrations (requests and drops).",
              q((f"sum(increase(namesrv_broker_expirations_total{{{SEL}}}[{RATE}]))", "expired"),
                (f"sum(increase(namesrv_broker_connection_drops_total{{{SEL}}}[{RATE}]))", "dropped"),
                (f"sum(increase(namesrv_broker_unregistrations_total{{{SEL}}}[{RATE}]))", "unregistered"))),
        Panel("Expiry scan duration", "p99 of the expiry scan's duration per worker.",
              q((f"histogram_quantile(0.99, sum by (instance, le) (rate(namesrv_expiry_scan_seconds_bucket{{{SEL}}}"
                 f"[{RATE}])))", "{{instance}}")), unit="s"),
    )),
    ("Redis", (
        Panel("Redis errors by kind", "Failed Redis calls per second: deadline (cut off by the call's deadline: "
              "Redis slow), connection, not_ready (loading, read-only, no replicas), resharding, error.",
              q((f"sum by (kind) (rate(namesrv_redis_errors_total{{{SEL}}}[{RATE}]))", "{{kind}}")), unit="ops"),
        Panel("Store unavailable replies", "Requests answered 503 STORE_UNAVAILABLE (Redis unreachable or too slow) "
              "or REPLICATION_UNCONFIRMED (replicas did not confirm a write), per second.",
              q((f'sum by (code) (rate({{__name__=~"namesrv_(http|remoting)_errors_total", '
                 f'code=~"STORE_UNAVAILABLE|REPLICATION_UNCONFIRMED", {SEL}}}[{RATE}]))', "{{code}}")),
              unit="reqps"),
    )),
    ("Worker health", (
        Panel("Event-loop lag p99", "How late each worker's event loop runs a 50 ms timer (p99): a stall delays "
              "every request on that worker.",
              q((f"histogram_quantile(0.99, sum by (instance, le) (rate(namesrv_event_loop_lag_seconds_bucket"
                 f"{{{SEL}}}[{RATE}])))", "{{instance}}")), unit="s"),
        Panel("Route cache hit ratio", "Share of route reads each worker answers from its cache over the interval.",
              q((f"sum by (instance) (rate(namesrv_route_cache_hits{{{SEL}}}[{RATE}])) / sum by (instance) "
                 f"(rate(namesrv_route_cache_hits{{{SEL}}}[{RATE}]) + rate(namesrv_route_cache_misses{{{SEL}}}"
                 f"[{RATE}]))", "{{instance}}")), unit="percentunit"),
        Panel("Route cache size", "Routes (and absent topics) each worker caches, and the bytes they account for.",
              q((f"namesrv_route_cache_entries{{{SEL}}}", "entries {{instance}}"),
                (f"namesrv_route_cache_bytes{{{SEL}}}", "bytes {{instance}}"))),
        Panel("Connections and in-flight requests", "Native connections open and HTTP requests being handled, "
              "per worker.",
              q((f"namesrv_remoting_connections{{{SEL}}}", "connections {{instance}}"),
                (f"namesrv_http_in_flight{{{SEL}}}", "in flight {{instance}}"))),
    )),
    ("Watchers", (
        Panel("Watchers", "Long-polls and route streams open now and the client addresses holding them.",
              q((f"sum(namesrv_watchers{{{SEL}}})", "watchers"), (f"sum(namesrv_watch_clients{{{SEL}}})", "clients"))),
        Panel("Watch events, refusals and drops", "Per second: route changes sent to watchers, watches refused "
              "by the caps (429), route streams dropped because their client did not read.",
              q((f"sum(rate(namesrv_watch_events_total{{{SEL}}}[{RATE}]))", "events"),
                (f"sum(rate(namesrv_watch_refused_total{{{SEL}}}[{RATE}]))", "refused"),
                (f"sum(rate(namesrv_watch_dropped_total{{{SEL}}}[{RATE}]))", "dropped")), unit="ops"),
    )),
    ("Controller", (
        Panel("Controller elections", "Master elections of the RocketMQ 5 controller per interval, by trigger and "
              "result.",
              q((f"sum by (trigger, result) (increase(namesrv_controller_elections_total{{{SEL}}}[{RATE}]))",
                 "{{trigger}} {{result}}"))),
        Panel("Election duration p99", "p99 of a controller election's duration.",
              q((f"histogram_quantile(0.99, sum by (le) (rate(namesrv_controller_election_seconds_bucket{{{SEL}}}"
                 f"[{RATE}])))", "p99")), unit="s"),
    )),
)


def panels() -> list[Panel]:
    return [p for _, ps in ROWS for p in ps]


def render() -> str:
    out: list[dict[str, Any]] = []
    y, pid = 0, 1
    for row, ps in ROWS:
        out.append({"id": pid, "type": "row", "title": row, "collapsed": False,
                    "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
        pid, y, x = pid + 1, y + 1, 0
        for p in ps:
            if x + p.width > 24:
                x, y = 0, y + 8
            panel: dict[str, Any] = {
                "id": pid, "type": p.kind, "title": p.title, "description": p.description,
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "gridPos": {"h": 8, "w": p.width, "x": x, "y": y},
                "fieldConfig": {"defaults": {"unit": p.unit}, "overrides": []},
                "targets": [{"refId": chr(ord("A") + i), "expr": e, "legendFormat": legend,
                             "datasource": {"type": "prometheus", "uid": "${datasource}"}}
                            for i, (e, legend) in enumerate(p.targets)],
            }
            if p.kind == "timeseries":
                panel["options"] = {"legend": {"displayMode": "list", "placement": "bottom"},
                                    "tooltip": {"mode": "multi"}}
            out.append(panel)
            pid, x = pid + 1, x + p.width
        y += 8
    dash = {
        "uid": "rmq-namesrv", "title": "RocketMQ NameServer (rmq-namesrv)", "tags": ["rocketmq", "rmq-namesrv"],
        "description": "Generated by `python -m service.monitoring` from service/monitoring/dashboard.py; panels "
                       "described in docs/operating.md.",
        "schemaVersion": 39, "version": 1, "editable": True, "graphTooltip": 1, "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"}, "timezone": "browser",
        "templating": {"list": [
            {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
             "current": {}, "hide": 0},
            {"name": "job", "label": "Job", "type": "query", "datasource": {"type": "prometheus",
                                                                         "uid": "${datasource}"},
             "query": {"query": "label_values(namesrv_ready, job)", "refId": "job"},
             "definition": "label_values(namesrv_ready, job)", "refresh": 2, "includeAll": True, "multi": True,
             "allValue": ".*", "current": {}, "hide": 0},
        ]},
        "annotations": {"list": []},
        "panels": out,
    }
    return json.dumps(dash, indent=2) + "\n"
