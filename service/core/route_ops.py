"""The route table's operations as a mixin of NameServer (nameserver.py), as Apache's ClientRequestProcessor
serves routes apart from the rest: route reads through the cache (the hot path), cluster info, topic lists and
member groups, and the topic admin writes (delete, register, write permissions)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, TypeVar

from service.config import Settings
from service.core.access import Access, Principal, Role
from service.core.cluster_infos import ClusterInfos
from service.core.route_cache import RouteCache, RouteEntry
from service.core.topic_lists import TopicLists
from service.core.versioned_copies import VersionedCopy
from service.errors import Disabled, InvalidArgument, NotReady
from service.models import (
    BrokerMemberGroup,
    ClusterInfo,
    ReadAt,
    TopicList,
    TopicRouteData,
    entity_name,
    parse_queue_datas,
    topic_name,
)
from service.store import RouteStore

TOPIC_LIST_KINDS = ("all", "cluster", "system", "unit", "unitsub", "unitsub-ununit")
T = TypeVar("T")


class RouteOps:
    """Routes and topics, for a NameServer with `access`, `settings`, `store`, `routes` (the route cache),
    `cluster_infos` (its copy of the cluster info), `topic_lists` (its copy of all topics), a `_clock`,
    `_not_ready_until` and `_changed`."""

    access: Access
    settings: Settings
    store: RouteStore
    routes: RouteCache
    cluster_infos: ClusterInfos
    topic_lists: TopicLists
    _clock: Callable[[], float]
    _not_ready_until: float
    _changed: Callable[[Iterable[str] | None], None]

    # ------------------------------------------------------------------ routes

    def cached_route(self, who: Principal, topic: str) -> RouteEntry | None:
        """The hot path, synchronous: the cached entry, or None (then call `route`)."""
        if self._not_ready_until and self._clock() < self._not_ready_until:
            raise NotReady("name server not ready")
        if self.access.reads_protected:
            self.access.require(who, Role.READ)
        return self.routes.lookup(topic)

    async def route(self, who: Principal, topic: str) -> RouteEntry:
        """The topic's route entry (`route` None: no such topic), through the cache."""
        entry = self.cached_route(who, topic)
        if entry is not None:
            return entry
        topic_name(topic)
        return await self.routes.fill(topic, lambda: self._read_route(topic))

    @staticmethod
    def zone_filter(zone_mode: str | bool | None, zone_name: str | None) -> str | None:
        """ZoneRouteRPCHook's condition: zone mode on and a non-blank zone name; the zone to filter by."""
        on = zone_mode is True or (isinstance(zone_mode, str) and zone_mode.lower() == "true")
        if not on or zone_name is None or not zone_name.strip():
            return None
        return zone_name.strip()

    def encoded_route(self, topic: str, entry: RouteEntry, door: str,
                      encode: Callable[[TopicRouteData], bytes], zone: str | None = None) -> bytes:
        """The route as `door` encodes it, optionally filtered to a zone; cached with the entry."""
        if zone is None:
            return self.routes.encoding(topic, entry, door, encode)
        return self.routes.encoding(topic, entry, (door, zone.lower()), lambda r: encode(r.in_zone(zone)))

    async def _read_route(self, topic: str) -> ReadAt:
        s = self.settings
        return await self.store.get_route_at(topic, support_acting_master=s.support_acting_master,
                                             order_message_enable=s.order_message_enable)

    async def cluster_info(self, who: Principal) -> ClusterInfo:
        """RocketMQ 106, from the worker's copy while the registry's cluster-info version holds (shared: read only)."""
        self.access.require(who, Role.READ)
        return (await self.cluster_infos.get()).value

    async def encoded_cluster_info(self, who: Principal, door: Hashable, encode: Callable[[ClusterInfo], T]) -> T:
        """The cluster info as `door` encodes it, made once per version of it (10 000 brokers: ~17 ms a time)."""
        self.access.require(who, Role.READ)
        return (await self.cluster_infos.get()).encoding(door, encode)

    async def topic_list(self, who: Principal, kind: str = "all", cluster: str | None = None) -> TopicList:
        """RocketMQ 206 (all), 224 (cluster), 304 (system), 311-313 (unit kinds), with their switches."""
        self.access.require(who, Role.READ)
        if kind == "all":
            return (await self._all_topics()).value
        if kind == "system":
            names, addr = await self.store.system_topic_list()
            return TopicList(names, addr)
        if kind not in TOPIC_LIST_KINDS:
            raise InvalidArgument(f"unknown topic list {kind!r}")
        if not self.settings.enable_topic_list:
            raise Disabled("disable: topic lists are switched off (enableTopicList=false)")
        if kind == "cluster":
            return TopicList(await self.store.cluster_topics(entity_name(cluster, "cluster")))
        return TopicList(await self.store.topic_list(kind))

    async def encoded_all_topics(self, who: Principal, door: Hashable, encode: Callable[[TopicList], T]) -> T:
        """RocketMQ 206 as `door` encodes it, made once per version of the topic set (100 000 topics: ~30 ms)."""
        self.access.require(who, Role.READ)
        return (await self._all_topics()).encoding(door, encode)

    async def _all_topics(self) -> VersionedCopy[TopicList]:
        """The worker's copy of all topics while the registry's topic-list version holds (shared: read only)."""
        if not self.settings.enable_all_topic_list:
            raise Disabled("disable: the all-topic list is switched off (enableAllTopicList=false)")
        return await self.topic_lists.get()

    async def member_group(self, who: Principal, cluster: str, broker_name: str) -> BrokerMemberGroup:
        """GET_BROKER_MEMBER_GROUP: the requested cluster is echoed, not checked (as Java)."""
        self.access.require(who, Role.READ)
        cluster, broker_name = entity_name(cluster, "cluster"), entity_name(broker_name, "brokerName")
        return BrokerMemberGroup(cluster, broker_name, await self.store.member_group(broker_name))

    # ------------------------------------------------------------------ admin

    async def delete_topic(self, who: Principal, topic: str, cluster: str | None = None) -> int:
        self.access.require(who, Role.ADMIN)
        topic_name(topic)
        if cluster is not None:
            entity_name(cluster, "cluster")
        try:  # a broker's next registration brings the topic back: not answered from memory
            return await self.store.delete_topic(topic, cluster)
        finally:
            self._changed(None)  # which brokers served it, the store knows

    async def register_topic(self, who: Principal, topic: str, body: Mapping[str, Any]) -> int:
        """REGISTER_TOPIC_IN_NAMESRV: `body` holds `queueDatas`; all or nothing (an unknown broker: nothing)."""
        self.access.require(who, Role.ADMIN)
        topic_name(topic)
        queue_datas = parse_queue_datas(body)
        try:
            return await self.store.register_topic(topic, queue_datas)
        finally:
            self._changed([q.broker_name for q in queue_datas])

    async def wipe_write_perm(self, who: Principal, broker_name: str) -> int:
        self.access.require(who, Role.ADMIN)
        name = entity_name(broker_name, "brokerName")
        try:
            return await self.store.wipe_write_perm(name)
        finally:
            self._changed([name])

    async def add_write_perm(self, who: Principal, broker_name: str) -> int:
        self.access.require(who, Role.ADMIN)
        name = entity_name(broker_name, "brokerName")
        try:
            return await self.store.add_write_perm(name)
        finally:
            self._changed([name])
