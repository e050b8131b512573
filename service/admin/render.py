"""Tables for people (rich): aligned columns, ages as "12 s", permissions as "RW", late heartbeats coloured on a
terminal and plain text when piped. Each function takes the API's JSON and returns a renderable; nothing here
talks to a server."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any, TextIO

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from service import display


def make_console(file: TextIO | None = None) -> Console:
    """Colours and the terminal's width on a terminal; plain text and no wrapping when piped. Markup and emoji
    codes are off: a name or a KV value holding `[red]` or `:x:` is printed as written."""
    out = file or sys.stdout
    if out.isatty():
        return Console(file=out, highlight=False, markup=False, emoji=False)
    return Console(file=out, highlight=False, markup=False, emoji=False, color_system=None,
                   width=int(os.environ.get("COLUMNS") or 0) or 400, soft_wrap=True)


def show(console: Console, renderable: RenderableType) -> None:
    """Print; when piped, without the padding rich leaves at the end of table lines (kinder to grep and awk)."""
    if console.is_terminal:
        console.print(renderable)
        return
    with console.capture() as captured:
        console.print(renderable)
    console.file.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


def table(*columns: str, title: str | None = None) -> Table:
    """A plain aligned table; columns named with a trailing '>' are right-aligned (numbers)."""
    t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold", title=title,
              title_justify="left", title_style="bold")
    for c in columns:
        right = c.endswith(">")
        t.add_column(c.rstrip(">"), justify="right" if right else "left", no_wrap=True)
    return t


def health(age_ms: int, timeout_ms: int) -> str:
    """'bad' at the heartbeat timeout (the expiry scan removes it), 'warn' from half of it, else 'ok'."""
    timeout_ms = timeout_ms or 1
    return "bad" if age_ms >= timeout_ms else "warn" if age_ms * 2 >= timeout_ms else "ok"


_STYLE = {"ok": "green", "warn": "yellow", "bad": "bold red"}


def brokers(data: dict[str, Any], title: str | None = None) -> Table:
    """GET /v1/brokers as a table: one row per live (cluster, address)."""
    t = table("CLUSTER", "BROKER", "ID>", "ROLE", "ADDRESS", "LAST HEARTBEAT>", "TIMEOUT>", "DATA VERSION", "TOPICS>",
              title=title)
    for b in data["brokers"]:
        age = b.get("ageMillis", max(0, data["now"] - b["lastHeartbeat"]))
        t.add_row(b["cluster"], b["brokerName"], str(b["brokerId"]), display.role(b["brokerId"]), b["brokerAddr"],
                  Text(display.age(age), style=_STYLE[health(age, b["heartbeatTimeoutMillis"])]),
                  display.age(b["heartbeatTimeoutMillis"]), display.data_version(b.get("dataVersion")),
                  str(b["topicCount"]))
    return t


def cluster_rows(info: dict[str, Any], live: dict[str, Any] | None) -> list[dict[str, Any]]:
    """One row per cluster from cluster-info and (when the door has it) the live-broker table."""
    rows = []
    groups_of = info.get("clusterAddrTable", {})
    table_ = info.get("brokerAddrTable", {})
    for cluster in sorted(groups_of):
        groups = sorted(groups_of[cluster])
        addrs = [(g, int(i), a) for g in groups for i, a in table_.get(g, {}).get("brokerAddrs", {}).items()]
        row: dict[str, Any] = {"cluster": cluster, "brokerNames": groups, "addresses": len(addrs),
                               "masters": sum(1 for _, i, _ in addrs if i == 0)}
        if live is not None:
            members = [b for b in live["brokers"] if b["cluster"] == cluster]
            ages = [b.get("ageMillis", live["now"] - b["lastHeartbeat"]) for b in members]
            row["live"] = len(members)
            row["oldestHeartbeatMillis"] = max(ages) if ages else None
            row["late"] = sum(1 for b, a in zip(members, ages, strict=True)
                              if health(a, b["heartbeatTimeoutMillis"]) != "ok")
        rows.append(row)
    return rows


def clusters(rows: list[dict[str, Any]]) -> Table:
    has_live = any("live" in r for r in rows)
    cols = ["CLUSTER", "BROKER GROUPS>", "MASTERS>", "ADDRESSES>"]
    if has_live:
        cols += ["LIVE>", "OLDEST HEARTBEAT>"]
    t = table(*cols, "BROKERS")
    for r in rows:
        cells: list[RenderableType] = [r["cluster"], str(len(r["brokerNames"])), str(r["masters"]), str(r["addresses"])]
        if has_live:
            oldest = r.get("oldestHeartbeatMillis")
            style = "yellow" if r.get("late") else ""
            cells += [str(r.get("live", "-")), Text(display.age(oldest), style=style)]
        cells.append(", ".join(r["brokerNames"]))
        t.add_row(*cells)
    return t


def topics(names: Iterable[str], own: dict[str, str] | None = None) -> Table:
    """Topic names with their kind: `own` names the topics that are a cluster's or a broker's own name (RocketMQ's
    system topic list is made of them), the rest are told by their name (retry, dlq, system, normal)."""
    own = own or {}
    t = table("TOPIC", "KIND")
    for name in names:
        t.add_row(name, own.get(name) or display.topic_kind(name))
    return t


def route(topic: str, data: dict[str, Any]) -> Group:
    """A TopicRouteData: queues per broker (with its addresses), then order config and filter servers."""
    queues = {q["brokerName"]: q for q in data.get("queueDatas", [])}
    t = table("BROKER", "CLUSTER", "ADDRESSES", "WRITE>", "READ>", "PERM", "SYSFLAG>", title=f"Route of {topic}")
    for b in sorted(data.get("brokerDatas", []), key=lambda b: b["brokerName"]):
        q = queues.get(b["brokerName"], {})
        addrs = ", ".join(f"{a} ({display.role(int(i))})" for i, a in sorted(b.get("brokerAddrs", {}).items(),
                                                                         key=lambda kv: int(kv[0])))
        t.add_row(b["brokerName"], b.get("cluster", ""), addrs or "-", str(q.get("writeQueueNums", "-")),
                  str(q.get("readQueueNums", "-")), display.perm(q.get("perm")), str(q.get("topicSysFlag", "-")))
    parts: list[RenderableType] = [t]
    if data.get("orderTopicConf"):
        parts.append(Text(f"orderTopicConf: {data['orderTopicConf']}"))
    for addr, servers in sorted((data.get("filterServerTable") or {}).items()):
        parts.append(Text(f"filter servers of {addr}: {', '.join(servers)}"))
    return Group(*parts)


def kv(namespace: str, data: dict[str, str]) -> Table:
    t = table("KEY", "VALUE", title=f"KV {namespace}")
    for k, v in sorted(data.items()):
        t.add_row(k, v)
    return t


def namespaces(names: list[str]) -> Table:
    t = table("NAMESPACE")
    for n in names:
        t.add_row(n)
    return t


def config(data: dict[str, Any]) -> Table:
    runtime = set(data.get("runtime") or ())
    t = table("SETTING", "VALUE", "CHANGE AT RUN TIME")
    for name, value in sorted(data["config"].items()):
        shown = str(value).lower() if isinstance(value, bool) else str(value)
        t.add_row(name, shown, "yes" if name in runtime else "")
    return t


def skew(summary: dict[str, Any], top: int) -> Group:
    """The stored skew summary: when and over what, totals, clusters, the `top` most skewed topics."""
    w = summary.get("window") or {}
    totals = summary.get("totals") or {}
    flags = ", ".join(f"{k} {v}" for k, v in sorted((totals.get("flags") or {}).items())) or "none"
    head = Text.assemble(
        ("Skew report ", "bold"), f"generated {summary.get('generatedAt', '-')} from {w.get('snapshots', '-')} "
        f"snapshot(s), {display.when(w.get('firstTakenAt'))} → {display.when(w.get('latestTakenAt'))}\n",
        f"{totals.get('topics', '-')} topics, {totals.get('brokers', '-')} brokers, {totals.get('clusters', '-')} "
        f"clusters; worsening {totals.get('worsening', '-')}; flags: {flags}")
    c = table("CLUSTER", "BROKERS>", "TOPICS>", "WRITE QUEUES>", "MAX SHARE>", "MAX/MEAN>", "CV>", "GINI>",
              title="Clusters")
    for r in summary.get("clusters") or []:
        c.add_row(r.get("cluster", ""), str(r.get("brokers", "")), str(r.get("topics", "")),
                  str(r.get("writeQueues", "")), display.share(r.get("maxShare")),
                  display.number(r.get("maxMeanRatio")), display.number(r.get("cv")), display.number(r.get("gini")))
    listed = (summary.get("topics") or [])[:top]
    t = table("CLUSTER", "TOPIC", "BROKERS>", "WRITE QUEUES>", "MAX SHARE>", "GINI>", "FLAGS",
              title=f"Most skewed topics (top {len(listed)})")
    for r in listed:
        share = display.share(r.get("maxShare"))
        t.add_row(r.get("cluster", ""), r.get("topic", ""), str(r.get("brokers", "")), str(r.get("writeQueues", "")),
                  Text(share, style="red" if r.get("flags") else ""), display.number(r.get("gini")),
                  ", ".join(r.get("flags") or []))
    parts: list[RenderableType] = [head, c, t]
    worsening = (summary.get("worsening") or [])[:top]
    if worsening:
        wt = table("CLUSTER", "TOPIC", "FIRST MAX SHARE>", "NOW>", "CHANGE>", title="Worsening in the window")
        for r in worsening:
            wt.add_row(r.get("cluster", ""), r.get("topic", ""), display.share(r.get("firstMaxShare")),
                       display.share(r.get("maxShare")), "+" + display.share(r.get("delta")))
        parts.append(wt)
    return Group(*parts)


def skew_history(runs: list[dict[str, Any]]) -> RenderableType:
    """One line per kept skew run, newest first: when, over what, how many topics flagged, each cluster's Gini."""
    if not runs:
        return Text("no skew runs kept yet: the skew job stores one per run (docs/skew-report.md)")
    t = table("GENERATED", "SNAPSHOT TAKEN", "SNAPSHOTS>", "ROWS>", "TOPICS>", "BROKERS>", "FLAGGED TOPICS",
              "WORSENING>", "GINI BY CLUSTER", title=f"Skew runs (newest first, {len(runs)})")
    for r in runs:
        totals = r.get("totals") or {}
        flags = ", ".join(f"{k} {v}" for k, v in sorted((totals.get("flags") or {}).items()) if v) or "none"
        gini = ", ".join(f"{c.get('cluster', '')} {display.number(c.get('gini'))}" for c in r.get("clusters") or [])
        t.add_row(str(r.get("generatedAt", "-")), display.when(r.get("latestTakenAt")), str(r.get("snapshots", "")),
                  str(r.get("rows", "")), str(totals.get("topics", "")), str(totals.get("brokers", "")), flags,
                  str(totals.get("worsening", "")), gini)
    return t
