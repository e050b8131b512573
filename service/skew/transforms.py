"""Pure DataFrame transforms of snapshot rows into skew metrics: no I/O, no session state.

A broker's share of a topic is its share of the topic's *writable* write queues (perm & 2), the queues
producers spread messages over; a topic is measured per cluster. Every metric is per snapshot (takenAt),
so the same functions give both the latest picture and the trend over the window.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from service.models import SYSTEM_TOPIC_PREFIX
from service.models import SYSTEM_TOPICS as MODEL_SYSTEM_TOPICS

PERM_WRITE = 2  # PermName.PERM_WRITE

SINGLE_BROKER = "SINGLE_BROKER"
CONCENTRATED = "CONCENTRATED"
UNWRITABLE = "UNWRITABLE"
READ_WRITE_MISMATCH = "READ_WRITE_MISMATCH"
FLAGS = (SINGLE_BROKER, CONCENTRATED, UNWRITABLE, READ_WRITE_MISMATCH)

# Topics every broker registers for itself (TopicValidator.SYSTEM_TOPIC_SET, one list in service/models/validators.py).
# Cluster and broker names are system topics too (GET_SYSTEM_TOPIC_LIST_FROM_NS), and anything starting with
# rmq_sys_.
SYSTEM_TOPICS = tuple(sorted(MODEL_SYSTEM_TOPICS))

ROW_SCHEMA = StructType(
    [
        StructField("takenAt", LongType(), False),
        StructField("cluster", StringType(), True),  # null only on a "part missing" marker row
        StructField("brokerName", StringType(), True),
        StructField("topic", StringType(), True),
        StructField("readQueueNums", IntegerType(), True),
        StructField("writeQueueNums", IntegerType(), True),
        StructField("perm", IntegerType(), True),
        StructField("topicSysFlag", IntegerType(), True),
    ]
)

BROKER_SCHEMA = StructType(
    [
        StructField("takenAt", LongType(), False),
        StructField("cluster", StringType(), False),
        StructField("brokerName", StringType(), False),
    ]
)

WEIGHT_SCHEMA = StructType(
    [
        StructField("topic", StringType(), False),
        StructField("weight", DoubleType(), False),
    ]
)

TOPIC_KEY = ("takenAt", "cluster", "topic")
BROKER_KEY = ("takenAt", "cluster", "brokerName")


def complete_rows(rows: DataFrame, broken: list[int] | None = None) -> DataFrame:
    """Drop every snapshot that has a part-missing marker (a row with a null cluster). `broken`: those
    snapshots' takenAt when the caller already knows them (saves a pass over the rows)."""
    if broken is not None:
        kept = rows.filter(F.col("cluster").isNotNull())
        return kept.filter(~F.col("takenAt").isin(*broken)) if broken else kept
    found = rows.filter(F.col("cluster").isNull()).select("takenAt").distinct()
    return rows.filter(F.col("cluster").isNotNull()).join(F.broadcast(found), "takenAt", "left_anti")


def drop_system_topics(rows: DataFrame, brokers: DataFrame | None = None) -> DataFrame:
    """Remove RocketMQ's own topics: the fixed set, rmq_sys_*, and topics named after a cluster or broker
    (each broker registers one of each; they are single-broker by design and would drown the report)."""
    names = rows.select(F.col("cluster").alias("name")).union(rows.select(F.col("brokerName").alias("name")))
    if brokers is not None:
        names = names.union(brokers.select(F.col("cluster").alias("name"))).union(
            brokers.select(F.col("brokerName").alias("name"))
        )
    names = names.distinct().withColumnRenamed("name", "topic")
    fixed = ~F.col("topic").isin(*SYSTEM_TOPICS) & ~F.col("topic").startswith(SYSTEM_TOPIC_PREFIX)
    return rows.filter(fixed).join(F.broadcast(names), "topic", "left_anti").select(*rows.columns)


def _writable(col_wq: Column, col_perm: Column) -> Column:
    return F.when((col_perm.bitwiseAND(F.lit(PERM_WRITE))) != 0, col_wq).otherwise(F.lit(0))


def topic_broker_shares(rows: DataFrame) -> DataFrame:
    """One row per (takenAt, cluster, topic, brokerName): writable write queues, the topic's total, and the
    broker's share of it (null when the topic has no writable queue at all)."""
    per_topic = Window.partitionBy(*TOPIC_KEY)
    return (
        rows.withColumn("writable", _writable(F.col("writeQueueNums"), F.col("perm")))
        .withColumn("topicWriteQueues", F.sum("writable").over(per_topic))
        .withColumn(
            "share",
            F.when(F.col("topicWriteQueues") > 0, F.col("writable") / F.col("topicWriteQueues")),
        )
        .select(
            *TOPIC_KEY,
            "brokerName",
            "readQueueNums",
            "writeQueueNums",
            "perm",
            "writable",
            "topicWriteQueues",
            "share",
        )
    )


def _gini(values: Column) -> Column:
    """Gini coefficient of an array of non-negative numbers (null if they sum to 0):
    G = 2 * sum_i(i * x_(i)) / (n * sum x) - (n + 1) / n, with x sorted ascending and i from 1."""
    xs = F.array_sort(values)
    n = F.size(xs)
    total = F.aggregate(xs, F.lit(0.0), lambda acc, x: acc + x)
    ranked = F.aggregate(
        F.zip_with(F.sequence(F.lit(1), n), xs, lambda i, x: i * x), F.lit(0.0), lambda acc, v: acc + v
    )
    return F.when(total > 0, 2.0 * ranked / (n * total) - (n + 1.0) / n)


def _spread(values: str, n: Column, total: Column) -> dict[str, Column]:
    """max/mean, CV (population std / mean) and Gini of `values` over n members; null when total is 0."""
    mean = total / n
    return {
        "maxMeanRatio": F.when(total > 0, F.max(values) / mean),
        "cv": F.when(total > 0, F.stddev_pop(values) / mean),
        "gini": _gini(F.collect_list(F.col(values).cast("double"))),
    }


def topic_metrics(shares: DataFrame, concentrated_share: float = 0.5) -> DataFrame:
    """Per (takenAt, cluster, topic): brokers hosting it, writable write queues, maxShare, max/mean, CV, Gini
    over those brokers, and flags. Input: topic_broker_shares()."""
    n = F.count(F.lit(1))
    total = F.sum("writable")
    spread = _spread("writable", n, total)
    agg = shares.groupBy(*TOPIC_KEY).agg(
        n.alias("brokers"),
        total.cast("long").alias("writeQueues"),
        F.sum("readQueueNums").cast("long").alias("readQueues"),
        F.max("share").alias("maxShare"),
        spread["maxMeanRatio"].alias("maxMeanRatio"),
        spread["cv"].alias("cv"),
        spread["gini"].alias("gini"),
        F.max((F.col("readQueueNums") != F.col("writeQueueNums")).cast("int")).alias("_mismatch"),
    )
    flags = F.array(
        F.when(F.col("brokers") == 1, F.lit(SINGLE_BROKER)),
        F.when((F.col("brokers") > 1) & (F.col("maxShare") > F.lit(concentrated_share)), F.lit(CONCENTRATED)),
        F.when(F.col("writeQueues") == 0, F.lit(UNWRITABLE)),
        F.when(F.col("_mismatch") == 1, F.lit(READ_WRITE_MISMATCH)),
    )
    return agg.withColumn("flags", F.filter(flags, lambda f: f.isNotNull())).drop("_mismatch")


def weights_frame(spark: SparkSession, weights: Mapping[str, float]) -> DataFrame:
    return spark.createDataFrame([(t, float(w)) for t, w in weights.items() if t != "*"], WEIGHT_SCHEMA)


def broker_metrics(
    shares: DataFrame,
    brokers: DataFrame | None = None,
    weights: DataFrame | None = None,
    default_weight: float = 1.0,
) -> DataFrame:
    """Per (takenAt, cluster, brokerName): writable write queues, topics hosted, load and share of the
    cluster's load. load = sum over topics of weight(topic) * broker's share of the topic; without weights
    every topic weighs 1, with weights a topic the table lacks weighs `default_weight`. `brokers`
    (BROKER_SCHEMA) adds registered brokers that host no topic, with load 0."""
    if weights is not None:
        shares = shares.join(F.broadcast(weights), "topic", "left").withColumn(
            "weight", F.coalesce(F.col("weight"), F.lit(float(default_weight)))
        )
    else:
        shares = shares.withColumn("weight", F.lit(1.0))
    per_broker = shares.groupBy(*BROKER_KEY).agg(
        F.sum("writable").cast("long").alias("writeQueues"),
        F.count(F.lit(1)).alias("topics"),
        F.sum(F.col("weight") * F.coalesce(F.col("share"), F.lit(0.0))).alias("load"),
    )
    if brokers is not None:
        per_broker = per_broker.join(brokers.select(*BROKER_KEY).distinct(), list(BROKER_KEY), "full").fillna(
            {"writeQueues": 0, "topics": 0, "load": 0.0}
        )
    cluster_load = F.sum("load").over(Window.partitionBy("takenAt", "cluster"))
    return per_broker.withColumn("share", F.when(cluster_load > 0, F.col("load") / cluster_load))


def cluster_metrics(brokers: DataFrame, topics: DataFrame | None = None) -> DataFrame:
    """Per (takenAt, cluster): brokers, load, and how unevenly it is spread over the brokers
    (max broker share, max/mean, CV, Gini). Input: broker_metrics(); topics (topic_metrics) adds a count."""
    n = F.count(F.lit(1))
    total = F.sum("load")
    spread = _spread("load", n, total)
    out = brokers.groupBy("takenAt", "cluster").agg(
        n.alias("brokers"),
        F.sum("writeQueues").cast("long").alias("writeQueues"),
        total.alias("load"),
        F.max("share").alias("maxShare"),
        spread["maxMeanRatio"].alias("maxMeanRatio"),
        spread["cv"].alias("cv"),
        spread["gini"].alias("gini"),
    )
    if topics is not None:
        counts = topics.groupBy("takenAt", "cluster").agg(F.count(F.lit(1)).alias("topics"))
        out = out.join(counts, ["takenAt", "cluster"], "left").fillna({"topics": 0})
    return out


def worsening(topics: DataFrame, latest_taken_at: int, epsilon: float = 1e-9) -> DataFrame:
    """Topics of the latest snapshot whose maxShare is above their maxShare in the first snapshot of the
    window where they appear. Input: topic_metrics() over the window."""
    first = topics.groupBy("cluster", "topic").agg(
        F.min("takenAt").alias("firstTakenAt"),
        F.min_by("maxShare", "takenAt").alias("firstMaxShare"),
        F.min_by("brokers", "takenAt").alias("firstBrokers"),
    )
    latest = topics.filter(F.col("takenAt") == F.lit(latest_taken_at)).select(
        "cluster", "topic", "maxShare", "brokers"
    )
    return (
        latest.join(first, ["cluster", "topic"])
        .filter(F.col("maxShare") > F.col("firstMaxShare") + F.lit(epsilon))
        .withColumn("delta", F.col("maxShare") - F.col("firstMaxShare"))
        .select(
            "cluster",
            "topic",
            "firstTakenAt",
            "firstMaxShare",
            "firstBrokers",
            "maxShare",
            "brokers",
            "delta",
        )
    )


def at(df: DataFrame, taken_at: int) -> DataFrame:
    """The rows of one snapshot, without the takenAt column."""
    return df.filter(F.col("takenAt") == F.lit(taken_at)).drop("takenAt")


def top_shares(spark: SparkSession, shares: DataFrame, taken_at: int, top: list[tuple[str, str]]) -> DataFrame:
    """Each broker's share of the given (cluster, topic)s in one snapshot (the heat map's cells)."""
    columns = ("cluster", "topic", "brokerName", "share")
    if not top:
        return shares.limit(0).select(*columns)
    wanted = spark.createDataFrame(top, "cluster string, topic string")
    return at(shares, taken_at).join(F.broadcast(wanted), ["cluster", "topic"]).select(*columns)


# --- what to do about it (one snapshot: inputs already filtered with at())

FIXABLE = (SINGLE_BROKER, CONCENTRATED)
SPREAD = "SPREAD"  # put queues on more brokers
REBALANCE = "REBALANCE"  # same brokers, equal queue counts
ADD_BROKERS = "ADD_BROKERS"  # the cluster has a single broker: nothing to spread over


def min_brokers_below(threshold: float) -> int:
    """The fewest brokers k over which an even spread is not CONCENTRATED: 1/k <= threshold."""
    k = max(1, math.ceil(1.0 / threshold - 1e-9))
    while 1.0 / k > threshold:
        k += 1
    return k


def topic_actions(shares: DataFrame, topics: DataFrame, brokers: DataFrame, concentrated_share: float) -> DataFrame:
    """For each SINGLE_BROKER or CONCENTRATED topic with writable queues: the even layout that clears the flag
    with the fewest changes, and the skew it would have.

    Target: k brokers, k = max(brokers holding writable queues now, the fewest with 1/k <= threshold), at most
    the cluster's brokers less those hosting the topic read-only; each gets q = ceil(writeQueues / k) writable
    queues. Brokers added are the cluster's least loaded ones that do not host the topic (each topic is planned
    on its own). Queues to move: the surplus of brokers above q; queues to add: k*q - writeQueues. After:
    maxShare 1/k, max/mean 1, Gini 0.

    Inputs (one snapshot, no takenAt): topic_broker_shares(), topic_metrics(), broker_metrics(). One shuffle:
    the per-topic plan is array arithmetic over the topic's brokers and its cluster's (broadcast) broker list."""
    k_min = min_brokers_below(concentrated_share)
    key = ["cluster", "topic"]
    flagged = topics.filter(
        F.arrays_overlap(F.col("flags"), F.array(*[F.lit(f) for f in FIXABLE])) & (F.col("writeQueues") > 0)
    ).select(*key, "flags", "brokers", "writeQueues", "maxShare", "gini")
    per_topic = (
        shares.join(flagged.select(*key), key, "left_semi")
        .groupBy(*key)
        .agg(
            F.array_sort(F.collect_list(F.when(F.col("writable") > 0, F.struct("brokerName", "writable")))).alias(
                "held"),
            F.collect_list("brokerName").alias("hosting"),
            F.sum((F.col("writable") == 0).cast("int")).alias("readOnly"),
        )
    )
    pool = brokers.groupBy("cluster").agg(
        F.count(F.lit(1)).alias("clusterBrokers"),
        # least loaded first (struct order: load, then name)
        F.array_sort(F.collect_list(F.struct(F.coalesce("share", F.lit(0.0)).alias("load"), "brokerName"))).alias(
            "pool"),
    )
    holding = F.size("held")
    k = F.col("targetBrokers")
    q = F.col("queuesPerBroker")
    held_names = lambda pred: F.transform(F.filter("held", pred), lambda h: h["brokerName"])  # noqa: E731
    plan = (
        flagged.join(per_topic, key)
        .join(F.broadcast(pool), "cluster")
        .withColumn("holding", holding)
        .withColumn("targetBrokers",
                    F.least(F.col("clusterBrokers") - F.col("readOnly"), F.greatest(holding, F.lit(k_min))))
        .withColumn("queuesPerBroker", F.ceil(F.col("writeQueues") / k).cast("int"))
        .withColumn(
            "added",
            F.transform(
                F.slice(F.filter("pool", lambda b: ~F.array_contains("hosting", b["brokerName"])), 1,
                        F.greatest(k - holding, F.lit(0))),
                lambda b: b["brokerName"],
            ),
        )
    )
    change = lambda name, before: F.concat(name, F.lit(": "), before.cast("string"), F.lit(" -> "),  # noqa: E731
                                           q.cast("string"))
    return (
        plan.withColumn("action", F.when(k <= 1, F.lit(ADD_BROKERS)).when(k > F.col("holding"), F.lit(SPREAD))
                        .otherwise(F.lit(REBALANCE)))
        .withColumn("queuesToMove",
                    F.aggregate("held", F.lit(0).cast("long"),
                                lambda acc, h: acc + F.greatest(h["writable"] - q, F.lit(0))))
        .withColumn("queuesToAdd", (k * q - F.col("writeQueues")).cast("long"))
        .withColumn("addOn", F.array_sort(F.concat(held_names(lambda h: h["writable"] < q), F.col("added"))))
        .withColumn("removeFrom", held_names(lambda h: h["writable"] > q))
        .withColumn(
            "changes",
            F.array_sort(F.concat(
                F.transform(F.filter("held", lambda h: h["writable"] != q),
                            lambda h: change(h["brokerName"], h["writable"])),
                F.transform("added", lambda b: change(b, F.lit(0))),
            )),
        )
        .withColumn("maxShareAfter", F.when(k > 1, F.lit(1.0) / k))
        .withColumn("maxMeanRatioAfter", F.when(k > 1, F.lit(1.0)))
        .withColumn("giniAfter", F.when(k > 1, F.lit(0.0)))
        .withColumn("flaggedAfter", F.coalesce(F.col("maxShareAfter") > F.lit(concentrated_share), F.lit(True)))
        .select(
            "cluster", "topic", "flags", "action", "brokers", "writeQueues", "maxShare", "gini", "clusterBrokers",
            "targetBrokers", "queuesPerBroker", "queuesToMove", "queuesToAdd", "addOn", "removeFrom", "changes",
            "maxShareAfter", "maxMeanRatioAfter", "giniAfter", "flaggedAfter",
        )
    )


def hot_brokers(
    shares: DataFrame,
    brokers: DataFrame,
    weights: DataFrame | None = None,
    default_weight: float = 1.0,
    hot_ratio: float = 1.5,
    top: int = 10,
) -> DataFrame:
    """Brokers carrying more than hot_ratio x the fair share 1/n of their cluster's load (n >= 2 brokers), each
    with the `top` topics that make it hot: largest excess of the topic's load on this broker
    (weight x the broker's share of the topic) over the topic's fair part (weight / n).

    Inputs (one snapshot, no takenAt): topic_broker_shares(), broker_metrics()."""
    size = brokers.groupBy("cluster").agg(F.count(F.lit(1)).alias("clusterBrokers"))
    hot = (
        brokers.join(size, "cluster")
        .filter((F.col("clusterBrokers") >= 2) & (F.col("share") > F.lit(hot_ratio) / F.col("clusterBrokers")))
        .select("cluster", "brokerName", F.col("share").alias("brokerShare"), "clusterBrokers")
        .withColumn("fairShare", F.lit(1.0) / F.col("clusterBrokers"))
        .withColumn("ratio", F.col("brokerShare") * F.col("clusterBrokers"))
    )
    if weights is not None:
        weighted = shares.join(F.broadcast(weights), "topic", "left").withColumn(
            "weight", F.coalesce(F.col("weight"), F.lit(float(default_weight)))
        )
    else:
        weighted = shares.withColumn("weight", F.lit(1.0))
    contrib = (
        weighted.join(F.broadcast(hot), ["cluster", "brokerName"])
        .withColumn("topicLoad", F.col("weight") * F.coalesce(F.col("share"), F.lit(0.0)))
        .withColumn("excessLoad", F.col("topicLoad") - F.col("weight") / F.col("clusterBrokers"))
        .filter(F.col("excessLoad") > 0)
        .withColumn(
            "rank",
            F.row_number().over(
                Window.partitionBy("cluster", "brokerName").orderBy(F.desc("excessLoad"), "topic")
            ),
        )
        .filter(F.col("rank") <= top)
    )
    return contrib.select(
        "cluster", "brokerName", "brokerShare", "fairShare", "ratio", "rank", "topic",
        F.col("writable").alias("writeQueuesOnBroker"), F.col("share").alias("topicShare"), "topicLoad",
        "excessLoad",
    )
