"""The route registry in Redis: one async method per operation, one Lua script each.

Every change is one script (lua/), so concurrent workers can never leave the tables half-updated, and Python
never reads, modifies and writes back across round trips. Each script receives exactly the keys its header
declares. Redis failures leave this module as the project's own errors (StoreUnavailable), so nothing above
the store needs to know redis-py. The client must use decode_responses=True.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from functools import wraps
from typing import Any, ParamSpec, TypeVar

import orjson
import redis.asyncio as aioredis
from redis.exceptions import (
    BusyLoadingError,
    NoScriptError,
    RedisError,
    ResponseError,
)
from redis.exceptions import (
    ConnectionError as RedisConnectionError,
)
from redis.exceptions import (
    TimeoutError as RedisTimeoutError,
)

from service.config import DEFAULT_BROKER_TIMEOUT_MS
from service.errors import NamesrvError, QueryNotFound, StoreUnavailable, from_script_code
from service.models import (
    BrokerData,
    BrokerIdentity,
    ClusterInfo,
    DataVersion,
    ExpireResult,
    HeartbeatResult,
    LiveBroker,
    QueueData,
    RegisterBroker,
    RegisterBrokerResult,
    TopicRouteData,
)
from service.store.keys import ORDER_TOPIC_CONFIG, Keys
from service.store.scripts import LuaScript, load_all

log = logging.getLogger(__name__)
TOPIC_LIST_MODES = ("all", "unit", "unitsub", "unitsub-ununit")
# Replies Redis gives while it cannot serve (restart, failover, cluster reconfiguration): retry later.
_TRANSIENT = ("LOADING", "BUSY", "MASTERDOWN", "READONLY", "TRYAGAIN", "CLUSTERDOWN", "NOREPLICAS")

P = ParamSpec("P")
R = TypeVar("R")


def translate(exc: BaseException) -> NamesrvError:
    """A redis-py exception as the project's error: transient trouble is StoreUnavailable (503 / retry)."""
    if isinstance(exc, RedisConnectionError | RedisTimeoutError | BusyLoadingError | OSError):
        return StoreUnavailable(f"the route store (Redis) is unavailable: {type(exc).__name__}; retry shortly")
    text = str(exc)
    if isinstance(exc, ResponseError) and text.split(" ", 1)[0] in _TRANSIENT:
        return StoreUnavailable(f"the route store is not ready: {text.split(' ', 1)[0]}; retry shortly")
    log.error("unexpected Redis error: %s", text)
    return NamesrvError(f"route store error: {type(exc).__name__}")


def store_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Decorate a store method that talks to Redis directly (not through `_run`)."""

    @wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except (RedisError, OSError) as exc:
            raise translate(exc) from exc

    return wrapper


def _pairs(flat: list[Any]) -> Iterable[tuple[Any, Any]]:
    return zip(flat[0::2], flat[1::2], strict=True)


def _flag(value: bool) -> str:
    return "1" if value else "0"


def _broker_data(name: str, cluster: str, eam: str, zone: str, addr_flat: list[str]) -> BrokerData:
    return BrokerData(
        cluster=cluster,
        broker_name=name,
        broker_addrs={int(i): a for i, a in _pairs(addr_flat)},
        enable_acting_master=eam == "1",
        zone_name=zone or None,
    )


class RouteStore:
    """RocketMQ's RouteInfoManager + KVConfigManager over one Redis, under one key prefix."""

    def __init__(self, redis: aioredis.Redis, prefix: str = "nsrv", bulk_redis: aioredis.Redis | None = None,
                 default_timeout_ms: int = DEFAULT_BROKER_TIMEOUT_MS) -> None:
        self.redis = redis
        self.bulk_redis = bulk_redis or redis  # long scripts (100 000-topic brokers): a longer command timeout
        self.keys = Keys(prefix)
        self.default_timeout_ms = default_timeout_ms
        self._scripts: dict[str, LuaScript] = load_all()
        self._shas: dict[str, str] = {}
        k = self.keys
        # KEYS of the scripts that touch only registry-wide keys, by role (see each script's header).
        self._global = {"topics": k.topics, "brokers": k.brokers, "clusters": k.clusters, "live": k.live,
                        "deadlines": k.deadlines, "filters": k.filter_servers, "ver": k.version,
                        "kvns": k.kv_namespaces, "config": k.runtime_config}
        self._fixed = {name: [self._global[r] for r in s.key_roles] for name, s in self._scripts.items()
                       if all(r in self._global for r in s.key_roles)}

    # ------------------------------------------------------------------ plumbing

    async def load_scripts(self) -> None:
        """SCRIPT LOAD every script (readiness); calls also reload by themselves after a Redis restart."""
        try:
            for name, script in self._scripts.items():
                self._shas[name] = await self.redis.script_load(script.source)
        except (RedisError, OSError) as exc:
            raise translate(exc) from exc

    @store_errors
    async def load_scripts_if_missing(self) -> None:
        """Readiness: one SCRIPT EXISTS round trip; reload everything if Redis lost the scripts (restart)."""
        if len(self._shas) < len(self._scripts) or not all(await self.redis.script_exists(*self._shas.values())):
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

    async def _run(self, name: str, keys: Sequence[str], *args: Any, client: aioredis.Redis | None = None) -> Any:
        """EVALSHA straight through execute_command (redis-py's Script wrapper costs ~10% of a heartbeat);
        NOSCRIPT after a Redis restart or SCRIPT FLUSH loads the script and retries once."""
        redis = client or self.redis
        try:
            sha = self._shas.get(name)
            if sha is None:
                sha = self._shas[name] = await redis.script_load(self._scripts[name].source)
            try:
                return await redis.execute_command("EVALSHA", sha, len(keys), *keys, *args)
            except NoScriptError:
                self._shas[name] = sha = await redis.script_load(self._scripts[name].source)
                return await redis.execute_command("EVALSHA", sha, len(keys), *keys, *args)
        except (RedisError, OSError) as exc:
            raise translate(exc) from exc

    @store_errors
    async def ping(self) -> bool:
        return bool(await self.redis.ping())

    async def close(self) -> None:
        await self.redis.aclose()
        if self.bulk_redis is not self.redis:
            await self.bulk_redis.aclose()

    # ------------------------------------------------------------------ brokers

    async def register_broker(
        self,
        req: RegisterBroker,
        *,
        default_timeout_ms: int | None = None,
        delete_topic_with_broker_registration: bool = False,
        return_order_topic_config: bool = True,
        single_topic_guard: bool = False,
        connection: str = "",
        cross_cluster_topics: Sequence[str] | None = None,
        now: int | None = None,
    ) -> RegisterBrokerResult:
        """REGISTER_BROKER. `connection`: the native connection it came on (its close unregisters the broker
        unless it registered again since). `cross_cluster_topics`: when not None, the cross-cluster guard is on
        and these topics (the payload's non-system ones) must not live only on other clusters' brokers."""
        eam = "" if req.enable_acting_master is None else _flag(req.enable_acting_master)
        fsl = "-" if req.filter_server_list is None else orjson.dumps(req.filter_server_list).decode()
        timeout = req.heartbeat_timeout_ms or default_timeout_ms or self.default_timeout_ms
        res = await self._run(
            "registerBroker", self._fixed["registerBroker"],
            req.cluster, req.broker_name, str(req.broker_id), req.broker_addr, req.ha_server_addr,
            req.zone_name or "", eam, timeout, req.data_version.encode(), req.data_version.state_version,
            _flag(delete_topic_with_broker_registration), _flag(return_order_topic_config),
            _flag(single_topic_guard), fsl, req.topic_table.lines, "" if now is None else now,
            connection, _flag(cross_cluster_topics is not None),
            "".join(t + "\n" for t in cross_cluster_topics or ()),
            client=self.bulk_redis,
        )
        status = int(res[0])
        if status < 0:
            raise from_script_code(status, res[1] if len(res) > 1 else "")
        if status == 2:
            return RegisterBrokerResult(None, None, None, fenced=True)
        return RegisterBrokerResult(
            ha_server_addr=res[1] or None,
            master_addr=res[2] or None,
            kv_table=dict(_pairs(res[4])) if int(res[3]) else None,
            changed_topics=int(res[5]),
            register_first=bool(int(res[6])),
        )

    async def heartbeat(
        self, cluster: str, broker_addr: str, data_version: DataVersion | None = None, now: int | None = None
    ) -> HeartbeatResult:
        """QUERY_DATA_VERSION / BROKER_HEARTBEAT: refresh if live; `changed` when unknown or different."""
        (res,) = await self.heartbeat_many([(cluster, broker_addr, data_version)], now)
        return res

    async def heartbeat_many(
        self, beats: Sequence[tuple[str, str, DataVersion | None]], now: int | None = None
    ) -> list[HeartbeatResult]:
        """Several heartbeats in one script call (see service/core/coalesce.py)."""
        args: list[Any] = ["" if now is None else now, self.default_timeout_ms]
        for cluster, addr, _ in beats:
            args += [cluster, addr]
        flat = await self._run("heartbeat", self._fixed["heartbeat"], *args)
        out = []
        for (_, _, dv), (found, stored) in zip(beats, _pairs(flat), strict=True):
            if not int(found):
                out.append(HeartbeatResult(changed=True, data_version=None))
                continue
            stored_dv = DataVersion.decode(stored)
            out.append(HeartbeatResult(changed=dv is not None and dv != stored_dv, data_version=stored_dv))
        return out

    async def unregister_broker(self, ident: BrokerIdentity) -> int:
        """0: address was not a member; 1: broker removed; 2: broker reduced."""
        (res,) = await self._run("unregisterBroker", self._fixed["unregisterBroker"], ident.cluster,
                                 ident.broker_name, str(ident.broker_id), ident.broker_addr, client=self.bulk_redis)
        return int(res)

    async def drop_connection(self, connection: str, members: Iterable[tuple[str, str]]
                              ) -> list[tuple[str, str, str, int]]:
        """A native connection closed: unregister the (cluster, brokerAddr) entries that registered on it and
        have not registered again since. Returns (cluster, addr, brokerName, 1 removed | 2 reduced)."""
        args: list[str] = [connection]
        for cluster, addr in members:
            args += [cluster, addr]
        if len(args) == 1:
            return []
        flat = await self._run("dropConnection", self._fixed["dropConnection"], *args, client=self.bulk_redis)
        return [(flat[i], flat[i + 1], flat[i + 2], int(flat[i + 3])) for i in range(0, len(flat), 4)]

    async def expire(self, batch: int = 100, now: int | None = None, topic_budget: int = 5_000) -> ExpireResult:
        """One bounded expiry pass (at most `batch` brokers and about `topic_budget` topics); `more` says
        another call may find more."""
        more, flat = await self._run("expireBrokers", self._fixed["expireBrokers"], batch,
                                     "" if now is None else now, topic_budget, self.default_timeout_ms,
                                     client=self.bulk_redis)
        expired = []
        for member, name in _pairs(flat):
            cluster, _, addr = member.partition("|")
            expired.append((cluster, addr, name))
        return ExpireResult(expired=expired, more=bool(int(more)))

    async def expire_all(self, batch: int = 100, now: int | None = None, max_calls: int = 1000) -> ExpireResult:
        """Expire batch after batch (each call bounded) until nothing is due."""
        out: list[tuple[str, str, str]] = []
        for _ in range(max_calls):
            res = await self.expire(batch, now)
            out.extend(res.expired)
            if not res.more:
                return ExpireResult(out, more=False)
        return ExpireResult(out, more=True)

    async def member_group(self, broker_name: str) -> dict[int, str]:
        (flat,) = await self._run("memberGroup", self._keys("memberGroup", broker=broker_name))
        return {int(i): a for i, a in _pairs(flat)}

    @store_errors
    async def live_brokers(self) -> list[LiveBroker]:
        """Every live entry with its last heartbeat (Redis clock), data version and topic count."""
        entries = await self.redis.zrange(self.keys.live, 0, -1, withscores=True)
        if not entries:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for member, _ in entries:
                cluster, _, addr = member.partition("|")
                pipe.hmget(self.keys.live_info(cluster, addr), "name", "id", "timeout", "dv", "ha")
            infos = await pipe.execute()
        async with self.redis.pipeline(transaction=False) as pipe:
            for name, *_ in infos:
                pipe.scard(self.keys.broker_topics(name or ""))
            counts = await pipe.execute()
        out = []
        for (member, score), (name, bid, timeout, dv, ha), n in zip(entries, infos, counts, strict=True):
            cluster, _, addr = member.partition("|")
            out.append(LiveBroker(cluster=cluster, broker_name=name or "", broker_id=int(bid or 0),
                                  broker_addr=addr, last_heartbeat_ms=int(score),
                                  heartbeat_timeout_ms=int(timeout or self.default_timeout_ms),
                                  data_version=DataVersion.decode(dv) if dv else None, ha_server_addr=ha or None,
                                  topic_count=int(n)))
        return out

    # ------------------------------------------------------------------ routes

    async def get_route(
        self, topic: str, *, support_acting_master: bool = False, order_message_enable: bool = False
    ) -> TopicRouteData | None:
        res = await self._run("getRoute", self._keys("getRoute", topic=topic), topic,
                              _flag(support_acting_master), _flag(order_message_enable))
        if not int(res[0]):
            return None
        _, qflat, brokers, filters, order = res
        queue_datas = sorted((QueueData.decode(n, e) for n, e in _pairs(qflat)), key=lambda q: q.broker_name)
        broker_datas = sorted((_broker_data(*b[:5]) for b in brokers), key=lambda b: b.broker_name)
        return TopicRouteData(
            queue_datas=queue_datas,
            broker_datas=broker_datas,
            filter_server_table={a: orjson.loads(f) for a, f in _pairs(filters)},
            order_topic_conf=order or None,
        )

    async def cluster_info(self) -> ClusterInfo:
        brokers, clusters = await self._run("clusterInfo", self._fixed["clusterInfo"])
        return ClusterInfo(
            broker_addr_table={b[0]: _broker_data(*b[:5]) for b in brokers},
            cluster_addr_table={c: sorted(members) for c, members in clusters},
        )

    async def topic_list(self, mode: str = "all", page: int = 1000) -> list[str]:
        """All topics, or those whose first queue data has the unit / unit-sub flags; paged, bounded calls."""
        if mode not in TOPIC_LIST_MODES:
            raise ValueError(f"unknown topic list mode {mode!r}")
        seen: set[str] = set()
        cursor = "0"
        while True:
            cursor, topics = await self._run("topicList", self._fixed["topicList"], mode, cursor, page, "")
            seen.update(topics)
            if cursor == "0":
                return sorted(seen)

    async def cluster_topics(self, cluster: str) -> list[str]:
        """Topics with queue data on any broker of the cluster (one bounded call per broker)."""
        seen: set[str] = set()
        cursor = "0"
        while True:
            cursor, topics = await self._run("topicList", self._fixed["topicList"], "cluster", cursor, 0, cluster)
            seen.update(topics)
            if cursor == "0":
                return sorted(seen)

    async def system_topic_list(self) -> tuple[list[str], str | None]:
        """RocketMQ 304: every cluster and broker name, plus the first broker address."""
        _, names, addr = await self._run("topicList", self._fixed["topicList"], "system", "0", 0, "")
        return list(names), addr or None

    async def delete_topic(self, topic: str, cluster: str | None = None) -> int:
        (n,) = await self._run("deleteTopic", self._keys("deleteTopic", topic=topic), topic, cluster or "")
        return int(n)

    async def register_topic(self, topic: str, queue_datas: list[QueueData]) -> int:
        arg = "".join(f"{q.broker_name}\t{q.encode().replace(',', chr(9))}\n" for q in queue_datas)
        res = await self._run("registerTopic", self._keys("registerTopic", topic=topic), topic, arg)
        if int(res[0]) < 0:
            raise from_script_code(int(res[0]), res[1])
        return int(res[0])

    async def wipe_write_perm(self, broker_name: str) -> int:
        (n,) = await self._run("writePerm", self._keys("writePerm", broker=broker_name), broker_name, "wipe")
        return int(n)

    async def add_write_perm(self, broker_name: str) -> int:
        (n,) = await self._run("writePerm", self._keys("writePerm", broker=broker_name), broker_name, "add")
        return int(n)

    @store_errors
    async def broker_exists(self, broker_name: str) -> bool:
        return bool(await self.redis.sismember(self.keys.brokers, broker_name))

    # ------------------------------------------------------------------ KV config

    async def kv_put(self, namespace: str, key: str, value: str) -> None:
        await self._run("kvPut", self._keys("kvPut", namespace=namespace), namespace, key, value)

    async def kv_get(self, namespace: str, key: str) -> str:
        res = await self._run("kvGet", self._keys("kvGet", namespace=namespace), namespace, key)
        if not int(res[0]):
            raise QueryNotFound(f"No config item, Namespace: {namespace} Key: {key}")
        return res[1]

    async def kv_delete(self, namespace: str, key: str) -> bool:
        (n,) = await self._run("kvDelete", self._keys("kvDelete", namespace=namespace), namespace, key)
        return bool(int(n))

    async def kv_list(self, namespace: str) -> dict[str, str]:
        res = await self._run("kvList", self._keys("kvList", namespace=namespace), namespace)
        if not int(res[0]):
            raise QueryNotFound(f"No config item, Namespace: {namespace}")
        return dict(_pairs(res[1]))

    @store_errors
    async def kv_namespaces(self) -> list[str]:
        """Every KV namespace ever written (an emptied one stays, as in Java), sorted: one SMEMBERS."""
        return sorted(await self.redis.smembers(self.keys.kv_namespaces))

    # ------------------------------------------------------------------ runtime config, version, events, stats

    @store_errors
    async def get_runtime_config(self) -> dict[str, str]:
        return await self.redis.hgetall(self.keys.runtime_config)

    async def put_runtime_config(self, values: Mapping[str, str]) -> int:
        args: list[str] = []
        for k, v in values.items():
            args += [k, v]
        (ver,) = await self._run("configPut", self._fixed["configPut"], *args)
        return int(ver)

    @store_errors
    async def version(self) -> int:
        return int(await self.redis.get(self.keys.version) or 0)

    async def change_events(self, on_subscribed: Callable[[], None] | None = None) -> AsyncIterator[str]:
        """The change events the scripts publish ("<ver>\\n*" or "<ver>\\n<topic>..."), until the connection
        drops (then StoreUnavailable). `on_subscribed` runs once the subscription is in place."""
        pubsub = self.redis.pubsub()
        try:
            await pubsub.subscribe(self.keys.changes)
            if on_subscribed is not None:
                on_subscribed()
            while True:
                msg = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                if msg is not None and msg.get("type") == "message":
                    yield msg["data"]
        except (RedisError, OSError) as exc:
            raise translate(exc) from exc
        finally:
            try:
                await pubsub.aclose()
            except (RedisError, OSError):
                pass

    @store_errors
    async def stats(self) -> dict[str, int]:
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.zcard(self.keys.live)
            pipe.scard(self.keys.topics)
            pipe.scard(self.keys.brokers)
            pipe.scard(self.keys.clusters)
            live, topics, brokers, clusters = await pipe.execute()
        return {"liveBrokers": live, "topics": topics, "brokerNames": brokers, "clusters": clusters}

    @store_errors
    async def redis_time_ms(self) -> int:
        """The one clock (DESIGN §2): Redis TIME in ms."""
        sec, usec = await self.redis.time()
        return int(sec) * 1000 + int(usec) // 1000

    # ------------------------------------------------------------------ snapshots (see snapshots.py)

    async def snapshot_pages(self, target_rows: int = 2000) -> AsyncIterator[list[tuple[str, str, str, QueueData]]]:
        """Yield (cluster, brokerName, topic, QueueData) rows in bounded pages (SSCAN inside a script).

        The SSCAN COUNT adapts so a page holds about `target_rows` rows whatever the brokers per topic, which
        keeps every call to a few ms of Redis time.
        """
        cursor, count = "0", 64
        while True:
            cursor, flat = await self._run("snapshotChunk", self._fixed["snapshotChunk"], cursor, count)
            rows = []
            for i in range(0, len(flat), 4):
                cluster, broker, topic, enc = flat[i:i + 4]
                rows.append((cluster, broker, topic, QueueData.decode(broker, enc)))
            if rows:
                per_topic = max(1.0, len(rows) / max(1, count))
                count = max(1, min(10_000, int(target_rows / per_topic)))
                yield rows
            if cursor == "0":
                return


__all__ = ["ORDER_TOPIC_CONFIG", "RouteStore", "store_errors", "translate"]
