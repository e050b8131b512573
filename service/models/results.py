"""What the registry answers about brokers: a registration's result, a heartbeat's, an unregistration's,
an expiry pass's, and the live broker table as an operator sees it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from service.config import DEFAULT_BROKER_TIMEOUT_MS
from service.models.broker_requests import DataVersion


@dataclass(frozen=True, slots=True)
class RegisterBrokerResult:
    ha_server_addr: str | None
    master_addr: str | None
    kv_table: dict[str, str] | None
    fenced: bool = False
    changed_topics: int = 0
    register_first: bool = False
    unchanged: bool = False  # applied without its topics: the same bytes as this broker's last registration
    who: tuple[str, str, str] | None = None  # unchanged: (brokerName, clusterName, brokerAddr) it replayed
    delta: bool = False  # sent with a delta (TopicDelta) and applied as one (not whole)

    def to_dict(self) -> dict[str, Any]:
        return {"haServerAddr": self.ha_server_addr, "masterAddr": self.master_addr,
                "kvTable": {"table": self.kv_table} if self.kv_table is not None else None}


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    changed: bool
    data_version: DataVersion | None

    def to_dict(self) -> dict[str, Any]:
        return {"changed": self.changed,
                "dataVersion": self.data_version.to_dict() if self.data_version else None}


UNREGISTER_RESULTS = {0: "unknown", 1: "removed", 2: "reduced"}


@dataclass(frozen=True, slots=True)
class ExpireResult:
    expired: list[tuple[str, str, str]]  # (cluster, brokerAddr, brokerName)
    more: bool


@dataclass(frozen=True, slots=True)
class LiveBroker:
    """One brokerLiveTable entry as an operator sees it."""

    cluster: str
    broker_name: str
    broker_id: int
    broker_addr: str
    last_heartbeat_ms: int  # Redis clock
    heartbeat_timeout_ms: int = DEFAULT_BROKER_TIMEOUT_MS
    data_version: DataVersion | None = None
    ha_server_addr: str | None = None
    topic_count: int = 0

    def to_dict(self, now_ms: int | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "cluster": self.cluster, "brokerName": self.broker_name, "brokerId": self.broker_id,
            "brokerAddr": self.broker_addr, "haServerAddr": self.ha_server_addr,
            "lastHeartbeat": self.last_heartbeat_ms, "heartbeatTimeoutMillis": self.heartbeat_timeout_ms,
            "dataVersion": self.data_version.to_dict() if self.data_version else None,
            "topicCount": self.topic_count,
        }
        if now_ms is not None:
            out["ageMillis"] = max(0, now_ms - self.last_heartbeat_ms)
        return out

    def to_snapshot_dict(self) -> dict[str, Any]:
        """The manifest's broker row (read by the skew job)."""
        return {"cluster": self.cluster, "brokerName": self.broker_name, "brokerId": self.broker_id,
                "brokerAddr": self.broker_addr, "lastHeartbeat": self.last_heartbeat_ms,
                "heartbeatTimeoutMillis": self.heartbeat_timeout_ms}
