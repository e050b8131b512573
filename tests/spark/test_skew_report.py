"""Report rendering on small pandas tables (no Spark): ranking, summary caps, sampling, HTML escaping."""

from __future__ import annotations

import numpy as np
import orjson
import pandas as pd

from service.skew import report


def topics_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "cluster": ["c", "c", "c", "c"],
            "topic": ["Even", "Dead", "Solo", "Big"],
            "brokers": [2, 2, 1, 2],
            "writeQueues": [8, 0, 4, 40],
            "readQueues": [8, 8, 4, 40],
            "maxShare": [0.5, np.nan, 1.0, 0.75],
            "maxMeanRatio": [1.0, np.nan, 1.0, 1.5],
            "cv": [0.0, np.nan, 0.0, 0.5],
            "gini": [0.0, np.nan, 0.0, 0.25],
            "flags": [
                np.array([], dtype=object),
                np.array(["UNWRITABLE"], dtype=object),
                np.array(["SINGLE_BROKER"], dtype=object),
                np.array(["CONCENTRATED"], dtype=object),
            ],
        }
    )


def test_rank_topics_most_skewed_first_unwritable_last():
    assert list(report.rank_topics(topics_frame())["topic"]) == ["Solo", "Big", "Even", "Dead"]


def test_summary_caps_topics_and_is_plain_json():
    empty = pd.DataFrame()
    s = report.build_summary(
        window={"since": "1h"},
        params={},
        topics=report.rank_topics(topics_frame()),
        brokers=pd.DataFrame(
            {
                "cluster": ["c"],
                "brokerName": ["b"],
                "writeQueues": [np.int64(3)],
                "topics": [np.int64(1)],
                "load": [1.0],
                "share": [1.0],
            }
        ),
        clusters=empty,
        worsening=empty,
        imbalance=empty,
        flags=("SINGLE_BROKER", "CONCENTRATED", "UNWRITABLE"),
        max_topics=2,
    )
    assert [t["topic"] for t in s["topics"]] == ["Solo", "Big"] and s["topicsTruncated"] is True
    assert s["totals"]["topics"] == 4
    assert s["totals"]["flags"] == {"SINGLE_BROKER": 1, "CONCENTRATED": 1, "UNWRITABLE": 1}
    assert s["topics"][1]["flags"] == ["CONCENTRATED"] and s["topics"][1]["maxShare"] == 0.75
    assert type(s["brokers"][0]["writeQueues"]) is int
    assert orjson.loads(orjson.dumps(s)) == s  # no numpy left over
    dead = report.build_summary(
        window={},
        params={},
        topics=report.rank_topics(topics_frame()),
        brokers=empty,
        clusters=empty,
        worsening=empty,
        imbalance=empty,
        flags=(),
        max_topics=0,
    )
    assert dead["topicsTruncated"] is False
    assert dead["topics"][-1]["maxShare"] is None  # NaN -> null


def test_sample_series_keeps_at_most_n_points_and_the_latest():
    frame = pd.DataFrame(
        {"takenAt": list(range(1000)) * 2, "cluster": ["a"] * 1000 + ["b"] * 1000, "gini": [0.1] * 2000}
    )
    out = report.sample_series(frame, 10)
    stamps = sorted(out["takenAt"].unique())
    assert len(stamps) == 10 and stamps[0] == 0 and stamps[-1] == 999
    assert len(out) == 20
    assert len(report.sample_series(frame.head(5), 10)) == 5


def test_html_escapes_names_and_embeds_charts():
    t = topics_frame()
    t.loc[0, "topic"] = "<script>x</script>"
    s = report.build_summary(
        window={"since": "1h", "latestTakenAt": 0},
        params={"concentratedShare": 0.5},
        topics=t,
        brokers=pd.DataFrame(),
        clusters=pd.DataFrame(),
        worsening=pd.DataFrame(),
        imbalance=pd.DataFrame(),
        flags=(),
    )
    html = report.render_html(s, {"topTopics": report.chart_top_topics(report.rank_topics(t), 0.5)})
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert html.count("data:image/png;base64,") == 1


def test_charts_render_empty_inputs():
    empty_topics = topics_frame().head(0)
    for png in (
        report.chart_top_topics(empty_topics, 0.5),
        report.chart_broker_load(pd.DataFrame()),
        report.chart_heatmap(pd.DataFrame(), []),
        report.chart_imbalance(pd.DataFrame()),
    ):
        assert png[:4] == b"\x89PNG"
