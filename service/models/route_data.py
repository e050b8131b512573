"""The route table's data as RocketMQ shapes it: queue and broker data, topic routes (with the zone filter),
cluster info, topic lists and member groups, and the queue data an admin registers a topic with."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from service.models.validators import MAX_INT32, MAX_QUEUES, _bad, entity_name, integer, obj


@dataclass(frozen=True, slots=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int

    def encode(self) -> str:
        return f"{self.read_queue_nums},{self.write_queue_nums},{self.perm},{self.topic_sys_flag}"

    @classmethod
    def decode(cls, broker_name: str, text: str) -> QueueData:
        r, w, p, s = (int(x) for x in text.split(","))
        return cls(broker_name, r, w, p, s)

    def to_dict(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "perm": self.perm, "readQueueNums": self.read_queue_nums,
                "topicSysFlag": self.topic_sys_flag, "writeQueueNums": self.write_queue_nums}

    @classmethod
    def parse(cls, value: Any, field_name: str) -> QueueData:
        d = obj(value, field_name)
        return cls(
            broker_name=entity_name(d.get("brokerName"), f"{field_name}.brokerName"),
            read_queue_nums=integer(d.get("readQueueNums"), f"{field_name}.readQueueNums", 0, MAX_QUEUES),
            write_queue_nums=integer(d.get("writeQueueNums"), f"{field_name}.writeQueueNums", 0, MAX_QUEUES),
            perm=integer(d.get("perm"), f"{field_name}.perm", 0, 15),
            topic_sys_flag=integer(d.get("topicSysFlag"), f"{field_name}.topicSysFlag", 0, MAX_INT32, 0),
        )


@dataclass(frozen=True, slots=True)
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str]
    enable_acting_master: bool = False
    zone_name: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "brokerAddrs": dict(sorted(self.broker_addrs.items())),
            "brokerName": self.broker_name,
            "cluster": self.cluster,
            "enableActingMaster": self.enable_acting_master,
        }
        if self.zone_name:
            out["zoneName"] = self.zone_name
        return out


@dataclass(frozen=True, slots=True)
class TopicRouteData:
    queue_datas: list[QueueData]
    broker_datas: list[BrokerData]
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    order_topic_conf: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "brokerDatas": [b.to_dict() for b in self.broker_datas],
            "filterServerTable": self.filter_server_table,
            "queueDatas": [q.to_dict() for q in self.queue_datas],
        }
        if self.order_topic_conf:
            out["orderTopicConf"] = self.order_topic_conf
        return out

    def in_zone(self, zone: str) -> TopicRouteData:
        """ZoneRouteRPCHook: keep brokers of `zone` (case-insensitive) and brokers whose master is down
        ("break nearby"), drop the queue data and filter servers of the others."""
        z = zone.lower()
        kept = [b for b in self.broker_datas
                if b.broker_addrs and ((b.zone_name or "").lower() == z or 0 not in b.broker_addrs)]
        names = {b.broker_name for b in kept}
        addrs = {a for b in kept for a in b.broker_addrs.values()}
        return TopicRouteData(
            queue_datas=[q for q in self.queue_datas if q.broker_name in names],
            broker_datas=kept,
            filter_server_table={a: f for a, f in self.filter_server_table.items() if a in addrs},
            order_topic_conf=self.order_topic_conf,
        )


class ReadAt(NamedTuple):
    """A route read together with the registry version it reflects (getRoutes returns both, atomically): a
    route-cache fill is then spoiled only by an event newer than its read, not by every event during its round
    trip, so topics a registration changes again and again (a roll-out) still get cached between changes."""

    route: TopicRouteData | None
    ver: int


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    broker_addr_table: dict[str, BrokerData]
    cluster_addr_table: dict[str, list[str]]

    def to_dict(self) -> dict[str, Any]:
        return {
            "brokerAddrTable": {k: v.to_dict() for k, v in sorted(self.broker_addr_table.items())},
            "clusterAddrTable": {k: sorted(v) for k, v in sorted(self.cluster_addr_table.items())},
        }


@dataclass(frozen=True, slots=True)
class TopicList:
    topics: list[str]
    broker_addr: str | None = None  # only GET_SYSTEM_TOPIC_LIST_FROM_NS (304) carries one

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"topicList": self.topics}
        if self.broker_addr:
            out["brokerAddr"] = self.broker_addr
        return out


@dataclass(frozen=True, slots=True)
class BrokerMemberGroup:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str]

    def to_dict(self) -> dict[str, Any]:
        return {"brokerMemberGroup": {"brokerAddrs": dict(sorted(self.broker_addrs.items())),
                                      "brokerName": self.broker_name, "cluster": self.cluster}}


def parse_queue_datas(body: Any) -> list[QueueData]:
    d = obj(body, "body")
    qds = d.get("queueDatas")
    if not isinstance(qds, list) or not qds:
        raise _bad("queueDatas", "required, a non-empty list")
    out = [QueueData.parse(q, f"queueDatas[{i}]") for i, q in enumerate(qds)]
    if len({q.broker_name for q in out}) != len(out):
        raise _bad("queueDatas", "one entry per brokerName")
    return out
