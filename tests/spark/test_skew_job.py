"""The job's wiring: arguments, exit codes, the schedule loop, one full run over hand-written snapshots."""

from __future__ import annotations

import argparse
import json
import re
import uuid
from pathlib import Path

import orjson
import pandas as pd
import pytest
import redis

from service.skew import job, options
from service.store.snapshot_reader import RedisSpec, SnapshotReader
from tests.spark.conftest import put_snapshot


def approx6(x: float):
    return pytest.approx(x, abs=1e-6)  # the summary rounds to 6 decimals


def parse(*argv: str) -> argparse.Namespace:
    return job.build_parser().parse_args(list(argv))


def redis_now_ms(client) -> int:
    sec, usec = client.time()
    return int(sec) * 1000 + int(usec) // 1000


def test_defaults_and_durations():
    o = options.options_of(parse("--redis-url", "redis://h:1/0", "--since", "2h", "--every", "10m"), env={})
    assert (o.since_s, o.every_s, o.prefix, o.concentrated_share, o.master, o.weights) == (
        7200,
        600,
        "nsrv",
        0.5,
        None,
        None,
    )
    o = options.options_of(parse("--redis-url", "redis://x:1/0"), env={})
    assert o.since_s == 86400 and o.every_s is None and o.since_text == "1d"


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--since", "yesterday"], "bad duration"),
        (["--every", "0s"], "must be positive"),
        (["--concentrated-share", "1.5"], "between 0 and 1"),
        (["--conf", "nokey"], "KEY=VALUE"),
    ],
)
def test_bad_arguments_are_argparse_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        parse(*argv)
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_schedule_repeats_on_ticks_survives_failures_and_stops_on_ctrl_c():
    now = [100.0]
    calls: list[float] = []
    sleeps: list[float] = []

    def clock() -> float:
        return now[0]

    def sleep(s: float) -> None:
        sleeps.append(s)
        if len(sleeps) == 3:
            raise KeyboardInterrupt
        now[0] += s

    def work() -> None:
        calls.append(now[0])
        now[0] += 4.0  # a run takes 4 s
        if len(calls) == 1:
            raise RuntimeError("redis down")  # logged, retried at the next tick
        if len(calls) == 2:
            raise job.NoSnapshots("nothing yet")

    assert job.schedule(work, 10.0, sleep=sleep, clock=clock) == 0
    assert calls == [100.0, 110.0, 120.0]  # on the 10 s grid, whatever each run took
    assert sleeps == [6.0, 6.0, 6.0]


def test_schedule_skips_missed_ticks():
    now = [0.0]
    sleeps: list[float] = []

    def sleep(s: float) -> None:
        sleeps.append(s)
        raise KeyboardInterrupt

    def slow() -> None:
        now[0] += 25.0  # longer than two periods

    assert job.schedule(slow, 10.0, sleep=sleep, clock=lambda: now[0]) == 0
    assert sleeps == [5.0]  # next tick at 30, not 10 or 20


def test_unreachable_redis_exits_1_before_starting_spark(capsys):
    from tests.redis_server import free_port

    rc = job.main(["--redis-url", f"redis://:secret@127.0.0.1:{free_port()}/0", "--out", "unused"])
    assert rc == 1
    err = capsys.readouterr().err
    assert "Redis at redis://:***@127.0.0.1:" in err and "secret" not in err


@pytest.fixture
def client(redis_server):
    c = redis.Redis.from_url(redis_server.url)
    yield c
    c.close()


@pytest.mark.redis
def test_no_snapshot_in_window_exits_2_and_says_what_to_do(redis_server, client, tmp_path, capsys):
    prefix = "empty" + uuid.uuid4().hex[:8]
    now = redis_now_ms(client)
    put_snapshot(client, prefix, now - 3 * 3600 * 1000, [["c", "b", "T", 1, 1, 6, 0]])  # outside a 1h window
    rc = job.main(
        ["--redis-url", redis_server.url, "--key-prefix", prefix, "--since", "1h", "--out", str(tmp_path)]
    )
    assert rc == 2
    err = capsys.readouterr().err
    assert f"no snapshots in the last 1h under {{{prefix}}}:snaps" in err and "namesrv snapshot" in err
    assert client.get(f"{{{prefix}}}:report:skew") is None


@pytest.mark.redis
def test_full_run_over_hand_written_snapshots(spark, redis_server, client, tmp_path):
    """Three snapshots in the window; the middle one lost a part (skipped). Weights from a CSV file."""
    prefix = "job" + uuid.uuid4().hex[:8]
    now = redis_now_ms(client)
    first = [
        ["c1", "b1", "Orders", 4, 4, 6, 0],
        ["c1", "b2", "Orders", 4, 4, 6, 0],
        ["c1", "b1", "c1", 16, 16, 7, 0],
        ["c1", "b1", "TBW102", 8, 8, 7, 0],  # system topics: left out
    ]
    latest = [
        ["c1", "b1", "Orders", 9, 9, 6, 0],
        ["c1", "b2", "Orders", 1, 1, 6, 0],  # 0.5 -> 0.9
        ["c1", "b1", "Solo", 4, 4, 6, 0],
        ["c1", "b1", "Even", 4, 4, 6, 0],
        ["c1", "b2", "Even", 4, 4, 6, 0],
        ["c1", "b1", "c1", 16, 16, 7, 0],
        ["c1", "b1", "TBW102", 8, 8, 7, 0],
    ]
    idle = {
        "cluster": "c1",
        "brokerName": "b3",
        "brokerId": 0,
        "brokerAddr": "10.0.0.9:10911",
        "lastHeartbeat": now,
    }
    put_snapshot(client, prefix, now - 600_000, first)
    put_snapshot(client, prefix, now - 300_000, first, part_rows=2)
    client.delete(f"{{{prefix}}}:snap:{now - 300_000}:1")
    brokers = [
        {
            "cluster": "c1",
            "brokerName": b,
            "brokerId": 0,
            "brokerAddr": f"10.0.0.{i}:10911",
            "lastHeartbeat": now,
        }
        for i, b in enumerate(("b1", "b2"))
    ] + [idle]
    put_snapshot(client, prefix, now - 1_000, latest, brokers=brokers, part_rows=3)
    weights = tmp_path / "weights.csv"
    weights.write_text("topic,weight\nOrders,10\nSolo,2\n")  # Even: unlisted, weighs 0
    out = tmp_path / "out"

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
            "--weights",
            str(weights),
        ]
    )
    assert rc == 0

    summary = orjson.loads((out / "summary.json").read_bytes())
    assert orjson.loads(client.get(f"{{{prefix}}}:report:skew")) == summary
    assert {"generatedAt", "window", "topics", "brokers", "clusters", "worsening"} <= summary.keys()
    w = summary["window"]
    assert (w["snapshots"], w["latestTakenAt"], w["firstTakenAt"]) == (2, now - 1_000, now - 600_000)
    assert w["skippedSnapshots"] == [now - 300_000]
    assert w["rows"] == len(first) + len(latest)  # the complete snapshots' rows, not the lost one's
    assert summary["params"]["rules"]["CONCENTRATED"].startswith(
        "two or more brokers host the topic and one holds more than 50 % of its writable write queues"
    )

    topics = {t["topic"]: t for t in summary["topics"]}
    assert set(topics) == {"Orders", "Solo", "Even"}
    assert list(topics) == ["Solo", "Orders", "Even"]  # most skewed first
    assert topics["Orders"]["maxShare"] == approx6(0.9)
    assert topics["Orders"]["flags"] == ["CONCENTRATED"]
    assert topics["Solo"]["flags"] == ["SINGLE_BROKER"]
    assert topics["Even"]["flags"] == [] and topics["Even"]["gini"] == 0
    assert {
        "topic",
        "cluster",
        "brokers",
        "writeQueues",
        "maxShare",
        "maxMeanRatio",
        "cv",
        "gini",
        "flags",
    } <= topics["Orders"].keys()

    # load: b1 = 10*0.9 + 2*1 + 0*0.5 = 11, b2 = 10*0.1 = 1, b3 = 0 (registered, no topics) -> 11/12, 1/12, 0
    brokers_out = {b["brokerName"]: b for b in summary["brokers"]}
    assert brokers_out["b1"]["share"] == approx6(11 / 12)
    assert brokers_out["b2"]["share"] == approx6(1 / 12)
    assert (brokers_out["b3"]["share"], brokers_out["b3"]["topics"], brokers_out["b3"]["writeQueues"]) == (
        0,
        0,
        0,
    )
    assert (brokers_out["b1"]["writeQueues"], brokers_out["b1"]["topics"]) == (9 + 4 + 4, 3)
    (cluster,) = summary["clusters"]
    assert (cluster["cluster"], cluster["brokers"], cluster["topics"]) == ("c1", 3, 3)
    assert cluster["maxMeanRatio"] == approx6((11 / 12) / (1 / 3))

    assert [(x["topic"], x["firstMaxShare"], x["maxShare"]) for x in summary["worsening"]] == [
        ("Orders", approx6(0.5), approx6(0.9))
    ]
    assert [(p["takenAt"], p["cluster"]) for p in summary["imbalance"]] == [
        (now - 600_000, "c1"),
        (now - 1_000, "c1"),
    ]

    for name in ("topics", "brokers", "clusters", "worsening", "imbalance"):
        assert (out / f"{name}.csv").is_file()
        assert len(pd.read_parquet(out / f"{name}.parquet")) == len(pd.read_csv(out / f"{name}.csv"))
    csv_topics = pd.read_csv(out / "topics.csv")
    assert csv_topics.set_index("topic").loc["Orders", "flags"] == "CONCENTRATED"

    html = (out / "report.html").read_text()
    assert "more than 50 %" in html and "≥" not in html and "&ge;" not in html
    assert len(re.findall(r'<img alt="[^"]+" src="data:image/png;base64,[A-Za-z0-9+/=]{100,}"', html)) == 5
    assert not re.search(r'(src|href)="(https?:)?//', html)  # self-contained
    assert "Orders" in html and "CONCENTRATED" in html

    # What would even it out. Orders 9 + 1 on b1, b2 -> 5 + 5 (4 queues move); Solo, 4 on b1 -> 2 + 2 with the
    # least loaded broker that does not host it (b3, idle). After: max share 1/2 each, not flagged.
    actions = {a["topic"]: a for a in summary["actions"]}
    assert set(actions) == {"Orders", "Solo"} and [a["topic"] for a in summary["actions"]] == ["Solo", "Orders"]
    assert (actions["Orders"]["action"], actions["Orders"]["changes"], actions["Orders"]["queuesToMove"]) == (
        "REBALANCE", ["b1: 9 -> 5", "b2: 1 -> 5"], 4)
    assert (actions["Solo"]["action"], actions["Solo"]["changes"], actions["Solo"]["addOn"]) == (
        "SPREAD", ["b1: 4 -> 2", "b3: 0 -> 2"], ["b3"])
    assert actions["Solo"]["maxShareAfter"] == 0.5 and actions["Solo"]["flaggedAfter"] is False
    # Hot brokers (fair share 1/3 in c1): b1 carries 11/12. Its topics beyond their fair part, by weight:
    # Orders 10 * 0.9 - 10/3, Solo 2 * 1 - 2/3 (Even weighs 0)
    (hot,) = summary["hotBrokers"]
    assert (hot["brokerName"], [t["topic"] for t in hot["topics"]]) == ("b1", ["Orders", "Solo"])
    assert [t["excessLoad"] for t in hot["topics"]] == [approx6(9 - 10 / 3), approx6(2 - 2 / 3)]
    assert summary["trend"]["previous"] is None and summary["trend"]["runs"] == 1
    assert len(pd.read_csv(out / "actions.csv")) == 2 and len(pd.read_parquet(out / "hot_brokers.parquet")) == 2
    (run_dir,) = (out / "runs").iterdir()
    assert orjson.loads((run_dir / "summary.json").read_bytes()) == summary

    # A later run compares itself with this one: Orders grew to 19 + 1 (0.95), b1's share grew.
    put_snapshot(client, prefix, now + 1_000, [r if r[2] != "Orders" or r[1] != "b1" else [*r[:3], 19, 19, 6, 0]
                                               for r in latest], brokers=brokers)
    argv = ["--redis-url", redis_server.url, "--key-prefix", prefix, "--since", "1h", "--out", str(out),
            "--weights", str(weights), "--history", "2"]
    assert job.main(argv) == 0
    second = orjson.loads((out / "summary.json").read_bytes())
    trend = second["trend"]
    assert trend["runs"] == 2 and trend["previous"]["generatedAt"] == summary["generatedAt"]
    assert [(t["topic"], t["previousMaxShare"], t["maxShare"]) for t in trend["topicsGrew"]] == [
        ("Orders", approx6(0.9), approx6(0.95))]
    assert [(b["brokerName"], b["previousShare"], b["share"]) for b in trend["brokersGrew"]] == [
        ("b1", approx6(11 / 12), approx6(11.5 / 12))]
    assert trend["newlyFlagged"] == []
    assert_doc_example_fields(second)
    assert [(c["cluster"], c["runAt"]) for c in trend["clusters"]] == [
        ("c1", summary["trend"]["clusters"][0]["runAt"]), ("c1", trend["clusters"][1]["runAt"])]
    history = pd.read_parquet(out / "history_topics.parquet")
    assert history.groupby("runId")["topic"].apply(sorted).tolist() == [["Even", "Orders", "Solo"]] * 2

    # The history is bounded: a third run with --history 2 keeps two runs in Redis and on disk.
    assert job.main(argv) == 0
    assert client.llen(f"{{{prefix}}}:report:skew:history") == 2
    assert len(list((out / "runs").iterdir())) == 2
    assert pd.read_parquet(out / "history_clusters.parquet")["runId"].nunique() == 2


# --- the stages, one at a time


def inline_fetched(spark, rows, brokers=()) -> job.Fetched:
    """What `fetch` hands to `compute`, built from inline rows (no Redis)."""
    from service.skew import transforms as T
    from service.store.snapshot_reader import SnapshotManifest

    stamps = sorted({r[0] for r in rows})
    snaps = [
        SnapshotManifest(str(t), t, 1, sum(r[0] == t for r in rows), 0,
                         tuple({"cluster": c, "brokerName": b} for c, b in brokers))
        for t in stamps
    ]
    return job.Fetched(spark.createDataFrame(rows, T.ROW_SCHEMA), snaps, len(rows), [], 1)


@pytest.mark.redis
def test_compute_then_render_then_publish(spark, redis_server, tmp_path):
    """compute() on inline rows (no snapshot in Redis): the latest snapshot's tables and the window's series;
    then the page, the files and the stored summary."""
    rows = [
        (1, "c", "b1", "Even", 4, 4, 6, 0), (1, "c", "b2", "Even", 4, 4, 6, 0),
        (2, "c", "b1", "Even", 4, 4, 6, 0), (2, "c", "b2", "Even", 4, 4, 6, 0),
        (2, "c", "b1", "Half", 2, 2, 6, 0), (2, "c", "b2", "Half", 2, 2, 6, 0),   # exactly 50 %: not flagged
        (1, "c", "b1", "Tilt", 2, 2, 6, 0), (1, "c", "b2", "Tilt", 2, 2, 6, 0),
        (2, "c", "b1", "Tilt", 3, 3, 6, 0), (2, "c", "b2", "Tilt", 2, 2, 6, 0),   # 60 %: CONCENTRATED, worse
    ]
    fetched = inline_fetched(spark, rows, brokers=[("c", "b1"), ("c", "b2"), ("c", "idle")])
    opts = options.JobOptions(settings=options.load_settings(env={}), since_s=3600, out=tmp_path)
    progress = job.Progress()
    tables = job.compute(spark, fetched, opts, None, progress)
    assert list(progress.stages) == ["topics", "brokers", "latest", "actions"]

    t = tables.topics.set_index("topic")
    assert list(tables.topics["topic"]) == ["Tilt", "Even", "Half"]
    assert [list(t.loc[n, "flags"]) for n in ("Tilt", "Even", "Half")] == [["CONCENTRATED"], [], []]
    assert t.loc["Half", "maxShare"] == 0.5
    assert list(tables.brokers["brokerName"]) == ["b1", "b2", "idle"]
    assert tables.brokers.set_index("brokerName").loc["idle", "topics"] == 0
    assert list(tables.worsening["topic"]) == ["Tilt"]
    assert sorted(tables.imbalance["takenAt"].unique()) == [1, 2]
    assert tables.top[0] == ("c", "Tilt") and set(tables.heat["topic"]) == {"Tilt", "Even", "Half"}

    window = job.Window(0, 3, fetched.snaps)
    summary, record = job.summarize(window, fetched, tables, opts, None)
    assert [a["topic"] for a in summary["actions"]] == ["Tilt"]
    assert summary["actions"][0]["changes"] == ["b2: 2 -> 3"]  # b1 keeps its 3; one queue added
    assert (record["runAt"], [t["topic"] for t in record["topics"]]) == (3, ["Tilt", "Even", "Half"])
    assert (summary["window"]["rows"], summary["totals"]["topics"], summary["totals"]["worsening"]) == (10, 3, 1)
    html = job.render(summary, tables, opts)
    assert html.count("data:image/png;base64,") == 5 and "more than 50 %" in html

    prefix = "pub" + uuid.uuid4().hex[:8]
    with SnapshotReader(RedisSpec(redis_server.url), prefix) as reader:
        files = job.publish(tmp_path / "out", reader, summary, record, tables, html, [], 5)
        assert reader.load_summary() == orjson.loads(orjson.dumps(summary))
        assert reader.history() == [orjson.loads(orjson.dumps(record))]
    tables_out = ("topics", "brokers", "clusters", "worsening", "imbalance", "actions", "hot_brokers",
                  "history_clusters", "history_brokers", "history_topics")
    assert sorted(str(p.relative_to(tmp_path / "out")) for p in files) == sorted(
        [f"{n}.{e}" for n in tables_out for e in ("csv", "parquet")]
        + ["report.html", "summary.json", "runs/3/report.html", "runs/3/summary.json"]
    )
    assert orjson.loads((tmp_path / "out" / "summary.json").read_bytes()) == orjson.loads(orjson.dumps(summary))


def assert_doc_example_fields(summary: dict) -> None:
    """docs/skew-report.md's summary.json example shows every top-level field of a real summary, and each field it
    shows at any depth is one a real summary has there (the doc may leave some out: "…" keys, fields it lists in
    prose)."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "skew-report.md").read_text()
    example = json.loads(re.search(r"`summary.json`, also `SET`.*?```json\n(.*?)```", doc, re.S).group(1))
    assert example.keys() == summary.keys()

    def walk(shown, real, path: str) -> None:
        if isinstance(shown, dict) and isinstance(real, dict):
            for key, value in shown.items():
                if key == "…":
                    continue
                assert key in real, f"docs/skew-report.md shows {path}.{key}, a real summary has no such field"
                walk(value, real[key], f"{path}.{key}")
        elif isinstance(shown, list) and isinstance(real, list) and shown and real:
            walk(shown[0], real[0], f"{path}[0]")

    walk(example, summary, "summary")
