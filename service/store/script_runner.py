"""The script-calling half of the route store: the clients, SCRIPT LOAD and readiness, KEYS by role, and one
EVALSHA under a deadline (with WAIT when asked), Redis's failures turned into the project's errors. RouteStore
(routes.py) and its mixins (kv_tables.py, registry_stats.py) build their operations on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.sentinel import Sentinel
from redis.exceptions import MovedError

from service.store.admission import Gate
from service.store.calls import (
    REDIS_ERRORS,
    LeanScripts,
    ReplicationUnconfirmed,
    StoreLimits,
    _unconfirmed,
    bounded,
    leanable,
    report,
    translate,
)
from service.store.keys import Keys
from service.store.outage import OUTAGE
from service.store.scripts import LuaScript, call_loaded, load_all


def _pairs(flat: list[Any]) -> Iterable[tuple[Any, Any]]:
    return zip(flat[0::2], flat[1::2], strict=True)


def _flag(value: bool) -> str:
    return "1" if value else "0"


class ScriptRunner:
    """The Redis clients of one registry (one key prefix) and the way its scripts are called."""

    def __init__(self, redis: aioredis.Redis | RedisCluster, prefix: str = "nsrv",
                 bulk_redis: aioredis.Redis | RedisCluster | None = None, *, limits: StoreLimits | None = None,
                 sentinel: Sentinel | None = None, master_name: str = "") -> None:
        self.redis = redis
        self.bulk_redis = bulk_redis or redis  # long scripts (100 000-topic brokers): a longer command timeout
        self.keys = Keys(prefix)
        self.limits = limits or StoreLimits()
        self.gate = Gate(self.limits.bulk_turns)  # registrations, removals, expiry: a few at a time (admission.py)
        # Cluster: every key of the registry hashes to one slot; pub/sub may use any node (PUBLISH is broadcast).
        self.cluster = isinstance(redis, RedisCluster)
        # Sentinel: watched for +switch-master, which drops connections still open to the old master (S3).
        self.sentinel = sentinel
        self.master_name = master_name
        self._scripts: dict[str, LuaScript] = load_all()
        self._lean: dict[int, LeanScripts | None] = {}  # id(client) -> its script calls' way (None: redis-py's)
        self._shas: dict[str, str] = {}
        k = self.keys
        # KEYS of the scripts that touch only registry-wide keys, by role (see each script's header).
        self._global = {"topics": k.topics, "brokers": k.brokers, "clusters": k.clusters, "live": k.live,
                        "deadlines": k.deadlines, "filters": k.filter_servers, "ver": k.version,
                        "kvns": k.kv_namespaces, "config": k.runtime_config, "sweeps": k.sweeps}
        self._fixed = {name: [self._global[r] for r in s.key_roles] for name, s in self._scripts.items()
                       if all(r in self._global for r in s.key_roles)}

    # ------------------------------------------------------------------ plumbing

    async def load_scripts(self) -> None:
        """SCRIPT LOAD every script (readiness); calls also reload by themselves after a Redis restart."""
        try:
            if self.cluster and self.bulk_redis is not self.redis:
                # Both clients learn every node now, while the seed node answers: a client that first connects
                # after the seed died has no other node to ask and never recovers ("cannot be connected").
                await self.bulk_redis.initialize()
            for name, script in self._scripts.items():
                self._shas[name] = await self.redis.script_load(script.source)
        except REDIS_ERRORS as exc:
            raise translate(exc) from exc
        OUTAGE.answered()

    @bounded()
    async def load_scripts_if_missing(self) -> None:
        """Readiness: one SCRIPT EXISTS round trip; reload everything if Redis lost the scripts (restart, or a
        promoted replica: SCRIPT LOAD is not replicated). In Cluster mode SCRIPT EXISTS goes to the node that owns
        the registry's slot *now*: a keyed read first (it follows MOVED and refreshes the client's slot map after
        a failover), because asking the primaries the client merely believes in answers "loaded" wrongly (C2)."""
        if len(self._shas) < len(self._scripts):
            return await self.load_scripts()
        shas = list(self._shas.values())
        if self.cluster:
            await self.redis.exists(self.keys.version)
            owner = self.redis.get_node_from_key(self.keys.version)
            found = await self.redis.execute_command("SCRIPT EXISTS", *shas, target_nodes=owner)
        else:
            found = await self.redis.script_exists(*shas)
        if not all(found):
            await self.load_scripts()

    def _keys(self, name: str, **entity: str) -> list[str]:
        """KEYS for a script that also touches per-entity keys, in its header's order."""
        k, out = self.keys, []
        for role in self._scripts[name].key_roles:
            if role in self._global:
                out.append(self._global[role])
            elif role == "topic":
                out.append(k.topic(entity["topic"]))
            elif role == "brokerTopics":
                out.append(k.broker_topics(entity["broker"]))
            elif role == "brokerAddrs":
                out.append(k.broker_addrs(entity["broker"]))
            elif role == "kv":
                out.append(k.kv(entity["namespace"]))
            else:
                raise KeyError(f"{name}: no key builder for role {role!r}")
        return out

    async def _run(self, name: str, keys: Sequence[str], *args: Any, client: Any = None,
                   deadline: float | None = None, wait: bool = False) -> Any:
        """EVALSHA straight through execute_command (redis-py's Script wrapper costs ~10% of a heartbeat);
        NOSCRIPT after a Redis restart, a failover or SCRIPT FLUSH loads the script and retries once. A call on
        the bulk client waits for a turn of the worker's bulk work first, unless its task holds one.

        `deadline` (seconds, default the limits' deadline) bounds the whole call, retries included, from its turn:
        a hung Redis answers StoreUnavailable then, not after the socket timeouts' arithmetic. `wait`: with
        wait_replicas set, the write is acknowledged only once that many replicas confirm it (WAIT on the writing
        connection)."""
        if client is not None and client is self.bulk_redis:  # bulk work takes turns (admission.py)
            async with self.gate.turn():
                return await self._call(name, keys, args, client, deadline, wait, patient=True)
        return await self._call(name, keys, args, client or self.redis, deadline, wait)

    async def _call(self, name: str, keys: Sequence[str], args: Sequence[Any], redis: Any, deadline: float | None,
                    wait: bool, patient: bool = False) -> Any:
        """One script call under its deadline, which starts here (after any turn was waited for); what it tells of
        Redis's health goes to the gate. `patient` (bulk work): past the deadline it waits on while a PING finds
        Redis there (_patiently)."""
        replicas = self.limits.wait_replicas if wait else 0
        budget = (deadline or self.limits.deadline_s) + (self.limits.wait_timeout_ms / 1000 if replicas else 0)
        try:
            call = call_loaded(redis, self._shas, self._scripts[name],
                               lambda sha: self._evalsha(redis, sha, keys, args, replicas))
            if patient:
                result = await self._patiently(call, budget)
            else:
                async with asyncio.timeout(budget):
                    result = await call
        except REDIS_ERRORS as exc:
            err = translate(exc)
            report(self.gate, exc, err, self.ping)
            raise err from exc
        OUTAGE.answered()
        self.gate.available()
        return result

    async def _patiently(self, call: Awaitable[Any], budget: float) -> Any:
        """A bulk call's reply. Past its deadline it waits on, up to the bulk deadline's ceiling, if a PING finds
        Redis there (admission.Gate.alive): a Redis slow to answer — busy, or starved of CPU on a loaded host —
        delays a storm's registrations instead of refusing them; a hung or unreachable one still fails them, within
        the deadline and a PING's. Raises TimeoutError (a deadline, as the project's errors say it) otherwise."""
        task = asyncio.ensure_future(call)
        try:
            done, _ = await asyncio.wait({task}, timeout=budget)
            if not done and await self.gate.alive("the route store (Redis) did not answer in time", self.ping):
                done, _ = await asyncio.wait({task}, timeout=max(0.0, self.limits.bulk_deadline_s - budget))
        except BaseException:
            task.cancel()
            raise
        if not done:
            task.cancel()
            raise TimeoutError
        return task.result()

    async def _evalsha(self, redis: Any, sha: str, keys: Sequence[str], args: Sequence[Any], replicas: int) -> Any:
        if not replicas:
            key = id(redis)
            if key not in self._lean:
                self._lean[key] = LeanScripts(redis) if leanable(redis) else None
            lean = self._lean[key]
            if lean is not None:
                return await lean.call(sha, keys, args)
            return await redis.execute_command("EVALSHA", sha, len(keys), *keys, *args)
        # WAIT counts the replicas that acknowledged *this connection's* last write (C6, S4): it must follow the
        # script on the same connection, so both go in one pipeline (Cluster: to the slot's owner; a redirected
        # script is not retried inside the pipeline, where WAIT would then vouch for another connection).
        timeout_ms = self.limits.wait_timeout_ms
        for attempt in (1, 2):
            if self.cluster:
                await redis.initialize()  # a client whose first call this is has no slot map yet
                pipe = redis.pipeline()
                pipe.execute_command("EVALSHA", sha, len(keys), *keys, *args)
                pipe.execute_command("WAIT", replicas, timeout_ms, target_nodes=redis.get_node_from_key(keys[0]))
                res, acked = await pipe.execute(raise_on_error=False, allow_redirections=False)
            else:
                async with redis.pipeline(transaction=False) as pipe:
                    pipe.execute_command("EVALSHA", sha, len(keys), *keys, *args)
                    pipe.execute_command("WAIT", replicas, timeout_ms)
                    res, acked = await pipe.execute(raise_on_error=False)
            if isinstance(res, MovedError) and attempt == 1:
                await redis.exists(keys[0])  # not executed there; a keyed read refreshes the slot map, then again
                continue
            if isinstance(res, Exception):
                raise res
            if isinstance(acked, Exception) or int(acked) < replicas:
                raise ReplicationUnconfirmed(_unconfirmed(acked, replicas, timeout_ms))
            return res
        raise AssertionError("unreachable")

    @bounded()
    async def ping(self) -> bool:
        if self.cluster:  # the registry's node, not every node
            await self.redis.exists(self.keys.version)
            return True
        return bool(await self.redis.ping())

    async def close(self) -> None:
        for lean in self._lean.values():
            if lean is not None:
                await lean.close()
        await self.redis.aclose()
        if self.bulk_redis is not self.redis:
            await self.bulk_redis.aclose()
        if self.sentinel is not None:
            for s in self.sentinel.sentinels:
                await s.aclose()

    def turn(self) -> AbstractAsyncContextManager[None]:
        """A turn of this worker's bulk Redis work (admission.py), for a caller whose work between store calls
        (decoding a registration) belongs to it: the store calls it makes meanwhile take no other."""
        return self.gate.turn()
