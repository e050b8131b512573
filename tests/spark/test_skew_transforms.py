"""Pure transforms on small inline snapshots. Every expected value is worked out by hand in the test."""

from __future__ import annotations

import math

import pytest

from service.skew import transforms as T

# One snapshot (takenAt=1) of cluster c1 (brokers b1, b2, b3) and cluster c2 (broker x1):
#   A   c1: b1 6 writable, b2 2 writable                      -> shares 0.75 / 0.25, CONCENTRATED
#   B   c1: b1, b2, b3 4 each                                 -> 1/3 each, balanced
#   C   c1: b1 only, 8                                        -> SINGLE_BROKER
#   D   c1: b1, b2 read-only (perm 4)                         -> UNWRITABLE
#   E   c1: b1 r8/w4 perm 6, b2 w4 perm 2, b3 w4 perm 4       -> writable 4/4/0, READ_WRITE_MISMATCH
#   A   c2: x1 only, 8                                        -> a topic is measured per cluster
SNAPSHOT = [
    (1, "c1", "b1", "A", 6, 6, 6, 0),
    (1, "c1", "b2", "A", 2, 2, 6, 0),
    (1, "c1", "b1", "B", 4, 4, 6, 0),
    (1, "c1", "b2", "B", 4, 4, 6, 0),
    (1, "c1", "b3", "B", 4, 4, 6, 0),
    (1, "c1", "b1", "C", 8, 8, 6, 0),
    (1, "c1", "b1", "D", 4, 4, 4, 0),
    (1, "c1", "b2", "D", 4, 4, 4, 0),
    (1, "c1", "b1", "E", 8, 4, 6, 0),
    (1, "c1", "b2", "E", 4, 4, 2, 0),
    (1, "c1", "b3", "E", 4, 4, 4, 0),
    (1, "c2", "x1", "A", 8, 8, 6, 0),
]


@pytest.fixture(scope="module")
def rows(spark):
    return spark.createDataFrame(SNAPSHOT, T.ROW_SCHEMA)


@pytest.fixture(scope="module")
def shares(rows):
    return T.topic_broker_shares(rows).cache()


def by_key(df, *key):
    return {tuple(r[k] for k in key): r.asDict() for r in df.collect()}


def test_shares_are_each_brokers_part_of_the_writable_write_queues(shares):
    got = {k: v["share"] for k, v in by_key(shares, "cluster", "topic", "brokerName").items()}
    assert got[("c1", "A", "b1")] == pytest.approx(6 / 8)
    assert got[("c1", "A", "b2")] == pytest.approx(2 / 8)
    for b in ("b1", "b2", "b3"):
        assert got[("c1", "B", b)] == pytest.approx(1 / 3)
    assert got[("c1", "C", "b1")] == 1.0
    assert got[("c1", "D", "b1")] is None and got[("c1", "D", "b2")] is None  # nothing writable
    # E: b2's queues are write-only (perm 2: writable), b3's read-only (perm 4: not writable)
    assert got[("c1", "E", "b1")] == pytest.approx(4 / 8)
    assert got[("c1", "E", "b2")] == pytest.approx(4 / 8)
    assert got[("c1", "E", "b3")] == 0.0
    assert got[("c2", "A", "x1")] == 1.0


def test_topic_metrics(shares):
    t = by_key(T.topic_metrics(shares), "cluster", "topic")
    a = t[("c1", "A")]
    # x = [6, 2]: mean 4, max/mean 1.5, population std 2 -> CV 0.5,
    # Gini = (|6-2| + |2-6|) / (2 * 2^2 * 4) = 0.25
    assert (a["brokers"], a["writeQueues"], a["readQueues"]) == (2, 8, 8)
    assert a["maxShare"] == pytest.approx(0.75)
    assert a["maxMeanRatio"] == pytest.approx(1.5)
    assert a["cv"] == pytest.approx(0.5)
    assert a["gini"] == pytest.approx(0.25)
    assert a["flags"] == ["CONCENTRATED"]

    b = t[("c1", "B")]
    assert (b["brokers"], b["writeQueues"]) == (3, 12)
    assert b["maxShare"] == pytest.approx(1 / 3)
    assert (b["maxMeanRatio"], b["cv"], b["gini"]) == (
        pytest.approx(1.0),
        pytest.approx(0.0),
        pytest.approx(0.0),
    )
    assert b["flags"] == []

    c = t[("c1", "C")]
    assert (c["brokers"], c["writeQueues"], c["maxShare"]) == (1, 8, 1.0)
    assert (c["maxMeanRatio"], c["cv"], c["gini"]) == (
        pytest.approx(1.0),
        pytest.approx(0.0),
        pytest.approx(0.0),
    )
    assert c["flags"] == ["SINGLE_BROKER"]

    d = t[("c1", "D")]
    assert (d["brokers"], d["writeQueues"]) == (2, 0)
    assert (d["maxShare"], d["maxMeanRatio"], d["cv"], d["gini"]) == (None, None, None, None)
    assert d["flags"] == ["UNWRITABLE"]

    e = t[("c1", "E")]
    # x = [4, 4, 0]: mean 8/3; max/mean = 4 / (8/3) = 1.5
    # variance = ((4/3)^2 + (4/3)^2 + (8/3)^2) / 3 = 32/9 -> std = 4*sqrt(2)/3 -> CV = sqrt(2)/2
    # Gini: sum over ordered pairs |xi - xj| = 4 * 4 = 16; 16 / (2 * 3^2 * 8/3) = 1/3
    assert (e["brokers"], e["writeQueues"], e["readQueues"]) == (3, 8, 16)
    assert e["maxShare"] == pytest.approx(0.5)
    assert e["maxMeanRatio"] == pytest.approx(1.5)
    assert e["cv"] == pytest.approx(math.sqrt(2) / 2)
    assert e["gini"] == pytest.approx(1 / 3)
    assert e["flags"] == ["READ_WRITE_MISMATCH"]  # 0.5 is not *more* than half: not CONCENTRATED

    assert t[("c2", "A")]["flags"] == ["SINGLE_BROKER"]
    assert len(t) == 6


def test_concentrated_share_is_configurable(shares):
    t = by_key(T.topic_metrics(shares, concentrated_share=0.8), "cluster", "topic")
    assert t[("c1", "A")]["flags"] == []  # 0.75 <= 0.8
    t = by_key(T.topic_metrics(shares, concentrated_share=0.3), "cluster", "topic")
    assert t[("c1", "B")]["flags"] == ["CONCENTRATED"]  # 1/3 > 0.3
    assert t[("c1", "E")]["flags"] == ["CONCENTRATED", "READ_WRITE_MISMATCH"]


def test_single_broker_unwritable_topic_has_both_flags(spark):
    rows = spark.createDataFrame([(1, "c1", "b1", "RO", 4, 4, 4, 0)], T.ROW_SCHEMA)
    (r,) = T.topic_metrics(T.topic_broker_shares(rows)).collect()
    assert r["flags"] == ["SINGLE_BROKER", "UNWRITABLE"]


@pytest.fixture(scope="module")
def known_brokers(spark):
    # b4 is registered but hosts no topic: it still counts in its cluster, with load 0
    return spark.createDataFrame(
        [(1, "c1", "b1"), (1, "c1", "b2"), (1, "c1", "b3"), (1, "c1", "b4"), (1, "c2", "x1")], T.BROKER_SCHEMA
    )


def test_broker_load_is_the_sum_of_its_topic_shares(shares, known_brokers):
    b = by_key(T.broker_metrics(shares, known_brokers), "cluster", "brokerName")
    # b1: A 3/4 + B 1/3 + C 1 + D 0 (unwritable) + E 1/2 = 31/12
    # b2: A 1/4 + B 1/3 + D 0 + E 1/2 = 13/12;  b3: B 1/3 + E 0 = 4/12;  b4: 0.  Cluster c1: 48/12 = 4
    assert b[("c1", "b1")]["load"] == pytest.approx(31 / 12)
    assert b[("c1", "b2")]["load"] == pytest.approx(13 / 12)
    assert b[("c1", "b3")]["load"] == pytest.approx(4 / 12)
    assert b[("c1", "b1")]["share"] == pytest.approx(31 / 48)
    assert b[("c1", "b2")]["share"] == pytest.approx(13 / 48)
    assert b[("c1", "b3")]["share"] == pytest.approx(4 / 48)
    assert (b[("c1", "b4")]["load"], b[("c1", "b4")]["share"], b[("c1", "b4")]["topics"]) == (0.0, 0.0, 0)
    # writable write queues and topics hosted
    assert (b[("c1", "b1")]["writeQueues"], b[("c1", "b1")]["topics"]) == (6 + 4 + 8 + 0 + 4, 5)
    assert (b[("c1", "b2")]["writeQueues"], b[("c1", "b2")]["topics"]) == (2 + 4 + 0 + 4, 4)
    assert (b[("c1", "b3")]["writeQueues"], b[("c1", "b3")]["topics"]) == (4 + 0, 2)
    assert b[("c2", "x1")]["share"] == 1.0


def test_weights_scale_each_topics_contribution(spark, shares):
    weights = T.weights_frame(spark, {"A": 10.0, "B": 0.0, "*": 99.0})  # "*" is the caller's default
    b = by_key(T.broker_metrics(shares, weights=weights, default_weight=1.0), "cluster", "brokerName")
    # b1 = 10*3/4 + 0*1/3 + 1*1 (C) + 1*0 (D) + 1*1/2 (E) = 9;  b2 = 10*1/4 + 0 + 0 + 1/2 = 3;  b3 = 0 + 0 = 0
    assert b[("c1", "b1")]["load"] == pytest.approx(9.0)
    assert b[("c1", "b2")]["load"] == pytest.approx(3.0)
    assert b[("c1", "b3")]["load"] == pytest.approx(0.0)
    assert b[("c1", "b1")]["share"] == pytest.approx(0.75)
    assert b[("c1", "b2")]["share"] == pytest.approx(0.25)
    b = by_key(T.broker_metrics(shares, weights=weights, default_weight=0.0), "cluster", "brokerName")
    assert b[("c1", "b1")]["load"] == pytest.approx(7.5)  # only A counts
    assert b[("c1", "b1")]["share"] == pytest.approx(0.75)


def test_cluster_imbalance_over_broker_loads(shares, known_brokers):
    brokers = T.broker_metrics(shares, known_brokers)
    topics = T.topic_metrics(shares)
    c = by_key(T.cluster_metrics(brokers, topics), "cluster")
    c1 = c[("c1",)]
    # loads (in twelfths) 31, 13, 4, 0: total 48/12 = 4, mean 1
    assert (c1["brokers"], c1["topics"]) == (4, 5)
    assert c1["load"] == pytest.approx(4.0)
    assert c1["maxShare"] == pytest.approx(31 / 48)
    assert c1["maxMeanRatio"] == pytest.approx(31 / 12)
    # deviations from the mean (12/12): 19, 1, -8, -12 twelfths -> variance (361+1+64+144)/4/144
    assert c1["cv"] == pytest.approx(math.sqrt(570 / 4) / 12)
    # pairwise |diffs| in twelfths: 4, 13, 31, 9, 27, 18 = 102 -> ordered 204/12 = 17; 17 / (2 * 16 * 1)
    assert c1["gini"] == pytest.approx(17 / 32)
    c2 = c[("c2",)]
    assert (c2["brokers"], c2["maxShare"], c2["gini"]) == (1, 1.0, pytest.approx(0.0))


def test_worsening_compares_latest_with_first_appearance(spark):
    rows = spark.createDataFrame(
        [
            # P: 0.5 -> 0.75 -> 0.5: back where it started, not worsening
            (1, "c", "b1", "P", 4, 4, 6, 0),
            (1, "c", "b2", "P", 4, 4, 6, 0),
            (2, "c", "b1", "P", 6, 6, 6, 0),
            (2, "c", "b2", "P", 2, 2, 6, 0),
            (3, "c", "b1", "P", 4, 4, 6, 0),
            (3, "c", "b2", "P", 4, 4, 6, 0),
            # Q: appears at t=2 at 0.5, latest 0.8 -> worsening by 0.3
            (2, "c", "b1", "Q", 4, 4, 6, 0),
            (2, "c", "b2", "Q", 4, 4, 6, 0),
            (3, "c", "b1", "Q", 8, 8, 6, 0),
            (3, "c", "b2", "Q", 2, 2, 6, 0),
            # R: 0.8 -> 0.5, improved
            (1, "c", "b1", "R", 8, 8, 6, 0),
            (1, "c", "b2", "R", 2, 2, 6, 0),
            (3, "c", "b1", "R", 5, 5, 6, 0),
            (3, "c", "b2", "R", 5, 5, 6, 0),
            # S: 0.5 -> 1.0 but gone from the latest snapshot
            (1, "c", "b1", "S", 4, 4, 6, 0),
            (1, "c", "b2", "S", 4, 4, 6, 0),
            (2, "c", "b1", "S", 4, 4, 6, 0),
            # U: new in the latest snapshot on one broker: nothing to compare with
            (3, "c", "b1", "U", 4, 4, 6, 0),
        ],
        T.ROW_SCHEMA,
    )
    topics = T.topic_metrics(T.topic_broker_shares(rows))
    got = [r.asDict() for r in T.worsening(topics, latest_taken_at=3).collect()]
    assert len(got) == 1
    q = got[0]
    assert (q["cluster"], q["topic"], q["firstTakenAt"], q["firstBrokers"], q["brokers"]) == (
        "c",
        "Q",
        2,
        2,
        2,
    )
    assert q["firstMaxShare"] == pytest.approx(0.5)
    assert q["maxShare"] == pytest.approx(0.8)
    assert q["delta"] == pytest.approx(0.3)


def test_complete_rows_drops_snapshots_with_a_missing_part(spark):
    rows = spark.createDataFrame(
        [
            (1, "c", "b1", "T", 4, 4, 6, 0),
            (2, "c", "b1", "T", 4, 4, 6, 0),
            (2, None, None, None, None, None, None, None),  # marker: a part of snapshot 2 was gone
            (3, "c", "b1", "T", 4, 4, 6, 0),
        ],
        T.ROW_SCHEMA,
    )
    assert sorted(r.takenAt for r in T.complete_rows(rows).collect()) == [1, 3]
    assert sorted(r.takenAt for r in T.complete_rows(rows, [2]).collect()) == [1, 3]  # broken already known
    assert sorted({r.takenAt for r in T.complete_rows(rows, []).collect()}) == [1, 2, 3]


def test_drop_system_topics(spark):
    rows = spark.createDataFrame(
        [
            (1, "c1", "b1", "Orders", 4, 4, 6, 0),
            (1, "c1", "b1", "%RETRY%group", 1, 1, 6, 0),
            (1, "c1", "b1", "TBW102", 8, 8, 7, 0),
            (1, "c1", "b1", "SCHEDULE_TOPIC_XXXX", 18, 18, 6, 0),
            (1, "c1", "b1", "rmq_sys_wheel_timer", 1, 1, 6, 0),
            (1, "c1", "b1", "c1", 16, 16, 7, 0),  # the cluster-name topic
            (1, "c1", "b1", "b1", 1, 1, 7, 0),  # the broker-name topic
            (1, "c1", "b1", "b9", 1, 1, 7, 0),  # named after a broker only the manifest knows
        ],
        T.ROW_SCHEMA,
    )
    brokers = spark.createDataFrame([(1, "c1", "b1"), (1, "c1", "b9")], T.BROKER_SCHEMA)
    kept = sorted(r.topic for r in T.drop_system_topics(rows, brokers).collect())
    assert kept == ["%RETRY%group", "Orders"]


# --- actions and hot brokers on the one-snapshot fixture (known_brokers: c1 = b1..b4, b4 idle; c2 = x1)


def latest_inputs(shares, known_brokers, threshold=0.5):
    topics = T.at(T.topic_metrics(shares, threshold), 1)
    return T.at(shares, 1), topics, T.at(T.broker_metrics(shares, known_brokers), 1)


def test_min_brokers_below():
    assert [T.min_brokers_below(t) for t in (0.5, 0.3, 1 / 3, 0.25, 0.9, 0.05)] == [2, 4, 3, 4, 2, 20]


def test_actions_even_out_each_flagged_topic(shares, known_brokers):
    s, topics, brokers = latest_inputs(shares, known_brokers)
    a = by_key(T.topic_actions(s, topics, brokers, 0.5), "cluster", "topic")
    # A in c1: 6 + 2 on b1, b2 -> 4 + 4 on the same brokers: 2 queues move, none added; 50 % is not flagged
    assert (a[("c1", "A")]["action"], a[("c1", "A")]["targetBrokers"], a[("c1", "A")]["queuesPerBroker"]) == (
        "REBALANCE", 2, 4)
    assert a[("c1", "A")]["changes"] == ["b1: 6 -> 4", "b2: 2 -> 4"]
    assert (a[("c1", "A")]["queuesToMove"], a[("c1", "A")]["queuesToAdd"]) == (2, 0)
    assert (a[("c1", "A")]["maxShareAfter"], a[("c1", "A")]["giniAfter"], a[("c1", "A")]["flaggedAfter"]) == (
        0.5, 0.0, False)
    # C: all 8 on b1 -> 4 + 4 with the least loaded broker not hosting C (b4, load 0)
    c = a[("c1", "C")]
    assert (c["action"], c["changes"], c["addOn"], c["removeFrom"]) == (
        "SPREAD", ["b1: 8 -> 4", "b4: 0 -> 4"], ["b4"], ["b1"])
    # A in c2: the cluster has one broker, nothing to spread over
    x = a[("c2", "A")]
    assert (x["action"], x["changes"], x["maxShareAfter"], x["flaggedAfter"]) == ("ADD_BROKERS", [], None, True)
    assert set(a) == {("c1", "A"), ("c1", "C"), ("c2", "A")}  # B even, D unwritable, E at 50 %: no action


def test_actions_with_a_lower_threshold_use_more_brokers(shares, known_brokers):
    s, topics, brokers = latest_inputs(shares, known_brokers, 0.3)
    a = by_key(T.topic_actions(s, topics, brokers, 0.3), "cluster", "topic")  # even needs 4 brokers (1/4 <= 0.3)
    assert a[("c1", "A")]["changes"] == ["b1: 6 -> 2", "b3: 0 -> 2", "b4: 0 -> 2"]
    assert (a[("c1", "A")]["queuesToMove"], a[("c1", "A")]["maxShareAfter"]) == (4, 0.25)
    assert a[("c1", "B")]["changes"] == ["b1: 4 -> 3", "b2: 4 -> 3", "b3: 4 -> 3", "b4: 0 -> 3"]
    # E: b3 hosts it read-only, so only b1, b2 and b4 can take queues: 3 brokers, 1/3 still above 0.3
    e = a[("c1", "E")]
    assert (e["targetBrokers"], e["queuesPerBroker"], e["changes"]) == (3, 3, ["b1: 4 -> 3", "b2: 4 -> 3",
                                                                                 "b4: 0 -> 3"])
    assert (e["queuesToMove"], e["queuesToAdd"], e["flaggedAfter"]) == (2, 1, True)
    assert e["maxShareAfter"] == pytest.approx(1 / 3)


def test_hot_brokers_and_the_topics_that_make_them_hot(shares, known_brokers):
    s, _, brokers = latest_inputs(shares, known_brokers)
    rows = T.hot_brokers(s, brokers, hot_ratio=1.5).collect()
    # c1 has 4 brokers (fair 1/4): b1 carries 31/48 > 1.5/4; b2 13/48 is not hot; c2 has one broker
    assert {(r["cluster"], r["brokerName"]) for r in rows} == {("c1", "b1")}
    assert rows[0]["ratio"] == pytest.approx(31 / 48 * 4)
    # excess over the fair part 1/4: C 1 - 1/4, A 3/4 - 1/4, E 1/2 - 1/4, B 1/3 - 1/4 (D: no writable share)
    got = [(r["rank"], r["topic"], r["excessLoad"]) for r in sorted(rows, key=lambda r: r["rank"])]
    assert [(k, t) for k, t, _ in got] == [(1, "C"), (2, "A"), (3, "E"), (4, "B")]
    assert [x for _, _, x in got] == pytest.approx([0.75, 0.5, 0.25, 1 / 12])
    assert len(T.hot_brokers(s, brokers, hot_ratio=1.5, top=2).collect()) == 2
