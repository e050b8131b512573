"""The report over time: one compact record per run (kept in Redis, the newest N), the comparison of this run
with earlier ones (topics whose skew grew, brokers whose share grew, Gini per cluster run after run), and the
history as tables a planner loads with pandas. Plain pandas on the driver; no Spark, no Redis here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from service.skew.report import records

EPSILON = 1e-9
BROKER_RECORD_FIELDS = ("cluster", "brokerName", "writeQueues", "topics", "load", "share")
RUN_FIELDS = ("runId", "runAt", "latestTakenAt")
HISTORY_CLUSTER_FIELDS = (*RUN_FIELDS, "cluster", "brokers", "topics", "writeQueues", "load", "maxShare",
                          "maxMeanRatio", "cv", "gini")
HISTORY_BROKER_FIELDS = (*RUN_FIELDS, *BROKER_RECORD_FIELDS)
HISTORY_TOPIC_FIELDS = (*RUN_FIELDS, "cluster", "topic", "brokers", "writeQueues", "maxShare", "maxMeanRatio",
                        "cv", "gini", "flags")


def run_record(summary: dict[str, Any], brokers: pd.DataFrame, run_at: int) -> dict[str, Any]:
    """What one run leaves for later runs: its clusters, every broker, and the topics its summary lists (the
    most skewed, up to --summary-topics). `run_at` is the Redis clock at the run's start."""
    w = summary["window"]
    return {
        "runId": str(run_at),
        "runAt": run_at,
        "generatedAt": summary["generatedAt"],
        "latestTakenAt": w["latestTakenAt"],
        "snapshots": w["snapshots"],
        "rows": w["rows"],
        "concentratedShare": summary["params"]["concentratedShare"],
        "totals": summary["totals"],
        "clusters": summary["clusters"],
        "brokers": records(brokers, BROKER_RECORD_FIELDS),
        "topics": summary["topics"],
        "topicsTruncated": summary["topicsTruncated"],
    }


def _cap(items: list[dict[str, Any]], cap: int | None) -> list[dict[str, Any]]:
    return items if cap is None else items[:cap]


def trend(
    topics: pd.DataFrame,
    brokers: pd.DataFrame,
    current: dict[str, Any],
    previous: Sequence[dict[str, Any]],
    cap: int | None = 1000,
) -> dict[str, Any]:
    """This run against the one before (`previous`: stored records, newest first) and the whole history.

    - topicsGrew: topics the previous run listed whose maxShare is higher now, largest rise first;
    - newlyFlagged: flagged now, and unflagged before (listed without a flag, or new when the previous run
      listed every topic);
    - brokersGrew: brokers whose share of their cluster's load is higher now;
    - clusters: every run's cluster metrics, oldest first (this run last): Gini over time."""
    runs = [*reversed(previous), current]
    series = [
        {"runId": r["runId"], "runAt": r["runAt"], "latestTakenAt": r["latestTakenAt"], **c}
        for r in runs
        for c in r["clusters"]
    ]
    out: dict[str, Any] = {
        "runs": len(runs),
        "previous": None,
        "topicsGrew": [],
        "newlyFlagged": [],
        "brokersGrew": [],
        "clusters": sorted(series, key=lambda x: (x["cluster"], x["runAt"])),
    }
    if not previous:
        return out
    prev = previous[0]
    out["previous"] = {k: prev[k] for k in ("runId", "runAt", "generatedAt", "latestTakenAt")}

    before = {(t["cluster"], t["topic"]): t for t in prev["topics"]}
    grew, flagged = [], []
    for row in records(topics, ("cluster", "topic", "brokers", "maxShare", "flags")):
        was = before.get((row["cluster"], row["topic"]))
        if was is not None and row["maxShare"] is not None and was.get("maxShare") is not None:
            delta = row["maxShare"] - was["maxShare"]
            if delta > EPSILON:
                grew.append({**row, "previousMaxShare": was["maxShare"], "previousBrokers": was["brokers"],
                             "previousFlags": was["flags"], "delta": round(delta, 6)})
        if row["flags"] and ((was is not None and not was["flags"]) or (was is None and not prev["topicsTruncated"])):
            flagged.append({**row, "previousFlags": None if was is None else was["flags"]})
    grew.sort(key=lambda x: (-x["delta"], x["cluster"], x["topic"]))
    out["topicsGrew"] = _cap(grew, cap)
    out["newlyFlagged"] = _cap(flagged, cap)

    shares_before = {(b["cluster"], b["brokerName"]): b.get("share") for b in prev["brokers"]}
    bgrew = []
    for row in records(brokers, ("cluster", "brokerName", "share", "load")):
        was = shares_before.get((row["cluster"], row["brokerName"]))
        if was is not None and row["share"] is not None and row["share"] - was > EPSILON:
            bgrew.append({**row, "previousShare": was, "delta": round(row["share"] - was, 6)})
    bgrew.sort(key=lambda x: (-x["delta"], x["cluster"], x["brokerName"]))
    out["brokersGrew"] = bgrew
    return out


def history_tables(runs: Sequence[dict[str, Any]]) -> dict[str, pd.DataFrame]:
    """The kept runs (any order) as three long tables, oldest run first: clusters, brokers, and the topics
    each run listed."""
    ordered = sorted(runs, key=lambda r: r["runAt"])

    def table(part: str, fields: Sequence[str]) -> pd.DataFrame:
        rows = [
            {"runId": r["runId"], "runAt": r["runAt"], "latestTakenAt": r["latestTakenAt"], **item}
            for r in ordered
            for item in r[part]
        ]
        return pd.DataFrame(rows, columns=list(fields)) if rows else pd.DataFrame(columns=list(fields))

    return {
        "clusters": table("clusters", HISTORY_CLUSTER_FIELDS),
        "brokers": table("brokers", HISTORY_BROKER_FIELDS),
        "topics": table("topics", HISTORY_TOPIC_FIELDS),
    }
