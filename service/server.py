"""Starting and stopping: one worker process (Redis clients, the core, its two doors — HTTP and RocketMQ
remoting —, the scheduler, signals) and the supervisor that keeps N of them serving on the same ports.

Every worker binds its own listening sockets with SO_REUSEPORT, so the kernel spreads connections over the
processes; a worker that dies is replaced; SIGTERM drains in-flight requests for `drain_grace_s` and exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import multiprocessing
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator

from aiohttp import web

from service import portclaim
from service.config import Settings
from service.core import NameServer
from service.core.announce import Announcer
from service.http.app import create_app
from service.http.ops import READINESS
from service.http.runner import Runner
from service.logs import setup_logging
from service.remoting.server import RemotingServer
from service.scheduler import build_scheduler
from service.store import RouteStore, connect_store
from service.store.connect import configuration_refused, redis_target
from service.store.members import MemberStore

log = logging.getLogger(__name__)


def bind_socket(host: str, port: int, share: bool = True) -> socket.socket:
    """A listening TCP socket; with `share`, one that other workers of the registry bind too (SO_REUSEPORT; who may
    is service/portclaim.py's business). An embedded server shares nothing."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if share and hasattr(socket, "SO_REUSEPORT"):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


@contextlib.asynccontextmanager
async def running(ns: NameServer, *, scheduler: bool = True,
                  announcer: Announcer | None = None) -> AsyncIterator[NameServer]:
    """The core started (scripts, shared switches, cache listener) and, optionally, the background jobs, with the
    renewal of this worker's announcement for /rocketmq/nsaddr (first made by the caller once its doors listen;
    withdrawn when the block ends, unless the caller has already)."""
    if ns.access.open_mode:
        log.warning("OPEN MODE: no NAMESRV_BROKER_TOKENS / NAMESRV_ADMIN_TOKEN / NAMESRV_READ_TOKEN is set; "
                    "anyone who reaches this port can register brokers, delete topics and change config")
    await ns.start()
    sched = build_scheduler(ns, announcer) if scheduler else None
    if sched is not None:
        sched.start()
    lag = asyncio.create_task(ns.metrics.loop_lag.run(), name="loop-lag")
    ns.metrics.gc_pauses.start()
    try:
        yield ns
    finally:
        lag.cancel()
        ns.metrics.gc_pauses.stop()
        if sched is not None:
            sched.shutdown(wait=False)
        if announcer is not None and not announcer.withdrawn:
            await announcer.withdraw()
        await ns.stop()


async def serve_worker(settings: Settings, *, store: RouteStore | None = None,
                       stop: asyncio.Event | None = None) -> None:
    """Serve until SIGTERM/SIGINT (or `stop` is set), then drain and close."""
    store = store or connect_store(settings)
    ns = NameServer(store, settings)
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    access_log = logging.getLogger("aiohttp.access") if settings.access_log else None
    app = create_app(ns)
    remoting = RemotingServer(ns, settings) if settings.remoting_port else None
    # Embedded mode shares nothing: its /rocketmq/nsaddr answers this worker itself, without an announcement.
    announcer = None if settings.embedded else Announcer.for_settings(MemberStore(store), settings)
    app[READINESS] = []
    if remoting is not None:
        app[READINESS].append(remoting.not_listening)
    if announcer is not None:  # ready once listed: a client that asks /rocketmq/nsaddr then gets this worker
        app[READINESS].append(announcer.not_announced)
    runner = Runner(app, access_log=access_log, shutdown_timeout=settings.drain_grace_s,
                    keepalive_timeout=settings.http_keepalive_s)
    try:
        async with running(ns, announcer=announcer):
            await runner.setup()
            # What start-up built (modules, classes, the app) lives as long as the worker: frozen, no full
            # collection walks it again, so a full collection costs what the worker holds for its clients only.
            gc.collect()
            gc.freeze()
            share = not settings.embedded
            await web.SockSite(runner, bind_socket(settings.host, settings.port, share),
                               shutdown_timeout=settings.drain_grace_s).start()
            if remoting is not None:
                await remoting.start(bind_socket(settings.host, settings.remoting_port, share))
            if announcer is not None and await announcer.renew() is not None:  # listening: clients may come
                log.info("announced %s for /rocketmq/nsaddr (lease %d ms)", announcer.addr, announcer.lease_ms)
            log.info("worker %d serving HTTP on %s:%d%s", os.getpid(), settings.host, settings.port,
                     f", RocketMQ remoting on {settings.remoting_port}" if remoting else "")
            await stop.wait()
            log.info("worker %d stopping: draining for up to %.0f s", os.getpid(), settings.drain_grace_s)
            if announcer is not None:  # out of /rocketmq/nsaddr before draining: nobody new is sent here
                await announcer.withdraw()
            ns.routes.feed.shutdown()  # streams end and long-polls answer now: their clients go elsewhere
            if remoting is not None:
                await remoting.stop(settings.drain_grace_s)
            await runner.cleanup()
    finally:
        with contextlib.suppress(Exception):
            await store.close()


# The cyclic GC's first-generation threshold in a worker (CPython's default is 700 allocations). Decoding a
# registration allocates a dict and a few values per topic, almost none of them in cycles: with 700 a 1 000-topic
# body set off several collections per registration, a quarter of its decoding time (benchmarks/README.md).
GC_GEN0_THRESHOLD = 10_000


def tune_gc() -> None:
    """Fewer first-generation collections (GC_GEN0_THRESHOLD); what start-up built is frozen in serve_worker."""
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_GEN0_THRESHOLD, older, oldest)


def run_worker(settings: Settings) -> None:
    """One worker process: its own sockets on the shared ports, its own event loop and Redis pool."""
    setup_logging(settings)
    if multiprocessing.parent_process() is not None:  # a supervisor's worker: it answers the port claims too,
        claim_ports(settings)  # should the supervisor die before it (a newcomer then still sees the registry)
    tune_gc()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(serve_worker(settings))


def registry_of(settings: Settings) -> str:
    """The registry a shared-Redis server serves, as servers compare it before sharing a port."""
    return f"{redis_target(settings)}, key prefix {settings.key_prefix}"


def claim_ports(settings: Settings) -> None:
    """Answer, for this server's addresses, which registry it serves (service/portclaim.py)."""
    registry = "its own memory (embedded)" if settings.embedded else registry_of(settings)
    portclaim.Claims(settings.host, [settings.port, settings.remoting_port], registry).start()


def serve(settings: Settings) -> int:
    """Run `settings.workers` worker processes (or this process alone) and keep them running."""
    if settings.embedded and settings.workers > 1:
        print("namesrv serve: --workers > 1 needs a shared Redis (--redis-url); the embedded store is "
              "per process", file=sys.stderr)
        return 2
    registry = None if settings.embedded else registry_of(settings)
    ports = [p for p in (settings.port, settings.remoting_port) if p]
    for port in ports:  # fail fast and clearly if a port is taken by anything but a server of this registry
        try:
            why = portclaim.refusal(settings.host, port, registry)
        except OSError as exc:
            why = f"cannot bind {settings.host}:{port}: {exc.strerror}"
        if why is not None:
            print(f"namesrv serve: {why}", file=sys.stderr)
            return 2
    claim_ports(settings)
    if not settings.embedded:
        refusal = asyncio.run(configuration_refused(settings))
        if refusal is not None:  # waiting will not help: say so now, not in every worker's log forever
            print(f"namesrv serve: configuration error: {refusal}", file=sys.stderr)
            return 2
    if settings.workers == 1:
        run_worker(settings)
        return 0
    return supervise(settings)


def supervise(settings: Settings) -> int:
    """Start the workers, replace any that dies, forward SIGTERM/SIGINT and wait for the drain."""
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=run_worker, args=(settings,), daemon=False) for _ in range(settings.workers)]
    for p in procs:
        p.start()
    stopping = False

    def forward(signum: int, _frame: object) -> None:
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
