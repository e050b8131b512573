"""`namesrv skew-report`: the PySpark job that reads the route snapshots of a time window from Redis and
writes the topic-load skew report (summary.json, CSV/Parquet tables, report.html) and stores the summary
in Redis.

Also runnable as `spark-submit --py-files namesrv.zip service/skew/job.py --redis-url ...`. pyspark is
imported only inside run(), so the CLI can build its parser (add_arguments) without the `spark` extra.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and not __package__:  # run as a script (spark-submit): make `service` importable
    _here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or ".") == _here:
        sys.path.pop(0)  # this directory holds io.py, which must not shadow the stdlib's io
    sys.path.insert(0, os.path.dirname(os.path.dirname(_here)))

import argparse  # noqa: E402
import logging  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from service.skew import io as skew_io  # noqa: E402

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2  # also: no snapshot in the window
HEATMAP_TOPICS = 20


# --- arguments


def _duration(text: str) -> float:
    try:
        return skew_io.parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _share(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 < v < 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (exclusive), got {v:g}")
    return v


def _conf(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The skew-report flags (service/cli.py adds them to its `skew-report` subparser)."""
    parser.add_argument(
        "--redis-url",
        default=os.environ.get("NAMESRV_REDIS_URL", ""),
        help="Redis holding the snapshots (default: $NAMESRV_REDIS_URL); executors connect too",
    )
    parser.add_argument(
        "--prefix",
        default=os.environ.get("NAMESRV_KEY_PREFIX", "nsrv"),
        help="key prefix / hash tag of the registry (default: $NAMESRV_KEY_PREFIX or nsrv)",
    )
    parser.add_argument(
        "--since",
        type=_duration,
        default=_duration("24h"),
        metavar="DURATION",
        help="window: snapshots taken in the last DURATION, e.g. 30m, 24h, 7d (default 24h)",
    )
    parser.add_argument(
        "--out",
        default="skew-report",
        metavar="DIR",
        help="output directory (created; files are replaced atomically) (default ./skew-report)",
    )
    parser.add_argument(
        "--master",
        default=None,
        help="Spark master (default local[*]; under spark-submit, spark-submit's --master)",
    )
    parser.add_argument(
        "--weights",
        default=None,
        metavar="FILE",
        help="per-topic traffic weights, JSON {topic: weight} or CSV topic,weight; "
        "'*' sets the weight of unlisted topics (default 0)",
    )
    parser.add_argument(
        "--every",
        type=_duration,
        default=None,
        metavar="DURATION",
        help="repeat on this period until Ctrl-C, e.g. 10m (default: run once)",
    )
    parser.add_argument(
        "--concentrated-share",
        type=_share,
        default=0.5,
        metavar="SHARE",
        help="flag CONCENTRATED when one broker holds more than this share of a multi-broker "
        "topic's writable write queues (default 0.5)",
    )
    parser.add_argument(
        "--include-system-topics",
        action="store_true",
        help="also report RocketMQ's own topics (TBW102, rmq_sys_*, cluster and broker names)",
    )
    parser.add_argument(
        "--summary-topics",
        type=int,
        default=1000,
        metavar="N",
        help="topics (and worsening topics) listed in summary.json and Redis; 0 = all "
        "(default 1000; the CSV/Parquet tables always hold all)",
    )
    parser.add_argument(
        "--conf",
        type=_conf,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark configuration, repeatable (e.g. spark.driver.memory=4g)",
    )
    return parser


# --- progress


class Progress:
    """Logs each stage with the rows it produced and the time since the run started."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.stages: dict[str, float] = {}  # stage -> elapsed seconds at its end (benchmarks read it)

    def stage(self, name: str, rows: int | None = None, **extra: Any) -> None:
        self.stages[name] = round(time.monotonic() - self.t0, 3)
        parts = [f"stage={name}"]
        if rows is not None:
            parts.append(f"rows={rows}")
        parts += [f"{k}={v}" for k, v in extra.items()]
        parts.append(f"elapsed={time.monotonic() - self.t0:.1f}s")
        log.info("skew-report %s", " ".join(parts))


class NoSnapshots(Exception):
    """Nothing to report on; the message tells the operator what to do."""


# --- Spark session


def _local_parallelism(master: str) -> int:
    inner = master[master.find("[") + 1 : master.find("]")] if "[" in master else "1"
    if inner.split(",")[0] in ("*", ""):
        return os.cpu_count() or 2
    try:
        return max(1, int(inner.split(",")[0]))
    except ValueError:
        return os.cpu_count() or 2


def spark_session(args: argparse.Namespace) -> tuple[Any, bool]:
    """(session, owned): an already active session (tests, notebooks) is reused and not stopped."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    master = args.master or (None if "PYSPARK_GATEWAY_PORT" in os.environ else "local[*]")
    b = SparkSession.builder.appName("namesrv-skew-report")
    if master:
        b = b.master(master)
        if master.startswith("local"):
            # Small, local data: a few shuffle partitions per core instead of 200.
            b = b.config("spark.sql.shuffle.partitions", str(4 * _local_parallelism(master)))
    b = b.config("spark.ui.showConsoleProgress", "false")  # progress goes to the log instead
    for key, value in args.conf:
        b = b.config(key, value)
    return b.getOrCreate(), True


# --- one run


@dataclass
class Outcome:
    summary: dict[str, Any]
    files: list[Path]
    stages: dict[str, float]


def run_once(spark: Any, args: argparse.Namespace) -> Outcome:
    """Read the window, compute, write the outputs and store the summary. Raises NoSnapshots."""
    import pandas as pd
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from service.skew import report
    from service.skew import transforms as T

    progress = Progress()
    spark.conf.set("spark.sql.execution.arrow.pyspark.enabled", "true")  # toPandas() on Spark 3.5
    spec = redis_spec(args)
    client = spec.client()
    try:
        since_ms, until_ms, snaps = window_snapshots(client, args)
        weights = skew_io.load_weights(args.weights) if args.weights else None
        specs = skew_io.part_specs(args.prefix, snaps)
        progress.stage("list", snapshots=len(snaps), parts=len(specs), indexedRows=sum(s.rows for s in snaps))

        # Executors fetch and decode the parts; the driver only hands out keys.
        sc = spark.sparkContext
        slices = max(1, min(len(specs), 4 * sc.defaultParallelism))
        rdd = sc.parallelize(specs, slices).mapPartitions(skew_io.PartFetcher(spec))
        # verifySchema off: the rows come from our own decoder, and checking each one costs ~30% of the fetch
        raw = spark.createDataFrame(rdd, T.ROW_SCHEMA, verifySchema=False)
        raw = raw.persist(StorageLevel.MEMORY_AND_DISK)
        fetched = raw.count()
        broken = {
            r.takenAt for r in raw.filter(F.col("cluster").isNull()).select("takenAt").distinct().collect()
        }
        if broken:
            log.warning(
                "skipping %d snapshot(s) with parts removed by retention during the run: %s",
                len(broken),
                sorted(broken),
            )
            snaps = [s for s in snaps if s.taken_at not in broken]
            if not snaps:
                raise NoSnapshots(
                    "every snapshot in the window lost parts to retention while being read; "
                    "run again (or take one with `namesrv snapshot`)"
                )
        progress.stage("fetch", rows=fetched, partitions=slices)

        latest = snaps[-1]
        rows = T.complete_rows(raw)
        brokers_known = spark.createDataFrame(skew_io.broker_rows(snaps), T.BROKER_SCHEMA)
        if not args.include_system_topics:
            rows = T.drop_system_topics(rows, brokers_known)
        shares = T.topic_broker_shares(rows).persist(StorageLevel.MEMORY_AND_DISK)
        topics_all = T.topic_metrics(shares, args.concentrated_share).persist(StorageLevel.MEMORY_AND_DISK)
        n_topic_rows = topics_all.count()
        raw.unpersist()
        progress.stage("topics", rows=n_topic_rows)

        weights_df = T.weights_frame(spark, weights) if weights else None
        default_weight = (weights or {}).get("*", 0.0) if weights else 1.0
        brokers_all = T.broker_metrics(shares, brokers_known, weights_df, default_weight).persist(
            StorageLevel.MEMORY_AND_DISK
        )
        clusters_all = T.cluster_metrics(brokers_all, topics_all)
        imbalance = to_pandas(clusters_all).sort_values(["cluster", "takenAt"]).reset_index(drop=True)
        progress.stage("brokers", rows=len(imbalance))

        topics = report.rank_topics(to_pandas(T.at(topics_all, latest.taken_at)))
        brokers = (
            to_pandas(T.at(brokers_all, latest.taken_at))
            .sort_values(["cluster", "brokerName"])
            .reset_index(drop=True)
        )
        clusters = (
            imbalance[imbalance["takenAt"] == latest.taken_at].drop(columns="takenAt").reset_index(drop=True)
        )
        worsening = to_pandas(T.worsening(topics_all, latest.taken_at))
        if not worsening.empty:
            worsening = worsening.sort_values(
                ["delta", "cluster", "topic"], ascending=[False, True, True]
            ).reset_index(drop=True)
        progress.stage("latest", rows=len(topics), brokers=len(brokers), worsening=len(worsening))

        top = (
            [(c, t) for c, t in zip(topics["cluster"], topics["topic"], strict=True)][:HEATMAP_TOPICS]
            if not topics.empty
            else []
        )
        heat = pd.DataFrame(columns=["cluster", "topic", "brokerName", "share"])
        if top:
            wanted = spark.createDataFrame(top, "cluster string, topic string")
            heat = to_pandas(
                T.at(shares, latest.taken_at)
                .join(F.broadcast(wanted), ["cluster", "topic"])
                .select("cluster", "topic", "brokerName", "share")
            )
        shares.unpersist()
        topics_all.unpersist()
        brokers_all.unpersist()

        window = {
            "since": _since_text(args),
            "sinceMs": since_ms,
            "untilMs": until_ms,
            "snapshots": len(snaps),
            "firstTakenAt": snaps[0].taken_at,
            "latestTakenAt": latest.taken_at,
            "latestSnapshotId": latest.snap_id,
            "rows": fetched - len(broken),
            "latestRows": latest.rows,
            "skippedSnapshots": sorted(broken),
        }
        params = {
            "prefix": args.prefix,
            "concentratedShare": args.concentrated_share,
            "weights": str(args.weights) if args.weights else None,
            "defaultWeight": default_weight,
            "includeSystemTopics": bool(args.include_system_topics),
        }
        summary = report.build_summary(
            window=window,
            params=params,
            topics=topics,
            brokers=brokers,
            clusters=clusters,
            worsening=worsening,
            imbalance=imbalance,
            flags=T.FLAGS,
            max_topics=args.summary_topics,
        )

        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        files: list[Path] = []
        tables = {
            "topics": (topics, report.TOPIC_FIELDS),
            "brokers": (brokers, report.BROKER_FIELDS),
            "clusters": (clusters, report.CLUSTER_FIELDS),
            "worsening": (worsening, report.WORSENING_FIELDS),
            "imbalance": (imbalance, report.IMBALANCE_FIELDS),
        }
        for name, (pdf, fields) in tables.items():
            files += skew_io.write_table(out, name, pdf[[f for f in fields if f in pdf.columns]])
        charts = {
            "topTopics": report.chart_top_topics(topics, args.concentrated_share),
            "brokerLoad": report.chart_broker_load(brokers),
            "heatmap": report.chart_heatmap(heat, top),
            "imbalance": report.chart_imbalance(imbalance),
        }
        skew_io.write_text(out / "report.html", report.render_html(summary, charts))
        skew_io.write_json(out / "summary.json", summary)
        files += [out / "report.html", out / "summary.json"]
        key = skew_io.store_summary(client, args.prefix, summary)
        progress.stage("write", files=len(files), out=str(out), redisKey=key)
        return Outcome(summary, files, progress.stages)
    finally:
        client.close()


def redis_spec(args: argparse.Namespace) -> skew_io.RedisSpec:
    return skew_io.RedisSpec(args.redis_url, password=os.environ.get("NAMESRV_REDIS_PASSWORD") or None)


def window_snapshots(client: Any, args: argparse.Namespace) -> tuple[int, int, list[skew_io.SnapshotInfo]]:
    """(since_ms, now_ms, snapshots in the window, oldest first) by Redis' clock. Raises NoSnapshots."""
    until_ms = skew_io.redis_now_ms(client)
    since_ms = until_ms - int(args.since * 1000)
    snaps = skew_io.list_snapshots(client, args.prefix, since_ms)
    if not snaps:
        raise NoSnapshots(
            f"no snapshots in the last {_since_text(args)} under {skew_io.index_key(args.prefix)}; "
            "take one with `namesrv snapshot` (serving workers also take them every "
            "NAMESRV_SNAPSHOT_INTERVAL_S seconds), or widen --since"
        )
    return since_ms, until_ms, snaps


def to_pandas(df: Any) -> Any:
    """A small result table on the driver. Through Arrow (Spark >= 4: DataFrame.toArrow) when possible:
    toPandas() warns on pandas 3, and the Arrow path keeps flags as lists."""
    if hasattr(df, "toArrow"):
        return df.toArrow().to_pandas()
    return df.toPandas()


def _since_text(args: argparse.Namespace) -> str:
    s = args.since
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size and s % size == 0:
            return f"{int(s // size)}{unit}"
    return f"{s:g}s"


# --- schedule


def schedule(
    job: Callable[[], Any],
    every_s: float,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Run job now and then on every tick (start + k * every_s; missed ticks are skipped, not queued).
    A failing run is logged and retried at the next tick; Ctrl-C stops cleanly (exit 0)."""
    next_tick = clock()
    try:
        while True:
            try:
                job()
            except NoSnapshots as e:
                log.warning("skew-report: %s", e)
            except KeyboardInterrupt:
                raise
            except Exception:
                log.exception("skew-report run failed; retrying at the next tick")
            next_tick += every_s
            now = clock()
            if next_tick <= now:
                next_tick += ((now - next_tick) // every_s + 1) * every_s
            log.info("skew-report next run in %.0fs", next_tick - now)
            sleep(next_tick - now)
    except KeyboardInterrupt:
        log.info("skew-report stopped")
        return EXIT_OK


# --- entry points


def _error(msg: str) -> None:
    print(f"namesrv skew-report: error: {msg}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    """Run the report once (or on a schedule with --every). Returns the process exit code."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not args.redis_url:
        _error(
            "--redis-url (or NAMESRV_REDIS_URL) is required: the Spark executors read the snapshots from a "
            "shared Redis (embedded mode keeps them inside the serving process)"
        )
        return EXIT_USAGE
    if args.weights and not Path(args.weights).is_file():
        _error(f"--weights: no such file: {args.weights}")
        return EXIT_USAGE
    if args.weights:
        try:
            skew_io.load_weights(args.weights)
        except ValueError as e:
            _error(f"--weights: {e}")
            return EXIT_USAGE
    try:
        import pyspark  # noqa: F401
    except ImportError:
        _error("pyspark is not installed: pip install 'rmq-namesrv[spark]' (and a Java 17+ runtime)")
        return EXIT_USAGE

    def preflight() -> None:
        with redis_spec(args).client() as client:
            client.ping()
            if not args.every:
                window_snapshots(client, args)

    # Fail fast, before a JVM is started: Redis unreachable, or nothing to report on.
    code = _exit_code_of(preflight, args.redis_url)
    if code is not None:
        return code

    spark, owned = spark_session(args)
    try:
        if args.every:
            return schedule(lambda: run_once(spark, args), args.every)
        outcome: list = []
        code = _exit_code_of(lambda: outcome.append(run_once(spark, args)), args.redis_url)
        if code is not None:
            return code
        log.info("skew-report written to %s (%d files)", args.out, len(outcome[0].files))
        return EXIT_OK
    finally:
        if owned:
            spark.stop()


def _exit_code_of(step, redis_url: str) -> int | None:
    """Run a step; map "no snapshots" and Redis errors to the CLI's exit codes with a clear message."""
    try:
        step()
    except NoSnapshots as e:
        _error(str(e))
        return EXIT_USAGE
    except skew_io.redis.RedisError as e:
        _error(f"Redis at {_redact(redis_url)}: {e}")
        return EXIT_FAILED
    return None


def _redact(url: str) -> str:
    """redis://user:secret@host -> redis://user:***@host"""
    head, at, tail = url.rpartition("@")
    if not at or ":" not in head.split("//", 1)[-1]:
        return url
    user = head.rsplit(":", 1)[0]
    return f"{user}:***@{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="namesrv skew-report", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
