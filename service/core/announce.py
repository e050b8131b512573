"""This worker's advertised remoting address in the shared registry, so that GET /rocketmq/nsaddr (RocketMQ's
address server) lists every live worker: announced at start, renewed every third of its lease by the scheduler,
withdrawn first thing on a graceful stop; a killed worker drops out when its lease runs out."""

from __future__ import annotations

import ipaddress
import logging
import os
import secrets
import socket

from service.config import Settings
from service.errors import NamesrvError
from service.store import RouteStore
from service.store.members import MemberStore, member

log = logging.getLogger(__name__)


async def live_addresses(store: RouteStore) -> list[str]:
    """Every address announced with a live lease, sorted, each once (what /rocketmq/nsaddr lists). Raises
    StoreUnavailable when Redis cannot answer within the store's deadline."""
    return await MemberStore(store).live_addrs()


def primary_ip() -> str:
    """The address this machine reaches others from: a UDP socket "connected" towards a documentation address
    (TEST-NET-1: no packet is sent) names the interface of the default route; else the host name's address."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))
            ip = s.getsockname()[0]
            if ip and ip != "0.0.0.0":
                return ip
        except OSError:
            pass
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def announced_address(settings: Settings) -> str:
    """What this worker announces: `announce_addr`, else the bind host when it is one address (the primary IP when
    it binds every interface), at the native remoting port (the HTTP port when remoting is off)."""
    if settings.announce_addr:
        return settings.announce_addr
    host = settings.host
    try:
        unspecified = ipaddress.ip_address(host).is_unspecified
    except ValueError:  # a host name
        unspecified = False
    if unspecified or not host:
        host = primary_ip()
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{settings.remoting_port or settings.port}"


class Announcer:
    """One worker's entry ("addr|workerId") and its lease. Several workers of one host (`--workers N`) announce the
    same address under their own ids, so one of them stopping leaves the address listed while the others serve."""

    def __init__(self, members: MemberStore, addr: str, lease_ms: int, worker_id: str | None = None) -> None:
        self.members = members
        self.addr = addr
        self.lease_ms = lease_ms
        worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self.entry = member(addr, worker_id)
        self.withdrawn = False
        self.attempted = False  # the first announcement was tried (readiness waits for it)
        self._failing = False

    @classmethod
    def for_settings(cls, members: MemberStore, settings: Settings) -> Announcer:
        return cls(members, announced_address(settings), settings.announce_lease_ms)

    @property
    def renew_interval_s(self) -> float:
        """A third of the lease: two renewals may fail (a Redis blip) before the entry lapses."""
        return self.lease_ms / 3000

    async def renew(self) -> int | None:
        """Announce or renew the lease; the new expiry (ms, Redis clock), or None once withdrawn (a renewal that
        was already running when the worker began to stop must not bring its entry back) or when Redis failed."""
        if self.withdrawn:
            return None
        try:
            expiry = await self.members.announce(self.entry, self.lease_ms)
        except NamesrvError as exc:
            self.attempted = True
            if not self._failing:
                log.warning("announcing %s for /rocketmq/nsaddr failed: %s (it drops out of the list when its "
                            "%d ms lease runs out; retried every %.1f s)", self.addr, exc.message, self.lease_ms,
                            self.renew_interval_s)
            self._failing = True
            return None
        self.attempted = True
        if self._failing:
            log.info("announcing %s for /rocketmq/nsaddr again", self.addr)
            self._failing = False
        if self.withdrawn:  # stopped while the call was in flight: take it back out
            await self.withdraw()
            return None
        return expiry

    def not_announced(self) -> str | None:
        """Readiness: None once the first announcement was tried, so a worker is listed by the time it is ready."""
        return None if self.attempted else "not yet announced for /rocketmq/nsaddr"

    async def withdraw(self) -> None:
        """Leave the list at once (graceful stop); a failure is logged: the lease then expires by itself."""
        self.withdrawn = True
        try:
            await self.members.withdraw(self.entry)
        except NamesrvError as exc:
            log.warning("withdrawing %s from /rocketmq/nsaddr failed: %s (it drops out within %d ms)", self.addr,
                        exc.message, self.lease_ms)
