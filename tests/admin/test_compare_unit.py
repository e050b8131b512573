"""`namesrv admin compare`'s rules without a server: what counts as a difference, how each is put in words, the
sorted walk over two topic lists, and the report (tests/admin/test_compare.py runs the command against real
servers, tests/interop/test_migration.py against Apache's NameServer)."""

from __future__ import annotations

from service.admin.compare import (
    Report,
    compare_clusters,
    compare_kv,
    compare_route,
    known_fields,
    merged,
)

FIELDS = ("cluster", "enableActingMaster")


def bd(name="broker-a", cluster="C1", addrs=None, **extra):
    return {"brokerName": name, "cluster": cluster, "brokerAddrs": addrs or {"0": "10.0.0.1:10911"}, **extra}


def qd(name="broker-a", r=8, w=8, perm=6, sys_flag=0):
    return {"brokerName": name, "readQueueNums": r, "writeQueueNums": w, "perm": perm, "topicSysFlag": sys_flag}


def route(*qds, brokers=None, **extra):
    return {"queueDatas": list(qds), "brokerDatas": brokers if brokers is not None else [bd()], **extra}


def lines(diffs):
    return [d.line() for d in diffs]


def test_equal_registries_in_any_order_agree():
    a = {"clusterAddrTable": {"C1": ["broker-a", "broker-b"]},
         "brokerAddrTable": {"broker-a": bd(enableActingMaster=False), "broker-b": bd("broker-b")}}
    b = {"clusterAddrTable": {"C1": ["broker-b", "broker-a"]},
         "brokerAddrTable": {"broker-b": bd("broker-b"), "broker-a": bd(enableActingMaster=False)}}
    assert compare_clusters(a, b, FIELDS) == []
    two = route(qd(), qd("broker-b", 4, 4), brokers=[bd(), bd("broker-b")])
    assert compare_route("T", two, route(qd("broker-b", 4, 4), qd(), brokers=[bd("broker-b"), bd()]), FIELDS) == []
    # fastjson leaves out what is null: a missing orderTopicConf or an empty filter table is none
    assert compare_route("T", route(qd(), filterServerTable={}), route(qd(), orderTopicConf=None), FIELDS) == []


def test_clusters_and_brokers_one_lacks_and_fields_that_differ():
    a = {"clusterAddrTable": {"C1": ["broker-a"], "C2": ["broker-c"]},
         "brokerAddrTable": {"broker-a": bd(addrs={"0": "10.0.0.1:10911", "1": "10.0.0.2:10911"}),
                             "broker-c": bd("broker-c", "C2")}}
    b = {"clusterAddrTable": {"C1": ["broker-a", "broker-b"]},
         "brokerAddrTable": {"broker-a": bd(cluster="Cx", addrs={"0": "10.0.0.1:10911"}), "broker-b": bd("broker-b")}}
    assert lines(compare_clusters(a, b, FIELDS)) == [
        "cluster C1: broker broker-b only on B",
        "cluster C2: only on A (brokers broker-c)",
        "broker broker-a: address of broker id 1: A 10.0.0.2:10911, B none",
        "broker broker-a: cluster: A C1, B Cx",
        "broker broker-b: only on B (id 0 10.0.0.1:10911)",
        "broker broker-c: only on A (id 0 10.0.0.1:10911)",
    ]


def test_a_field_one_side_never_reports_is_known_apart():
    """A 4.9.x NameServer's BrokerData has no enableActingMaster: the field is left out of the comparison (and
    the report says so), not counted as a difference on every broker."""
    assert known_fields({"brokerAddrTable": {"b": bd(enableActingMaster=True)}}) == {
        "brokerName", "cluster", "brokerAddrs", "enableActingMaster"}
    assert compare_clusters({"brokerAddrTable": {"b": bd(enableActingMaster=True)}},
                            {"brokerAddrTable": {"b": bd()}}, ("cluster",)) == []


def test_a_side_without_brokers_hides_no_field():
    import asyncio

    from service.admin.compare import run_compare

    class Fake:
        def __init__(self, label, info):
            self.label, self.info = label, info

        async def cluster_info(self):
            return self.info

        async def topics(self, clusters):
            return []

        async def routes(self, topics):
            return []

        async def kv_table(self, ns):
            return None

    empty = Fake("a", {"clusterAddrTable": {}, "brokerAddrTable": {}})
    full = Fake("b", {"clusterAddrTable": {"C1": ["b"]}, "brokerAddrTable": {"b": bd(enableActingMaster=False)}})
    report = asyncio.run(run_compare(empty, full, []))
    assert report.not_compared == [] and report.total == 2


def test_routes_in_words():
    a = route(qd(), qd("broker-b", 8, 8, 6), brokers=[bd(), bd("broker-b")], orderTopicConf="broker-a:8")
    b = route(qd(w=4, perm=4), qd("broker-c", 2, 2), brokers=[bd(addrs={"0": "10.0.0.9:10911"}), bd("broker-c")])
    assert lines(compare_route("OrderPaid", a, b, FIELDS)) == [
        "topic OrderPaid: writeQueueNums of broker-a: A 8, B 4",
        "topic OrderPaid: perm of broker-a: A 6, B 4",
        "topic OrderPaid: queues on broker-b only on A (8/8 queues RW)",
        "topic OrderPaid: queues on broker-c only on B (2/2 queues RW)",
        "topic OrderPaid: broker broker-a's address of broker id 0: A 10.0.0.1:10911, B 10.0.0.9:10911",
        "topic OrderPaid: broker broker-b in A's route only (id 0 10.0.0.1:10911)",
        "topic OrderPaid: broker broker-c in B's route only (id 0 10.0.0.1:10911)",
        "topic OrderPaid: orderTopicConf: A broker-a:8, B none",
    ]
    assert lines(compare_route("T", route(qd(), qd("broker-b", 4, 4, 4)), None, FIELDS)) == [
        "topic T: only on A (broker-a 8/8 queues RW; broker-b 4/4 queues R-)"]
    assert lines(compare_route("T", None, route(qd()), FIELDS)) == ["topic T: only on B (broker-a 8/8 queues RW)"]
    assert compare_route("T", None, None, FIELDS) == []


def test_kv_namespaces_and_keys():
    assert compare_kv("NS", None, None) == []
    assert lines(compare_kv("NS", {"k": "v"}, None)) == ["KV NS: only on A (1 key(s): k)"]
    assert lines(compare_kv("NS", None, {})) == ["KV NS: only on B (0 key(s))"]
    assert lines(compare_kv("ORDER_TOPIC_CONFIG", {"T1": "a:4", "T2": "a:4", " x": "1"},
                            {"T1": "a:8", "T3": "b:4", " x": "1"})) == [
        "KV ORDER_TOPIC_CONFIG: key T1: A a:4, B a:8",
        "KV ORDER_TOPIC_CONFIG: key T2: A a:4, B none",
        "KV ORDER_TOPIC_CONFIG: key T3: A none, B b:4"]
    assert lines(compare_kv("NS", {"k k ": "v\n"}, {})) == ['KV NS: key "k k ": A "v\\n", B none']
    many = {f"k{i}": "v" for i in range(7)}
    assert lines(compare_kv("NS", None, many)) == ["KV NS: only on B (7 key(s): k0, k1, k2, k3, k4, …)"]


def test_the_sorted_walk():
    assert list(merged(["a", "c", "d"], ["b", "c", "e"])) == [
        ("a", True, False), ("b", False, True), ("c", True, True), ("d", True, False), ("e", False, True)]
    assert list(merged([], ["x"])) == [("x", False, True)]
    assert list(merged(["x"], [])) == [("x", True, False)]


def test_the_report():
    r = Report("http://a:8080", "rmq://b:9876", max_details=2)
    r.clusters = compare_clusters({"clusterAddrTable": {"C1": []}}, {}, FIELDS)
    r.topics = {"T": compare_route("T", route(qd()), None, FIELDS)}
    r.kv = compare_kv("NS", {"k": "v"}, None)
    r.counts = {"clusters": 1, "brokers": 0, "topics": 1, "kvNamespaces": 2}
    r.settled, r.seconds, r.not_compared = 1, 0.25, ["enableActingMaster (B does not report it)"]
    assert r.text().splitlines() == [
        "A: http://a:8080", "B: rmq://b:9876",
        "cluster C1: only on A (brokers none)",
        "topic T: only on A (broker-a 8/8 queues RW)",
        "… and 1 more (--max-differences, --json)",
        "not compared: enableActingMaster (B does not report it)",
        "compared 1 cluster(s), 0 broker(s), 1 topic(s), 2 KV namespace(s) in 250 ms: 3 difference(s) (1 more "
        "settled on a second read)"]
    d = r.to_dict()
    assert (d["agree"], d["differenceCount"], d["notDescribed"], len(d["differences"])) == (False, 3, 1, 2)
    assert d["differences"][1] == {"kind": "topic", "name": "T", "field": None, "a": route(qd()), "b": None,
                                   "text": "topic T: only on A (broker-a 8/8 queues RW)"}
    same = Report("a", "b", 10)
    same.counts = {"clusters": 0, "brokers": 0, "topics": 0, "kvNamespaces": 1}
    assert same.text().splitlines()[-1] == ("compared 0 cluster(s), 0 broker(s), 0 topic(s), 1 KV namespace(s) in "
                                            "0 ms: they agree")
