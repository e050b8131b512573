"""End to end on a real redis-server: brokers registered through the RouteStore with planted skew, snapshots
taken by service.snapshot before and after a change, the job run, and the report checked for what was planted.
"""

from __future__ import annotations

import uuid

import orjson
import pytest
import redis.asyncio as aioredis

from service.models import DataVersion, RegisterBroker, TopicConfig
from service.skew import job
from service.store import RouteStore, SnapshotStore


async def take_snapshot(store, retention_s=86_400, **kw) -> str:
    return (await SnapshotStore(store).take(retention_s, **kw)).snap_id

pytestmark = pytest.mark.redis


def tc(read: int, write: int | None = None, perm: int = 6) -> TopicConfig:
    return TopicConfig(
        read_queue_nums=read, write_queue_nums=read if write is None else write, perm=perm, topic_sys_flag=0
    )


def registration(
    cluster: str, name: str, n: int, topics: dict[str, TopicConfig], counter: int
) -> RegisterBroker:
    return RegisterBroker(
        cluster=cluster,
        broker_name=name,
        broker_id=0,
        broker_addr=f"127.0.0.{n}:10911",
        ha_server_addr=f"127.0.0.{n}:10912",
        topics=topics,
        data_version=DataVersion(timestamp=1, counter=counter, state_version=0),
    )


# Cluster "prod" (broker-a, broker-b, broker-c) and cluster "dev" (dev-a):
#   OnlyA     a 8                          -> SINGLE_BROKER (the auto-create effect: all on one broker)
#   Skewed    a 8, b 2                     -> CONCENTRATED, maxShare 0.8
#   Even      a 4, b 4, c 4                -> no flag
#   Drifting  a 4, b 4, c 4  then a 12     -> 1/3 -> 12/20 = 0.6: worsening (and CONCENTRATED)
#   ReadOnly  a 4, b 4 with perm 4 (R)     -> UNWRITABLE
#   Mismatch  a r8/w4, b 4                 -> READ_WRITE_MISMATCH
#   Skewed    dev-a 4 (cluster dev)        -> SINGLE_BROKER in dev: topics are measured per cluster
def broker_a(drift: int) -> dict[str, TopicConfig]:
    return {
        "OnlyA": tc(8),
        "Skewed": tc(8),
        "Even": tc(4),
        "Drifting": tc(drift),
        "ReadOnly": tc(4, perm=4),
        "Mismatch": tc(8, 4),
    }


BROKER_B = {"Skewed": tc(2), "Even": tc(4), "Drifting": tc(4), "ReadOnly": tc(4, perm=4), "Mismatch": tc(4)}
BROKER_C = {"Even": tc(4), "Drifting": tc(4)}
DEV_A = {"Skewed": tc(4)}


async def test_report_finds_the_planted_skew(spark, redis_server, tmp_path):
    prefix = "e2e" + uuid.uuid4().hex[:8]
    client = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
    try:
        store = RouteStore(client, prefix=prefix)
        await store.load_scripts()
        for req in (
            registration("prod", "broker-a", 1, broker_a(drift=4), 1),
            registration("prod", "broker-b", 2, BROKER_B, 1),
            registration("prod", "broker-c", 3, BROKER_C, 1),
            registration("dev", "dev-a", 4, DEV_A, 1),
        ):
            await store.register_broker(req)
        sec, usec = await client.time()
        now = int(sec) * 1000 + int(usec) // 1000
        before = await take_snapshot(store, retention_s=86400, now_ms=now - 60_000)
        await store.register_broker(registration("prod", "broker-a", 1, broker_a(drift=12), 2))
        after = await take_snapshot(store, retention_s=86400, now_ms=now)
        assert before != after

        out = tmp_path / "report"
        rc = job.main(
            [
                "--redis-url",
                redis_server.url,
                "--key-prefix",
                prefix,
                "--since",
                "1h",
                "--out",
                str(out),
                "--master",
                "local[2]",
            ]
        )
        assert rc == 0

        summary = orjson.loads((out / "summary.json").read_bytes())
        assert orjson.loads(await client.get(f"{{{prefix}}}:report:skew")) == summary
        assert summary["window"]["snapshots"] == 2
        assert summary["window"]["latestSnapshotId"] == after

        topics = {(t["cluster"], t["topic"]): t for t in summary["topics"]}
        assert set(topics) == {
            ("prod", t) for t in ("OnlyA", "Skewed", "Even", "Drifting", "ReadOnly", "Mismatch")
        } | {("dev", "Skewed")}
        assert topics[("prod", "OnlyA")]["flags"] == ["SINGLE_BROKER"]
        assert topics[("prod", "OnlyA")]["brokers"] == 1
        skewed = topics[("prod", "Skewed")]
        assert skewed["flags"] == ["CONCENTRATED"]
        assert (skewed["maxShare"], skewed["brokers"], skewed["writeQueues"]) == (0.8, 2, 10)
        assert skewed["maxMeanRatio"] == pytest.approx(1.6)  # 8 / (10 / 2)
        assert skewed["gini"] == pytest.approx(0.3)  # |8-2| * 2 / (2 * 2^2 * 5)
        assert topics[("prod", "Even")]["flags"] == []
        assert topics[("prod", "Even")]["maxShare"] == pytest.approx(1 / 3, abs=1e-6)
        assert topics[("prod", "Drifting")]["maxShare"] == pytest.approx(0.6)
        assert topics[("prod", "Drifting")]["flags"] == ["CONCENTRATED"]
        assert topics[("prod", "ReadOnly")]["flags"] == ["UNWRITABLE"]
        assert topics[("prod", "Mismatch")]["flags"] == ["READ_WRITE_MISMATCH"]
        assert topics[("dev", "Skewed")]["flags"] == ["SINGLE_BROKER"]

        assert [(w["cluster"], w["topic"]) for w in summary["worsening"]] == [("prod", "Drifting")]
        (drift,) = summary["worsening"]
        assert drift["firstMaxShare"] == pytest.approx(1 / 3, abs=1e-6)
        assert drift["maxShare"] == pytest.approx(0.6)
        assert drift["firstTakenAt"] == now - 60_000

        # Broker load in prod (no weights: each topic weighs 1), latest snapshot:
        #   a = 1 (OnlyA) + 0.8 + 1/3 + 0.6 + 0 (ReadOnly) + 0.5 (Mismatch: 4 of 8 writable) = 3.2333..
        #   b = 0.2 + 1/3 + 0.2 + 0 + 0.5 = 1.2333..;  c = 1/3 + 0.2 = 0.5333..;  total 5 writable topics
        brokers = {(b["cluster"], b["brokerName"]): b for b in summary["brokers"]}
        assert brokers[("prod", "broker-a")]["share"] == pytest.approx(
            (1 + 0.8 + 1 / 3 + 0.6 + 0.5) / 5, abs=1e-6
        )
        assert brokers[("prod", "broker-b")]["share"] == pytest.approx(
            (0.2 + 1 / 3 + 0.2 + 0.5) / 5, abs=1e-6
        )
        assert brokers[("prod", "broker-c")]["share"] == pytest.approx((1 / 3 + 0.2) / 5, abs=1e-6)
        assert brokers[("dev", "dev-a")]["share"] == 1.0
        assert (brokers[("prod", "broker-a")]["topics"], brokers[("prod", "broker-a")]["writeQueues"]) == (
            6,
            8 + 8 + 4 + 12 + 0 + 4,
        )

        clusters = {c["cluster"]: c for c in summary["clusters"]}
        assert (clusters["prod"]["brokers"], clusters["prod"]["topics"]) == (3, 6)
        imbalance = [(p["cluster"], p["takenAt"]) for p in summary["imbalance"]]
        assert ("prod", now - 60_000) in imbalance and ("prod", now) in imbalance
        prod_gini = {p["takenAt"]: p["gini"] for p in summary["imbalance"] if p["cluster"] == "prod"}
        assert prod_gini[now] > prod_gini[now - 60_000]  # the drift made prod less even

        for name in (
            "summary.json",
            "report.html",
            "topics.csv",
            "topics.parquet",
            "brokers.csv",
            "clusters.parquet",
            "worsening.csv",
            "imbalance.parquet",
        ):
            assert (out / name).stat().st_size > 0
    finally:
        await client.aclose()
