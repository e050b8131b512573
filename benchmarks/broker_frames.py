"""REGISTER_BROKER and UNREGISTER_BROKER as stock brokers send them on the native door, for benchmarks.

A 5.x broker (`BrokerOuterAPI.registerBrokerAll`) sends its RegisterBrokerBody either as fastjson JSON or, with
`compressedRegister=true`, in the zipped binary form of `RegisterBrokerBody.encode(true)`; a 4.9.x broker flags the
zipped form `compressed=true`, a 5.x one (5.0.0-5.5.0) sends it with `compressed=false` (docs/deviations.md). The
request `version` is 5.4.0's (493), so the zipped form ends with its (empty) TopicQueueMappingInfo table.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

import orjson

from service.remoting.bodies import crc32_of

REGISTER_BROKER, UNREGISTER_BROKER, GET_ROUTEINFO_BY_TOPIC = 103, 104, 105
VERSION = 493  # MQVersion.CURRENT_VERSION of 5.4.0
BODIES = ("plain", "compressed", "zipped")  # JSON; zipped and flagged (4.9.x); zipped, flagged false (5.x)


def _chunk(raw: bytes) -> bytes:
    return struct.pack(">i", len(raw)) + raw


def register_body(topics: dict[str, int], counter: int, kind: str = "plain") -> bytes:
    """RegisterBrokerBody of these topics (name -> read/write queue count, perm 6) and data version `counter`."""
    dv = {"counter": counter, "stateVersion": 0, "timestamp": 1_700_000_000_000}
    if kind == "plain":
        table = {t: {"attributes": {}, "order": False, "perm": 6, "readQueueNums": q, "topicFilterType": "SINGLE_TAG",
                     "topicName": t, "topicSysFlag": 0, "writeQueueNums": q} for t, q in topics.items()}
        return orjson.dumps({"filterServerList": [],
                             "topicConfigSerializeWrapper": {"dataVersion": dv, "topicConfigTable": table}})
    raw = [_chunk(orjson.dumps(dv)), struct.pack(">i", len(topics))]
    raw += [_chunk(f"{t} {q} {q} 6 SINGLE_TAG {{}}".encode()) for t, q in topics.items()]
    raw += [_chunk(b"[]"), struct.pack(">i", 0)]
    return zlib.compress(b"".join(raw), 9)  # Deflater(BEST_COMPRESSION), zlib header


def register_header(cluster: str, name: str, addr: str, kind: str = "plain", body: bytes = b"",
                    timeout_ms: int | None = None) -> dict[str, Any]:
    """REGISTER_BROKER's header fields for a master (`brokerId` 0)."""
    ext: dict[str, Any] = {"brokerName": name, "brokerAddr": addr, "clusterName": cluster, "brokerId": 0,
                           "haServerAddr": addr.rsplit(":", 1)[0] + ":10912", "enableActingMaster": False,
                           "compressed": kind == "compressed", "bodyCrc32": crc32_of(body)}
    if timeout_ms is not None:
        ext["heartbeatTimeoutMillis"] = timeout_ms
    return ext


def unregister_header(cluster: str, name: str, addr: str) -> dict[str, Any]:
    return {"brokerName": name, "brokerAddr": addr, "clusterName": cluster, "brokerId": 0}
