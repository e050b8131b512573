"""Apache's NameServer 5.5.0 as the oracle: generated sequences of native requests, every one sent to Apache's
NameServer and to ours (two workers on one real Redis, steps alternating between them), every reply compared —
code, response header fields, remark, decoded body — after the normalisation below. What differs on purpose is
listed once, with its reason, in docs/deviations.md; the generator keeps away from those cases or the comparison
normalises them, each place naming its entry there. Any other difference fails and hypothesis prints the
shortest sequence that shows it.

Budget: CI runs a fixed, derandomized set (`EXAMPLES` sequences of up to `STEPS` steps); `--long` runs many more
with random seeds. Triage: `DIFF_SURVEY=1 python -m pytest tests/differential/test_differential.py -s` records
every difference instead of stopping at the first and prints them at the end (the test then checks nothing: only
for finding what to fix).
"""

from __future__ import annotations

import os
import struct
import time
import uuid
import zlib
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from service.remoting import codes, fastjson
from service.remoting.bodies import crc32_of
from tests.differential.conftest import Peers

pytestmark = [pytest.mark.interop, pytest.mark.differential, pytest.mark.timeout(900)]

EXAMPLES, STEPS = 150, 50
COVERAGE: Counter[tuple[int, int]] = Counter()  # (request code, Apache's reply code) over the run
SURVEY: list | None = [] if os.environ.get("DIFF_SURVEY") else None
LONG_EXAMPLES, LONG_STEPS = 1000, 60

# Broker identities (cluster, name, id, address): addresses on loopback ports nobody listens on (neither
# NameServer ever dials a broker). One brokerName per cluster (docs/deviations.md: brokerName in two clusters).
BROKERS = [
    ("C1", "broker-a", 0, "127.0.0.1:10911"),
    ("C1", "broker-a", 1, "127.0.0.1:10921"),
    ("C1", "broker-a", 2, "127.0.0.1:10931"),
    ("C1", "broker-b", 0, "127.0.0.1:10941"),
    ("C2", "broker-c", 0, "127.0.0.1:10951"),
    ("C2", "broker-c", 1, "127.0.0.1:10961"),
]
BROKER_NAMES = sorted({b[1] for b in BROKERS}) + ["broker-x"]  # broker-x is never registered
CLUSTERS = ["C1", "C2", "C9"]  # C9 is never registered
TOPICS = ["TopicA", "TopicB", "TopicC", "TopicD", "%RETRY%group1", "rmq_sys_wheel"]
ORDER_NS = "ORDER_TOPIC_CONFIG"
TOPIC_LISTS = [206, 304, 311, 312, 313]  # ALL, SYSTEM, UNIT, HAS_UNIT_SUB, HAS_UNIT_SUB_UNUNIT topic lists
# KV keys are any text on both sides (Java checks only for null; issue 42 widened ours): non-ASCII, spaces and
# event-line characters too
KV_KEYS = ["k1", "k2", "TopicA", "TopicB", "键 名", " clé=1 ", "=TopicA", "emoji \U0001f680"]
# Runtime switches both NameServers have, toggled by UPDATE_NAMESRV_CONFIG and read back by GET_NAMESRV_CONFIG;
# the defaults restore them after each sequence.
SWITCHES = {"enableTopicList": "true", "enableAllTopicList": "true", "orderMessageEnable": "false",
            "deleteTopicWithBrokerRegistration": "false", "returnOrderTopicConfigToBroker": "true"}

REGISTER_HEADER = ("brokerName", "brokerAddr", "clusterName", "haServerAddr", "brokerId")
IDENTITY_HEADER = ("brokerName", "brokerAddr", "clusterName", "brokerId")

topic_config = st.fixed_dictionaries({
    "readQueueNums": st.sampled_from([1, 4, 8]), "writeQueueNums": st.sampled_from([1, 4, 8]),
    "perm": st.sampled_from([2, 4, 6, 7]), "topicSysFlag": st.sampled_from([0, 1, 2, 3]),
    "order": st.booleans()})
topic_tables = st.dictionaries(st.sampled_from(TOPICS), topic_config, max_size=5)
brokers = st.sampled_from(BROKERS)


def register_body(table: dict[str, dict[str, Any]], dv: dict[str, int], filters: list[str]) -> bytes:
    """RegisterBrokerBody as a 5.x broker writes it (fastjson, compressed=false)."""
    configs = {t: {"attributes": {}, "order": c["order"], "perm": c["perm"], "readQueueNums": c["readQueueNums"],
                   "topicFilterType": "SINGLE_TAG", "topicName": t, "topicSysFlag": c["topicSysFlag"],
                   "writeQueueNums": c["writeQueueNums"]} for t, c in table.items()}
    return fastjson.dumps({"filterServerList": filters, "topicConfigSerializeWrapper": {
        "dataVersion": dv, "topicConfigTable": configs}})


def compressed_body(table: dict[str, dict[str, Any]], dv: dict[str, int], filters: list[str]) -> bytes:
    """The compressed RegisterBrokerBody of 4.x brokers with compressedRegister=true (reference §4.5)."""
    def chunk(raw: bytes) -> bytes:
        return struct.pack(">i", len(raw)) + raw

    raw = chunk(fastjson.dumps(dv)) + struct.pack(">i", len(table))
    for t, c in table.items():
        raw += chunk(f"{t} {c['readQueueNums']} {c['writeQueueNums']} {c['perm']} SINGLE_TAG {{}}".encode())
    raw += chunk(fastjson.dumps(filters))
    return zlib.compress(raw, 9)


# ------------------------------------------------------------------ normalisation


def _keys(obj: Any) -> Any:
    """Map keys as strings (fastjson writes integer keys bare, standard JSON quotes them)."""
    if isinstance(obj, dict):
        return {str(k): _keys(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_keys(v) for v in obj]
    return obj


def _body(code: int, body: bytes) -> Any:
    if not body:
        return None
    if code == codes.GET_NAMESRV_CONFIG:  # docs/deviations.md "GET_NAMESRV_CONFIG": only the shared switches
        lines = dict(ln.split("=", 1) for ln in body.decode().splitlines() if "=" in ln)
        return {k: lines.get(k) for k in SWITCHES}
    try:
        data = _keys(fastjson.loads(body))
    except fastjson.JsonError:
        return body
    if code == codes.GET_BROKER_CLUSTER_INFO:  # clusterAddrTable's values are HashSets: no order
        data["clusterAddrTable"] = {c: sorted(n) for c, n in (data.get("clusterAddrTable") or {}).items()}
    if isinstance(data, dict) and isinstance(data.get("topicList"), list):  # a HashSet's keys: no order
        data["topicList"] = sorted(data["topicList"])
    return data


def _remark(code: int, request: int, reply_code: int, remark: str | None) -> str | None:
    for prefix in ("register broker failed", "disable"):  # docs/deviations.md "remarks": ours add the reason
        if reply_code == 1 and remark and remark.startswith(prefix):
            return prefix
    if reply_code == 1 and remark and remark not in ("disable", "crc32 not match", "register broker failed",
                                                     "namespace or key is null", "string2Properties error"):
        return "<exception>"  # docs/deviations.md "SYSTEM_ERROR remarks"
    if request == codes.REGISTER_TOPIC_IN_NAMESRV and reply_code == 0:
        return None  # docs/deviations.md "REGISTER_TOPIC_IN_NAMESRV naming an unknown broker"
    return remark


def normalise(request: int, reply) -> dict[str, Any]:
    return {"code": reply.code, "ext": dict(reply.ext_fields or {}),
            "remark": _remark(request, request, reply.code, reply.remark), "body": _body(request, reply.body)}


# ------------------------------------------------------------------ the machine


class Differential(RuleBasedStateMachine):
    peers: Peers

    def __init__(self) -> None:
        super().__init__()
        self.step = 0
        self.lists = 0  # topic list requests sent, to take the five lists in turn
        self.versions: dict[tuple, dict[str, int]] = {}
        self.kv_ns = ["NS" + uuid.uuid4().hex[:6], ORDER_NS, "命名 空间 " + uuid.uuid4().hex[:6]]
        self.touched_kv: set[tuple[str, str]] = set()
        self.last_kv: tuple[str, str] | None = None  # (namespace, key) of the last PUT_KV_CONFIG
        self.registered: set[tuple] = set()

    # ---- sending and comparing

    def both(self, code: int, ext: dict[str, Any] | None = None, body: bytes = b"", version: int = 479,
             serialize: str = "JSON") -> tuple[Any, Any]:
        """Send to Apache's and to one of our workers; the serialization of replies is not compared
        (docs/deviations.md "Replies come in the request's serialization")."""
        ext = {k: v for k, v in (ext or {}).items() if v is not None}
        worker = self.step % 2
        self.step += 1
        java = self.peers.java_request(code, ext, body, version=version, serialize=serialize)
        ours = self.peers.our_request(worker, code, ext, body, version=version, serialize=serialize)
        a, b = normalise(code, java), normalise(code, ours)
        COVERAGE[(code, java.code)] += 1
        if SURVEY is not None and a != b:
            SURVEY.append((codes.NAMES.get(code, code), ext, a, b, java.remark, ours.remark))
            return java, ours
        assert a == b, (f"{codes.NAMES.get(code, code)} {ext} (body {body[:300]!r}, version {version}, "
                        f"{serialize}) to worker {worker}:\n  Apache: {a} (remark {java.remark!r})\n"
                        f"  ours:   {b} (remark {ours.remark!r})")
        return java, ours

    def converge(self) -> None:
        """Java applies UNREGISTER_BROKER from a queue (reference §2.4): wait until its tables show it."""
        deadline = time.monotonic() + 5
        while True:
            java = normalise(106, self.peers.java_request(106))
            ours = normalise(106, self.peers.our_request(0, 106))
            if java == ours or time.monotonic() > deadline:
                return
            time.sleep(0.02)

    # ---- brokers

    def dv(self, b: tuple, bump: bool) -> dict[str, int]:
        cur = self.versions.get(b) or {"counter": 0, "stateVersion": 0, "timestamp": 1700000000000}
        if bump or b not in self.versions:
            cur = {"counter": cur["counter"] + 1, "stateVersion": 0, "timestamp": cur["timestamp"] + 1000}
        self.versions[b] = cur
        return cur

    @initialize(first=st.lists(st.tuples(brokers, st.dictionaries(st.sampled_from(TOPICS), topic_config, min_size=2,
                                                                  max_size=5)),
                               min_size=1, max_size=3, unique_by=lambda x: x[0]))
    def start(self, first):
        """Every sequence starts with brokers holding topics (then any step may change or remove them)."""
        for b, table in first:
            self.register(b, table, True, True, None, False, [], None)

    @rule(b=brokers, table=topic_tables, bump=st.booleans(), acting=st.sampled_from([None, True, False]),
          zone=st.sampled_from([None, "zone1", "zone2"]), compressed=st.booleans(),
          filters=st.sampled_from([[], ["127.0.0.1:10999"]]), timeout=st.sampled_from([None, 60000, 300000]))
    def register(self, b, table, bump, acting, zone, compressed, filters, timeout):
        cluster, name, bid, addr = b
        if len(table) == 1 and b not in self.registered:
            # docs/deviations.md "single-topic guard": Java's refused registration leaves part of itself behind
            table = {**table, "TopicD": table[next(iter(table))]} if "TopicD" not in table else {}
        dv = self.dv(b, bump)
        body = (compressed_body if compressed else register_body)(table, dv, filters)
        ext = {"brokerName": name, "brokerAddr": addr, "clusterName": cluster, "brokerId": bid,
               "haServerAddr": addr.replace(":1", ":2"), "compressed": "true" if compressed else "false",
               "bodyCrc32": crc32_of(body), "enableActingMaster": acting, "__ZONE_NAME": zone,
               "heartbeatTimeoutMillis": timeout}
        java, _ = self.both(codes.REGISTER_BROKER, ext, body, version=121 if compressed else 479)
        if java.code == 0:
            self.registered.add(b)

    @rule(b=brokers)
    def unregister(self, b):
        cluster, name, bid, addr = b
        if b not in self.registered and name in {r[1] for r in self.registered}:
            # docs/deviations.md "An unregister whose brokerName does not own the address changes nothing":
            # Java marks the group reduced and, acting master on, clears its WRITE bit. A registered member, then.
            b = min((r for r in self.registered if r[1] == name), key=lambda r: r[2])
            cluster, name, bid, addr = b
        self.both(codes.UNREGISTER_BROKER, {"brokerName": name, "brokerAddr": addr, "clusterName": cluster,
                                            "brokerId": bid})
        self.registered.discard(b)
        self.converge()

    @rule(b=brokers)
    def heartbeat(self, b):
        cluster, name, bid, addr = b
        self.both(codes.BROKER_HEARTBEAT, {"brokerName": name, "brokerAddr": addr, "clusterName": cluster,
                                           "brokerId": bid})

    @rule(b=brokers, same=st.booleans())
    def query_data_version(self, b, same):
        cluster, name, bid, addr = b
        dv = self.versions.get(b) if same else None
        dv = dv or {"counter": 99, "stateVersion": 0, "timestamp": 1}
        self.both(codes.QUERY_DATA_VERSION, {"brokerName": name, "brokerAddr": addr, "clusterName": cluster,
                                             "brokerId": bid}, fastjson.dumps(dv))

    @rule(cluster=st.sampled_from(CLUSTERS), name=st.sampled_from(BROKER_NAMES))
    def member_group(self, cluster, name):
        self.both(codes.GET_BROKER_MEMBER_GROUP, {"clusterName": cluster, "brokerName": name})

    # ---- reads

    @rule(topic=st.sampled_from(TOPICS + ["Nope"]), version=st.sampled_from([121, 479]),
          standard=st.sampled_from([None, "true"]), zone=st.sampled_from([None, "zone1", "ZONE2"]),
          mode=st.sampled_from([None, "true", "false"]), serialize=st.sampled_from(["JSON", "ROCKETMQ"]))
    def route(self, topic, version, standard, zone, mode, serialize):
        self.both(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": topic, "acceptStandardJsonOnly": standard,
                                                 "__ZONE_NAME": zone, "__ZONE_MODE": mode}, version=version,
                  serialize=serialize)

    @rule(serialize=st.sampled_from(["JSON", "ROCKETMQ"]))
    def cluster_info(self, serialize):
        self.both(codes.GET_BROKER_CLUSTER_INFO, serialize=serialize)

    @rule()
    def topic_list(self):
        # the five lists in turn, not drawn: a drawn code left one list at 1-2 calls in a run (a CI run saw
        # GET_HAS_UNIT_SUB_TOPIC_LIST once, while its switch was off), and the coverage check below failed on luck
        self.lists += 1
        self.both(TOPIC_LISTS[self.lists % len(TOPIC_LISTS)])

    @rule(cluster=st.sampled_from(CLUSTERS))
    def cluster_topics(self, cluster):
        self.both(codes.GET_TOPICS_BY_CLUSTER, {"cluster": cluster})

    # ---- admin

    @rule(name=st.sampled_from(BROKER_NAMES), add=st.booleans())
    def write_perm(self, name, add):
        self.both(codes.ADD_WRITE_PERM_OF_BROKER if add else codes.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": name})

    @rule(topic=st.sampled_from(TOPICS), cluster=st.sampled_from([None, *CLUSTERS]))
    def delete_topic(self, topic, cluster):
        self.both(codes.DELETE_TOPIC_IN_NAMESRV, {"topic": topic, "clusterName": cluster})

    @rule(topic=st.sampled_from(TOPICS), queues=st.lists(st.tuples(st.sampled_from(BROKER_NAMES[:-1]), topic_config),
                                                           min_size=1, max_size=2, unique_by=lambda q: q[0]))
    def register_topic(self, topic, queues):
        # docs/deviations.md "REGISTER_TOPIC_IN_NAMESRV naming an unknown broker": Java merges the queue data
        # listed before the unknown broker into an existing topic; unknown brokers first keeps away from that
        present = {b[1] for b in self.registered}
        queues = sorted(queues, key=lambda q: q[0] in present)
        datas = [{"brokerName": n, "perm": c["perm"], "readQueueNums": c["readQueueNums"],
                  "topicSysFlag": c["topicSysFlag"], "writeQueueNums": c["writeQueueNums"]} for n, c in queues]
        self.both(codes.REGISTER_TOPIC_IN_NAMESRV, {"topic": topic}, fastjson.dumps({"queueDatas": datas}))

    # ---- KV

    @rule(ns=st.integers(0, 2), key=st.sampled_from(KV_KEYS),
          value=st.sampled_from(["broker-a:4", "v;2", "x", "värde\t2"]))
    def kv_put(self, ns, key, value):
        self.touched_kv.add((self.kv_ns[ns], key))
        self.last_kv = (self.kv_ns[ns], key)
        self.both(codes.PUT_KV_CONFIG, {"namespace": self.kv_ns[ns], "key": key, "value": value})

    @rule(ns=st.integers(0, 2), key=st.sampled_from(KV_KEYS), serialize=st.sampled_from(["JSON", "ROCKETMQ"]),
          last=st.booleans())
    def kv_get(self, ns, key, serialize, last):
        # half the reads ask for the last key put: 8 keys in 3 namespaces drawn at random found a stored one so
        # seldom that a CI run answered GET_KV_CONFIG SUCCESS never (216 reads, all "not found")
        namespace, key = self.last_kv if last and self.last_kv else (self.kv_ns[ns], key)
        self.both(codes.GET_KV_CONFIG, {"namespace": namespace, "key": key}, serialize=serialize)

    @rule(ns=st.integers(0, 2), key=st.sampled_from(KV_KEYS))
    def kv_delete(self, ns, key):
        self.both(codes.DELETE_KV_CONFIG, {"namespace": self.kv_ns[ns], "key": key})

    @rule(ns=st.integers(0, 2))
    def kv_list(self, ns):
        self.both(codes.GET_KVLIST_BY_NAMESPACE, {"namespace": self.kv_ns[ns]})

    # ---- config

    @rule(key=st.sampled_from(sorted(SWITCHES)), value=st.booleans())
    def update_config(self, key, value):
        self.both(codes.UPDATE_NAMESRV_CONFIG, body=f"{key}={str(value).lower()}\n".encode())
        self.config_converged()

    @rule()
    def get_config(self):
        self.both(codes.GET_NAMESRV_CONFIG)

    def config_converged(self) -> None:
        """Our workers share the switches through Redis: both must show the change before the next step."""
        deadline = time.monotonic() + 5
        while True:
            seen = [_body(319, self.peers.our_request(w, 319).body) for w in (0, 1)]
            if seen[0] == seen[1] or time.monotonic() > deadline:
                return
            time.sleep(0.02)

    # ---- malformed headers: a required field missing

    @rule(code=st.sampled_from([100, 101, 102, 103, 104, 105, 205, 216, 217, 219, 224, 322, 327, 901, 904]),
          drop=st.integers(0, 4), b=brokers)
    def missing_field(self, code, drop, b):
        cluster, name, bid, addr = b
        full = {
            100: {"namespace": self.kv_ns[0], "key": "k1", "value": "v"},
            101: {"namespace": self.kv_ns[0], "key": "k1"},
            102: {"namespace": self.kv_ns[0], "key": "k1"},
            103: {"brokerName": name, "brokerAddr": addr, "clusterName": cluster, "brokerId": bid},
            104: {"brokerName": name, "brokerAddr": addr, "clusterName": cluster, "brokerId": bid},
            105: {"topic": "TopicA"},
            205: {"brokerName": name},
            216: {"topic": "TopicA"},
            217: {"topic": "TopicA"},
            219: {"namespace": self.kv_ns[0]},
            224: {"cluster": cluster},
            322: {"brokerName": name, "brokerAddr": addr, "clusterName": cluster, "brokerId": bid},
            327: {"brokerName": name},
            901: {"clusterName": cluster, "brokerName": name},
            904: {"brokerName": name, "brokerAddr": addr, "clusterName": cluster},
        }[code]
        keys = sorted(full)
        gone = keys[drop % len(keys)]
        ext = {k: v for k, v in full.items() if k != gone}
        body = b""
        if code == 103:
            ext |= {"compressed": "false", "bodyCrc32": 0}
            body = register_body({"TopicA": {"readQueueNums": 4, "writeQueueNums": 4, "perm": 6, "topicSysFlag": 0,
                                             "order": False}}, self.dv(b, False), [])
        elif code == 322:
            body = fastjson.dumps(self.dv(b, False))
        elif code == 217:
            body = fastjson.dumps({"queueDatas": [{"brokerName": name, "perm": 6, "readQueueNums": 4,
                                                   "topicSysFlag": 0, "writeQueueNums": 4}]})
        if code == 103 or (code == 104 and gone != "brokerId") or (code == 100 and gone == "value"):
            # docs/deviations.md "broker calls missing an identity field": refused, naming the field; Java
            # goes on with null and files the broker under a null cluster or name. Ours only, then. And
            # "PUT_KV_CONFIG without a value": refused; Java stores a null.
            r = self.peers.our_request(self.step % 2, code, ext, body)
            self.step += 1
            assert r.code == 1 and gone in (r.remark or ""), (code, ext, r)
            return
        self.both(code, ext, body)
        if code == 104:
            self.converge()

    # ---- a check after every step: the whole registry equal

    @invariant()
    def same_cluster_info(self):
        if self.step and self.step % 5 == 0:
            self.both(codes.GET_BROKER_CLUSTER_INFO)

    def teardown(self):
        clean(self.peers, self.touched_kv)


def clean(peers: Peers, kv: set[tuple[str, str]]) -> None:
    """Empty both registries through the same requests, and wait until Apache's queue has applied them."""
    for cluster, name, bid, addr in BROKERS:
        ext = {"brokerName": name, "brokerAddr": addr, "clusterName": cluster, "brokerId": bid}
        peers.java_request(codes.UNREGISTER_BROKER, ext)
        peers.our_request(0, codes.UNREGISTER_BROKER, ext)
    props = "".join(f"{k}={v}\n" for k, v in SWITCHES.items()).encode()
    for ns, key in kv:
        peers.java_request(codes.DELETE_KV_CONFIG, {"namespace": ns, "key": key})
        peers.our_request(0, codes.DELETE_KV_CONFIG, {"namespace": ns, "key": key})
    peers.java_request(codes.UPDATE_NAMESRV_CONFIG, body=props)
    peers.our_request(0, codes.UPDATE_NAMESRV_CONFIG, body=props)
    deadline = time.monotonic() + 10
    while True:
        for topic in TOPICS:  # topics another broker's unregister left (register topic on a removed broker)
            peers.java_request(codes.DELETE_TOPIC_IN_NAMESRV, {"topic": topic})
            peers.our_request(0, codes.DELETE_TOPIC_IN_NAMESRV, {"topic": topic})
        empty = [fastjson.loads(r.body) for r in (peers.java_request(106), peers.our_request(0, 106),
                                                   peers.our_request(1, 106))]
        topics = [fastjson.loads(r.body) for r in (peers.java_request(206), peers.our_request(0, 206),
                                                    peers.our_request(1, 206))]
        if all(not e["brokerAddrTable"] and not e["clusterAddrTable"] for e in empty) and \
                all(not t["topicList"] for t in topics):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"registries not empty after a sequence: {empty} {topics}")
        time.sleep(0.05)


def test_same_answers_as_apache_namesrv(peers, request):
    long = request.config.getoption("--long", default=False)
    Differential.peers = peers
    clean(peers, set())
    run = Differential.TestCase
    run.settings = settings(max_examples=LONG_EXAMPLES if long else EXAMPLES,
                            stateful_step_count=LONG_STEPS if long else STEPS, derandomize=not long, database=None,
                            deadline=None, suppress_health_check=list(HealthCheck), print_blob=True)
    COVERAGE.clear()
    run().runTest()
    # the generator reached every request code with a successful answer, and routes both found and not
    print("replies compared (request code, Apache's code): count", dict(sorted(COVERAGE.items())))
    answered = {c for c, rc in COVERAGE if rc == 0}
    assert set(codes.NAMES) - answered == set(), f"never answered SUCCESS: {set(codes.NAMES) - answered}"
    assert COVERAGE[(105, 17)] and COVERAGE[(101, 22)], COVERAGE
    if SURVEY:
        for x in SURVEY:
            print("DIFF", *x)
