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
VERSION_5_5_0 = 513  # MQVersion.CURRENT_VERSION of 5.5.0
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


# ------------------------------------------------------------------------------------------ a stock 5.5.0 broker

# The topics a stock 5.5.0 broker (BrokerStartup, default broker.conf: autoCreateTopicEnable=true) creates for
# itself and registers with its own (TopicConfigManager), in the order its table serialized them for cluster
# "DefaultCluster" and broker "broker-a" (tests/fixtures/register_frame_5_5_0.bin): name, queues, perm. {c} and {b}
# stand for the cluster's and the broker's name.
SYSTEM_TOPICS_5_5_0 = (
    ("RMQ_SYS_TRANS_HALF_TOPIC", 1, 6), ("BenchmarkTest", 1024, 6), ("OFFSET_MOVED_EVENT", 1, 6), ("TBW102", 8, 7),
    ("RMQ_SYS_ROCKSDB_TRANS_HALF_TOPIC", 1, 6), ("rmq_sys_REVIVE_LOG_{c}", 8, 6), ("SELF_TEST_TOPIC", 1, 6),
    ("{c}", 16, 7), ("SCHEDULE_TOPIC_XXXX", 18, 6), ("{c}_REPLY_TOPIC", 1, 6), ("rmq_sys_wheel_timer", 1, 6),
    ("rmq_sys_SYNC_BROKER_MEMBER_{b}", 1, 1), ("RMQ_SYS_TRANS_OP_HALF_TOPIC", 1, 6),
    ("RMQ_SYS_ROCKSDB_TRANS_OP_HALF_TOPIC", 1, 6), ("{b}", 1, 7))


def stock_topics(cluster: str, name: str, topics: dict[str, int] | None = None) -> dict[str, tuple[int, int]]:
    """A stock 5.5.0 broker's topic table: its system topics, then `topics` (name -> queues, perm 6)."""
    table = {t.format(c=cluster, b=name): (q, p) for t, q, p in SYSTEM_TOPICS_5_5_0}
    table.update((t, (q, 6)) for t, q in (topics or {}).items())
    return table


def stock_body(table: dict[str, tuple[int, int]], counter: int, timestamp: int, mapping_timestamp: int) -> bytes:
    """RegisterBrokerBody byte for byte as a 5.5.0 broker's fastjson writes it (TopicConfigAndMappingSerialize-
    Wrapper: every TopicConfig field in alphabetical order, no whitespace). `mapping_timestamp`: the wrapper's
    mappingDataVersion is a new DataVersion each registration, so a stock broker's periodic registrations differ
    in it even when nothing else does."""
    entries = ",".join(
        f'"{t}":{{"attributes":{{}},"order":false,"perm":{p},"readQueueNums":{q},"topicFilterType":"SINGLE_TAG",'
        f'"topicName":"{t}","topicSysFlag":0,"writeQueueNums":{q}}}' for t, (q, p) in table.items())
    return (f'{{"filterServerList":[],"topicConfigSerializeWrapper":{{"dataVersion":{{"counter":{counter},'
            f'"stateVersion":0,"timestamp":{timestamp}}},"mappingDataVersion":{{"counter":0,"stateVersion":0,'
            f'"timestamp":{mapping_timestamp}}},"topicConfigTable":{{{entries}}},"topicQueueMappingDetailMap":{{}},'
            f'"topicQueueMappingInfoMap":{{}}}}}}').encode()


def stock_frame(cluster: str, name: str, addr: str, body: bytes, opaque: int, acting_master: bool = False) -> bytes:
    """REGISTER_BROKER as a 5.5.0 broker frames it (its header fields in its order, bodyCrc32, version 513; a
    master: brokerId 0). With enableSlaveActingMaster (`acting_master`, off by default) it also sends
    heartbeatTimeoutMillis, its brokerNotActiveTimeoutMillis (10 s by default), and heart-beats every second."""
    ext = {"heartbeatTimeoutMillis": "10000", "brokerId": "0", "bodyCrc32": str(crc32_of(body)),
           "clusterName": cluster, "brokerAddr": addr, "enableActingMaster": "true" if acting_master else "false",
           "haServerAddr": addr.rsplit(":", 1)[0] + ":" + str(int(addr.rsplit(":", 1)[1]) + 1),
           "compressed": "false", "brokerName": name}
    if not acting_master:
        del ext["heartbeatTimeoutMillis"]
    header = orjson.dumps({"code": REGISTER_BROKER, "extFields": ext, "flag": 0, "language": "JAVA",
                           "opaque": opaque, "serializeTypeCurrentRPC": "JSON", "version": VERSION_5_5_0})
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body
