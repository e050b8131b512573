"""The route registry in Redis (RocketMQ's RouteInfoManager): one async method per operation, one Lua script each.

Every change is one script (lua/), so concurrent workers can never leave the tables half-updated, and Python
never reads, modifies and writes back across round trips. Each script receives exactly the keys its header
declares. Redis failures leave the store as the project's own errors (StoreUnavailable), so nothing above
the store needs to know redis-py. The client must use decode_responses=True. How scripts are called is
script_runner.py; the KV and runtime config are kv_tables.py, the registry's figures registry_stats.py.
"""

from __future__ import annotations

import logging
import random
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

import orjson
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.sentinel import Sentinel

from service.config import DEFAULT_BROKER_TIMEOUT_MS
from service.errors import from_script_code
from service.models import (
    BrokerIdentity,
    ClusterInfo,
    DataVersion,
    ExpireResult,
    HeartbeatResult,
    LiveBroker,
    QueueData,
    ReadAt,
    RegisterBroker,
    RegisterBrokerResult,
    TopicDelta,
    TopicRouteData,
)
from service.store import sweeps
from service.store.calls import (  # re-exported: the store's callers import them from here
    PER_TOPIC_S,
    REDIS_ERRORS,
    ReplicationUnconfirmed,
    StoreLimits,
    bounded,
    store_errors,
    translate,
)
from service.store.chunked import ChunkedRegistration
from service.store.events import ChangeEvents
from service.store.keys import ORDER_TOPIC_CONFIG
from service.store.kv_tables import KvTables
from service.store.registry_stats import RegistryStats
from service.store.route_reads import RouteReads
from service.store.script_runner import _flag, _pairs
from service.store.shared_parts import SharedParts, _broker_data
from service.store.steps import Steps

log = logging.getLogger(__name__)
TOPIC_LIST_MODES = ("all", "unit", "unitsub", "unitsub-ununit")
CLUSTER_INFO_ATTEMPTS = 3  # stepped cluster info reads a change may disturb before one whole read instead


def _cluster_info(brokers: Iterable[list[Any]], clusters: Iterable[list[Any]]) -> ClusterInfo:
    """ClusterInfo from clusterInfo's rows (clusterInfoStep's alike)."""
    return ClusterInfo(broker_addr_table={b[0]: _broker_data(*b[:5]) for b in brokers},
                       cluster_addr_table={c: sorted(members) for c, members in clusters})


def _registration_result(res: list[Any]) -> RegisterBrokerResult | None:
    """registerBroker's reply: a result, None for 'not unchanged' (3), or the error it codes."""
    status = int(res[0])
    if status < 0:
        raise from_script_code(status, res[1] if len(res) > 1 else "")
    if status == 3:
        return None
    if status == 2:
        return RegisterBrokerResult(None, None, None, fenced=True)
    return RegisterBrokerResult(
        ha_server_addr=res[1] or None,
        master_addr=res[2] or None,
        kv_table=dict(_pairs(res[4])) if int(res[3]) else None,
        changed_topics=int(res[5]),
        register_first=bool(int(res[6])),
        unchanged=bool(int(res[7])),
        who=(res[8], res[9], res[10]) if len(res) > 10 else None,
        delta=len(res) == 9 and res[8] == "delta",
    )


class RouteStore(KvTables, RegistryStats, ChangeEvents):
    """RocketMQ's RouteInfoManager + KVConfigManager over one Redis, under one key prefix."""

    def __init__(self, redis: aioredis.Redis | RedisCluster, prefix: str = "nsrv",
                 bulk_redis: aioredis.Redis | RedisCluster | None = None,
                 default_timeout_ms: int = DEFAULT_BROKER_TIMEOUT_MS, *, limits: StoreLimits | None = None,
                 sentinel: Sentinel | None = None, master_name: str = "") -> None:
        super().__init__(redis, prefix, bulk_redis, limits=limits, sentinel=sentinel, master_name=master_name)
        self.default_timeout_ms = default_timeout_ms
        self._sub_cursor = random.randrange(1 << 16)
        self._shared = SharedParts()  # route reads' broker and queue data, one object per value
        self.reads = RouteReads(self._get_routes, self._shared)
        self._steps_of: StoreLimits | None = None
        self._steps = Steps()

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
        digest: str = "",
        delta: TopicDelta | None = None,
        now: int | None = None,
    ) -> RegisterBrokerResult:
        """REGISTER_BROKER. `connection`: the native connection it came on (its close unregisters the broker
        unless it registered again since). `cross_cluster_topics`: when not None, the cross-cluster guard is on
        and these topics (the payload's non-system ones) must not live only on other clusters' brokers.
        `digest`: of the registration as received (NameServer.registration_digest), recorded so that the same
        bytes again can be applied by register_unchanged; "" = unknown (the next one is a full one). `delta`:
        what its topic table changes against an earlier registration of the same broker (its base): Redis
        writes only that if it still holds exactly the base's table, else the whole table (registerBroker's delta
        mode; one call either way). More topics than a step takes (service/store/steps.py): applied in bounded
        steps (service/store/chunked.py), without a delta."""
        count = req.topic_table.count
        # The single-topic guard refuses a first registration of one topic: never one with more topics than a step.
        if not self.applies_whole(count):
            args = self._registration_args(
                req, default_timeout_ms, delete_topic_with_broker_registration, return_order_topic_config,
                single_topic_guard, connection, cross_cluster_topics, digest, now, "")
            async with self.gate.turn():  # one turn for all its steps
                return await self._chunked(req, args, self.steps, delete_topic_with_broker_registration,
                                           cross_cluster_topics, digest).run()
        args = self._registration_args(
            req, default_timeout_ms, delete_topic_with_broker_registration, return_order_topic_config,
            single_topic_guard, connection, cross_cluster_topics, digest, now, req.topic_table.groups, delta)
        res = await self._run("registerBroker", self._fixed["registerBroker"], *args, client=self.bulk_redis,
                              deadline=self.limits.bulk(count), wait=self.limits.wait_registrations)
        result = _registration_result(res)
        if result is None:
            raise AssertionError("registerBroker answered 'unchanged only' to a full registration")
        return result

    def applies_whole(self, topics: int) -> bool:
        """Whether a registration of this many topics is one script call (else it goes in steps: past what a
        step of writing topics takes on this Redis, steps.py, or past a configured step size)."""
        past = self.steps.chunked_past()
        return not past or topics <= past

    @property
    def steps(self) -> Steps:
        """This worker's step sizers (steps.py), following `limits` (tests set other limits on a store)."""
        if self._steps_of is not self.limits:
            self._steps = Steps(self.limits.chunk_topics, self.limits.adaptive_steps)
            self._steps_of = self.limits
        return self._steps

    def chunked_registration(
        self,
        req: RegisterBroker,
        chunk_topics: int,
        *,
        default_timeout_ms: int | None = None,
        delete_topic_with_broker_registration: bool = False,
        return_order_topic_config: bool = True,
        connection: str = "",
        cross_cluster_topics: Sequence[str] | None = None,
        digest: str = "",
        now: int | None = None,
    ) -> ChunkedRegistration:
        """register_broker's chunked path as an object to step through, `chunk_topics` topics a step (tests
        interleave other operations)."""
        args = self._registration_args(
            req, default_timeout_ms, delete_topic_with_broker_registration, return_order_topic_config, False,
            connection, cross_cluster_topics, digest, now, "")
        return self._chunked(req, args, Steps(chunk_topics), delete_topic_with_broker_registration,
                             cross_cluster_topics, digest)

    def _chunked(self, req: RegisterBroker, args: list[Any], steps: Steps, delete_missing: bool,
                 cross_cluster_topics: Sequence[str] | None, digest: str) -> ChunkedRegistration:
        return ChunkedRegistration(
            self, args, req.cluster, req.broker_name, req.broker_addr, req.topic_table.lines, req.topic_table.count,
            steps, delete_missing, None if cross_cluster_topics is None else list(cross_cluster_topics), digest)

    def _registration_args(self, req: RegisterBroker, default_timeout_ms: int | None, delete_missing: bool,
                           return_kv: bool, single_topic_guard: bool, connection: str,
                           cross_cluster_topics: Sequence[str] | None, digest: str, now: int | None, topics: str,
                           delta: TopicDelta | None = None) -> list[Any]:
        """registerBroker's ARGV for a registration with these topics (ARGV 15: grouped, or "" for the steps of a
        chunked one), in delta mode with a delta (see its header)."""
        eam = "" if req.enable_acting_master is None else _flag(req.enable_acting_master)
        fsl = "-" if req.filter_server_list is None else orjson.dumps(req.filter_server_list).decode()
        timeout = req.heartbeat_timeout_ms or default_timeout_ms or self.default_timeout_ms
        args = [
            req.cluster, req.broker_name, str(req.broker_id), req.broker_addr, req.ha_server_addr,
            req.zone_name or "", eam, timeout, req.data_version.encode(), req.data_version.state_version,
            _flag(delete_missing), _flag(return_kv), _flag(single_topic_guard), fsl,
            topics,
            "" if now is None else now, connection, _flag(cross_cluster_topics is not None),
            "".join(t + "\n" for t in cross_cluster_topics or ()), digest, "0" if delta is None else "3", "",
        ]
        if delta is not None:
            args += ["", delta.base, delta.changed, delta.removed, delta.added]
        return args

    async def register_unchanged(
        self,
        digest: str,
        *,
        delete_topic_with_broker_registration: bool = False,
        return_order_topic_config: bool = True,
        single_topic_guard: bool = False,
        connection: str = "",
        cross_cluster: bool = False,
        cross_cluster_topics: bool = False,
        clusters: Iterable[str] | None = None,
        now: int | None = None,
    ) -> RegisterBrokerResult | None:
        """REGISTER_BROKER of the same bytes as the registration recorded under `digest`, without its topics: O(1)
        in the broker's topics. None when it cannot be shown unchanged (nothing written): send the full one.
        `cross_cluster`: the cross-cluster guard is on; `cross_cluster_topics`: it would check the payload's
        topics. `clusters`: the clusters the credential may write (None = any)."""
        if clusters is not None:
            clusters = list(clusters)
            if not clusters:
                return None
        res = await self._run(
            "registerBroker", self._fixed["registerBroker"],
            "", "", "", "", "", "", "", "", "", "",
            _flag(delete_topic_with_broker_registration), _flag(return_order_topic_config),
            _flag(single_topic_guard), "", "", "" if now is None else now, connection, _flag(cross_cluster),
            "*" if cross_cluster_topics else "", digest, "1", "".join(c + "\n" for c in clusters or ()),
            client=self.bulk_redis,  # every registration goes through the one client (an outage resets its pool)
            wait=self.limits.wait_registrations,
        )
        return _registration_result(res)

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
        flat = await self._run("heartbeat", self._fixed["heartbeat"], *args, deadline=self.limits.bulk(len(beats)))
        out = []
        for (_, _, dv), (found, stored) in zip(beats, _pairs(flat), strict=True):
            if not int(found):
                out.append(HeartbeatResult(changed=True, data_version=None))
                continue
            stored_dv = DataVersion.decode(stored)
            out.append(HeartbeatResult(changed=dv is not None and dv != stored_dv, data_version=stored_dv))
        return out

    async def touch_live(self, beats: Sequence[tuple[str, str, int]], now: int | None = None) -> int:
        """A batch of acknowledged BROKER_HEARTBEATs, (cluster, brokerAddr, age ms) each (service/core/liveness.py):
        live entries move forward to now - age, never back; gone ones stay gone. How many moved. Its Redis time
        sizes the next batch (`touch_live_step`)."""
        args: list[Any] = ["" if now is None else now]
        for cluster, addr, age in beats:
            args += [f"{cluster}|{addr}", max(0, int(age))]
        n, elapsed = await self._run("touchLive", self._fixed["touchLive"], *args,
                                     deadline=self.limits.bulk(len(beats)))
        self.steps.touch.took(len(beats), int(elapsed))
        return int(n)

    def touch_live_step(self) -> int:
        """Heartbeats per touch_live call: what lands near a step's Redis time on this Redis (steps.py)."""
        return self.steps.touch.topics()

    async def unregister_broker(self, ident: BrokerIdentity) -> int:
        """0: address was not a member; 1: broker removed; 2: broker reduced. A broker with more topics than
        a sweep step takes (steps.py) is removed in bounded steps (service/store/sweeps.py), all done before this
        returns."""
        async with self.gate.turn():  # the removal and its sweeps in one turn
            bound = sweeps.sweep_bound(self)
            res, sweep_ids = await self._run("unregisterBroker", self._fixed["unregisterBroker"], ident.cluster,
                                             ident.broker_name, str(ident.broker_id), ident.broker_addr, str(bound),
                                             client=self.bulk_redis, deadline=sweeps.removal_deadline(self, bound))
            await self.run_sweeps(sweep_ids)
        return int(res)

    async def drop_connection(self, connection: str, members: Iterable[tuple[str, str]]
                              ) -> list[tuple[str, str, str, int]]:
        """A native connection closed: unregister the (cluster, brokerAddr) entries that registered on it and
        have not registered again since. Returns (cluster, addr, brokerName, 1 removed | 2 reduced)."""
        pairs: list[str] = []
        for cluster, addr in members:
            pairs += [cluster, addr]
        if not pairs:
            return []
        async with self.gate.turn():
            bound = sweeps.sweep_bound(self)
            flat, sweep_ids = await self._run("dropConnection", self._fixed["dropConnection"], connection, str(bound),
                                              *pairs, client=self.bulk_redis,
                                              deadline=sweeps.removal_deadline(self, bound, len(pairs) // 2))
            await self.run_sweeps(sweep_ids)
        return [(flat[i], flat[i + 1], flat[i + 2], int(flat[i + 3])) for i in range(0, len(flat), 4)]

    async def expire(self, batch: int = 100, now: int | None = None, topic_budget: int | None = None,
                     grace_ms: int = 0) -> ExpireResult:
        """One bounded expiry pass (at most `batch` brokers and about `topic_budget` topics — by default what a
        step of its kind takes on this Redis, steps.py —, a broker past the sweep bound counting as the bound: its
        topics go in steps); `more` says another call may find more. `grace_ms`: a broker expires only this long
        after its timeout (heartbeats acknowledged but not yet written: service/core/liveness.py)."""
        async with self.gate.turn():
            sizer = self.steps.expire
            budget = sizer.topics() if topic_budget is None else topic_budget
            more, flat, sweep_ids, spent, elapsed = await self._run(
                "expireBrokers", self._fixed["expireBrokers"], batch, "" if now is None else now, budget,
                self.default_timeout_ms, str(sweeps.sweep_bound(self)), grace_ms, client=self.bulk_redis,
                deadline=self.limits.bulk(budget + batch))
            sizer.took(int(spent), int(elapsed))
            await self.run_sweeps(sweep_ids)
        expired = []
        for member, name in _pairs(flat):
            cluster, _, addr = member.partition("|")
            expired.append((cluster, addr, name))
        return ExpireResult(expired=expired, more=bool(int(more)))

    async def run_sweeps(self, sweep_ids: Sequence[str]) -> None:
        """Run the sweeps a removal queued to the end (bounded steps: service/store/sweeps.py)."""
        await sweeps.finish(self, sweep_ids)

    async def finish_sweeps(self) -> int:
        """Finish the broker sweeps a worker left half-done (it died, or Redis failed mid-way): script calls made."""
        return await sweeps.finish_pending(self)

    async def expire_all(self, batch: int = 100, now: int | None = None, max_calls: int = 1000,
                         grace_ms: int = 0) -> ExpireResult:
        """Expire batch after batch (each call bounded) until nothing is due."""
        out: list[tuple[str, str, str]] = []
        for _ in range(max_calls):
            res = await self.expire(batch, now, grace_ms=grace_ms)
            out.extend(res.expired)
            if not res.more:
                return ExpireResult(out, more=False)
        return ExpireResult(out, more=True)

    async def member_group(self, broker_name: str) -> dict[int, str]:
        (flat,) = await self._run("memberGroup", self._keys("memberGroup", broker=broker_name))
        return {int(i): a for i, a in _pairs(flat)}

    @bounded(bulk=True)
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
        return (await self.get_route_at(topic, support_acting_master=support_acting_master,
                                        order_message_enable=order_message_enable)).route

    async def get_route_at(
        self, topic: str, *, support_acting_master: bool = False, order_message_enable: bool = False
    ) -> ReadAt:
        """The route and the registry version it reflects (read in the same script: the route cache keeps a
        read unless an event newer than that version changed the topic meanwhile); reads that come together go
        to Redis together (route_reads.py)."""
        return await self.reads.read(topic, support_acting_master, order_message_enable)

    async def _get_routes(self, topics: list[str], support_acting_master: bool, order_message_enable: bool,
                          budget: int) -> list[Any]:
        return await self._run("getRoutes", self._keys("getRoutes", topic=topics[0]), _flag(support_acting_master),
                               _flag(order_message_enable), budget, *topics)

    async def cluster_info(self) -> ClusterInfo:
        return (await self.cluster_info_read())[0]

    async def cluster_info_at(self) -> tuple[ClusterInfo, str | None]:
        """The cluster info and the {P}:civer it reflects (None: never renewed), read in one script: O(brokers),
        100+ ms at 10 000 brokers (cluster_info_read goes in bounded steps, and falls back to this)."""
        brokers, clusters, version = await self._run("clusterInfo", self._fixed["clusterInfo"])
        return _cluster_info(brokers, clusters), str(version) if version else None

    async def cluster_info_read(self) -> tuple[ClusterInfo, str | None, str]:
        """The cluster info, the {P}:civer it reflects and how it was read: "steps", in bounded clusterInfoStep
        calls of a chunk of brokers each, sized to about a step's Redis time (steps.py), so that no command holds
        Redis long however many brokers there are.

        Every change to what cluster info shows renews {P}:civer (`cluster_info_changed`, lua/includes/common.lua)
        and each step returns the value it read with its chunk. When every step's equals the first's, no visible
        change happened between the first step and the last, so the chunks stitched together are the registry at
        that one version — a consistent snapshot, what a single clusterInfo call would have returned. A step at
        another value also returns, from the change log {P}:cilog, every broker that changed since the value the
        read was at, as it is now: those rows replace the read's, and the read goes on at the new value, still
        the registry at one version in the end. Only when the log cannot say (a renewal by a worker of a release
        before it) does the read start over; after CLUSTER_INFO_ATTEMPTS of those it reads the whole in one call:
        "whole", correct, just long. Like the other stepped reads (snapshots, topic lists) the steps take no bulk
        turn."""
        for _ in range(CLUSTER_INFO_ATTEMPTS):
            read = await self._cluster_info_steps()
            if read is not None:
                return read
        return (*(await self.cluster_info_at()), "whole")

    async def _cluster_info_steps(self) -> tuple[ClusterInfo, str | None, str] | None:
        """One stepped read of the cluster info and how ("steps", or "caught_up" when it replaced brokers that
        changed meanwhile); None if {P}:civer moved between its steps and the change log could not say how."""
        how = "steps"
        sizer = self.steps.cluster_info
        brokers: dict[str, list[Any]] = {}  # by name: SSCAN may return a broker twice
        version, cursor, chunk, elapsed, *_ = await self.cluster_info_step("0", sizer.topics())
        while True:
            sizer.took(len(chunk), elapsed)
            brokers.update((b[0], b) for b in chunk)
            if cursor == "0":
                break
            at, cursor, chunk, elapsed, caught, changed, gone = await self.cluster_info_step(
                cursor, sizer.topics(), version)
            if not caught:
                return None
            if at != version:  # the brokers changed since `version`, as they are at `at`
                how = "caught_up"
                for name in gone:
                    brokers.pop(name, None)
                brokers.update((b[0], b) for b in changed)
                version = at
        # clusterAddrTable from the rows: each broker is in exactly the cluster its data names (tests/invariants.py;
        # reading the cluster sets instead is O(brokers) in one step, ~4 ms at 10 000)
        clusters: dict[str, list[str]] = {}
        for name, cluster, *_ in brokers.values():
            if cluster:
                clusters.setdefault(cluster, []).append(name)
        return _cluster_info(brokers.values(), clusters.items()), str(version) if version else None, how

    async def cluster_info_step(self, cursor: str, count: int, since: str = "") -> list[Any]:
        """One clusterInfoStep call from `cursor` ("0": the first) of about `count` brokers, the read being at
        civer `since`: [civer or "", the next cursor ("0": done), broker rows, the step's Redis time in µs, 1 if the
        rows and names that follow are every broker changed since `since` (0: unknown), their rows, the names of
        those gone]."""
        return await self._run("clusterInfoStep", self._fixed["clusterInfoStep"], cursor, count, since)

    @bounded()
    async def cluster_info_version(self) -> str | None:
        """{P}:civer now (one GET): a copy of the cluster info read at this value is still the registry's."""
        version = await self.redis.get(self.keys.cluster_info_version)
        return str(version) if version else None

    async def topic_list(self, mode: str = "all", page: int = 1000) -> list[str]:
        """All topics, or those whose first queue data has the unit / unit-sub flags; paged, bounded calls."""
        return (await self.topic_list_at(mode, page))[0]

    async def topic_list_at(self, mode: str = "all", page: int = 1000) -> tuple[list[str], str | None]:
        """The topic list and, for mode "all", the {P}:tlver it is exactly the set at: None when the pages read
        different values (the set changed during the walk) or none (never renewed), or for the other modes."""
        if mode not in TOPIC_LIST_MODES:
            raise ValueError(f"unknown topic list mode {mode!r}")
        seen: set[str] = set()
        versions: set[str] = set()
        runs: list[list[str]] = []
        cursor = "0"
        while True:
            cursor, topics, *version = await self._run("topicList", self._fixed["topicList"], mode, cursor, page, "")
            seen.update(topics)
            _add_sorted_run(runs, topics)
            versions.update(str(v) for v in version)
            if cursor == "0":
                at = versions.pop() if len(versions) == 1 else None
                return _merged(runs, seen), at or None

    @bounded()
    async def topic_list_version(self) -> str | None:
        """{P}:tlver now (one GET): a copy of the all-topics list read at this value is still the registry's."""
        version = await self.redis.get(self.keys.topic_list_version)
        return str(version) if version else None

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
        (n,) = await self._run("deleteTopic", self._keys("deleteTopic", topic=topic), topic, cluster or "", wait=True)
        return int(n)

    async def register_topic(self, topic: str, queue_datas: list[QueueData]) -> int:
        arg = "".join(f"{q.broker_name}\t{q.encode().replace(',', chr(9))}\n" for q in queue_datas)
        res = await self._run("registerTopic", self._keys("registerTopic", topic=topic), topic, arg, wait=True)
        if int(res[0]) < 0:
            raise from_script_code(int(res[0]), res[1])
        return int(res[0])

    async def wipe_write_perm(self, broker_name: str) -> int:
        (n,) = await self._run("writePerm", self._keys("writePerm", broker=broker_name), broker_name, "wipe",
                               wait=True)
        return int(n)

    async def add_write_perm(self, broker_name: str) -> int:
        (n,) = await self._run("writePerm", self._keys("writePerm", broker=broker_name), broker_name, "add",
                               wait=True)
        return int(n)

    @bounded()
    async def broker_exists(self, broker_name: str) -> bool:
        return bool(await self.redis.sismember(self.keys.brokers, broker_name))

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


def _add_sorted_run(runs: list[list[str]], page: list[str]) -> None:
    """Sort a page of a walk into `runs` (sorted lists, each longer than the next), merging while the last is
    no longer than the new one: sorting 120 000 names at the end of a walk held a worker's event loop for 22 ms
    (its route reads with it, stall_bench); merged as the pages come, no step takes more than a few ms."""
    run = sorted(page)
    while runs and len(runs[-1]) <= len(run):
        prev = runs.pop()
        prev.extend(run)
        prev.sort()  # two sorted runs: one linear merge
        run = prev
    runs.append(run)


def _merged(runs: list[list[str]], seen: set[str]) -> list[str]:
    """The walk's names in order, once each (a cursor walk may return a name twice)."""
    out = [name for run in runs for name in run]
    out.sort()  # a few runs left: a few merges
    return out if len(out) == len(seen) else sorted(seen)


__all__ = ["ORDER_TOPIC_CONFIG", "PER_TOPIC_S", "REDIS_ERRORS", "ReplicationUnconfirmed", "RouteStore", "StoreLimits",
           "store_errors", "translate"]

