"""Java's HashMap iteration order (service/javaorder.py), checked against values a JVM printed.

The expected lists were printed by OpenJDK 17 for `new ArrayList<>(map.keySet())` after putting the keys in the
order given, and for `new ArrayList<>(new HashSet<>(map.keySet()))`; ties within a bucket (Java: insertion order)
are the two pairs noted, which this order breaks by name.
"""

from service.javaorder import hash_order, string_hash, table_size
from service.models import RegisterBroker, TopicConfig

KEYS = ["broker-a", "broker-b", "broker-c", "bk1", "x", "broker-aa", "brokerZ", "q1", "q2", "q3", "q4", "q5", "q6",
        "q7", "abc"]
# java: [q1, q2, q3, q4, abc, q5, q6, q7, bk1, broker-aa, broker-b, x, brokerZ, broker-c, broker-a]
# (q4/abc and x/brokerZ share a bucket and come in insertion order there)
JAVA = ["q1", "q2", "q3", "abc", "q4", "q5", "q6", "q7", "bk1", "broker-aa", "broker-b", "brokerZ", "x", "broker-c",
        "broker-a"]


def test_string_hash_is_javas():
    assert string_hash("broker-a") == 372697965  # Integer.toUnsignedString("broker-a".hashCode())
    assert string_hash("hello") == 99162322
    assert string_hash("") == 0
    assert string_hash("日本") == (ord("日") * 31 + ord("本")) & 0xFFFFFFFF


def test_table_sizes_follow_hashmap_growth_and_hashset_copy():
    assert [table_size(n, copied=False) for n in (0, 12, 13, 24, 25)] == [16, 16, 32, 32, 64]
    assert [table_size(n, copied=True) for n in (0, 11, 12, 13, 24)] == [16, 16, 32, 32, 64]


def test_order_is_the_jvms_up_to_ties_within_a_bucket():
    assert hash_order(KEYS, key=lambda k: k) == JAVA
    assert hash_order(KEYS, key=lambda k: k, copied=True) == JAVA
    assert hash_order(["broker-a", "broker-b"], key=lambda k: k) == ["broker-b", "broker-a"]


async def test_a_route_lists_brokers_in_javas_order(store):
    """mqadmin topicClusterList names the cluster of the first broker data: against Java, broker-b's for a
    topic on broker-a and broker-b (found by interop, tests/interop/test_mqadmin.py)."""
    for i, (cluster, name) in enumerate((("ClusterA", "broker-a"), ("ClusterB", "broker-b"))):
        await store.register_broker(RegisterBroker(cluster=cluster, broker_name=name, broker_id=0,
                                                   broker_addr=f"10.0.0.{i}:10911", ha_server_addr="",
                                                   topics={"T": TopicConfig(4, 4, 6, 0)}))
    route = await store.get_route("T")
    assert [b.broker_name for b in route.broker_datas] == ["broker-b", "broker-a"]
    assert [q.broker_name for q in route.queue_datas] == ["broker-b", "broker-a"]
