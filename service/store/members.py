"""The workers' announced addresses (GET /rocketmq/nsaddr): one ZSET member per worker, `addr|workerId`, scored by
the expiry of its lease on the Redis clock. A worker renews its lease on a timer, withdraws it when it stops on
purpose, and a killed worker's entry lapses by itself when its lease runs out."""

from __future__ import annotations

from service.store.calls import bounded
from service.store.routes import RouteStore

SEPARATOR = "|"  # "addr|workerId": an address (host:port) has no '|'


def member(addr: str, worker_id: str) -> str:
    return addr + SEPARATOR + worker_id


def member_addr(entry: str) -> str:
    return entry.split(SEPARATOR, 1)[0]


class MemberStore:
    """Announce, renew, withdraw and list the workers' advertised addresses."""

    def __init__(self, store: RouteStore) -> None:
        self.store = store
        self.limits = store.limits
        self.key = store.keys.members

    async def announce(self, entry: str, lease_ms: int, now: int | None = None) -> int:
        """Announce or renew `entry` ("addr|workerId") for `lease_ms`; the lease's expiry, ms on the Redis clock.
        Lapsed entries of other workers are removed in the same script."""
        expiry, _dropped = await self.store._run("announceMember", [self.key], "" if now is None else now,
                                                  entry, lease_ms)
        return int(expiry)

    @bounded()
    async def withdraw(self, entry: str) -> bool:
        """Remove `entry` at once (a worker stopping on purpose); False when it was not there."""
        return bool(await self.store.redis.zrem(self.key, entry))

    async def live(self, now: int | None = None) -> list[str]:
        """The live entries ("addr|workerId"), each with a lease still running at `now` (default Redis TIME)."""
        return [e.decode() if isinstance(e, bytes) else e
                for e in await self.store._run("liveMembers", [self.key], "" if now is None else now)]

    async def live_addrs(self, now: int | None = None) -> list[str]:
        """The distinct addresses of the live entries, sorted (several workers of one host share an address)."""
        return sorted({member_addr(e) for e in await self.live(now)})
