"""The native door: RocketMQ's TCP remoting protocol on port 9876, one asyncio Protocol per connection.

- Frames are decoded as bytes arrive; a cached route read (code 105) is answered inside data_received, with no
  task and no copy beyond the write; everything else runs as a task, bounded per connection
  (`remoting_max_in_flight`: past it the answer is SYSTEM_BUSY at once, as Java's "[OVERLOAD]system busy").
- A storm waits its turn: the frames a worker takes on — incomplete ones at their declared length from their
  length prefix, then their requests until answered — are bounded by `remoting_max_partial_bytes`, and the requests
  in progress by `remoting_max_pending`. A frame that does not fit stops its connection being read (TCP
  backpressure: the peer's bytes wait in its socket) until the worker has room; waiting connections are taken
  back first come, first served. A fleet registering at once is answered, slower, not refused.
- What is truly hostile is still closed: a frame over the frame limit or one that cannot be decoded (that
  connection only); a frame not whole within `remoting_frame_timeout_s` of being taken on (trickling bytes do not
  extend it); and, while others wait for room, a frame taken on that stops making progress (STALL_S).
- Broker liveness by connection, as Java's BrokerHousekeepingService: when a connection a broker registered on
  is closed by the peer, breaks, or idles out, the broker is unregistered at once (in Redis, so for every worker),
  unless it registered again since through another connection, worker or door. A worker that stops on purpose
  (SIGTERM) closes its connections without unregistering anyone: the brokers re-register elsewhere.
- TLS: DISABLED, PERMISSIVE (a first byte 0x16 means a TLS ClientHello; plain and TLS share the port, as
  RocketMQ's tls.server.mode=permissive) or ENFORCING.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import logging
import os
import socket
import ssl
import time
from typing import Any

import orjson

from service.config import Settings
from service.core import NameServer, Principal, RegistrationMemo
from service.errors import (
    RMQ_NO_PERMISSION,
    RMQ_REQUEST_CODE_NOT_SUPPORTED,
    RMQ_SYSTEM_BUSY,
    RMQ_SYSTEM_ERROR,
    NamesrvError,
    retry_while_store_unavailable,
)
from service.metrics import RemotingStats
from service.remoting import codes, controller_handlers  # controller_handlers registers its codes on import
from service.remoting.codec import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    SERVER_VERSION,
    FrameDecoder,
    FrameError,
    RemotingCommand,
    encode,
    json_header_error,
    make_response,
)
from service.remoting.credentials import Credentials
from service.remoting.handlers import (
    HANDLERS,
    HEARTBEAT_FIELDS,
    Call,
    Reply,
    encoder,
    error_reply,
    heartbeat_fields,
    route_reply,
    route_variant,
)

log = logging.getLogger(__name__)
FORGET_RETRY_S = 30.0  # how long a closed broker connection's unregistration waits out a Redis outage
REFUSAL_LOG_EVERY_S = 60  # a refused request is logged once per client host per this many seconds
OVERLOAD = "[OVERLOAD]system busy, start flow control for a while"
_CONN_PREFIX = f"{socket.gethostname()}:{os.getpid()}:{int(time.time() * 1000)}:"
_conn_ids = itertools.count(1)
TLS_HANDSHAKE = 0x16
HTTP_METHODS = (b"GET ", b"POST ", b"PUT ", b"DELETE ", b"HEAD ", b"OPTIONS ", b"PATCH ")
# While connections wait for room, a frame taken on that receives nothing for this long holds the room for nobody:
# its connection is closed (a broker's frame arrives in milliseconds; the idle sweep checks every few seconds).
STALL_S = 10.0


class Connection(asyncio.Protocol):
    """One client or broker connection."""

    def __init__(self, server: RemotingServer) -> None:
        self.server = server
        self.id = _CONN_PREFIX + str(next(_conn_ids))
        self.decoder = FrameDecoder(server.settings.remoting_max_frame_bytes)
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.peer_ip: str | None = None
        self.unsigned: Principal = server.anonymous
        self.in_flight = 0
        self.last_active = 0.0
        self.members: set[tuple[str, str]] = set()  # (cluster, brokerAddr) registered on this connection
        # registered on it by a request that completed after the connection was gone: the broker never got the
        # answer (it gave up on it, and may be registered through another connection since): its close leaves them
        self.unanswered: set[tuple[str, str]] = set()
        self.lost = False
        self.tasks: set[asyncio.Task[Any]] = set()  # its requests in progress
        self.registration = RegistrationMemo()  # the last registration body: the same bytes again are not hashed
        self.close_reason = "peer"
        self.partial = 0  # bytes of the worker's frame budget this connection's incomplete frame holds
        self.handling = 0  # bytes of the worker's frame budget its requests in progress hold
        self.waiting = False  # not read until the worker has room (in server.waiting)
        self.need = 0  # while waiting: what its incomplete frame will hold once taken on
        self.replies_paused = False  # not read because its peer does not read its replies
        self.frame_timer: asyncio.TimerHandle | None = None  # the incomplete frame's deadline

    # --- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports are not asyncio classes
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.peer_ip = str(peer[0])
            self.peer = f"{peer[0]}:{peer[1]}"
        self.unsigned = self.server.credentials.of_connection(self.peer_ip, _cert_cluster(transport))
        self.last_active = self.server.loop.time()
        self.server.opened(self)

    def data_received(self, data: bytes) -> None:
        server = self.server
        self.last_active = server.loop.time()
        try:
            items = self.decoder.feed(data, server.fast_route)
        except FrameError as exc:
            self._serve(exc.decoded)  # type: ignore[arg-type]
            reason = str(exc)
            if data.startswith(HTTP_METHODS):  # a length prefix spelling "GET ": someone's HTTP client
                reason = (f"an HTTP request ({data.split(b' ', 1)[0].decode()}) on RocketMQ's remoting port; the HTTP "
                          f"API listens on port {server.settings.port}")
                if self.transport is not None:  # told to the client too (curl's "Empty reply from server" said nothing)
                    self.transport.write(wrong_door_answer(server.settings.port))
            log.warning("remoting %s: closing the connection: %s", self.peer, reason)
            server.stats.frame_errors += 1
            self.close("bad-frame")
            return
        self._serve(items)
        pending = self.decoder.pending
        if pending and pending != self.partial and not server.fits(self, pending):
            self.wait(pending)  # a frame the worker has no room for yet: stop reading it (TCP backpressure)
            return
        freed = pending < self.partial
        server.reserve(self, pending)
        if not pending:
            self._stop_frame_timer()
        elif items or self.frame_timer is None:  # a frame begun in this chunk: its own deadline
            self._start_frame_timer()
        if server.pending >= server.settings.remoting_max_pending and self.in_flight:
            self.wait(0)  # as many requests in progress as the worker takes, some its own: read on once fewer
        elif freed:
            server.admit()

    def wait(self, need: int) -> None:
        """Stop reading until the worker has room for `need` more bytes (and fewer requests in progress): the
        peer's bytes wait in its socket. What the connection already holds stays with it; its frame's deadline
        does not run meanwhile (the wait is the worker's)."""
        server = self.server
        server.reserve(self, 0)
        self._stop_frame_timer()
        if self.waiting and need != self.need:  # waiting in the other queue
            server.unqueue(self)
            self.waiting = False
        self.need = need
        if not self.waiting:
            self.waiting = True
            (server.waiting if need else server.backlog).append(self)
            server.stats.waits += 1
            if self.transport is not None:
                self.transport.pause_reading()

    def resume(self) -> None:
        """Taken back by the server (server.admit): its incomplete frame's room is reserved, its deadline runs."""
        self.waiting = False
        self.last_active = self.server.loop.time()  # its wait was the worker's, not the peer's silence
        self.server.reserve(self, self.need)
        if self.need:
            self._start_frame_timer()
        self.need = 0
        if self.transport is not None and not self.replies_paused and not self.transport.is_closing():
            self.transport.resume_reading()

    def _start_frame_timer(self) -> None:
        self._stop_frame_timer()
        self.frame_timer = self.server.loop.call_later(self.server.settings.remoting_frame_timeout_s,
                                                       self._frame_late)

    def _stop_frame_timer(self) -> None:
        if self.frame_timer is not None:
            self.frame_timer.cancel()
            self.frame_timer = None

    def _frame_late(self) -> None:
        self.frame_timer = None
        log.warning("remoting %s: closing the connection: a frame not complete within %d s of being taken on",
                    self.peer, self.server.settings.remoting_frame_timeout_s)
        self.close("frame-timeout")

    def _serve(self, items: list[RemotingCommand | bytes]) -> None:
        """Cached route replies go out in one write; every other command is dispatched."""
        ready = []
        for item in items:
            if type(item) is bytes:
                ready.append(item)
            else:
                self.server.dispatch(self, item)  # type: ignore[arg-type]
        if ready:
            self.send(b"".join(ready) if len(ready) > 1 else ready[0])

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self._release()
        self.server.closed(self, exc)

    def _release(self) -> None:
        """Give back what this connection holds of the worker's room, and its place in the queue."""
        self._stop_frame_timer()
        server = self.server
        if self.waiting:
            self.waiting = False
            server.unqueue(self)
        server.reserve(self, 0)
        server.admit()

    def pause_writing(self) -> None:
        """A peer that does not read its replies stops being read: its replies never pile up in memory."""
        self.replies_paused = True
        if self.transport is not None:
            self.transport.pause_reading()
            self.server.stats.paused += 1

    def resume_writing(self) -> None:
        self.replies_paused = False
        if self.transport is not None and not self.waiting and not self.transport.is_closing():
            self.transport.resume_reading()

    # --- used by the server and the handlers

    def registered(self, cluster: str, addr: str) -> None:
        if self.lost:  # nobody receives the answer: not the registration whose connection the broker is on
            self.unanswered.add((cluster, addr))
            return
        self.members.add((cluster, addr))
        self.unanswered.discard((cluster, addr))

    def unregistered(self, cluster: str, addr: str) -> None:
        self.members.discard((cluster, addr))

    def send(self, frame: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(frame)

    def close(self, reason: str) -> None:
        self.close_reason = reason
        self._release()
        self.decoder = FrameDecoder(self.server.settings.remoting_max_frame_bytes)  # drop what it held
        if self.transport is not None:
            self.transport.close()


def wrong_door_answer(http_port: int) -> bytes:
    """What an HTTP client that came to the remoting port reads before the connection closes: a 400 in the API's
    error shape, naming the port it wanted. `namesrv admin` knows the code (REMOTING_PORT) and names the scheme."""
    body = orjson.dumps({"code": "REMOTING_PORT", "message": "this is RocketMQ's remoting port (its native protocol), "
                                                             f"not HTTP: the HTTP API listens on port {http_port}"})
    return (b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body))


def _cert_cluster(transport: asyncio.BaseTransport) -> str | None:
    """The subject CN of a verified client certificate: the cluster it may register into."""
    cert = transport.get_extra_info("peercert")
    if not cert:
        return None
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


class RemotingServer:
    """The remoting listener of one worker, over the worker's NameServer core."""

    def __init__(self, ns: NameServer, settings: Settings) -> None:
        self.ns = ns
        self.settings = settings
        self.credentials = Credentials(ns.access, settings)
        self.anonymous = self.credentials.of_connection(None, None)
        self.open_mode = ns.access.open_mode
        # the hot path needs no credential: reads are open (no read token) or everything is (open mode)
        self.fast_ok = self.open_mode or not ns.access.reads_protected
        self.fast_heartbeats = self.open_mode or ns.access.writes_open  # likewise for brokers' heartbeats
        self.standard_only = settings.remoting_standard_json
        self.stats: RemotingStats = ns.metrics.remoting
        self.connections: set[Connection] = set()
        self.stats.open_now = lambda: len(self.connections)
        self.stats.partial_now = lambda: self.partial_bytes
        self.stats.handling_now = lambda: self.handling_bytes
        self.stats.waiting_now = lambda: len(self.waiting) + len(self.backlog)
        self.pending = 0
        self.partial_bytes = 0  # held for incomplete frames over all connections (their declared lengths)
        self.handling_bytes = 0  # held by the requests in progress (their bodies)
        self.waiting: collections.deque[Connection] = collections.deque()  # not read until there is room
        self.backlog: collections.deque[Connection] = collections.deque()  # not read until fewer are in progress
        self.stopping = False
        self.loop = asyncio.get_event_loop()
        self._servers: list[asyncio.AbstractServer] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._sweeper: asyncio.Task[None] | None = None
        self._tls = _tls_context(settings)
        self._refusals_logged: dict[str, float] = {}  # client host -> when its last refusal was logged

    # --- lifecycle

    def not_listening(self) -> str | None:
        """For /readyz: None while the remoting port accepts connections, else why not."""
        if self.stopping:
            return "remoting: stopping"
        if self._servers and not all(s.is_serving() for s in self._servers):
            return "remoting: listener closed"
        if not self._servers and not self._tasks:
            return "remoting: not started"
        return None

    async def start(self, sock: socket.socket) -> None:
        self.loop = asyncio.get_running_loop()
        mode = self.settings.remoting_tls_mode
        if mode == "DISABLED":
            self._servers.append(await self.loop.create_server(lambda: Connection(self), sock=sock, backlog=1024))
        else:
            self._track(self.loop.create_task(self._accept_tls(sock, mode == "ENFORCING")))
        self._sweeper = self.loop.create_task(self._sweep_idle())

    async def stop(self, grace_s: float) -> None:
        """Stop accepting, let in-flight requests finish (up to `grace_s`), close every connection without
        unregistering anyone (the brokers register again with another worker)."""
        self.stopping = True
        for srv in self._servers:
            srv.close()
        if self._sweeper is not None:
            self._sweeper.cancel()
        deadline = self.loop.time() + grace_s
        while self.pending and self.loop.time() < deadline:
            await asyncio.sleep(0.01)
        for conn in list(self.connections):
            conn.close("shutdown")
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def _track(self, task: asyncio.Task[Any]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _accept_tls(self, sock: socket.socket, enforcing: bool) -> None:
        """Accept by hand so the first byte can be peeked: 0x16 starts a TLS handshake."""
        sock.setblocking(False)
        while True:
            client, _ = await self.loop.sock_accept(sock)
            self._track(self.loop.create_task(self._admit(client, enforcing)))

    async def _admit(self, client: socket.socket, enforcing: bool) -> None:
        client.setblocking(False)
        try:
            first = await asyncio.wait_for(self._peek(client), timeout=self.settings.remoting_idle_s)
            tls = first == TLS_HANDSHAKE
            if not tls and enforcing:
                self.stats.closes["plain-refused"] += 1
                client.close()
                return
            await self.loop.connect_accepted_socket(lambda: Connection(self), client,
                                                    ssl=self._tls if tls else None)
        except (TimeoutError, OSError, ssl.SSLError) as exc:
            log.info("remoting: connection not admitted: %s", exc)
            client.close()

    async def _peek(self, client: socket.socket) -> int:
        fut: asyncio.Future[None] = self.loop.create_future()
        self.loop.add_reader(client.fileno(), lambda: fut.done() or fut.set_result(None))
        try:
            await fut
        finally:
            self.loop.remove_reader(client.fileno())
        data = client.recv(1, socket.MSG_PEEK)
        if not data:
            raise ConnectionResetError("closed before sending anything")
        return data[0]

    async def _sweep_idle(self) -> None:
        """One timer for all connections: close those silent for remoting_idle_s (RocketMQ's all-idle) — not those
        the worker is not reading — and, while connections wait for room, frames taken on that stopped arriving."""
        idle = self.settings.remoting_idle_s
        while True:
            await asyncio.sleep(min(idle / 4, 5.0))
            now = self.loop.time()
            for conn in [c for c in self.connections
                         if c.last_active < now - idle and not c.in_flight and not c.waiting]:
                log.info("remoting %s: idle for %d s, closing", conn.peer, idle)
                conn.close("idle")
            if self.waiting:
                for conn in [c for c in self.connections if c.partial and c.last_active < now - STALL_S]:
                    log.warning("remoting %s: closing the connection: its frame stopped arriving for %.0f s "
                                "while %d connections wait for room", conn.peer, STALL_S, len(self.waiting))
                    conn.close("frame-stalled")

    # --- connections

    def fits(self, conn: Connection, size: int) -> bool:
        """Whether `conn`'s incomplete frame may hold `size` bytes of the worker's room (remoting_max_partial_bytes
        over the frames taken on: incomplete and being handled), and nobody waits before it. A frame alone is
        always taken on (the room holds a largest frame: config)."""
        held = self.partial_bytes + self.handling_bytes - conn.partial
        return (held + size <= self.settings.remoting_max_partial_bytes and not self.waiting) or held == 0

    def reserve(self, conn: Connection, size: int) -> None:
        """Let `conn`'s incomplete frame hold `size` bytes of the worker's room (0 releases it)."""
        self.partial_bytes += size - conn.partial
        conn.partial = size

    def admit(self) -> None:
        """Take back waiting connections, first come first served, while there is room for them: those that only
        wait for fewer requests in progress, then those whose frame waits for bytes."""
        budget, most = self.settings.remoting_max_partial_bytes, self.settings.remoting_max_pending
        while self.backlog and self.pending < most:
            self.backlog.popleft().resume()
        while self.waiting and self.pending < most:
            conn = self.waiting[0]
            held = self.partial_bytes + self.handling_bytes
            if held and held + conn.need > budget:
                return
            self.waiting.popleft()
            conn.resume()

    def unqueue(self, conn: Connection) -> None:
        with contextlib.suppress(ValueError):
            (self.waiting if conn.need else self.backlog).remove(conn)

    def opened(self, conn: Connection) -> None:
        self.connections.add(conn)
        self.stats.opened += 1

    def closed(self, conn: Connection, exc: Exception | None) -> None:
        self.connections.discard(conn)
        reason = conn.close_reason if exc is None else "error"
        self.stats.closes[reason] += 1
        if not self.stopping:
            controller_handlers.connection_lost(self, conn)
        if conn.members and not self.stopping:
            self._track(self.loop.create_task(self._forget(conn, reason)))

    async def _forget(self, conn: Connection, reason: str) -> None:
        # Its requests still in progress first: a registration the worker reads only now (a worker resuming from a
        # pause reads the request and the close together) is not answered, and must not make this close
        # unregister a broker that registered through another connection after giving up on this one
        if conn.tasks:
            await asyncio.wait(list(conn.tasks), timeout=self.settings.redis_bulk_deadline_ms / 1000 + 1)
        members = sorted(conn.members - conn.unanswered)
        if not members:
            return
        # Redis failing over as the broker goes: try again for a while rather than leave the broker routed until
        # the 120 s expiry (repeating is safe: brokers that registered again since are kept)
        try:
            removed = await retry_while_store_unavailable(lambda: self.ns.connection_closed(conn.id, members),
                                                          within_s=FORGET_RETRY_S)
            log.info("remoting %s: connection closed (%s); unregistered %s", conn.peer, reason, removed or "none")
        except NamesrvError as exc:  # Redis still down: the expiry scan removes them later
            log.warning("remoting %s: connection closed (%s), brokers %s not unregistered: %s", conn.peer,
                        reason, members, exc.message)

    # --- requests

    def fast_route(self, view: memoryview, start: int, stop: int) -> bytes | None:
        """The hot path, called by the frame decoder for every frame: a JSON GET_ROUTEINFO_BY_TOPIC whose route
        is cached, and a JSON BROKER_HEARTBEAT the worker may acknowledge from memory (service/core/liveness.py),
        get their reply frame here, without a RemotingCommand, a task or a separate write. Anything else (other
        codes, signatures, zones, a miss, a header this does not fully understand) returns None and takes the
        general path, which decodes and checks the frame properly."""
        if view[start] != 0 or not self.fast_ok:  # serialize type byte: JSON only
            return None
        header_len = int.from_bytes(view[start + 1:start + 4], "big")
        if start + 4 + header_len != stop:  # a body: not a plain route request
            return None
        try:
            header = orjson.loads(view[start + 4:stop])
        except orjson.JSONDecodeError:
            return None
        # only a frame the decoder accepts (json_header_error decides for both), and only one whose every field
        # means the same as a string: anything else takes the general path, which decodes (or refuses) it
        code = header.get("code")
        if json_header_error(header) is not None or header.get("flag") or (
                code != codes.GET_ROUTEINFO_BY_TOPIC and code != codes.BROKER_HEARTBEAT):
            return None
        ext = header.get("extFields")
        if code == codes.BROKER_HEARTBEAT:
            return self._fast_heartbeat(header, ext)
        if type(ext) is not dict or len(ext) > 2:
            return None
        topic = ext.get("topic")
        if type(topic) is not str or (len(ext) > 1 and type(ext.get("acceptStandardJsonOnly")) is not str):
            return None  # signatures, zones, unknown fields, values the decoder converts: the general path
        opaque = header.get("opaque") or 0
        version = header.get("version") or 0
        try:
            entry = self.ns.cached_route(self.anonymous, topic)
        except NamesrvError:
            return None
        if entry is None or entry.route is None:
            return None
        variant = route_variant(version, ext, self.standard_only)
        body = entry.encoded.get(variant) or self.ns.encoded_route(topic, entry, variant, encoder(variant))
        self.stats.fast_routes += 1
        return route_frame(opaque, body)

    def _fast_heartbeat(self, header: dict, ext: Any) -> bytes | None:
        """BROKER_HEARTBEAT without a credential to check (open modes) and with only the fields brokers send, all
        strings: validated as the handler validates them, recorded for the next liveness batch, SUCCESS. Not a
        controller heartbeat (one with a brokerId while the controller is on: controller_handlers answers it)."""
        if not self.fast_heartbeats or type(ext) is not dict or not ext.keys() <= HEARTBEAT_FIELDS \
                or not all(type(v) is str for v in ext.values()) or ("brokerId" in ext and self.ns.settings.controller):
            return None
        try:
            cluster, addr = heartbeat_fields(ext)
            if not self.ns.heartbeat_from_memory(self.anonymous, cluster, addr):
                return None
        except NamesrvError:
            return None
        self.stats.fast_heartbeats += 1
        return route_frame(header.get("opaque") or 0, b"")

    def dispatch(self, conn: Connection, cmd: RemotingCommand) -> None:
        if cmd.flag & FLAG_RESPONSE:
            return  # the NameServer sends no requests, so no response is awaited
        started = time.perf_counter()
        code = cmd.code
        if code == codes.GET_ROUTEINFO_BY_TOPIC:  # the hot path: a cache hit is answered right here
            try:
                who = self.anonymous if self.open_mode else self.credentials.of_request(
                    cmd.ext_fields, cmd.body, conn.unsigned)
                topic = cmd.ext_fields.get("topic")
                entry = self.ns.cached_route(who, topic) if topic else None
                if entry is not None:
                    self.reply(conn, cmd, route_reply(self.ns, cmd, topic, entry), started)  # type: ignore[arg-type]
                    return
            except NamesrvError as err:
                self.stats.errors[err.code] += 1
                self._log_refusal(conn, cmd, err)
                self.reply(conn, cmd, error_reply(err), started)
                return
        handler = HANDLERS.get(code)
        if handler is None:
            self.reply(conn, cmd, Reply(RMQ_REQUEST_CODE_NOT_SUPPORTED, f" request type {code} not supported"),
                       started)
            return
        if conn.in_flight >= self.settings.remoting_max_in_flight:
            self.stats.busy += 1
            self.reply(conn, cmd, Reply(RMQ_SYSTEM_BUSY, OVERLOAD), started)
            return
        conn.in_flight += 1
        self.pending += 1
        size = len(cmd.body) if cmd.body else 0
        conn.handling += size
        self.handling_bytes += size
        task = self.loop.create_task(self._run(conn, cmd, handler, started, size))
        self._track(task)
        conn.tasks.add(task)
        task.add_done_callback(conn.tasks.discard)

    async def _run(self, conn: Connection, cmd: RemotingCommand, handler: Any, started: float, size: int) -> None:
        try:
            who = self.anonymous if self.open_mode else self.credentials.of_request(
                cmd.ext_fields, cmd.body, conn.unsigned)
            reply = await handler(Call(self.ns, who, cmd, conn))
        except NamesrvError as err:
            self.stats.errors[err.code] += 1
            self._log_refusal(conn, cmd, err)
            reply = error_reply(err)
        except Exception:
            self.stats.errors[NamesrvError.code] += 1
            log.exception("remoting %s: request %s failed", conn.peer, codes.NAMES.get(cmd.code, cmd.code))
            reply = Reply(RMQ_SYSTEM_ERROR, "internal error; see the server log")
        finally:
            conn.in_flight -= 1
            self.pending -= 1
            conn.handling -= size
            self.handling_bytes -= size
        self.reply(conn, cmd, reply, started)
        self.admit()

    def _log_refusal(self, conn: Connection, cmd: RemotingCommand, err: NamesrvError) -> None:
        """A request refused for its credential (NO_PERMISSION), logged with where it came from: the operator's
        only way to find who is trying (the metrics count refusals, not sources). At most one line per client
        host and REFUSAL_LOG_EVERY_S, so a broker retrying or a flood of attempts cannot fill the log."""
        if err.rocketmq_code != RMQ_NO_PERMISSION:
            return
        host = conn.peer.rsplit(":", 1)[0]
        now = time.monotonic()
        if now - self._refusals_logged.get(host, -REFUSAL_LOG_EVERY_S) < REFUSAL_LOG_EVERY_S:
            return
        if len(self._refusals_logged) >= 10_000:  # bounded however many hosts try
            self._refusals_logged.clear()
        self._refusals_logged[host] = now
        log.warning("remoting %s: %s refused (%s): %s (one line per host per %d s)", conn.peer,
                    codes.NAMES.get(cmd.code, cmd.code), err.code, err.message, REFUSAL_LOG_EVERY_S)

    def reply(self, conn: Connection, cmd: RemotingCommand, reply: Reply, started: float) -> None:
        self.stats.observe(cmd.code, reply.code, time.perf_counter() - started)
        if cmd.flag & FLAG_ONEWAY:
            return
        try:
            frame = encode(make_response(cmd, reply.code, reply.remark, reply.ext, reply.body))
        except ValueError as exc:  # a value the request's serialization cannot carry
            frame = encode(make_response(cmd, RMQ_SYSTEM_ERROR, f"reply not encodable: {exc}"))
        conn.send(frame)


_ROUTE_HEADER = (b'{"code":0,"flag":1,"language":"JAVA","opaque":%d,"serializeTypeCurrentRPC":"JSON","version":'
                 + str(SERVER_VERSION).encode() + b"}")


def route_frame(opaque: int, body: bytes) -> bytes:
    """A SUCCESS reply carrying `body`, byte for byte what encode(make_response(...)) builds for a JSON request."""
    header = _ROUTE_HEADER % opaque
    return (4 + len(header) + len(body)).to_bytes(4, "big") + len(header).to_bytes(4, "big") + header + body


def _tls_context(settings: Settings) -> ssl.SSLContext | None:
    if settings.remoting_tls_mode == "DISABLED":
        return None
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(settings.remoting_tls_cert_file, settings.remoting_tls_key_file)
    if settings.remoting_tls_ca_file:
        ctx.load_verify_locations(settings.remoting_tls_ca_file)
        ctx.verify_mode = ssl.CERT_OPTIONAL  # a client certificate names a cluster; unsigned clients may still read
    return ctx
