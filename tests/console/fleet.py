"""A small, realistic RocketMQ fleet registered with a real NameServer over its HTTP API: two clusters, masters
and slaves, ordinary, retry, dead-letter and system topics, some of them spread unevenly (for the skew report).
Used by the console's browser tests and by `python -m tests.console.screenshots`."""

from __future__ import annotations

import urllib.request
from typing import Any

import orjson

# brokerName -> (cluster, master address, slave address or None)
BROKERS = {
    "broker-a": ("ClusterA", "10.0.1.11:10911", "10.0.1.12:10911"),
    "broker-b": ("ClusterA", "10.0.1.21:10911", "10.0.1.22:10911"),
    "broker-c": ("ClusterA", "10.0.1.31:10911", None),
    "broker-d": ("ClusterB", "10.0.2.11:10911", "10.0.2.12:10911"),
    "broker-e": ("ClusterB", "10.0.2.21:10911", None),
}
# topic -> {brokerName: write queues}
TOPICS: dict[str, dict[str, int]] = {
    "OrderCreated": {"broker-a": 8, "broker-b": 8, "broker-c": 8},
    "OrderPaid": {"broker-a": 16, "broker-b": 4, "broker-c": 4},
    "InventoryReserved": {"broker-a": 8},
    "ShipmentEvents": {"broker-b": 8, "broker-c": 8},
    "AuditLog": {"broker-a": 4, "broker-b": 4, "broker-c": 12},
    "%RETRY%order-service": {"broker-a": 1, "broker-b": 1, "broker-c": 1},
    "%DLQ%order-service": {"broker-a": 1},
    "UserSignup": {"broker-d": 8, "broker-e": 8},
    "ClickStream": {"broker-d": 24, "broker-e": 8},
    "%RETRY%analytics": {"broker-d": 1, "broker-e": 1},
    "RMQ_SYS_TRACE_TOPIC": {"broker-a": 1, "broker-b": 1, "broker-c": 1, "broker-d": 1, "broker-e": 1},
    "TBW102": {"broker-a": 8, "broker-b": 8, "broker-c": 8, "broker-d": 8, "broker-e": 8},
}


def call(base: str, method: str, path: str, body: Any = None, token: str | None = None) -> Any:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(base + path, method=method, headers=headers,
                                 data=None if body is None else orjson.dumps(body))
    with urllib.request.urlopen(req, timeout=10) as resp:
        return orjson.loads(resp.read())


def topic_table(broker: str, topics: dict[str, dict[str, int]]) -> dict[str, Any]:
    return {t: {"readQueueNums": q[broker], "writeQueueNums": q[broker], "perm": 7 if t == "TBW102" else 6,
                "topicSysFlag": 0} for t, q in topics.items() if broker in q}


def register_all(base: str, token: str | None = None, topics: dict[str, dict[str, int]] | None = None,
                 counter: int = 1) -> None:
    """Every master and slave registers with its full topic table, as brokers do every 30 s."""
    topics = TOPICS if topics is None else topics
    for name, (cluster, master, slave) in BROKERS.items():
        for broker_id, addr in ((0, master), (1, slave)):
            if addr is None:
                continue
            host = addr.rsplit(":", 1)[0]
            call(base, "POST", "/v1/brokers/register", {
                "clusterName": cluster, "brokerName": name, "brokerId": broker_id, "brokerAddr": addr,
                "haServerAddr": f"{host}:10912",
                "dataVersion": {"timestamp": 1_763_700_000_000 + counter, "counter": counter, "stateVersion": 0},
                "topicConfigTable": topic_table(name, topics)}, token)
