"""Tables for people (rich): aligned columns, ages as "12 s", permissions as "RW", late heartbeats coloured on a
terminal and plain text when piped. Each function takes the API's JSON and returns a renderable; nothing here
talks to a server."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TextIO

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text

from service import display

PIPED_WIDTH = 1 << 20  # piped: no line is cut or wrapped, whatever COLUMNS says


def make_console(file: TextIO | None = None) -> Console:
    """Colours and the terminal's width on a terminal; plain text and every value in full when piped. Markup and
    emoji codes are off: a name or a KV value holding `[red]` or `:x:` is printed as written."""
    out = file or sys.stdout
    if out.isatty():
        return Console(file=out, highlight=False, markup=False, emoji=False)
    return Console(file=out, highlight=False, markup=False, emoji=False, color_system=None, width=PIPED_WIDTH,
                   soft_wrap=True)


def show(console: Console, renderable: RenderableType) -> None:
    """Print; a line wider than the terminal is left to the terminal to wrap, never cut. Piped, without the padding
    rich leaves at the end of table lines (kinder to grep and awk)."""
    if console.is_terminal:
        console.print(renderable, crop=False)
        return
    with console.capture() as captured:
        console.print(renderable)
    console.file.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


GAP, TIGHT_GAP, TIGHTEST_GAP = 3, 2, 1  # cells between two columns: their padding and the (blank) rule


@dataclass
class Column:
    header: str
    right: bool = False
    drop: int = 0  # 0: always shown; else the order in which it goes on a narrow terminal (1 first)
    wrap: bool = False  # a list or a value: may wrap onto more lines inside its column


@dataclass
class Layout:
    shown: list[int]  # the columns shown, by index
    widths: list[int]  # theirs
    headers: list[str]  # theirs, a long one split over lines where its values are narrower
    gap: int
    folded: set[int] = field(default_factory=set)  # columns narrower than a value: it goes on over more lines

    @property
    def width(self) -> int:
        return sum(self.widths) + self.gap * (len(self.widths) - 1)


class FittedTable:
    """A table laid out for the width it is printed in, as kubectl's are read: names, ids, roles and addresses are
    never cut. On a narrow terminal the least useful columns go first (each table says which, in order), then
    lists and values wrap inside their columns, then the columns move closer and a header wider than its values
    takes two lines; a line still wider than the terminal is the terminal's to wrap. Piped, the width is
    unlimited: every column, every value in full.

    `fit`: for a table redrawn in place (`watch`), which the terminal cannot wrap (what passes the width is cut):
    then the columns close up to one cell, and the widest go on over more lines, every character still shown."""

    def __init__(self, columns: list[Column], title: str | None = None, fit: bool = False) -> None:
        self.columns = columns
        self.title = title
        self.fit = fit
        self.rows: list[list[RenderableType]] = []

    def add_row(self, *cells: RenderableType) -> None:
        self.rows.append(list(cells))

    def layout(self, width: int) -> Layout:
        cols = self.columns
        values = [max([_len(row[i]) for row in self.rows], default=0) for i in range(len(cols))]
        natural = [max(cell_len(c.header), v) for c, v in zip(cols, values, strict=True)]
        shown = list(range(len(cols)))
        out = Layout(shown, natural, [c.header for c in cols], GAP)

        def fits() -> bool:
            out.widths = [widths[i] for i in shown]
            out.headers = [headers[i] for i in shown]
            return out.width <= width

        widths, headers = list(natural), [c.header for c in cols]
        for i in sorted((i for i, c in enumerate(cols) if c.drop), key=lambda i: cols[i].drop):
            if fits():
                return out
            shown.remove(i)
        for i in sorted((i for i in shown if cols[i].wrap), key=lambda i: -natural[i]):
            if fits():
                return out
            words = [len(w) for row in self.rows for w in _plain(row[i]).split()]
            widths[i] = max(max(words, default=1), cell_len(cols[i].header), natural[i] - (out.width - width))
        if fits():
            return out
        out.gap = TIGHT_GAP
        for i in sorted(shown, key=lambda i: values[i] - natural[i]):  # the header wider than its values most
            if fits():
                return out
            words = cols[i].header.split()
            if len(words) > 1 and values[i] < natural[i]:
                widths[i] = max(values[i], *(len(w) for w in words))
                headers[i] = "\n".join(words)
        if fits() or not self.fit:
            return out
        out.gap = TIGHTEST_GAP
        while not fits():
            i = max(shown, key=lambda i: widths[i])
            if widths[i] <= 1:
                break
            widths[i] -= 1
            out.folded.add(i)
        return out

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lay = self.layout(options.max_width)
        padding = {GAP: (0, 1), TIGHT_GAP: (0, 1, 0, 0), TIGHTEST_GAP: (0, 0)}[lay.gap]
        t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold", title=self.title,
                  title_justify="left", title_style="bold", padding=padding)
        for i, header, w in zip(lay.shown, lay.headers, lay.widths, strict=True):
            c = self.columns[i]
            t.add_column(header, justify="right" if c.right else "left", width=w,
                         no_wrap=not (c.wrap or i in lay.folded), overflow="fold")
        for row in self.rows:
            t.add_row(*(row[i] for i in lay.shown))
        yield from console.render(t, options.update(width=max(options.max_width, lay.width)))


def _plain(cell: RenderableType) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def _len(cell: RenderableType) -> int:
    return cell.cell_len if isinstance(cell, Text) else cell_len(str(cell))


def table(*columns: str, title: str | None = None, drop: tuple[str, ...] = (),
          wrap: tuple[str, ...] = (), fit: bool = False) -> FittedTable:
    """An aligned table; columns named with a trailing '>' are right-aligned (numbers). `drop` names the columns
    that may go on a narrow terminal, least useful first; `wrap` those that may wrap (lists, values). Every other
    column is shown in full, always."""
    names = [c.rstrip(">") for c in columns]
    assert set(drop) | set(wrap) <= set(names), (drop, wrap)
    return FittedTable([Column(n, c.endswith(">"), drop.index(n) + 1 if n in drop else 0, n in wrap)
                        for n, c in zip(names, columns, strict=True)], title, fit)


def health(age_ms: int, timeout_ms: int) -> str:
    """'bad' at the heartbeat timeout (the expiry scan removes it), 'warn' from half of it, else 'ok'."""
    timeout_ms = timeout_ms or 1
    return "bad" if age_ms >= timeout_ms else "warn" if age_ms * 2 >= timeout_ms else "ok"


_STYLE = {"ok": "green", "warn": "yellow", "bad": "bold red"}


def brokers(data: dict[str, Any], title: str | None = None, fit: bool = False) -> FittedTable:
    """GET /v1/brokers as a table: one row per live (cluster, address); `fit` for `watch` (FittedTable)."""
    t = table("CLUSTER", "BROKER", "ID>", "ROLE", "ADDRESS", "LAST HEARTBEAT>", "TIMEOUT>", "DATA VERSION", "TOPICS>",
              title=title, drop=("DATA VERSION", "TIMEOUT", "TOPICS"), fit=fit)
    for b in data["brokers"]:
        age = b.get("ageMillis", max(0, data["now"] - b["lastHeartbeat"]))
        t.add_row(b["cluster"], b["brokerName"], str(b["brokerId"]), display.role(b["brokerId"]), b["brokerAddr"],
                  Text(display.age(age), style=_STYLE[health(age, b["heartbeatTimeoutMillis"])]),
                  display.age(b["heartbeatTimeoutMillis"]), display.data_version(b.get("dataVersion")),
                  str(b["topicCount"]))
    return t


def controller(data: dict[str, Any]) -> FittedTable:
    """GET /v1/controller/broker-sets: one row per broker set, its master and epochs, replicas (* alive)."""
    t = table("BROKER SET", "CLUSTER", "MASTER", "MASTER EPOCH>", "SYNCSTATESET", "SYNCSTATESET EPOCH>",
              "REPLICAS (* ALIVE)", wrap=("SYNCSTATESET", "REPLICAS (* ALIVE)"))
    for g in data["brokerSets"]:
        master = "-" if g["masterBrokerId"] is None else f"{g['masterBrokerId']} {g['masterAddress'] or '?'}"
        t.add_row(g["brokerName"], g["clusterName"], master, str(g["masterEpoch"]),
                  ",".join(str(i) for i in g["syncStateSet"]) or "-", str(g["syncStateSetEpoch"]),
                  " ".join(f"{r['brokerId']}{'*' if r['alive'] else ''}" for r in g["replicas"]))
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


def clusters(rows: list[dict[str, Any]]) -> FittedTable:
    has_live = any("live" in r for r in rows)
    cols = ["CLUSTER", "BROKER GROUPS>", "MASTERS>", "ADDRESSES>"]
    if has_live:
        cols += ["LIVE>", "OLDEST HEARTBEAT>"]
    t = table(*cols, "BROKERS", drop=("ADDRESSES", "MASTERS", "BROKER GROUPS"), wrap=("BROKERS",))
    for r in rows:
        cells: list[RenderableType] = [r["cluster"], str(len(r["brokerNames"])), str(r["masters"]), str(r["addresses"])]
        if has_live:
            oldest = r.get("oldestHeartbeatMillis")
            style = "yellow" if r.get("late") else ""
            cells += [str(r.get("live", "-")), Text(display.age(oldest), style=style)]
        cells.append(", ".join(r["brokerNames"]))
        t.add_row(*cells)
    return t


def topics(names: Iterable[str], own: dict[str, str] | None = None) -> FittedTable:
    """Topic names with their kind: `own` names the topics that are a cluster's or a broker's own name (RocketMQ's
    system topic list is made of them), the rest are told by their name (retry, dlq, system, normal)."""
    own = own or {}
    t = table("TOPIC", "KIND", drop=("KIND",))
    for name in names:
        t.add_row(name, own.get(name) or display.topic_kind(name))
    return t


def route(topic: str, data: dict[str, Any]) -> Group:
    """A TopicRouteData: queues per broker (with its addresses), then order config and filter servers."""
    queues = {q["brokerName"]: q for q in data.get("queueDatas", [])}
    t = table("BROKER", "CLUSTER", "ADDRESSES", "WRITE>", "READ>", "PERM", "SYSFLAG>", title=f"Route of {topic}",
              drop=("SYSFLAG",), wrap=("ADDRESSES",))
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


def kv(namespace: str, data: dict[str, str]) -> FittedTable:
    t = table("KEY", "VALUE", title=f"KV {namespace}", wrap=("VALUE",))
    for k, v in sorted(data.items()):
        t.add_row(k, v)
    return t


def namespaces(names: list[str]) -> FittedTable:
    t = table("NAMESPACE")
    for n in names:
        t.add_row(n)
    return t


def config(data: dict[str, Any]) -> FittedTable:
    runtime = set(data.get("runtime") or ())
    t = table("SETTING", "VALUE", "CHANGE AT RUN TIME", drop=("CHANGE AT RUN TIME",), wrap=("VALUE",))
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
        ("Skew report ", "bold"),
        f"generated {display.when_iso(summary.get('generatedAt'))} from {w.get('snapshots', '-')} "
        f"snapshot(s), {display.when(w.get('firstTakenAt'))} → {display.when(w.get('latestTakenAt'))}\n",
        f"{totals.get('topics', '-')} topics, {totals.get('brokers', '-')} brokers, {totals.get('clusters', '-')} "
        f"clusters; worsening {totals.get('worsening', '-')}; flags: {flags}")
    c = table("CLUSTER", "BROKERS>", "TOPICS>", "WRITE QUEUES>", "MAX SHARE>", "MAX/MEAN>", "CV>", "GINI>",
              title="Clusters", drop=("MAX/MEAN", "CV", "WRITE QUEUES", "BROKERS", "TOPICS"))
    for r in summary.get("clusters") or []:
        c.add_row(r.get("cluster", ""), str(r.get("brokers", "")), str(r.get("topics", "")),
                  str(r.get("writeQueues", "")), display.share(r.get("maxShare")),
                  display.number(r.get("maxMeanRatio")), display.number(r.get("cv")), display.number(r.get("gini")))
    listed = (summary.get("topics") or [])[:top]
    t = table("CLUSTER", "TOPIC", "BROKERS>", "WRITE QUEUES>", "MAX SHARE>", "GINI>", "FLAGS",
              title=f"Most skewed topics (top {len(listed)})", drop=("WRITE QUEUES", "BROKERS", "GINI"),
              wrap=("FLAGS",))
    for r in listed:
        share = display.share(r.get("maxShare"))
        t.add_row(r.get("cluster", ""), r.get("topic", ""), str(r.get("brokers", "")), str(r.get("writeQueues", "")),
                  Text(share, style="red" if r.get("flags") else ""), display.number(r.get("gini")),
                  ", ".join(r.get("flags") or []))
    parts: list[RenderableType] = [head, c, t]
    worsening = (summary.get("worsening") or [])[:top]
    if worsening:
        wt = table("CLUSTER", "TOPIC", "FIRST MAX SHARE>", "NOW>", "CHANGE>", title="Worsening in the window",
                   drop=("FIRST MAX SHARE",))
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
              "WORSENING>", "GINI BY CLUSTER", title=f"Skew runs (newest first, {len(runs)})",
              drop=("ROWS", "SNAPSHOTS", "TOPICS", "SNAPSHOT TAKEN", "BROKERS", "WORSENING"),
              wrap=("FLAGGED TOPICS", "GINI BY CLUSTER"))
    for r in runs:
        totals = r.get("totals") or {}
        flags = ", ".join(f"{k} {v}" for k, v in sorted((totals.get("flags") or {}).items()) if v) or "none"
        gini = ", ".join(f"{c.get('cluster', '')} {display.number(c.get('gini'))}" for c in r.get("clusters") or [])
        t.add_row(display.when_iso(r.get("generatedAt")), display.when(r.get("latestTakenAt")),
                  str(r.get("snapshots", "")), str(r.get("rows", "")), str(totals.get("topics", "")),
                  str(totals.get("brokers", "")), flags, str(totals.get("worsening", "")), gini)
    return t


def _mb(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1024:.1f} GB" if value >= 1024 else f"{value:.1f} MB"


def capacity(data: dict[str, Any]) -> Group:
    """GET /v1/capacity: the registry's counts, its Redis, and where it stands against the sizing model."""
    reg = table("REGISTRY", "VALUE>", title="The registry")
    for label, key in (("live brokers (addresses)", "brokers"), ("broker names", "brokerNames"),
                       ("clusters", "clusters"), ("topics", "topics"), ("(topic, broker) entries", "entries"),
                       ("topics per broker", "topicsPerBroker"), ("brokers per topic", "brokersPerTopic"),
                       ("workers announced", "workers")):
        reg.add_row(label, f"{data.get(key, 0):,}")
    r = data.get("redis") or {}
    red = table("REDIS", "VALUE>", title="Its Redis (INFO)")
    red.add_row("used memory", _mb(r.get("usedMemoryMb")))
    red.add_row("resident (RSS)", _mb(r.get("rssMb")))
    red.add_row("maxmemory", _mb(r.get("maxmemoryMb")) if r.get("maxmemoryMb") else "not set")
    cpu, up = r.get("cpuSecondsSinceStart"), r.get("uptimeSeconds")
    red.add_row("CPU since start", f"{cpu:,.0f} s ({cpu / up:.1%} of a core)" if cpu is not None and up else "-")
    red.add_row("version", str(r.get("version") or "-"))
    parts: list[RenderableType] = [reg, red]
    model, room = data.get("model"), data.get("headroom")
    if model is None or room is None:
        parts.append(Text("no live broker: nothing to weigh against the sizing model"))
        return Group(*parts)
    m = table("RESOURCE", "THIS FLEET (MODEL)", "USE OF THE LIMIT>",
              title="Against the sizing model (README, Sizing), a fleet of this shape at its restart peak")
    use = model["utilisation"]
    m.add_row("Redis CPU", f"{model['redisCoresPeak']:.3g} cores (steady {model['redisCores']:.3g})",
              f"{use.get('Redis CPU', 0):.0%}")
    m.add_row("Redis memory", f"{_mb(model['redisMb'])} (used now: {_mb(r.get('usedMemoryMb'))})",
              f"{use.get('Redis memory', 0):.0%}")
    events, cache = "a worker's event application", "the route cache's bounds"
    m.add_row(events, f"{model['eventCoresPerWorker']:.3g} cores", f"{use.get(events, 0):.0%}")
    m.add_row(cache, f"{_mb(model['workerMb'])} per worker in all", f"{use.get(cache, 0):.0%}")
    m.add_row("workers", f"{model['workersNeeded']} needed ({model['workerCoresPeak']:.3g} cores at the peak), "
                         f"{data.get('workers', 0)} announced", "")
    m.add_row("registrations in", f"{model['registrationMbPerS']:.3g} MB/s", "")
    parts.append(m)
    more = room["moreBrokers"]
    line = (f"Headroom: {more:,} more brokers of this shape ({room['maxBrokers']:,} in all) before {room['limit']}."
            if more else f"No headroom: {room['limit']} is at or past its limit ({room['maxBrokers']:,} brokers).")
    if room.get("workersShort"):
        line += f" Add {room['workersShort']} worker(s) for the model's CPU."
    parts.append(Text(line))
    return Group(*parts)
