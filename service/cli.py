"""`namesrv serve | snapshot | skew-report | expire`: the console script.

Settings precedence is flags > NAMESRV_* env > `-c` file > defaults; `-p` prints the effective config (secrets
masked) and exits, as NamesrvStartup does. `serve --workers N` runs N processes on one port (SO_REUSEPORT).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import multiprocessing
import os
import signal
import socket
import sys
import time
from typing import Any

from service import __version__
from service.config import ConfigError, Settings, load_settings


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {"ts": round(record.created, 3), "level": record.levelname, "logger": record.name,
                               "msg": record.getMessage(), "pid": record.process}
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


def setup_logging(settings: Settings) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if settings.log_json:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s [%(process)d] %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level)
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    logging.getLogger("aiohttp.access").setLevel(logging.INFO if settings.access_log else logging.WARNING)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--config-file", help="properties file (key=value; NAMESRV_X, x_y or RocketMQ camelCase)")
    p.add_argument("--redis-url", help="redis://host:port/db (env NAMESRV_REDIS_URL); empty = embedded")
    p.add_argument("--key-prefix", help="key prefix / hash tag (env NAMESRV_KEY_PREFIX, default nsrv)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="namesrv", description="RocketMQ NameServer over HTTP, routes in Redis")
    parser.add_argument("--version", action="version", version=f"rmq-namesrv {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the HTTP workers")
    _common(serve)
    serve.add_argument("--host", help="bind address (env NAMESRV_HOST, default 0.0.0.0)")
    serve.add_argument("--port", type=int, help="HTTP port (env NAMESRV_PORT, default 8080)")
    serve.add_argument("--workers", type=int, help="worker processes on one port (env NAMESRV_WORKERS)")
    serve.add_argument("-p", "--print-config", action="store_true", help="print the effective config and exit")

    snap = sub.add_parser("snapshot", help="take a route snapshot for the skew report now")
    _common(snap)

    exp = sub.add_parser("expire", help="run one expiry scan now and print what expired")
    _common(exp)

    skew = sub.add_parser("skew-report", help="run the PySpark topic load skew job (needs the [spark] extra)")
    try:
        from service.skew.job import add_arguments
    except ImportError:  # the worker image has no pyspark; the subcommand still exists and explains
        skew.add_argument("rest", nargs=argparse.REMAINDER)
    else:
        add_arguments(skew)
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    flags = {k: getattr(args, k, None) for k in ("host", "port", "workers", "redis_url", "key_prefix")}
    return load_settings(file=getattr(args, "config_file", None), flags=flags)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "skew-report":
        return _skew(args)
    try:
        settings = _settings(args)
    except (ConfigError, OSError) as exc:
        print(f"namesrv: configuration error: {exc}", file=sys.stderr)
        return 2
    setup_logging(settings)
    if args.command == "serve":
        if args.print_config:
            sys.stdout.write(settings.as_properties())
            return 0
        return serve(settings)
    if settings.embedded:
        print(f"namesrv {args.command}: needs a shared Redis (--redis-url or NAMESRV_REDIS_URL); the embedded "
              "store lives inside a running `namesrv serve` only", file=sys.stderr)
        return 2
    return asyncio.run(_one_shot(args.command, settings))


async def _one_shot(command: str, settings: Settings) -> int:
    from service.redis_client import make_redis
    from service.snapshot import take_snapshot
    from service.store import RouteStore

    store = RouteStore(make_redis(settings), settings.key_prefix)
    try:
        if command == "snapshot":
            snap_id = await take_snapshot(store, settings.snapshot_retention_s)
            meta = await store.redis.hmget(store.keys.snapshot(snap_id), "rows", "parts", "bytes")
            print(json.dumps({"snapshot": snap_id, "rows": int(meta[0]), "parts": int(meta[1]),
                              "bytes": int(meta[2])}))
        else:
            res = await store.expire_all(batch=settings.expire_batch)
            print(json.dumps({"expired": [{"cluster": c, "brokerAddr": a, "brokerName": n}
                                          for c, a, n in res.expired]}))
    finally:
        await store.redis.aclose()
    return 0


def _skew(args: argparse.Namespace) -> int:
    try:
        from service.skew.job import run
    except ImportError as exc:
        print(f"namesrv skew-report needs the Spark extra: pip install 'rmq-namesrv[spark]' ({exc})",
              file=sys.stderr)
        return 2
    return run(args)


# ---------------------------------------------------------------------------- serving

def bind_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if hasattr(socket, "SO_REUSEPORT"):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


def run_worker(settings: Settings) -> None:
    """One worker process: its own socket on the shared port, its own event loop and Redis pool."""
    from aiohttp import web

    from service.app import create_app

    setup_logging(settings)
    try:
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:
        pass
    sock = bind_socket(settings.host, settings.port)
    app = create_app(settings)
    logging.getLogger(__name__).info("worker %d serving on %s:%d", os.getpid(), settings.host, settings.port)
    web.run_app(app, sock=sock, shutdown_timeout=settings.drain_grace_s, print=None,
                access_log=logging.getLogger("aiohttp.access") if settings.access_log else None,
                handle_signals=True)


def serve(settings: Settings) -> int:
    log = logging.getLogger(__name__)
    if settings.embedded and settings.workers > 1:
        print("namesrv serve: --workers > 1 needs a shared Redis (--redis-url); the embedded store is "
              "per process", file=sys.stderr)
        return 2
    try:
        bind_socket(settings.host, settings.port).close()  # fail fast and clearly if the port is taken
    except OSError as exc:
        print(f"namesrv serve: cannot bind {settings.host}:{settings.port}: {exc.strerror}", file=sys.stderr)
        return 2
    if settings.workers == 1:
        run_worker(settings)
        return 0
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=run_worker, args=(settings,), daemon=False) for _ in range(settings.workers)]
    for p in procs:
        p.start()
    stopping = False

    def forward(signum, _frame):
        nonlocal stopping
        stopping = True
        for p in procs:
            if p.is_alive() and p.pid:
                os.kill(p.pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    while not stopping:
        for i, p in enumerate(procs):
            if not p.is_alive() and not stopping:
                log.error("worker %s exited with %s; starting a new one", p.pid, p.exitcode)
                procs[i] = ctx.Process(target=run_worker, args=(settings,), daemon=False)
                procs[i].start()
        time.sleep(0.2)
    deadline = time.monotonic() + settings.drain_grace_s + 5
    for p in procs:
        p.join(max(0.1, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
    return 0 if all(p.exitcode == 0 for p in procs) else 1


if __name__ == "__main__":
    sys.exit(main())
