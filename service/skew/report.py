"""Skew report rendering: the JSON summary and a self-contained HTML page with PNG charts (matplotlib Agg,
embedded as base64). Works on small pandas tables the job has already aggregated; no Spark here.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

TOPIC_FIELDS = (
    "topic",
    "cluster",
    "brokers",
    "writeQueues",
    "readQueues",
    "maxShare",
    "maxMeanRatio",
    "cv",
    "gini",
    "flags",
)
BROKER_FIELDS = ("cluster", "brokerName", "writeQueues", "topics", "load", "share")
CLUSTER_FIELDS = (
    "cluster",
    "brokers",
    "topics",
    "writeQueues",
    "load",
    "maxShare",
    "maxMeanRatio",
    "cv",
    "gini",
)
WORSENING_FIELDS = (
    "topic",
    "cluster",
    "firstTakenAt",
    "firstMaxShare",
    "firstBrokers",
    "maxShare",
    "brokers",
    "delta",
)
IMBALANCE_FIELDS = (
    "takenAt",
    "cluster",
    "brokers",
    "topics",
    "writeQueues",
    "load",
    "maxShare",
    "maxMeanRatio",
    "cv",
    "gini",
)

def percent(share: float) -> str:
    """0.5 -> '50 %', 0.125 -> '12.5 %'."""
    return f"{round(share * 100, 4):g} %"


def concentrated_rule(threshold: float) -> str:
    """The CONCENTRATED rule in words; transforms.topic_metrics applies it as maxShare > threshold (strictly)."""
    return (
        f"two or more brokers host the topic and one holds more than {percent(threshold)} of its writable "
        f"write queues (maxShare > {threshold:g})"
    )


def flag_rules(threshold: float) -> dict[str, str]:
    """Every flag's rule, as the summary and the page state it."""
    return {
        "SINGLE_BROKER": "one broker hosts the topic",
        "CONCENTRATED": concentrated_rule(threshold),
        "UNWRITABLE": "no broker has a writable queue for the topic",
        "READ_WRITE_MISMATCH": "readQueueNums differs from writeQueueNums on some broker",
    }


ACTION_FIELDS = (
    "topic",
    "cluster",
    "flags",
    "action",
    "brokers",
    "writeQueues",
    "maxShare",
    "gini",
    "clusterBrokers",
    "targetBrokers",
    "queuesPerBroker",
    "queuesToMove",
    "queuesToAdd",
    "addOn",
    "removeFrom",
    "changes",
    "maxShareAfter",
    "maxMeanRatioAfter",
    "giniAfter",
    "flaggedAfter",
)
HOT_FIELDS = (
    "cluster",
    "brokerName",
    "brokerShare",
    "fairShare",
    "ratio",
    "rank",
    "topic",
    "writeQueuesOnBroker",
    "topicShare",
    "topicLoad",
    "excessLoad",
)

FLAG_COLORS = {"SINGLE_BROKER": "#c0392b", "CONCENTRATED": "#e67e22", "UNWRITABLE": "#7f8c8d"}
DEFAULT_COLOR = "#2e86c1"


def iso_ms(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _plain(v: Any, digits: int = 6) -> Any:
    """numpy/pandas scalars and arrays -> JSON-friendly Python values; NaN -> None; floats rounded."""
    if v is None:
        return None
    if isinstance(v, str):
        return v
    if hasattr(v, "tolist") and not isinstance(v, int | float):
        v = v.tolist()
    if isinstance(v, list | tuple):
        return [_plain(x, digits) for x in v]
    if isinstance(v, float):
        return None if math.isnan(v) or math.isinf(v) else round(float(v), digits)
    if v is pd.NA or v is pd.NaT:
        return None
    return v


def records(pdf: pd.DataFrame, fields: Sequence[str], limit: int | None = None) -> list[dict[str, Any]]:
    cols = [f for f in fields if f in pdf.columns]
    part = pdf if limit is None else pdf.head(limit)
    return [
        {c: _plain(v) for c, v in zip(cols, row, strict=True)} for row in part[cols].itertuples(index=False)
    ]


def rank_topics(topics: pd.DataFrame) -> pd.DataFrame:
    """Most skewed first: highest max share, then Gini, then the most write queues (the bigger problem)."""
    if topics.empty:
        return topics
    return topics.sort_values(
        ["maxShare", "gini", "writeQueues", "cluster", "topic"],
        ascending=[False, False, False, True, True],
        na_position="last",
        kind="mergesort",
    ).reset_index(drop=True)


def sort_brokers(brokers: pd.DataFrame) -> pd.DataFrame:
    if brokers.empty:
        return brokers
    return brokers.sort_values(["cluster", "brokerName"]).reset_index(drop=True)


def sort_worsening(worsening: pd.DataFrame) -> pd.DataFrame:
    """Largest rise of the max share first."""
    if worsening.empty:
        return worsening
    return worsening.sort_values(["delta", "cluster", "topic"], ascending=[False, True, True]).reset_index(
        drop=True
    )


def rank_actions(actions: pd.DataFrame, topics: pd.DataFrame) -> pd.DataFrame:
    """Actions in the order of the topic ranking (most skewed first)."""
    if actions.empty:
        return actions
    order = topics[["cluster", "topic"]].reset_index(drop=True).reset_index(names="_rank")
    return (
        actions.merge(order, on=["cluster", "topic"], how="left")
        .sort_values(["_rank", "cluster", "topic"], kind="mergesort")
        .drop(columns="_rank")
        .reset_index(drop=True)
    )


def sort_hot(hot: pd.DataFrame) -> pd.DataFrame:
    if hot.empty:
        return hot
    return hot.sort_values(["ratio", "cluster", "brokerName", "rank"], ascending=[False, True, True, True]).reset_index(
        drop=True
    )


def group_hot(hot: pd.DataFrame) -> list[dict[str, Any]]:
    """One entry per hot broker, hottest first, with the topics that make it hot."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for r in records(sort_hot(hot), HOT_FIELDS):
        entry = out.setdefault(
            (r["cluster"], r["brokerName"]),
            {k: r[k] for k in ("cluster", "brokerName", "brokerShare", "fairShare", "ratio")} | {"topics": []},
        )
        entry["topics"].append(
            {k: r[k] for k in ("topic", "writeQueuesOnBroker", "topicShare", "topicLoad", "excessLoad")}
        )
    return list(out.values())


def sample_series(imbalance: pd.DataFrame, max_points: int) -> pd.DataFrame:
    """At most max_points snapshots per cluster, evenly spaced, always keeping the latest."""
    if imbalance.empty or max_points <= 0:
        return imbalance
    stamps = sorted(imbalance["takenAt"].unique())
    if len(stamps) <= max_points:
        return imbalance
    step = (len(stamps) - 1) / (max_points - 1) if max_points > 1 else 0
    keep = {stamps[round(i * step)] for i in range(max_points)} | {stamps[-1]}
    return imbalance[imbalance["takenAt"].isin(keep)]


def flag_counts(topics: pd.DataFrame, flags: Iterable[str]) -> dict[str, int]:
    counts = dict.fromkeys(flags, 0)
    if not topics.empty:
        for fl in topics["flags"]:
            for f in _plain(fl) or []:
                counts[f] = counts.get(f, 0) + 1
    return counts


def build_summary(
    *,
    window: dict[str, Any],
    params: dict[str, Any],
    topics: pd.DataFrame,
    brokers: pd.DataFrame,
    clusters: pd.DataFrame,
    worsening: pd.DataFrame,
    imbalance: pd.DataFrame,
    flags: Iterable[str],
    actions: pd.DataFrame | None = None,
    hot: pd.DataFrame | None = None,
    max_topics: int = 1000,
    max_series_points: int = 300,
    generated_at: datetime | None = None,
) -> dict[str, Any]:
    """The summary.json document (also stored in Redis). `topics` must be ranked (rank_topics); lists of
    topics are capped at max_topics (0 = no cap) so the HTTP answer stays small — the tables hold all."""
    cap = None if max_topics <= 0 else max_topics
    generated = (generated_at or datetime.now(UTC)).isoformat(timespec="seconds").replace("+00:00", "Z")
    wors = (
        worsening.sort_values(["delta", "cluster", "topic"], ascending=[False, True, True])
        if not worsening.empty
        else worsening
    )
    actions = pd.DataFrame(columns=list(ACTION_FIELDS)) if actions is None else actions
    hot_list = group_hot(hot) if hot is not None else []
    series = sample_series(imbalance, max_series_points)
    series = series.sort_values(["cluster", "takenAt"]) if not series.empty else series
    return {
        "generatedAt": generated,
        "window": window,
        "params": params,
        "totals": {
            "topics": len(topics),
            "brokers": len(brokers),
            "clusters": len(clusters),
            "worsening": len(worsening),
            "actions": len(actions),
            "hotBrokers": len(hot_list),
            "flags": flag_counts(topics, flags),
        },
        "topics": records(topics, TOPIC_FIELDS, cap),
        "topicsTruncated": cap is not None and len(topics) > cap,
        "brokers": records(
            brokers.sort_values(["cluster", "brokerName"]) if not brokers.empty else brokers, BROKER_FIELDS
        ),
        "clusters": records(
            clusters.sort_values("cluster") if not clusters.empty else clusters, CLUSTER_FIELDS
        ),
        "worsening": records(wors, WORSENING_FIELDS, cap),
        "worseningTruncated": cap is not None and len(worsening) > cap,
        "imbalance": records(series, IMBALANCE_FIELDS),
        "actions": records(actions, ACTION_FIELDS, cap),
        "actionsTruncated": cap is not None and len(actions) > cap,
        "hotBrokers": hot_list,
    }


# --- charts


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return buf.getvalue()


def _empty(fig: Figure, text: str) -> bytes:
    ax = fig.add_subplot()
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=12, color="#555")
    return _png(fig)


def _label(cluster: str, name: str, width: int = 40) -> str:
    s = f"{cluster}/{name}"
    return s if len(s) <= width else s[: width - 1] + "…"


def chart_top_topics(topics: pd.DataFrame, threshold: float, k: int = 20) -> bytes:
    """Horizontal bars of the k most skewed topics' max share, coloured by flag."""
    top = topics[topics["maxShare"].notna()].head(k) if not topics.empty else topics
    fig = Figure(figsize=(9, max(2.5, 0.32 * len(top) + 1.2)))
    if top.empty:
        return _empty(fig, "no writable topics in the latest snapshot")
    ax = fig.add_subplot()
    top = top.iloc[::-1]
    colors = []
    for fl in top["flags"]:
        fl = _plain(fl) or []
        colors.append(next((FLAG_COLORS[f] for f in FLAG_COLORS if f in fl), DEFAULT_COLOR))
    labels = [
        f"{_label(c, t)} ({b})" for c, t, b in zip(top["cluster"], top["topic"], top["brokers"], strict=True)
    ]
    ax.barh(labels, top["maxShare"], color=colors)
    label = f"CONCENTRATED: more than {percent(threshold)}"
    ax.axvline(threshold, color="#333", linestyle="--", linewidth=1, label=label)
    ax.set_xlim(0, 1.05)
    ax.set_xlabel("max share of writable write queues on one broker  (label: cluster/topic (brokers))")
    ax.set_title("Most skewed topics")
    ax.legend(loc="lower right", fontsize=8)
    ax.tick_params(axis="y", labelsize=8)
    return _png(fig)


def chart_broker_load(brokers: pd.DataFrame, max_clusters: int = 6, max_brokers: int = 40) -> bytes:
    """Per cluster, each broker's share of the cluster's load, against the fair share 1/n."""
    fig = Figure(figsize=(9, 3))
    if brokers.empty:
        return _empty(fig, "no brokers in the latest snapshot")
    clusters = sorted(brokers["cluster"].unique())[:max_clusters]
    fig = Figure(figsize=(9, 2.8 * len(clusters)))
    for i, cluster in enumerate(clusters, start=1):
        ax = fig.add_subplot(len(clusters), 1, i)
        b = (
            brokers[brokers["cluster"] == cluster]
            .fillna({"share": 0.0})
            .sort_values(["share", "brokerName"], ascending=[False, True])
        )
        n = len(b)
        b = b.head(max_brokers)
        ax.bar(b["brokerName"], b["share"], color=DEFAULT_COLOR)
        ax.axhline(1.0 / n, color="#c0392b", linestyle="--", linewidth=1, label=f"fair share 1/{n}")
        ax.set_ylabel("share of load")
        ax.set_title(
            f"Broker load — cluster {cluster}" + (f" (top {max_brokers} of {n})" if n > max_brokers else "")
        )
        ax.tick_params(axis="x", labelrotation=60, labelsize=8)
        ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    return _png(fig)


def chart_heatmap(
    shares: pd.DataFrame, topic_order: Sequence[tuple[str, str]], max_brokers: int = 30
) -> bytes:
    """Broker x topic share matrix of the top topics (blank where the broker does not host the topic)."""
    fig = Figure(figsize=(9, 3))
    if shares.empty or not topic_order:
        return _empty(fig, "no topics to show")
    rows = [f"{c}/{t}" for c, t in topic_order]
    s = shares.assign(row=shares["cluster"] + "/" + shares["topic"])
    s = s[s["row"].isin(rows)]
    load = s.groupby("brokerName")["share"].sum().sort_values(ascending=False)
    cols = list(load.index[:max_brokers])
    m = s.pivot_table(index="row", columns="brokerName", values="share", aggfunc="max").reindex(
        index=rows, columns=cols
    )
    fig = Figure(figsize=(max(6, 0.45 * len(cols) + 4), max(3, 0.32 * len(rows) + 1.5)))
    ax = fig.add_subplot()
    im = ax.imshow(m.to_numpy(dtype=float), aspect="auto", cmap="viridis", vmin=0, vmax=1)
    ax.set_xticks(range(len(cols)), cols, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(len(rows)), [_label(*r.split("/", 1)) for r in rows], fontsize=8)
    ax.set_title("Share of each top topic's writable queues per broker")
    fig.colorbar(im, ax=ax, label="share")
    return _png(fig)


def chart_imbalance(imbalance: pd.DataFrame) -> bytes:
    """Per cluster, broker-load Gini and max/mean over the window."""
    if imbalance.empty:
        return _empty(Figure(figsize=(9, 5)), "no snapshots")
    return _gini_and(imbalance, "takenAt", "maxMeanRatio", "max / mean broker load", "snapshot time (UTC)",
                     "Cluster imbalance over time", (9, 5))


def chart_runs(series: list[dict[str, Any]]) -> bytes:
    """Per cluster, broker-load Gini and max share at each kept run (this run last)."""
    if not series:
        return _empty(Figure(figsize=(9, 4.5)), "no earlier runs kept yet")
    return _gini_and(pd.DataFrame(series), "runAt", "maxShare", "max broker share", "report run (UTC)",
                     "Clusters over the kept report runs", (9, 4.5))


def _gini_and(frame: pd.DataFrame, time_col: str, other: str, other_label: str, xlabel: str, title: str,
              size: tuple[float, float]) -> bytes:
    """Two panels sharing a time axis, one line per cluster: the Gini of broker load above, `other` below."""
    fig = Figure(figsize=size)
    ax1, ax2 = fig.subplots(2, 1, sharex=True)
    for cluster, g in frame.sort_values(time_col).groupby("cluster"):
        t = pd.to_datetime(g[time_col], unit="ms", utc=True)
        ax1.plot(t, g["gini"], marker="o", markersize=3, label=str(cluster))
        ax2.plot(t, g[other], marker="o", markersize=3, label=str(cluster))
    ax1.set_ylabel("Gini of broker load")
    ax1.set_ylim(bottom=0)
    ax2.set_ylabel(other_label)
    ax2.set_xlabel(xlabel)
    ax1.set_title(title)
    ax1.legend(loc="upper left", fontsize=8)
    ax2.tick_params(axis="x", labelrotation=30)
    fig.tight_layout()
    return _png(fig)


# --- HTML

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em;color:#222;max-width:1100px}
h1{margin-bottom:.2em} .meta{color:#555} table{border-collapse:collapse;margin:.5em 0 2em;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:right} th{background:#f4f4f4}
td.l,th.l{text-align:left} .flag{display:inline-block;padding:0 5px;margin:0 2px;border-radius:3px;color:#fff;
font-size:11px} .cards{display:flex;gap:1em;flex-wrap:wrap} .card{border:1px solid #ddd;border-radius:6px;
padding:.6em 1em} .card b{font-size:1.4em;display:block} img{max-width:100%}
"""


def _fmt(v: Any) -> str:
    v = _plain(v)
    if v is None:
        return "–"
    if isinstance(v, list):
        return html.escape(", ".join(map(str, v)))
    if isinstance(v, float):
        return f"{v:.3f}"
    return html.escape(str(v))


def _flags_html(flags: Any) -> str:
    out = []
    for f in _plain(flags) or []:
        color = FLAG_COLORS.get(f, "#8e44ad")
        out.append(f'<span class="flag" style="background:{color}">{html.escape(f)}</span>')
    return "".join(out)


def _table(rows: list[dict[str, Any]], fields: Sequence[str], left: Iterable[str] = ()) -> str:
    if not rows:
        return "<p><i>none</i></p>"
    left = set(left) | {"flags"}
    head = "".join(f'<th class="{"l" if f in left else ""}">{html.escape(f)}</th>' for f in fields)
    body = []
    for r in rows:
        cells = []
        for f in fields:
            v = r.get(f)
            text = _flags_html(v) if f == "flags" else (iso_ms(v) if f.endswith("TakenAt") and v else _fmt(v))
            cells.append(f'<td class="{"l" if f in left else ""}">{text}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _img(png: bytes, alt: str) -> str:
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


ACTION_VIEW = ("topic", "cluster", "action", "maxShare", "maxShareAfter", "targetBrokers", "queuesPerBroker",
               "queuesToMove", "queuesToAdd", "changes")


def _trend_html(trend: dict[str, Any], table_rows: int) -> str:
    prev = trend.get("previous")
    if not prev:
        return "<p><i>No earlier run kept yet: the next run compares itself with this one.</i></p>"
    return (
        f"<p>{_fmt(trend.get('runs'))} runs kept; this run against the one of "
        f"{html.escape(str(iso_ms(prev.get('runAt'))))}.</p>"
        "<h3>Topics whose max share grew</h3>"
        + _table(trend.get("topicsGrew", [])[:table_rows],
                 ("topic", "cluster", "previousMaxShare", "maxShare", "delta", "flags"), ("topic", "cluster"))
        + "<h3>Newly flagged topics</h3>"
        + _table(trend.get("newlyFlagged", [])[:table_rows], ("topic", "cluster", "maxShare", "flags"),
                 ("topic", "cluster"))
        + "<h3>Brokers whose share grew</h3>"
        + _table(trend.get("brokersGrew", [])[:table_rows],
                 ("cluster", "brokerName", "previousShare", "share", "delta"), ("cluster", "brokerName"))
    )


def render_html(summary: dict[str, Any], charts: dict[str, bytes], table_rows: int = 50) -> str:
    """One self-contained page: no external CSS, scripts or images."""
    w, t, p = summary["window"], summary["totals"], summary["params"]
    cards = [
        ("topics", t["topics"]),
        ("brokers", t["brokers"]),
        ("clusters", t["clusters"]),
        ("worsening", t["worsening"]),
        ("actions", t.get("actions", 0)),
        ("hot brokers", t.get("hotBrokers", 0)),
    ] + sorted(t["flags"].items())
    cards_html = "".join(f'<div class="card"><b>{_fmt(v)}</b>{html.escape(k)}</div>' for k, v in cards)
    weights = p.get("weights") or "none (every topic weighs 1)"
    rules = p.get("rules") or {}
    rules_html = (
        '<ul class="meta">'
        + "".join(f"<li><b>{html.escape(k)}</b>: {html.escape(v)}</li>" for k, v in rules.items())
        + "</ul>"
        if rules
        else ""
    )
    sections = [
        (
            "Most skewed topics",
            "topTopics",
            _table(summary["topics"][:table_rows], TOPIC_FIELDS, ("topic", "cluster")),
        ),
        (
            "Broker load per cluster",
            "brokerLoad",
            _table(summary["brokers"], BROKER_FIELDS, ("cluster", "brokerName"))
            + _table(summary["clusters"], CLUSTER_FIELDS, ("cluster",)),
        ),
        ("Broker × topic shares (top topics)", "heatmap", ""),
        (
            "What would even it out",
            "",
            "<p>Per flagged topic with writable queues: the even layout that clears the flag with the fewest "
            "changes (queues per broker, brokers to add queues on, queues to move), and its max share after. "
            "Each topic is planned on its own; actions.csv lists them all.</p>"
            + _table(summary.get("actions", [])[:table_rows], ACTION_VIEW, ("topic", "cluster", "action",
                                                                            "changes")),
        ),
        (
            "Hot brokers",
            "",
            f"<p>Brokers carrying more than {_fmt(p.get('hotBrokerRatio'))} × the fair share 1/n of their "
            "cluster's load, with the topics that load them most beyond their fair part.</p>"
            + _table(
                [
                    {**{k: b[k] for k in ("cluster", "brokerName", "brokerShare", "fairShare", "ratio")},
                     "topics": [f"{x['topic']} (+{_fmt(x['excessLoad'])})" for x in b["topics"]]}
                    for b in summary.get("hotBrokers", [])
                ],
                ("cluster", "brokerName", "brokerShare", "fairShare", "ratio", "topics"),
                ("cluster", "brokerName", "topics"),
            ),
        ),
        (
            "Compared with earlier runs",
            "runs",
            _trend_html(summary.get("trend") or {}, table_rows),
        ),
        (
            "Imbalance over time",
            "imbalance",
            "<h3>Topics whose max share rose in the window</h3>"
            + _table(summary["worsening"][:table_rows], WORSENING_FIELDS, ("topic", "cluster")),
        ),
    ]
    body = []
    for title, key, extra in sections:
        body.append(f"<h2>{html.escape(title)}</h2>")
        if key and key in charts:
            body.append(_img(charts[key], title))
        body.append(extra)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Topic load skew report</title><style>{_CSS}</style></head>
<body>
<h1>Topic load skew</h1>
<p class="meta">Generated {html.escape(summary["generatedAt"])} ·
latest snapshot {html.escape(str(iso_ms(w.get("latestTakenAt"))))} ·
window {html.escape(str(w.get("since")))} ({_fmt(w.get("snapshots"))} snapshots,
{_fmt(w.get("rows"))} rows) · weights: {html.escape(str(weights))}</p>
{rules_html}
<p class="meta">A broker's share of a topic is its share of the topic's writable write queues (perm &amp; 2);
a broker's load is the sum over its topics of weight × share. Tables list at most {table_rows} topics;
topics.csv / topics.parquet hold them all.</p>
<div class="cards">{cards_html}</div>
{"".join(body)}
</body></html>
"""
