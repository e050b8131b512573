"""The skew job's options: its own flags (window, outputs, Spark) on top of the common ones every command
takes (`-c`, `--redis-url`, `--key-prefix`), resolved into one `JobOptions` with the service's settings
(flags > NAMESRV_* env > file), so the job reads Redis the way every other command does.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from service.config import BY_NAME, ConfigError, Settings, load_settings

DEFAULT_SINCE = "24h"

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0, None: 1.0}
_warned_prefix = False


def parse_duration(text: str) -> float:
    """'90s', '10m', '24h', '7d', '1w', '500ms' or plain seconds -> seconds (> 0). ValueError otherwise."""
    m = _DURATION.match(str(text))
    if not m:
        raise ValueError(f"bad duration {text!r}: use a number with a unit, e.g. 30m, 24h, 7d")
    seconds = float(m.group(1)) * _UNIT_S[m.group(2)]
    if seconds <= 0:
        raise ValueError(f"bad duration {text!r}: must be positive")
    return seconds


def duration_text(seconds: float) -> str:
    """86400 -> '1d', 5400 -> '90m', 1.5 -> '1.5s'."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
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


def _ratio(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 1.0 <= v <= 100.0:
        raise argparse.ArgumentTypeError(f"must be between 1 and 100, got {v:g}")
    return v


def conf_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def add_scheduler_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """`namesrv skew-scheduler`: the skew-report flags (but --every) and the interval."""
    add_arguments(parser, every=False)
    parser.add_argument(
        "--interval",
        type=_duration,
        default=None,
        metavar="DURATION",
        help="one report per interval cluster-wide, e.g. 15m, 1h (env NAMESRV_SKEW_INTERVAL_S, default 1h)",
    )
    return parser


def add_arguments(parser: argparse.ArgumentParser, every: bool = True) -> argparse.ArgumentParser:
    """The skew-report flags. The common ones (-c, --redis-url, --key-prefix) come from service.cmdline.add_common,
    which service/cli.py and job.main() add first."""
    parser.add_argument(
        "--prefix",
        dest="legacy_prefix",
        default=None,
        metavar="PREFIX",
        help="deprecated alias of --key-prefix",
    )
    parser.add_argument(
        "--since",
        type=_duration,
        default=_duration(DEFAULT_SINCE),
        metavar="DURATION",
        help=f"window: snapshots taken in the last DURATION, e.g. 30m, 24h, 7d (default {DEFAULT_SINCE})",
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
    if every:
        parser.add_argument(
            "--every",
            type=_duration,
            default=None,
            metavar="DURATION",
            help="repeat on this period until Ctrl-C, in this process only (no lease; for several machines use "
            "`namesrv skew-scheduler`) (default: run once)",
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
        "--hot-broker-ratio",
        type=_ratio,
        default=1.5,
        metavar="R",
        help="list a broker as hot when it carries more than R x the fair share 1/n of its cluster's load "
        "(default 1.5)",
    )
    parser.add_argument(
        "--history",
        type=int,
        default=None,
        metavar="N",
        help="reports kept for the trend, in Redis and under OUT/runs (env NAMESRV_SKEW_HISTORY, default 48)",
    )
    parser.add_argument(
        "--conf",
        type=conf_pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark configuration, repeatable (e.g. spark.driver.memory=4g)",
    )
    return parser


@dataclass(frozen=True)
class JobOptions:
    """Everything one run needs, resolved."""

    settings: Settings
    since_s: float = 86400.0
    out: Path = Path("skew-report")
    master: str | None = None
    weights: str | None = None
    every_s: float | None = None
    concentrated_share: float = 0.5
    include_system_topics: bool = False
    summary_topics: int = 1000
    conf: tuple[tuple[str, str], ...] = ()
    hot_broker_ratio: float = 1.5

    @property
    def history(self) -> int:
        """Reports kept for the trend (Redis history and OUT/runs)."""
        return self.settings.skew_history

    @property
    def prefix(self) -> str:
        return self.settings.key_prefix

    @property
    def since_text(self) -> str:
        return duration_text(self.since_s)


def _key_prefix(args: argparse.Namespace) -> str | None:
    """--key-prefix, or the deprecated --prefix (said once per process on stderr)."""
    global _warned_prefix
    prefix = getattr(args, "key_prefix", None)
    legacy = getattr(args, "legacy_prefix", None)
    if legacy is None:
        return prefix
    if not _warned_prefix:
        print("namesrv skew-report: --prefix is deprecated; use --key-prefix (or NAMESRV_KEY_PREFIX)",
              file=sys.stderr)
        _warned_prefix = True
    if prefix is not None and prefix != legacy:
        raise ConfigError(f"--prefix {legacy!r} and --key-prefix {prefix!r} disagree; use --key-prefix only")
    return legacy


def settings_of(args: argparse.Namespace, env: dict[str, str] | None = None) -> Settings:
    """The service settings for this command line: flags > NAMESRV_* env > `-c` file > defaults."""
    interval = getattr(args, "interval", None)
    # every common option that is a setting (--redis-url, --key-prefix, and whatever add_common grows)
    flags = {name: value for name, value in vars(args).items() if name in BY_NAME and value is not None}
    flags |= {"key_prefix": _key_prefix(args), "skew_history": getattr(args, "history", None),
              "skew_interval_s": None if interval is None else max(1, round(interval))}
    return load_settings(file=getattr(args, "config_file", None), env=env, flags=flags)


def options_of(args: argparse.Namespace, env: dict[str, str] | None = None) -> JobOptions:
    """Raises ConfigError (a usage error) on a bad setting."""
    return JobOptions(
        settings=settings_of(args, env),
        since_s=args.since,
        out=Path(args.out),
        master=args.master,
        weights=args.weights,
        every_s=getattr(args, "every", None),
        concentrated_share=args.concentrated_share,
        include_system_topics=bool(args.include_system_topics),
        summary_topics=args.summary_topics,
        conf=tuple(args.conf),
        hot_broker_ratio=args.hot_broker_ratio,
    )
