"""Who may share a listening port: only servers of one registry.

Workers bind their ports with SO_REUSEPORT so the kernel spreads connections over them, which is right only when
every process on the port answers from the same registry. Two embedded servers (each with its registry in its own
memory) on one port split it: reads alternate between them. So a server that finds its address taken asks the
holder which registry it serves, through a claim every server keeps for each of its addresses: an abstract Unix
socket named after host and port (Linux; no file to clean up, gone with its process, in the same network namespace
as the port), answering one JSON line `{"pid", "registry"}`. The same registry (the same Redis and key prefix):
share — a second supervisor on the same Redis, or a new deployment started before the old one stops. Anything else
(an embedded server, another registry, a process that is not a namesrv server): refuse, saying which. Embedded
servers do not set SO_REUSEPORT at all, so nothing can share their ports.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import select
import socket
import threading
import time

import orjson

log = logging.getLogger(__name__)

ABSTRACT = hasattr(socket, "AF_UNIX") and os.uname().sysname == "Linux"
# A claim whose holder stopped is taken over by a server of the same registry sharing the port within half of this
# (its claim thread looks every TAKEOVER_S / 2); a server that finds the port taken and no claim asks again this long.
TAKEOVER_S = 1.5


def claim_name(host: str, port: int) -> bytes:
    return f"\0rmq-namesrv:{host}:{port}".encode()


def taken(host: str, port: int) -> bool:
    """Whether something listens on host:port: a bind without SO_REUSEPORT fails then, whoever holds it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a closed connection's TIME_WAIT is no holder
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return True
            raise
    return False


def holder(host: str, port: int, timeout: float = 2.0) -> dict | None:
    """What the server holding host:port says of itself ({pid, registry}), or None if nothing answers the claim
    (not a namesrv server, or one bound to a wider address: that one's claim is under its own host)."""
    if not ABSTRACT:
        return None
    for name in dict.fromkeys([host, "0.0.0.0", "::"]):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            try:
                sock.connect(claim_name(name, port))
                data = b""
                while chunk := sock.recv(4096):
                    data += chunk
                return orjson.loads(data)
            except (OSError, orjson.JSONDecodeError):
                continue
    return None


def refusal(host: str, port: int, registry: str | None) -> str | None:
    """Why this server may not listen on host:port (None: free, or held by a server of the same registry).
    `registry` None: this server's registry is its own (embedded), shared with nobody."""
    if not taken(host, port):
        return None
    other = holder(host, port)
    deadline = time.monotonic() + TAKEOVER_S
    while other is None and ABSTRACT and time.monotonic() < deadline:  # a sharer may be taking the claim over now
        time.sleep(0.05)
        other = holder(host, port)
    if other is not None and registry is not None and other.get("registry") == registry:
        log.info("%s:%d is served by namesrv pid %s of the same registry (%s): sharing it", host, port,
                 other.get("pid"), registry)
        return None
    if other is None:  # nothing to share and no registry to split: the port is simply taken
        return (f"cannot listen on {host}:{port}: the address is already in use by a process that is not a namesrv "
                "server (or one too old to say which registry it serves). Choose other ports (--port, "
                "--remoting-port) or stop that process")
    who = f"namesrv serve pid {other.get('pid')}, whose registry is {other.get('registry')}"
    if registry is None:
        why = ("this server is embedded: its registry lives in its own memory, and two servers on one port would "
               "split the registry between them")
    else:
        why = f"servers share a port only when they share a registry, and this one's is {registry}"
    return (f"cannot listen on {host}:{port}: the address is already in use by {who}; {why}. Choose other ports "
            "(--port, --remoting-port) or stop the other server")


class Claims:
    """This server's claims on its addresses, answered by a thread until the process ends. A claim a same-registry
    server already holds is taken over when that one stops."""

    def __init__(self, host: str, ports: list[int], registry: str) -> None:
        self.reply = orjson.dumps({"pid": os.getpid(), "registry": registry})
        self.wanted = [claim_name(host, p) for p in ports if p]
        self.held: dict[bytes, socket.socket] = {}

    def start(self) -> Claims:
        if ABSTRACT and self.wanted:
            self._take()
            threading.Thread(target=self._serve, name="port-claims", daemon=True).start()
        return self

    def _take(self) -> None:
        for name in self.wanted:
            if name in self.held:
                continue
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.bind(name)
                sock.listen(16)
            except OSError:  # held by a server of the same registry (others were refused): take it when it stops
                sock.close()
                continue
            self.held[name] = sock

    def _serve(self) -> None:
        while True:
            ready, _, _ = select.select(list(self.held.values()), [], [], TAKEOVER_S / 2)
            for sock in ready:
                with contextlib.suppress(OSError):
                    conn, _ = sock.accept()
                    with conn:
                        conn.sendall(self.reply)
            if len(self.held) < len(self.wanted):
                self._take()
