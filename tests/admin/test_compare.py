"""`namesrv admin compare` as operators run it: a subprocess against two real NameServers (two registries on one
real Redis), over both doors on either side — they agree (exit 0), then planted differences are each found and
put in words (exit 5), and a registry of 5 000 topics is walked with progress on stderr. Against Apache's
NameServer and its brokers: tests/interop/test_migration.py; at 100 000 topics: benchmarks/compare_bench.py."""

from __future__ import annotations

import uuid

import orjson
import pytest

from tests.admin.test_admin_cli import ADMIN, READ, admin
from tests.console import fleet
from tests.integration.conftest import Namesrv

pytestmark = [pytest.mark.integration, pytest.mark.redis]
MANY = 5_000


@pytest.fixture(scope="module")
def pair(redis_server, tmp_path_factory):
    """Two NameServers fed the same fleet (A with tokens on, B open), plus a broker of MANY topics on both."""
    a = Namesrv(redis_server.url, "cmpa" + uuid.uuid4().hex[:8], admin_token=ADMIN, read_token=READ,
                broker_timeout_ms=600_000)
    b = Namesrv(redis_server.url, "cmpb" + uuid.uuid4().hex[:8], broker_timeout_ms=600_000)
    try:
        a.wait_ready()
        b.wait_ready()
        many = {f"Many-{i:05d}": {"broker-e": 4} for i in range(MANY)}
        for n, token in ((a, ADMIN), (b, None)):
            fleet.register_all(n.url, token, {**fleet.TOPICS, **many})
        token_file = tmp_path_factory.mktemp("cmp") / "token"
        token_file.write_text(ADMIN)
        token_file.chmod(0o600)
        yield a, b, str(token_file)
    finally:
        a.stop()
        b.stop()


def doors(n: Namesrv) -> dict[str, str]:
    return {"http": n.url, "rmq": f"rmq://127.0.0.1:{n.remoting_port}"}


@pytest.mark.parametrize(("door_a", "door_b"), [("http", "rmq"), ("rmq", "http"), ("rmq", "rmq")])
def test_the_same_registry_agrees_whichever_doors(pair, door_a, door_b):
    a, b, _ = pair
    r = admin(a, "--server", doors(a)[door_a], "compare", "--with", doors(b)[door_b])
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[-1].startswith(f"compared 2 cluster(s), 5 broker(s), {12 + MANY} topic(s), 1 KV "
                                                "namespace(s) in ")
    assert r.stdout.splitlines()[-1].endswith(": they agree")
    assert r.stderr == ""


def test_b_with_tokens_on_needs_its_token_file(pair):
    a, b, token_file = pair
    r = admin(b, "--server", doors(b)["http"], "compare", "--with", doors(a)["rmq"])
    assert r.returncode == 4 and "cluster info (106): this operation needs a read credential" in r.stderr, r.stderr
    r = admin(b, "--server", doors(b)["http"], "compare", "--with", doors(a)["rmq"], "--with-token-file", token_file)
    assert r.returncode == 0, r.stderr


def test_each_planted_difference_is_found_and_put_in_words(pair):
    a, b, token_file = pair
    at_b = {"NAMESRV_SERVER": b.url}
    admin(b, "delete-topic", "AuditLog", "--yes", token=None)
    admin(b, "kv", "put", "ORDER_TOPIC_CONFIG", "OrderPaid", "broker-a:16", token=None)
    admin(b, "kv", "put", "MIG_NS", "键", "值", token=None)
    fleet.call(b.url, "PUT", "/v1/topics/OnlyB/route", {"queueDatas": [
        {"brokerName": "broker-d", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6, "topicSysFlag": 0}]})
    fleet.call(b.url, "PUT", "/v1/topics/Many-00042/route", {"queueDatas": [
        {"brokerName": "broker-e", "readQueueNums": 4, "writeQueueNums": 2, "perm": 4, "topicSysFlag": 0}]})
    fleet.call(b.url, "POST", "/v1/brokers/unregister", {"clusterName": "ClusterA", "brokerName": "broker-c",
                                                          "brokerId": 0, "brokerAddr": "10.0.1.31:10911"})
    try:
        r = admin(a, "--server", doors(a)["rmq"], "compare", "--with", doors(b)["http"], "--namespace", "MIG_NS",
                  **at_b)
        assert r.returncode == 5, r.stderr
        out = r.stdout.splitlines()
        assert out[:2] == [f"A: rmq://127.0.0.1:{a.remoting_port}", f"B: {b.url}"]
        assert out[2:-1] == [
            "cluster ClusterA: broker broker-c only on A",
            "broker broker-c: only on A (id 0 10.0.1.31:10911)",
            "topic %RETRY%order-service: queues on broker-c only on A (1/1 queues RW)",
            "topic %RETRY%order-service: broker broker-c in A's route only (id 0 10.0.1.31:10911)",
            "topic AuditLog: only on A (broker-a 4/4 queues RW; broker-b 4/4 queues RW; broker-c 12/12 queues RW)",
            "topic Many-00042: writeQueueNums of broker-e: A 4, B 2",
            "topic Many-00042: perm of broker-e: A 6, B 4",
            "topic OnlyB: only on B (broker-d 2/2 queues RW)",
            "topic OrderCreated: queues on broker-c only on A (8/8 queues RW)",
            "topic OrderCreated: broker broker-c in A's route only (id 0 10.0.1.31:10911)",
            "topic OrderPaid: queues on broker-c only on A (4/4 queues RW)",
            "topic OrderPaid: broker broker-c in A's route only (id 0 10.0.1.31:10911)",
            "topic RMQ_SYS_TRACE_TOPIC: queues on broker-c only on A (1/1 queues RW)",
            "topic RMQ_SYS_TRACE_TOPIC: broker broker-c in A's route only (id 0 10.0.1.31:10911)",
            "topic ShipmentEvents: queues on broker-c only on A (8/8 queues RW)",
            "topic ShipmentEvents: broker broker-c in A's route only (id 0 10.0.1.31:10911)",
            "topic TBW102: queues on broker-c only on A (8/8 queues RWX)",
            "topic TBW102: broker broker-c in A's route only (id 0 10.0.1.31:10911)",
            "KV ORDER_TOPIC_CONFIG: only on B (1 key(s): OrderPaid)",
            "KV MIG_NS: only on B (1 key(s): 键)",
        ]
        assert out[-1].startswith(f"compared 2 cluster(s), 5 broker(s), {13 + MANY} topic(s), 2 KV namespace(s) in ")
        assert out[-1].endswith(": 20 difference(s)")
        r = admin(a, "--json", "compare", "--with", doors(b)["rmq"], "--namespace", "MIG_NS", "--max-differences",
                  "3", "--progress", "0.001")
        assert r.returncode == 5
        res = orjson.loads(r.stdout)
        assert (res["agree"], res["differenceCount"], res["notDescribed"]) == (False, 20, 17)
        assert res["differences"][0] == {"kind": "cluster", "name": "ClusterA", "field": "brokerNames",
                                         "a": "broker-c", "b": None,
                                         "text": "cluster ClusterA: broker broker-c only on A"}
        assert res["compared"]["topics"] == 13 + MANY
        progress = r.stderr.splitlines()
        assert progress and all(p.startswith("compare: ") and " topics (" in p for p in progress), r.stderr
    finally:  # back as A has it
        fleet.register_all(b.url, None, {**fleet.TOPICS, **{f"Many-{i:05d}": {"broker-e": 4} for i in range(MANY)}},
                           counter=2)
        admin(b, "delete-topic", "OnlyB", "--yes", token=None)
        admin(b, "kv", "delete", "ORDER_TOPIC_CONFIG", "OrderPaid", "--yes", token=None)
        admin(b, "kv", "delete", "MIG_NS", "键", "--yes", token=None)
