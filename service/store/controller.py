"""RocketMQ 5's controller state in Redis: broker sets (master, epochs, SyncStateSet, broker ids) and liveness.

One async method per controller transition, one Lua script each (lua/controller/), so concurrent workers are
serialised by Redis the way the Java controller's single event thread serialises requests. Rules and wire
protocol: docs/controller-protocol.md. Scripts answer the set's state after the call (a `GroupView`), which the
doors turn into RocketMQ headers and bodies.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from service.store.routes import REDIS_ERRORS, translate
from service.store.scripts import LuaScript, ScriptError, call_loaded, check_header, resolve_includes

# RocketMQ ResponseCode values the scripts answer
SUCCESS = 0
FENCED_MASTER_EPOCH = 2000
FENCED_SYNC_STATE_SET_EPOCH = 2001
INVALID_MASTER = 2002
INVALID_REPLICAS = 2003
MASTER_NOT_AVAILABLE = 2004
BROKER_NOT_ALIVE = 2006
INVALID_CLEAN_BROKER_METADATA = 2009
BROKER_NEED_TO_BE_REGISTERED = 2010
MASTER_STILL_EXIST = 2011
ELECT_MASTER_FAILED = 2012
ALTER_SYNC_STATE_SET_FAILED = 2013
BROKER_ID_INVALID = 2014
STALE_EPOCH = -1  # ours: an election based on a master epoch the set has already left (nothing changed)

CONTROLLER_TRIGGER = -1  # the brokerId of an election the controller triggers itself (ofControllerTrigger)
DEFAULT_HEARTBEAT_TIMEOUT_MS = 10_000  # BrokerHeartbeatManager.DEFAULT_BROKER_CHANNEL_EXPIRED_TIME


@dataclass(frozen=True)
class ControllerKeys:
    """The controller's keys, under the registry's hash tag (one Redis Cluster slot with the route tables)."""

    prefix: str = "nsrv"

    @property
    def base(self) -> str:
        return "{" + self.prefix + "}:"

    @property
    def groups(self) -> str:  # SET of brokerNames the controller knows
        return self.base + "ctl:groups"

    @property
    def alive(self) -> str:  # ZSET "cluster|brokerName|brokerId" -> last heartbeat + timeout, ms, Redis clock
        return self.base + "ctl:alive"

    def group(self, name: str) -> str:  # HASH cluster, next, master, mepoch, sss, sepoch
        return self.base + "ctl:g:" + name

    def replicas(self, name: str) -> str:  # HASH brokerId -> address
        return self.base + "ctl:r:" + name

    def check_codes(self, name: str) -> str:  # HASH brokerId -> registerCheckCode
        return self.base + "ctl:k:" + name

    def heartbeat(self, cluster: str, name: str, broker_id: int) -> str:  # HASH addr, epoch, off, conf, prio, timeout
        return self.base + f"ctl:h:{cluster}|{name}|{broker_id}"


@dataclass(frozen=True)
class GroupView:
    """One broker set as the controller holds it (BrokerReplicaInfo + SyncStateInfo) and who of it is alive."""

    name: str
    cluster: str
    next_id: int
    master: int | None
    master_epoch: int
    sync_state_set: frozenset[int]
    sync_state_set_epoch: int
    replicas: dict[int, str] = field(default_factory=dict)  # brokerId -> address
    alive: frozenset[int] = frozenset()  # replicas alive under the set's cluster

    @property
    def master_address(self) -> str | None:
        return None if self.master is None else self.replicas.get(self.master)


@dataclass(frozen=True)
class Reply:
    """A transition's outcome: RocketMQ response code, one script-specific number, the set after the call."""

    code: int
    extra: int
    group: GroupView | None


def parse_view(name: str, flat: Sequence[Any]) -> GroupView | None:
    if not flat or int(flat[0]) == 0:
        return None
    cluster, next_id, master, mepoch, sepoch, sss, n = flat[1:8]
    replicas: dict[int, str] = {}
    alive = set()
    for i in range(int(n)):
        bid, addr, up = flat[8 + 3 * i: 11 + 3 * i]
        replicas[int(bid)] = addr
        if int(up):
            alive.add(int(bid))
    return GroupView(name, cluster, int(next_id), int(master) if master not in ("", None) else None, int(mepoch),
                     frozenset(int(x) for x in str(sss).split(",") if x), int(sepoch), replicas, frozenset(alive))


@cache
def load_controller_scripts() -> dict[str, LuaScript]:
    """lua/controller/*.lua, checked like the route scripts (service/store/scripts.py)."""
    root = resources.files("service.lua").joinpath("controller")
    out: dict[str, LuaScript] = {}
    for entry in sorted(root.iterdir(), key=lambda p: p.name):
        if not entry.name.endswith(".lua"):
            continue
        source = entry.read_text(encoding="utf-8")
        roles = check_header(entry.name, source)
        op = entry.name.rsplit("-", 1)[0]
        if not op.startswith("ctl"):
            raise ScriptError(f"controller/{entry.name}: controller scripts are named ctl<Operation>-<n>.lua")
        out[op] = LuaScript(op, roles, resolve_includes(source))
    return out


def _now(now: int | None) -> str:
    return "" if now is None else str(int(now))


def _opt(value: int | None) -> str:
    return "" if value is None else str(int(value))


async def _plain_evalsha(redis: Any, sha: str, keys: Sequence[str], args: Sequence[Any], replicas: int) -> Any:
    return await redis.execute_command("EVALSHA", sha, len(keys), *keys, *args)


class ControllerStore:
    """The controller's transitions, each one EVALSHA; `now` pins the clock for tests (else Redis TIME)."""

    @classmethod
    def beside(cls, routes: Any) -> ControllerStore:
        """The controller's store on a RouteStore's Redis client and key prefix (one registry, one hash tag), with
        its WAIT setting: transitions a broker acts on are then acknowledged only once redis_wait_replicas
        replicas have them, so a Sentinel or Cluster failover cannot roll an epoch back under a broker."""
        return cls(routes.redis, prefix=routes.keys.prefix, evalsha=routes._evalsha,
                   wait_replicas=routes.limits.wait_replicas, wait_timeout_ms=routes.limits.wait_timeout_ms)

    def __init__(self, redis: Any, prefix: str = "nsrv", deadline_s: float = 5.0, *,
                 evalsha: Callable[..., Awaitable[Any]] | None = None, wait_replicas: int = 0,
                 wait_timeout_ms: int = 1000) -> None:
        self.redis = redis
        self.keys = ControllerKeys(prefix)
        self.deadline_s = deadline_s
        self.wait_replicas = wait_replicas if evalsha is not None else 0
        self.wait_timeout_ms = wait_timeout_ms
        self._evalsha = evalsha or _plain_evalsha
        self._scripts = load_controller_scripts()
        self._shas: dict[str, str] = {}

    async def load_scripts(self) -> None:
        for name, script in self._scripts.items():
            self._shas[name] = await self.redis.script_load(script.source)

    async def _run(self, name: str, *args: Any, wait: bool = False) -> Any:
        """EVALSHA (loading the script again after NOSCRIPT). `wait`: a transition brokers act on (ids, master,
        epochs, SyncStateSet): with wait_replicas set it raises ReplicationUnconfirmed (a 503-like
        StoreUnavailable; the broker retries) unless that many replicas confirmed it."""
        script = self._scripts[name]
        keys = [getattr(self.keys, role) for role in script.key_roles]
        replicas = self.wait_replicas if wait else 0
        try:
            async with asyncio.timeout(self.deadline_s + (self.wait_timeout_ms / 1000 if replicas else 0)):
                return await call_loaded(self.redis, self._shas, script,
                                         lambda sha: self._evalsha(self.redis, sha, keys, args, replicas))
        except REDIS_ERRORS as exc:
            raise translate(exc) from exc

    async def _reply(self, name: str, broker_name: str, *args: Any) -> Reply:
        out = await self._run(name, *args, wait=True)
        return Reply(int(out[0]), int(out[1]), parse_view(broker_name, out[2:]))

    # ------------------------------------------------------------------ transitions

    async def heartbeat(self, cluster: str, name: str, broker_id: int, addr: str, *,
                        timeout_ms: int | None = None, epoch: int | None = None, max_offset: int | None = None,
                        confirm_offset: int | None = None, election_priority: int | None = None,
                        connection: str = "", now: int | None = None) -> bool:
        """BROKER_HEARTBEAT with a brokerId. True when this made a new liveness entry."""
        out = await self._run("ctlHeartbeat", _now(now), cluster, name, int(broker_id), addr, _opt(timeout_ms),
                              _opt(epoch), _opt(max_offset), _opt(confirm_offset), _opt(election_priority),
                              connection)
        return bool(int(out))

    async def apply_broker_id(self, cluster: str, name: str, broker_id: int, check_code: str, *,
                              now: int | None = None) -> Reply:
        return await self._reply("ctlApplyBrokerId", name, _now(now), cluster, name, int(broker_id), check_code)

    async def register_broker(self, cluster: str, name: str, broker_id: int, addr: str, *,
                              now: int | None = None) -> Reply:
        """extra = 1 when the set's master is alive (under the request's cluster): only then is it answered."""
        return await self._reply("ctlRegisterBroker", name, _now(now), cluster, name, int(broker_id), addr)

    async def alter_sync_state_set(self, name: str, master_id: int | None, master_epoch: int,
                                   new_set: Sequence[int], sync_state_set_epoch: int, *,
                                   now: int | None = None) -> Reply:
        """extra = the new SyncStateSet epoch on success."""
        members = ",".join(str(int(i)) for i in sorted(set(new_set)))
        return await self._reply("ctlAlterSyncStateSet", name, _now(now), name, _opt(master_id), int(master_epoch),
                                 int(sync_state_set_epoch), members)

    async def elect_master(self, name: str, broker_id: int | None = CONTROLLER_TRIGGER, *, designate: bool = False,
                           unclean: bool = False, based_on_epoch: int | None = None,
                           now: int | None = None) -> Reply:
        bid = CONTROLLER_TRIGGER if broker_id is None else int(broker_id)
        return await self._reply("ctlElectMaster", name, _now(now), name, bid, "1" if designate else "0",
                                 "1" if unclean else "0", _opt(based_on_epoch))

    async def clean_broker_data(self, cluster: str | None, name: str, ids: str | None, clean_living: bool, *,
                                now: int | None = None) -> Reply:
        """`ids` as mqadmin sends it ("1;2"); extra tells a 2009's reason (see ctlCleanBrokerData-2.lua)."""
        return await self._reply("ctlCleanBrokerData", name, _now(now), cluster or "", name, parse_clean_ids(ids),
                                 "1" if clean_living else "0")

    # ------------------------------------------------------------------ reads and scans

    async def groups(self, names: Sequence[str] = (), *, now: int | None = None) -> dict[str, GroupView | None]:
        """The named sets (every known set when none are named), read at one instant."""
        out = await self._run("ctlRead", _now(now), *names)
        return {str(flat[0]): parse_view(str(flat[0]), flat[1:]) for flat in out}

    async def group(self, name: str, *, now: int | None = None) -> GroupView | None:
        return (await self.groups([name], now=now))[name]

    async def next_broker_id(self, name: str) -> int:
        view = await self.group(name)
        return 1 if view is None else view.next_id

    async def expire(self, *, batch: int = 200, now: int | None = None
                     ) -> tuple[bool, list[tuple[str, str, int]], list[tuple[str, int]]]:
        """One batch of heartbeat expiry: (more, expired (cluster, name, id), sets to elect (name, masterEpoch))."""
        more, members, elect = await self._run("ctlExpire", _now(now), int(batch))
        expired = [_member(m) for m in members]
        return bool(int(more)), expired, [(elect[i], int(elect[i + 1])) for i in range(0, len(elect), 2)]

    async def drop_connection(self, connection: str, members: Sequence[tuple[str, str, int]]
                              ) -> tuple[list[tuple[str, str, int]], list[tuple[str, int]]]:
        """A connection closed: (members whose liveness ended, sets to elect (name, masterEpoch))."""
        if not members:
            return [], []
        dropped, elect = await self._run("ctlDropConnection", connection,
                                         *(f"{c}|{n}|{int(b)}" for c, n, b in members))
        return [_member(m) for m in dropped], [(elect[i], int(elect[i + 1])) for i in range(0, len(elect), 2)]

    async def inactive_masters(self, *, page: int = 200, now: int | None = None) -> list[tuple[str, int]]:
        """Every set whose master is dead while another replica lives: (name, masterEpoch), all pages."""
        cursor, found = "0", []
        while True:
            cursor, out = await self._run("ctlInactiveMasters", _now(now), cursor, int(page))
            found += [(out[i], int(out[i + 1])) for i in range(0, len(out), 2)]
            if str(cursor) == "0":
                return found


def _member(m: str) -> tuple[str, str, int]:
    cluster, rest = m.split("|", 1)
    name, bid = rest.rsplit("|", 1)
    return cluster, name, int(bid)


def parse_clean_ids(ids: str | None) -> str:
    """brokerControllerIdsToClean as Java reads it (`isBlank`, then `split(";")` and `Long.valueOf` each): "" when
    blank, "=1,2" when every piece is a number ("=" alone: given, but no ids), "!" when one is not."""
    if ids is None or not ids.strip():
        return ""
    pieces = ids.split(";")
    while pieces and pieces[-1] == "":  # Java's split drops trailing empty strings
        pieces.pop()
    try:
        values = [_java_long(p) for p in pieces]
    except ValueError:
        return "!"
    return "=" + ",".join(str(v) for v in values)


def _java_long(text: str) -> int:
    body = text[1:] if text[:1] in "+-" else text
    if not body or not body.isascii() or not body.isdigit():
        raise ValueError(text)
    value = int(text)
    if not -(2 ** 63) <= value < 2 ** 63:
        raise ValueError(text)
    return value
