"""`namesrv serve | snapshot | expire | skew-report | admin`: argument parsing and dispatch only.

Settings precedence is flags > NAMESRV_* env > `-c` file > defaults; `-p` prints the effective config (secrets
masked) and exits, as NamesrvStartup does. Serving lives in service/server.py, one-shot commands in
service/maintenance.py, the Spark job in service/skew/.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from service import __version__
from service.cmdline import CommandParser, add_common, install_extra, settings_from
from service.config import ConfigError
from service.errors import NamesrvError
from service.logs import setup_logging

__all__ = ["add_common", "build_parser", "main", "settings_from"]


def build_parser() -> argparse.ArgumentParser:
    """Every command's parser is a CommandParser (sub-parsers take their parent's class): one argument policy."""
    parser = CommandParser(prog="namesrv", description="RocketMQ NameServer: routes in Redis, "
                                     "stateless workers, HTTP API")
    parser.add_argument("--version", action="version", version=f"rmq-namesrv {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the workers")
    add_common(serve)
    serve.add_argument("--host", help="bind address (env NAMESRV_HOST, default 0.0.0.0)")
    serve.add_argument("--port", type=int, help="HTTP port (env NAMESRV_PORT, default 8080)")
    serve.add_argument("--remoting-port", type=int,
                       help="RocketMQ native remoting port (env NAMESRV_REMOTING_PORT, default 9876; 0 = off)")
    serve.add_argument("--workers", type=int,
                       help="worker processes on one port (env NAMESRV_WORKERS, default 1; more need --redis-url)")
    serve.add_argument("--controller", action="store_true", default=None,
                       help="also be RocketMQ 5's controller on the native port (env NAMESRV_CONTROLLER)")
    serve.add_argument("-p", "--print-config", action="store_true", help="print the effective config and exit")

    add_common(sub.add_parser("snapshot", help="take a route snapshot for the skew report now"))
    add_common(sub.add_parser("expire", help="run one expiry scan now and print what expired"))

    skew = sub.add_parser("skew-report", help="run the PySpark topic load skew job (needs the [spark] extra)")
    add_common(skew)
    try:
        from service.skew.options import add_arguments
    except ImportError:  # the worker image has no pyspark; the subcommand still exists and explains
        skew.add_argument("rest", nargs=argparse.REMAINDER)
    else:
        add_arguments(skew)
    sched = sub.add_parser("skew-scheduler", help="the skew report every --interval, once per interval "
                           "cluster-wide (lease in Redis)")
    add_common(sched)
    from service.skew.options import add_scheduler_arguments

    add_scheduler_arguments(sched)
    from service.admin.commands import add_parser as add_admin_parser

    add_admin_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "admin":  # talks to a running server's API, not to Redis: no settings to load
        from service.admin.commands import run

        return run(args)
    if args.command in ("skew-report", "skew-scheduler"):
        return _skew(args)
    try:
        settings = settings_from(args)
    except (ConfigError, OSError) as exc:
        print(f"namesrv: configuration error: {exc}", file=sys.stderr)
        return 2
    setup_logging(settings)
    if args.command == "serve":
        if args.print_config:
            sys.stdout.write(settings.as_properties())
            return 0
        from service.server import serve

        return serve(settings)
    if settings.embedded:
        print(f"namesrv {args.command}: needs a shared Redis (--redis-url or NAMESRV_REDIS_URL); the embedded "
              "store lives inside a running `namesrv serve` only", file=sys.stderr)
        return 2
    from service.maintenance import COMMANDS, to_text
    from service.store.outage import OUTAGE

    OUTAGE.quiet = True  # one line says it all, naming Redis and the cause
    try:
        result = asyncio.run(COMMANDS[args.command](settings))
    except NamesrvError as exc:
        print(f"namesrv {args.command}: {OUTAGE.status() if OUTAGE.failing else exc.message}", file=sys.stderr)
        return 2 if OUTAGE.refusal else 1
    print(to_text(result))
    return 0


def _skew(args: argparse.Namespace) -> int:
    try:
        if args.command == "skew-scheduler":
            from service.skew.scheduler import run
        else:
            from service.skew.job import run
    except ImportError as exc:
        print(f"namesrv {args.command} needs the spark extra: {install_extra('spark')} ({exc})", file=sys.stderr)
        return 2
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
