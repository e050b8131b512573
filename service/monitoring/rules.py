"""The alerting and recording rules, once: rendered as a plain rules file for any Prometheus (thresholds at their
defaults) and as the chart's PrometheusRule template (each threshold and `for` a value under `prometheusRule`).

Every alert names its runbook section in docs/operating.md (`runbook_url`). Series are aggregated by
(namespace, job): one deployment's workers together, whatever else the scrape configuration adds.
"""

from __future__ import annotations

from dataclasses import dataclass
from string import Template
from typing import Any

import yaml

BY = "namespace, job"


@dataclass(frozen=True)
class Param:
    """A tunable: `$name` in a rule's text, a value `prometheusRule.<name>` in the chart."""

    name: str
    default: str | float
    doc: str
    kind: str = "number"  # number | duration | text


def _d(name: str, default: str, doc: str) -> Param:
    return Param(name, default, doc, "duration")


PARAMS = (
    Param("runbookBaseUrl", "docs/operating.md", "Where docs/operating.md is served (e.g. your repository's or "
                                                  "wiki's URL of it): each alert's runbook_url is this plus "
                                                  "`#runbook-<alert>`.", "text"),
    _d("noReadyWorkerFor", "1m", "How long no worker may be ready before NamesrvNoReadyWorker fires."),
    _d("workerNotReadyFor", "5m", "How long one worker may be not ready (or not scraped) before "
                                     "NamesrvWorkerNotReady fires."),
    _d("redisErrorsWindow", "2m", "Window over which Redis failures are counted for NamesrvRedisUnavailable."),
    Param("redisErrorsPerSecond", 0.1, "Failed Redis calls per second (all workers) that make Redis unavailable: "
                                       "a worker with nothing to do still fails about 0.3 calls/s while Redis is "
                                       "down (scans, gauges, scrapes); a lone blip stays below."),
    _d("redisUnavailableFor", "1m", "How long Redis calls must fail before NamesrvRedisUnavailable fires."),
    Param("redisDeadlinesPerSecond", 0.01, "Redis calls per second (all workers) cut off by their deadline before "
                                           "NamesrvRedisSlow fires."),
    _d("redisSlowFor", "5m", "How long deadline hits must last before NamesrvRedisSlow fires."),
    _d("replicationUnconfirmedFor", "1m", "How long writes may go unconfirmed by replicas (WAIT) before "
                                             "NamesrvReplicationUnconfirmed fires."),
    Param("brokersLostMin", 3, "Brokers expired (or dropped with their connection) in 10 minutes below which "
                               "no loss alert fires, however quiet the day was."),
    Param("brokersLostFactor", 3, "How many times the day's usual 10-minute loss counts as faster than usual."),
    _d("brokersLostFor", "5m", "How long the loss must stay fast before NamesrvBrokersExpiring or "
                                  "NamesrvBrokersDropped fires."),
    Param("registrationsRefusedPerSecond", 0.01, "Registrations refused for their credentials per second (all "
                                                 "workers): one broker with a bad token retrying every 30 s "
                                                 "makes 0.033."),
    _d("registrationsRefusedFor", "5m", "How long refusals must last before NamesrvRegistrationsRefused fires."),
    Param("eventLoopLagSeconds", 0.1, "p99 of a worker's event-loop lag (a 50 ms timer's delay) over 5 minutes "
                                      "above which NamesrvEventLoopLag fires."),
    _d("eventLoopLagFor", "10m", "How long the lag must last before NamesrvEventLoopLag fires."),
    Param("routeCacheHitRatio", 0.5, "A worker's route-cache hit ratio over 5 minutes below which "
                                     "NamesrvRouteCacheHitRatioLow fires."),
    Param("routeCacheMinLookups", 1, "Route reads per second a worker must serve for its hit ratio to count."),
    _d("routeCacheFor", "15m", "How long the ratio must stay low before NamesrvRouteCacheHitRatioLow fires."),
    Param("watchDropsPerSecond", 0.01, "Route streams dropped per second (all workers; their clients did not read) "
                                       "above which NamesrvWatchStreamsDropped fires."),
    _d("watchDropsFor", "10m", "How long drops must last before NamesrvWatchStreamsDropped fires."),
)
DEFAULTS = {p.name: p.default for p in PARAMS}
# Which scrape targets are the workers, for `up` (a worker that does not answer exports nothing else). The chart
# knows its Service (the job label the ServiceMonitor gives); a plain Prometheus's job name is the operator's.
UP_SELECTOR = 'job=~".*namesrv.*"'
HELM_UP_SELECTOR = 'job="{{ include "rmq-namesrv.fullname" . }}", namespace="{{ .Release.Namespace }}"'
ERRORS = '{__name__=~"namesrv_(http|remoting)_errors_total"'

RECORDING = (
    ("namesrv:ready_workers:sum", f"sum by ({BY}) (namesrv_ready)"),
    ("namesrv:http_requests:rate5m",
     f"sum by ({BY}, route, status) (rate(namesrv_http_requests_total[5m]))"),
    ("namesrv:remoting_requests:rate5m",
     f"sum by ({BY}, request, result) (rate(namesrv_remoting_requests_total[5m]))"),
    ("namesrv:error_replies:rate5m", f"sum by ({BY}, code) (rate({ERRORS}}}[5m]))"),
    ("namesrv:http_request_seconds:p99_5m",
     f"histogram_quantile(0.99, sum by ({BY}, route, le) (rate(namesrv_http_request_seconds_bucket[5m])))"),
    ("namesrv:redis_errors:rate5m", f"sum by ({BY}, kind) (rate(namesrv_redis_errors_total[5m]))"),
    ("namesrv:broker_expirations:increase10m",
     f"sum by ({BY}) (increase(namesrv_broker_expirations_total[10m]))"),
    ("namesrv:broker_connection_drops:increase10m",
     f"sum by ({BY}) (increase(namesrv_broker_connection_drops_total[10m]))"),
    ("namesrv:registrations_refused:rate5m",
     f"sum by ({BY}) (\n"
     '  rate(namesrv_http_requests_total{route="/v1/brokers/register", status=~"401|403"}[5m])\n'
     '  or rate(namesrv_remoting_requests_total{request="REGISTER_BROKER", result="16"}[5m])\n)'),
    ("namesrv:event_loop_lag_seconds:p99_5m",
     f"histogram_quantile(0.99, sum by ({BY}, instance, le) (rate(namesrv_event_loop_lag_seconds_bucket[5m])))"),
    ("namesrv:route_cache_lookups:rate5m",  # hits and misses are counts since start (gauges that only grow)
     f"sum by ({BY}, instance) (rate(namesrv_route_cache_hits[5m]) + rate(namesrv_route_cache_misses[5m]))"),
    ("namesrv:route_cache_hit_ratio:rate5m",
     f"sum by ({BY}, instance) (rate(namesrv_route_cache_hits[5m]))\n"
     "/ namesrv:route_cache_lookups:rate5m"),
    ("namesrv:watch_dropped:rate5m", f"sum by ({BY}) (rate(namesrv_watch_dropped_total[5m]))"),
)


@dataclass(frozen=True)
class Alert:
    name: str
    expr: str  # `$param` for tunables, `$up` for the selector of the workers' scrape targets
    for_: str  # a duration param's `$name`
    severity: str
    summary: str
    description: str  # Prometheus template text ({{ $labels.x }}, {{ $value }})
    anchor: str  # the runbook section in docs/operating.md


BROKERS_LOST = ("{rule} > $brokersLostMin\nand\n{rule} > $brokersLostFactor * avg_over_time({rule}[1d])")

ALERTS = (
    Alert("NamesrvNoReadyWorker",
          f"sum by ({BY}) (namesrv_ready) == 0\nor\nsum by ({BY}) (up{{$up}}) == 0",
          "$noReadyWorkerFor", "critical", "No NameServer worker is ready",
          "No worker of {{ $labels.job }} in {{ $labels.namespace }} is ready (Redis unreachable, scripts not "
          "loaded, a door not listening) or answers a scrape: brokers cannot register and clients get no routes.",
          "runbook-namesrvnoreadyworker"),
    Alert("NamesrvWorkerNotReady", "namesrv_ready == 0\nor\nup{$up} == 0", "$workerNotReadyFor", "warning",
          "A NameServer worker is not ready",
          "Worker {{ $labels.instance }} has not been ready (or not answered a scrape) for a while.",
          "runbook-namesrvworkernotready"),
    Alert("NamesrvRedisUnavailable",
          f'sum by ({BY}) (rate(namesrv_redis_errors_total{{kind!="deadline"}}[$redisErrorsWindow]))\n'
          "> $redisErrorsPerSecond",
          "$redisUnavailableFor", "critical", "Redis is unreachable from the NameServer",
          "Workers of {{ $labels.job }} fail {{ $value | humanize }} Redis calls/s (connection lost, loading, "
          "read-only, resharding): requests get 503 STORE_UNAVAILABLE and /readyz fails.",
          "runbook-namesrvredisunavailable"),
    Alert("NamesrvRedisSlow",
          f'sum by ({BY}) (rate(namesrv_redis_errors_total{{kind="deadline"}}[5m])) > $redisDeadlinesPerSecond',
          "$redisSlowFor", "warning", "Redis answers the NameServer too slowly",
          "{{ $value | humanize }} Redis calls/s of {{ $labels.job }} are cut off by their deadline: those "
          "requests got 503 STORE_UNAVAILABLE.",
          "runbook-namesrvredisslow"),
    Alert("NamesrvReplicationUnconfirmed",
          f'sum by ({BY}) (increase({ERRORS}, code="REPLICATION_UNCONFIRMED"}}[5m])) > 0',
          "$replicationUnconfirmedFor", "warning", "Writes are not confirmed by Redis replicas",
          "{{ $value | humanize }} writes in 5 minutes were applied on the Redis primary but not confirmed by "
          "the replicas NAMESRV_REDIS_WAIT_REPLICAS asks for; they were answered REPLICATION_UNCONFIRMED.",
          "runbook-namesrvreplicationunconfirmed"),
    Alert("NamesrvBrokersExpiring", BROKERS_LOST.format(rule="namesrv:broker_expirations:increase10m"),
          "$brokersLostFor", "warning", "Brokers expire faster than usual",
          "{{ $value | humanize }} brokers expired in 10 minutes (no heartbeat within their timeout), more "
          "than usual for {{ $labels.job }}.",
          "runbook-namesrvbrokersexpiring"),
    Alert("NamesrvBrokersDropped", BROKERS_LOST.format(rule="namesrv:broker_connection_drops:increase10m"),
          "$brokersLostFor", "warning", "Brokers are dropped with their connections faster than usual",
          "{{ $value | humanize }} brokers were removed in 10 minutes because the native connection they "
          "registered on closed, more than usual for {{ $labels.job }}.",
          "runbook-namesrvbrokersdropped"),
    Alert("NamesrvRegistrationsRefused",
          "namesrv:registrations_refused:rate5m > $registrationsRefusedPerSecond",
          "$registrationsRefusedFor", "warning", "Broker registrations are refused for their credentials",
          "{{ $value | humanize }} registrations/s are refused (HTTP 401/403, remoting NO_PERMISSION): a broker "
          "with a wrong or revoked token, or a credential bound to another cluster.",
          "runbook-namesrvregistrationsrefused"),
    Alert("NamesrvEventLoopLag", "namesrv:event_loop_lag_seconds:p99_5m > $eventLoopLagSeconds",
          "$eventLoopLagFor", "warning", "A NameServer worker's event loop stalls",
          "The event loop of {{ $labels.instance }} runs timers {{ $value | humanizeDuration }} late (p99): "
          "every request on that worker waits as long.",
          "runbook-namesrveventlooplag"),
    Alert("NamesrvRouteCacheHitRatioLow",
          "namesrv:route_cache_hit_ratio:rate5m < $routeCacheHitRatio\n"
          "and\nnamesrv:route_cache_lookups:rate5m > $routeCacheMinLookups",
          "$routeCacheFor", "warning", "A worker's route cache hit ratio collapsed",
          "Only {{ $value | humanizePercentage }} of route reads on {{ $labels.instance }} are answered from "
          "its cache: they go to Redis.",
          "runbook-namesrvroutecachehitratiolow"),
    Alert("NamesrvWatchStreamsDropped", "namesrv:watch_dropped:rate5m > $watchDropsPerSecond", "$watchDropsFor",
          "warning", "Route streams are dropped",
          "{{ $value | humanize }} route streams/s of {{ $labels.job }} are closed because their clients do not "
          "read what is sent.",
          "runbook-namesrvwatchstreamsdropped"),
)


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, s: str) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", s, style="|" if "\n" in s else None)


_Dumper.add_representer(str, _str)


def groups(values: dict[str, Any], up: str) -> dict[str, Any]:
    """The rule groups with `values` for the params and `up` as the workers' selector."""
    def fill(text: str) -> str:
        return Template(text).substitute({**values, "up": up})

    alerts = [{"alert": a.name, "expr": fill(a.expr), "for": fill(a.for_),
               "labels": {"severity": a.severity},
               "annotations": {"summary": a.summary, "description": a.description,
                               "runbook_url": f"{values['runbookBaseUrl']}#{a.anchor}"}}
              for a in ALERTS]
    # One group: its rules run in order, so an alert reads the recording rules of the same evaluation (groups
    # run independently, and an alert in another group could read them one evaluation late).
    return {"groups": [{"name": "rmq-namesrv", "rules": [{"record": n, "expr": e} for n, e in RECORDING] + alerts}]}


HEADER = "# Generated by `python -m service.monitoring` from service/monitoring/rules.py: edit that, not this.\n"


def plain(overrides: dict[str, Any] | None = None, up: str = UP_SELECTOR) -> str:
    """The rules file for any Prometheus (`rule_files:`), at the defaults unless overridden."""
    unknown = set(overrides or {}) - DEFAULTS.keys()
    if unknown:
        raise KeyError(f"no such rule parameter: {sorted(unknown)}")
    body = yaml.dump(groups({**DEFAULTS, **(overrides or {})}, up), Dumper=_Dumper, sort_keys=False, width=120)
    return HEADER + body


def helm_template() -> str:
    """The chart's PrometheusRule: the same groups, each param a value, Prometheus's own {{ }} escaped."""
    marks = {p.name: f"@@{p.name}@@" for p in PARAMS}
    body = yaml.dump(groups(marks, "@@up@@")["groups"], Dumper=_Dumper, sort_keys=False, width=120)
    body = body.replace("{{", "@@lb@@").replace("}}", "@@rb@@")
    body = body.replace("@@lb@@", '{{ "{{" }}').replace("@@rb@@", '{{ "}}" }}').replace("@@up@@", HELM_UP_SELECTOR)
    for name, mark in marks.items():
        body = body.replace(mark, f"{{{{ .Values.prometheusRule.{name} }}}}")
    indented = "".join(f"    {line}\n" if line else "\n" for line in body.splitlines())
    return (HEADER.replace("# ", "{{- /* ", 1).rstrip("\n") + " */}}\n"
            "{{- if .Values.prometheusRule.enabled }}\n"
            "apiVersion: monitoring.coreos.com/v1\n"
            "kind: PrometheusRule\n"
            "metadata:\n"
            '  name: {{ include "rmq-namesrv.fullname" . }}\n'
            "  namespace: {{ .Release.Namespace }}\n"
            "  labels:\n"
            '    {{- include "rmq-namesrv.labels" . | nindent 4 }}\n'
            "    {{- with .Values.prometheusRule.labels }}\n"
            "    {{- toYaml . | nindent 4 }}\n"
            "    {{- end }}\n"
            "spec:\n"
            "  groups:\n" + indented + "{{- end }}\n")
