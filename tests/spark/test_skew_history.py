"""The report over time on small hand-made records (no Spark): what grew, what is newly flagged, the series,
and the history tables."""

from __future__ import annotations

import pandas as pd

from service.skew import history


def rec(run_at: int, topics: list[dict], brokers: list[dict], gini: float, truncated: bool = False) -> dict:
    return {
        "runId": str(run_at), "runAt": run_at, "generatedAt": f"t{run_at}", "latestTakenAt": run_at - 5,
        "clusters": [{"cluster": "c", "brokers": 2, "topics": len(topics), "writeQueues": 8, "load": 2.0,
                      "maxShare": 0.7, "maxMeanRatio": 1.4, "cv": 0.4, "gini": gini}],
        "brokers": brokers, "topics": topics, "topicsTruncated": truncated,
    }


def t(topic: str, share: float, flags: list[str], brokers: int = 2) -> dict:
    return {"cluster": "c", "topic": topic, "brokers": brokers, "maxShare": share, "flags": flags}


def b(name: str, share: float) -> dict:
    return {"cluster": "c", "brokerName": name, "share": share, "load": share * 2}


NOW_TOPICS = pd.DataFrame([t("Up", 0.8, ["CONCENTRATED"]), t("Same", 0.5, []), t("New", 1.0, ["SINGLE_BROKER"], 1),
                           t("Turned", 0.6, ["CONCENTRATED"]), t("Down", 0.5, [])])
NOW_BROKERS = pd.DataFrame([b("b1", 0.7), b("b2", 0.3)])


def test_first_run_has_nothing_to_compare():
    current = rec(300, [], [], 0.3)
    out = history.trend(NOW_TOPICS, NOW_BROKERS, current, [])
    assert out["previous"] is None and out["runs"] == 1 and out["topicsGrew"] == []
    assert [c["runAt"] for c in out["clusters"]] == [300]


def test_trend_against_the_previous_run():
    older = rec(100, [t("Up", 0.5, [])], [b("b1", 0.5), b("b2", 0.5)], 0.1)
    prev = rec(200, [t("Up", 0.6, ["CONCENTRATED"]), t("Same", 0.5, []), t("Turned", 0.5, []), t("Down", 0.9, [])],
               [b("b1", 0.6), b("b2", 0.4)], 0.2)
    current = rec(300, [], [], 0.3)
    out = history.trend(NOW_TOPICS, NOW_BROKERS, current, [prev, older])
    assert out["runs"] == 3 and out["previous"]["runId"] == "200"
    assert [(x["topic"], x["previousMaxShare"], x["maxShare"], x["delta"]) for x in out["topicsGrew"]] == [
        ("Up", 0.6, 0.8, 0.2), ("Turned", 0.5, 0.6, 0.1)]
    # New: not listed before, and the previous run listed every topic; Turned: listed without a flag
    assert sorted(x["topic"] for x in out["newlyFlagged"]) == ["New", "Turned"]
    assert [(x["brokerName"], x["delta"]) for x in out["brokersGrew"]] == [("b1", 0.1)]
    assert [(c["runAt"], c["gini"]) for c in out["clusters"]] == [(100, 0.1), (200, 0.2), (300, 0.3)]
    assert len(history.trend(NOW_TOPICS, NOW_BROKERS, current, [prev], cap=1)["topicsGrew"]) == 1


def test_a_truncated_previous_list_does_not_call_unlisted_topics_new():
    prev = rec(200, [t("Up", 0.9, ["CONCENTRATED"])], [b("b1", 0.7)], 0.2, truncated=True)
    out = history.trend(NOW_TOPICS, NOW_BROKERS, rec(300, [], [], 0.3), [prev])
    assert out["newlyFlagged"] == [] and out["topicsGrew"] == []  # Up fell from 0.9 to 0.8


def test_history_tables_oldest_first():
    runs = [rec(300, [t("A", 0.5, [])], [b("b1", 0.5)], 0.3), rec(100, [t("A", 0.7, ["CONCENTRATED"])], [], 0.1)]
    tables = history.history_tables(runs)
    assert tables["clusters"][["runAt", "gini"]].values.tolist() == [[100, 0.1], [300, 0.3]]
    assert tables["topics"]["maxShare"].tolist() == [0.7, 0.5]
    assert list(tables["brokers"].columns) == list(history.HISTORY_BROKER_FIELDS) and len(tables["brokers"]) == 1
    assert history.history_tables([])["topics"].empty
