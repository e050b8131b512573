"""`namesrv skew-report`: the PySpark job that reads the route snapshots of a time window from Redis and
writes the topic-load skew report (summary.json, CSV/Parquet tables, report.html) and stores the summary
in Redis.

One run is four stages: read (list the window, executors fetch the parts) -> compute (pure DataFrame
transforms, service/skew/transforms.py) -> render (summary and HTML, service/skew/report.py) -> publish
(files, Redis). Also runnable as `spark-submit ... service/skew/job.py --redis-url ...`; pyspark is imported
only once a run starts, so the CLI can build its parser without the `spark` extra.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from service.cmdline import CommandParser, add_common, install_extra
from service.config import ConfigError
from service.errors import StoreUnavailable
from service.skew import outputs
from service.skew.options import JobOptions, add_arguments, options_of
from service.skew.weights import default_weight, load_weights
from service.store.snapshot_reader import (
    RedisSpec,
    SnapshotManifest,
    SnapshotReader,
    broker_rows,
    part_refs,
)

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2  # also: no snapshot in the window
HEATMAP_TOPICS = 20
STAGES = ("list", "fetch", "topics", "brokers", "latest", "actions", "render", "write")


class Progress:
    """Logs each stage with the rows it produced and the time since the run started."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.stages: dict[str, float] = {}  # stage -> elapsed seconds at its end (benchmarks read it)

    def stage(self, name: str, rows: int | None = None, **extra: Any) -> None:
        elapsed = time.monotonic() - self.t0
        self.stages[name] = round(elapsed, 3)
        parts = [f"stage={name}"]
        if rows is not None:
            parts.append(f"rows={rows}")
        parts += [f"{k}={v}" for k, v in extra.items()]
        parts.append(f"elapsed={elapsed:.1f}s")
        log.info("skew-report %s", " ".join(parts))


class NoSnapshots(Exception):
    """Nothing to report on; the message tells the operator what to do."""


@dataclass
class Window:
    since_ms: int
    until_ms: int  # Redis' clock when the run started: also the run's id in the history
    snaps: list[SnapshotManifest]
    previous: list[dict[str, Any]] = field(default_factory=list)  # earlier runs' records, newest first


@dataclass
class Fetched:
    """The rows the executors fetched (persisted; marker rows of lost parts included) and what they hold."""

    rows: Any  # DataFrame, transforms.ROW_SCHEMA
    snaps: list[SnapshotManifest]  # complete snapshots only, oldest first
    row_count: int  # rows of the complete snapshots
    skipped: list[int]  # takenAt of snapshots that lost a part while being read
    partitions: int

    @property
    def latest(self) -> SnapshotManifest:
        return self.snaps[-1]


@dataclass
class Tables:
    """Small pandas tables on the driver: the latest snapshot, and the window's cluster series."""

    topics: Any
    brokers: Any
    clusters: Any
    worsening: Any
    imbalance: Any
    heat: Any
    top: list[tuple[str, str]] = field(default_factory=list)
    actions: Any = None  # per flagged topic: what would even it out
    hot: Any = None  # hot brokers and the topics that make them hot


@dataclass
class Outcome:
    summary: dict[str, Any]
    files: list[Path]
    stages: dict[str, float]


def reader_for(opts: JobOptions) -> SnapshotReader:
    """The store's reader, in the settings' Redis mode: single, Sentinel or Cluster."""
    return SnapshotReader(RedisSpec.from_settings(opts.settings), opts.settings.key_prefix)


def redis_where(settings: Any) -> str:
    """Where the job looked for Redis, for messages (no password)."""
    if settings.redis_sentinels:
        return f"Sentinel master {settings.redis_master_name!r} via {settings.redis_sentinels}"
    return str(settings.masked()["redis_url"])


def to_pandas(df: Any) -> Any:
    """A small result table on the driver, through Arrow (DataFrame.toArrow, Spark >= 4): no pyspark pandas
    conversion (and its pandas-3 warnings), and flags stay lists."""
    if hasattr(df, "toArrow"):
        return df.toArrow().to_pandas()
    return df.toPandas()


# --- read


def list_window(reader: SnapshotReader, opts: JobOptions) -> Window:
    """The snapshots of the window by Redis' clock, oldest first, and the earlier runs kept for the trend.
    Raises NoSnapshots."""
    until_ms = reader.now_ms()
    since_ms = until_ms - int(opts.since_s * 1000)
    snaps = reader.list_snapshots(since_ms)
    if not snaps:
        raise NoSnapshots(
            f"no snapshots in the last {opts.since_text} under {reader.index_name}; "
            "take one with `namesrv snapshot` (serving workers also take them every "
            "NAMESRV_SNAPSHOT_INTERVAL_S seconds), or widen --since"
        )
    return Window(since_ms, until_ms, snaps, reader.history(opts.history))


def fetch(spark: Any, reader: SnapshotReader, window: Window) -> Fetched:
    """Executors fetch and decode the parts; the driver only hands out (takenAt, id, part) references.
    A snapshot that lost a part to retention meanwhile is dropped whole."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from service.skew import transforms as T

    refs = part_refs(window.snaps)
    sc = spark.sparkContext
    slices = max(1, min(len(refs), 4 * sc.defaultParallelism))
    rdd = sc.parallelize(refs, slices).mapPartitions(reader.fetch_parts)
    # verifySchema off: the rows come from the store's decoder, and checking each one costs ~30% of the fetch
    raw = spark.createDataFrame(rdd, T.ROW_SCHEMA, verifySchema=False).persist(StorageLevel.MEMORY_AND_DISK)
    per_snapshot = raw.groupBy("takenAt").agg(
        F.count(F.lit(1)).alias("rows"), F.max(F.col("cluster").isNull().cast("int")).alias("lost")
    )
    counts = {r.takenAt: (r.rows, r.lost) for r in per_snapshot.collect()}
    skipped = sorted(t for t, (_, lost) in counts.items() if lost)
    if skipped:
        log.warning("skipping %d snapshot(s) with parts removed by retention during the run: %s",
                    len(skipped), skipped)
    snaps = [s for s in window.snaps if s.taken_at not in skipped]
    if not snaps:
        raw.unpersist()
        raise NoSnapshots(
            "every snapshot in the window lost parts to retention while being read; "
            "run again (or take one with `namesrv snapshot`)"
        )
    row_count = sum(counts.get(s.taken_at, (0, 0))[0] for s in snaps)
    return Fetched(raw, snaps, row_count, skipped, slices)


# --- compute


def compute(
    spark: Any, fetched: Fetched, opts: JobOptions, weights: dict[str, float] | None, progress: Progress
) -> Tables:
    """The metrics of every snapshot in the window, then the latest snapshot's tables."""
    from pyspark import StorageLevel

    from service.skew import report
    from service.skew import transforms as T

    def keep(df: Any) -> Any:
        return df.persist(StorageLevel.MEMORY_AND_DISK)

    rows = T.complete_rows(fetched.rows, fetched.skipped)
    known = spark.createDataFrame(broker_rows(fetched.snaps), T.BROKER_SCHEMA)
    if not opts.include_system_topics:
        rows = T.drop_system_topics(rows, known)
    shares = keep(T.topic_broker_shares(rows))
    topics_all = keep(T.topic_metrics(shares, opts.concentrated_share))
    progress.stage("topics", rows=topics_all.count())
    fetched.rows.unpersist()

    weights_df = T.weights_frame(spark, weights) if weights else None
    brokers_all = keep(T.broker_metrics(shares, known, weights_df, default_weight(weights)))
    imbalance = to_pandas(T.cluster_metrics(brokers_all, topics_all)).sort_values(["cluster", "takenAt"])
    imbalance = imbalance.reset_index(drop=True)
    progress.stage("brokers", rows=len(imbalance))

    latest = fetched.latest.taken_at
    topics = report.rank_topics(to_pandas(T.at(topics_all, latest)))
    top = list(zip(topics["cluster"], topics["topic"], strict=True))[:HEATMAP_TOPICS]
    heat = to_pandas(T.top_shares(spark, shares, latest, top))
    tables = Tables(
        topics=topics,
        brokers=report.sort_brokers(to_pandas(T.at(brokers_all, latest))),
        clusters=imbalance[imbalance["takenAt"] == latest].drop(columns="takenAt").reset_index(drop=True),
        worsening=report.sort_worsening(to_pandas(T.worsening(topics_all, latest))),
        imbalance=imbalance,
        heat=heat,
        top=top,
    )
    progress.stage("latest", rows=len(tables.topics), brokers=len(tables.brokers),
                   worsening=len(tables.worsening))

    shares_now, brokers_now = T.at(shares, latest), T.at(brokers_all, latest)
    tables.actions = report.rank_actions(
        to_pandas(T.topic_actions(shares_now, T.at(topics_all, latest), brokers_now, opts.concentrated_share)),
        tables.topics,
    )
    tables.hot = report.sort_hot(to_pandas(T.hot_brokers(
        shares_now, brokers_now, weights_df, default_weight(weights), opts.hot_broker_ratio)))
    for df in (shares, topics_all, brokers_all):
        df.unpersist()
    progress.stage("actions", rows=len(tables.actions), hotBrokerTopics=len(tables.hot))
    return tables


# --- render


def summarize(
    window: Window, fetched: Fetched, tables: Tables, opts: JobOptions, weights: dict[str, float] | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(summary, this run's history record). The summary's `trend` compares the run with the kept ones."""
    from service.skew import history, report
    from service.skew import transforms as T

    latest = fetched.latest
    summary = report.build_summary(
        window={
            "since": opts.since_text,
            "sinceMs": window.since_ms,
            "untilMs": window.until_ms,
            "snapshots": len(fetched.snaps),
            "firstTakenAt": fetched.snaps[0].taken_at,
            "latestTakenAt": latest.taken_at,
            "latestSnapshotId": latest.snap_id,
            "rows": fetched.row_count,
            "latestRows": latest.rows,
            "skippedSnapshots": fetched.skipped,
        },
        params={
            "prefix": opts.prefix,
            "concentratedShare": opts.concentrated_share,
            "weights": str(opts.weights) if opts.weights else None,
            "defaultWeight": default_weight(weights),
            "includeSystemTopics": opts.include_system_topics,
            "rules": report.flag_rules(opts.concentrated_share),
            "hotBrokerRatio": opts.hot_broker_ratio,
            "history": opts.history,
        },
        topics=tables.topics,
        brokers=tables.brokers,
        clusters=tables.clusters,
        worsening=tables.worsening,
        imbalance=tables.imbalance,
        flags=T.FLAGS,
        actions=tables.actions,
        hot=tables.hot,
        max_topics=opts.summary_topics,
    )
    record = history.run_record(summary, tables.brokers, window.until_ms)
    cap = opts.summary_topics if opts.summary_topics > 0 else None
    summary["trend"] = history.trend(tables.topics, tables.brokers, record, window.previous, cap)
    return summary, record


def render(summary: dict[str, Any], tables: Tables, opts: JobOptions) -> str:
    """The HTML page with its charts."""
    from service.skew import report

    charts = {
        "topTopics": report.chart_top_topics(tables.topics, opts.concentrated_share),
        "brokerLoad": report.chart_broker_load(tables.brokers),
        "heatmap": report.chart_heatmap(tables.heat, tables.top),
        "imbalance": report.chart_imbalance(tables.imbalance),
        "runs": report.chart_runs(summary["trend"]["clusters"]),
    }
    return report.render_html(summary, charts)


# --- publish


def publish(
    out: Path,
    reader: SnapshotReader,
    summary: dict[str, Any],
    record: dict[str, Any],
    tables: Tables,
    html: str,
    previous: list[dict[str, Any]],
    keep: int,
) -> list[Path]:
    """Tables, page and summary into `out` (each file replaced atomically), this run's page and summary under
    out/runs/<runId> (the newest `keep`), the kept runs as history tables; then the summary and this run's
    record into Redis."""
    from service.skew import history, report

    out.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    for name, (pdf, fields) in {
        "topics": (tables.topics, report.TOPIC_FIELDS),
        "brokers": (tables.brokers, report.BROKER_FIELDS),
        "clusters": (tables.clusters, report.CLUSTER_FIELDS),
        "worsening": (tables.worsening, report.WORSENING_FIELDS),
        "imbalance": (tables.imbalance, report.IMBALANCE_FIELDS),
        "actions": (tables.actions, report.ACTION_FIELDS),
        "hot_brokers": (tables.hot, report.HOT_FIELDS),
    }.items():
        files += outputs.write_table(out, name, pdf[[f for f in fields if f in pdf.columns]])
    outputs.write_text(out / "report.html", html)
    outputs.write_json(out / "summary.json", summary)
    files += [out / "report.html", out / "summary.json"]
    files += outputs.write_run(out, record["runId"], summary, html, keep)
    kept = [record, *previous][:keep]
    for name, pdf in history.history_tables(kept).items():
        files += outputs.write_table(out, f"history_{name}", pdf)
    reader.store_summary(summary)
    reader.push_history(record, keep)
    return files


# --- one run


ROWS_PER_SHUFFLE_PARTITION = 250_000


def size_shuffles(spark: Any, opts: JobOptions, rows: int) -> int:
    """Shuffle partitions for this run, unless set with --conf: Spark's 200 costs seconds per stage on small
    windows; two per core, or one per 250 000 rows on big ones (at most 400)."""
    if any(k == "spark.sql.shuffle.partitions" for k, _ in opts.conf):
        return int(spark.conf.get("spark.sql.shuffle.partitions"))
    n = max(2 * spark.sparkContext.defaultParallelism, min(400, rows // ROWS_PER_SHUFFLE_PARTITION))
    spark.conf.set("spark.sql.shuffle.partitions", str(n))
    return n


def run_once(spark: Any, opts: JobOptions) -> Outcome:
    """Read the window, compute, render, publish. Raises NoSnapshots, StoreUnavailable."""
    spark.conf.set("spark.sql.execution.arrow.pyspark.enabled", "true")
    progress = Progress()
    with reader_for(opts) as reader:
        window = list_window(reader, opts)
        indexed = sum(s.rows for s in window.snaps)
        progress.stage("list", snapshots=len(window.snaps), parts=sum(s.parts for s in window.snaps),
                       indexedRows=indexed, shufflePartitions=size_shuffles(spark, opts, indexed))
        fetched = fetch(spark, reader, window)
        progress.stage("fetch", rows=fetched.row_count, partitions=fetched.partitions)
        weights = load_weights(opts.weights) if opts.weights else None
        tables = compute(spark, fetched, opts, weights, progress)
        summary, record = summarize(window, fetched, tables, opts, weights)
        html = render(summary, tables, opts)
        progress.stage("render")
        files = publish(opts.out, reader, summary, record, tables, html, window.previous, opts.history)
        progress.stage("write", files=len(files), out=str(opts.out), redisKey=reader.summary_name)
    return Outcome(summary, files, progress.stages)


# --- schedule (--every: this process only)


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


def check(opts: JobOptions) -> int | None:
    """Usage checks before anything starts; an exit code when one fails."""
    if opts.settings.embedded:
        _error(
            "--redis-url or --redis-sentinels (or NAMESRV_REDIS_URL / NAMESRV_REDIS_SENTINELS) is required: the "
            "Spark executors read the snapshots from a shared Redis (embedded mode keeps them inside the serving "
            "process)"
        )
        return EXIT_USAGE
    if opts.weights:
        if not Path(opts.weights).is_file():
            _error(f"--weights: no such file: {opts.weights}")
            return EXIT_USAGE
        try:
            load_weights(opts.weights)
        except ValueError as e:
            _error(f"--weights: {e}")
            return EXIT_USAGE
    try:
        import pyspark  # noqa: F401
    except ImportError:
        _error(f"pyspark is not installed: {install_extra('spark')} (and a Java 17+ runtime)")
        return EXIT_USAGE
    return None


def preflight(opts: JobOptions, *, window: bool = True) -> int | None:
    """Fail fast, before a JVM starts: Redis unreachable, or nothing to report on."""

    def probe() -> None:
        with reader_for(opts) as reader:
            reader.ping()
            if window:
                list_window(reader, opts)

    return exit_code_of(probe, opts)


def execute(opts: JobOptions) -> int:
    """Run the report once (or on a schedule with --every). Returns the process exit code."""
    from service.skew.session import spark_session

    code = check(opts) or preflight(opts, window=not opts.every_s)
    if code is not None:
        return code
    spark, owned = spark_session(opts)
    try:
        if opts.every_s:
            return schedule(lambda: run_once(spark, opts), opts.every_s)
        done: list[Outcome] = []
        code = exit_code_of(lambda: done.append(run_once(spark, opts)), opts)
        if code is not None:
            return code
        log.info("skew-report written to %s (%d files)", opts.out, len(done[0].files))
        return EXIT_OK
    finally:
        if owned:
            spark.stop()


def exit_code_of(step: Callable[[], Any], opts: JobOptions) -> int | None:
    """Run a step; map "no snapshots" and Redis errors to the CLI's exit codes with a clear message."""
    try:
        step()
    except NoSnapshots as e:
        _error(str(e))
        return EXIT_USAGE
    except StoreUnavailable as e:
        _error(f"Redis at {redis_where(opts.settings)}: {e.message}")
        return EXIT_FAILED
    return None


def run(args: argparse.Namespace) -> int:
    """`namesrv skew-report`: resolve the settings (flags > env > file), set up logging, run."""
    try:
        opts = options_of(args)
    except (ConfigError, OSError) as e:
        _error(f"configuration error: {e}")
        return EXIT_USAGE
    if not logging.getLogger().handlers:
        from service.logs import setup_logging

        setup_logging(opts.settings)
    return execute(opts)


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="namesrv skew-report", description=__doc__.splitlines()[0])
    add_common(parser)
    return add_arguments(parser)


def main(argv: list[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
