"""RocketMQ 5's Proxy (5.5.0, cluster mode) with `namesrvAddr` naming two of our workers on a real Redis, the stock
5.5.0 brokers of the shared deployment behind it, and the clients RocketMQ 5 steers applications to: Apache's Java
gRPC client (producer, SimpleConsumer, PushConsumer) and its Python client (the README's examples, run from the
README's own command lines), plus a 5.5.0 remoting client on the Proxy's remoting port. Every acknowledged message is
received by every consumer group (keys compared both ways); a worker SIGKILLed mid-run loses nothing acknowledged;
a topic that does not exist gives each client the same error as a second Proxy fed by Apache's NameServer.
"""

from __future__ import annotations

import re
import signal
import urllib.request
import uuid
from importlib.metadata import version

import pytest

from tests.conftest import IN_CI
from tests.interop import proxy as px
from tests.interop import rocketmq as rmq
from tests.interop.conftest import Deployment, native

# the Proxy fronts 5.x brokers only (its consumers pop): the 5.x deployment, shared with the tier's other modules
line5 = pytest.mark.parametrize("deployment", [rmq.LINE5], indirect=True, ids=["rocketmq5"])

PY_CLIENT = "rocketmq-python-client==5.1.2"


@pytest.fixture(scope="module")
def proxies(deployment: Deployment):
    """Two Proxies in cluster mode over the same brokers: one reading routes from our two workers, one from
    Apache's NameServer (the missing-topic oracle)."""
    if not px.built():
        if IN_CI:
            pytest.fail("tests/interop/java (proxy5, grpc5) is not built: .ci/run runs mvn package before the tests")
        rmq.build()
    ours = px.Proxy(deployment.root, "ours", deployment.ours.addrs, "ClusterA")
    apache = px.Proxy(deployment.root, "apache", deployment.apache.addr, "ClusterA")
    try:
        ours.start()
        apache.start()
        ours.wait_up()
        apache.wait_up()
        yield ours, apache
    finally:
        rmq.stop_all([ours, apache])


def route_reads(url: str) -> float:
    """GET_ROUTEINFO_BY_TOPIC (105) requests a worker answered, from its /metrics."""
    with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
        text = r.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith('namesrv_remoting_requests_total{code="105"'))


def reads_by_worker(deployment: Deployment) -> list[float]:
    return [route_reads(deployment.ours.url(i)) for i in range(len(deployment.ours.procs))]


def received_by_python(consumer: px.PyRun) -> set[str]:
    return {w[1] for w in consumer.words("received")}


def test_the_readme_shows_the_examples_whole_and_the_pin_it_installs():
    """What the README prints is what runs: both examples listed whole, the client version pinned in the install
    line is the one the `interop` extra installed here, and the block holds nothing the test would not run."""
    readme = px.README.read_text()
    for name, text in px.example_listings().items():
        assert f"```python\n{text}```" in readme, f"README does not print examples/python/{name} as it is"
    py = px.readme_python()
    assert py.install == ["pip", "install", PY_CLIENT]
    assert version("rocketmq-python-client") == PY_CLIENT.split("==")[1]
    assert set(py.env) == {"ROCKETMQ_ENDPOINTS"}
    assert py.consumer[1:2] == ["examples/python/consumer.py"] and py.producer[1:2] == ["examples/python/producer.py"]


@line5
def test_java_and_python_grpc_clients_send_and_receive_every_message(deployment: Deployment, proxies):
    """The README's Python consumer and producer (as printed; only the Proxy's port is the test's) and the Java gRPC
    producer, SimpleConsumer and PushConsumer on one topic through the Proxy over our NameServer: each of the
    three consumer groups receives exactly the messages both producers had acknowledged."""
    ours_proxy, _ = proxies
    py = px.readme_python()
    topic, count = py.producer[2], int(py.producer[3])
    assert py.consumer[2] == topic
    deployment.create_topic(topic, "ClusterA", "ClusterB")
    env = {**py.env, "ROCKETMQ_ENDPOINTS": ours_proxy.grpc}
    reads_before = sum(reads_by_worker(deployment))
    root = deployment.root

    java = px.grpc_clients(root, "grpc-e2e", endpoint=ours_proxy.grpc, topic=topic, count=200, prefix="java",
                           **{"push-group": "g_grpc_push", "simple-group": "g_grpc_simple", "timeout-s": 240})
    consumer = px.run_example(py.consumer, env, root, "py-consumer")
    try:
        rmq.wait_until(lambda: consumer.proc.poll() is None and "subscribed to" in consumer.output()
                       or consumer.proc.poll() is not None, 60, "the Python consumer subscribed")
        assert consumer.proc.poll() is None, consumer.output()[-3000:]
        java.wait_started()
        producer = px.run_example(py.producer, env, root, "py-producer")
        assert producer.wait(120) == 0, producer.output()[-3000:]
        py_acked = {w[1] for w in producer.words("sent")}
        assert len(py_acked) == count
        rmq.wait_until(java.sent, 180, "the Java gRPC producer done")
        java_acked = java.acked()
        assert len(java_acked) == 200, java.failures()[:5]
        acked = py_acked | java_acked

        def all_received() -> bool:
            return (java.received("push") >= acked and java.received("simple") >= acked
                    and received_by_python(consumer) >= acked)

        try:
            rmq.wait_until(lambda: all_received() or consumer.proc.poll() is not None, 120,
                           "every acknowledged message received by every group")
        except TimeoutError:
            _progress(deployment, py.consumer[3], "g_grpc_simple", "g_grpc_push")
            raise
        assert consumer.proc.poll() is None, consumer.output()[-3000:]
        assert consumer.interrupt() == 0, consumer.output()[-3000:]  # Ctrl-C, as the README says
        java.stop()
    finally:
        consumer.kill()
        java.proc.kill()
    # none missing (above), none invented
    assert java.received("push") == acked
    assert java.received("simple") == acked
    assert received_by_python(consumer) == acked
    # the Proxy read the routes from our workers
    assert sum(reads_by_worker(deployment)) > reads_before


@line5
def test_a_remoting_client_through_the_proxys_remoting_port(deployment: Deployment, proxies):
    """A stock 5.5.0 producer and push consumer with `namesrvAddr` = the Proxy's remoting port: the Proxy answers
    their route reads (from our NameServer's routes, its own address as the broker's) and relays their traffic."""
    ours_proxy, _ = proxies
    topic = "PROXYR5"
    deployment.create_topic(topic, "ClusterA", "ClusterB")
    opts = {"timeout-s": 150}
    consumer = deployment.clients.consumer(ours_proxy.remoting, topic, "g_proxyr", expect=200, **opts)
    producer = deployment.clients.producer(ours_proxy.remoting, topic, 200, prefix="rm", **opts)
    acked = producer.wait_done(180).acked()
    assert len(acked) == 200, producer.failures()[:5]
    assert set(consumer.wait_done(180).received()) == set(acked)


@line5
def test_a_worker_killed_mid_run_loses_nothing_acknowledged(deployment: Deployment, proxies):
    """SIGKILL the worker the Proxy reads routes from while the Java gRPC producer and a remoting producer send
    through it (the Proxy refreshes a route every second while it is used): the Proxy goes on with the other
    worker, every acknowledged message reaches every consumer group."""
    ours_proxy, _ = proxies
    ours = deployment.ours
    topic = "PROXYKILL5"
    deployment.create_topic(topic, "ClusterA", "ClusterB")
    root = deployment.root
    java = px.grpc_clients(root, "grpc-kill", endpoint=ours_proxy.grpc, topic=topic, count=300, prefix="java",
                           **{"interval-ms": 25, "push-group": "g_kill_push", "simple-group": "g_kill_simple",
                              "timeout-s": 240})
    opts = {"timeout-s": 240}
    r_consumer = deployment.clients.consumer(ours_proxy.remoting, topic, "g_kill_remoting", **opts)
    victim = None
    try:
        java.wait_started()
        before = reads_by_worker(deployment)
        r_producer = deployment.clients.producer(ours_proxy.remoting, topic, 300, prefix="rm",
                                                 **{"interval-ms": 25, **opts})
        rmq.wait_until(lambda: len(java.acked()) >= 60 and len(r_producer.acked()) >= 60, 120,
                       "60 messages of each producer acknowledged before the kill")
        # the worker the Proxy reads from: the one whose route reads grew since the sends began
        rmq.wait_until(lambda: max(a - b for a, b in zip(reads_by_worker(deployment), before, strict=True)) > 0, 30,
                       "the Proxy reading routes from a worker")
        deltas = [a - b for a, b in zip(reads_by_worker(deployment), before, strict=True)]
        victim = deltas.index(max(deltas))
        survivor = 1 - victim
        survivor_reads = route_reads(ours.url(survivor))
        acked_at_kill = len(java.acked()) + len(r_producer.acked())
        ours.procs[victim].stop(signal.SIGKILL)

        rmq.wait_until(java.sent, 240, "the Java gRPC producer done")
        r_acked = set(r_producer.wait_done(240).acked())
        java_acked = java.acked()
        assert len(java_acked) == 300, java.failures()[:5]
        assert len(r_acked) == 300, r_producer.failures()[:5]
        assert acked_at_kill < 600  # the kill landed mid-run
        acked = java_acked | r_acked
        rmq.wait_until(lambda: (java.received("push") >= acked and java.received("simple") >= acked
                                and set(r_consumer.received()) >= acked), 120,
                       "every acknowledged message received by every group")
        java.stop()
        r_received = set(r_consumer.stop().received())
    finally:
        java.proc.kill()
        r_consumer.proc.kill()
        if victim is not None and ours.procs[victim].proc.poll() is not None:
            ours.restart(victim, stop=False)
            deployment.wait_registered(*deployment.brokers.values(), timeout=60)
    assert java.received("push") == acked
    assert java.received("simple") == acked
    assert r_received == acked
    # the Proxy's route reads went on at the surviving worker
    assert route_reads(ours.url(survivor)) > survivor_reads


@line5
def test_a_missing_topic_gives_the_clients_the_error_apaches_namesrv_gives(deployment: Deployment, proxies):
    """The same calls on a topic nobody created, through the Proxy over our NameServer and through the Proxy over
    Apache's: the Java gRPC client's exceptions (class, status code, message), the Python example's failure and the
    status its client logs, the remoting producer's exception — equal, not normalised (request ids aside)."""
    ours_proxy, apache_proxy = proxies
    missing = "NoSuchTopic" + uuid.uuid4().hex[:8]
    root = deployment.root
    probe = px.grpc_clients(root, "grpc-probe", **{"probe-topic": missing,
                                                   "probe-endpoints": f"{ours_proxy.grpc};{apache_proxy.grpc}"})
    pys = [px.run_example(["python", "examples/python/producer.py", missing, "1"],
                          {"ROCKETMQ_ENDPOINTS": p.grpc}, root, f"py-missing-{p.label}") for p in proxies]
    remotings = [deployment.clients.producer(p.remoting, missing, 1, **{"timeout-s": 0}) for p in proxies]
    try:
        probes = probe.wait_done(120).probes()
        py_rcs = [r.wait(90) for r in pys]
        r_fails = [r.wait_done(90).failures() for r in remotings]
    finally:
        probe.proc.kill()
        for r in pys:
            r.kill()

    print("gRPC (Java):", probes, "Python:", [r.output()[-300:] for r in pys], "remoting:", r_fails, sep="\n")
    for op in ("send", "simple"):
        ours, apache = probes[(ours_proxy.grpc, op)], probes[(apache_proxy.grpc, op)]
        assert ours == apache, op
        assert "TOPIC_NOT_FOUND" in ours or "40402" in ours, ours

    assert py_rcs[0] == py_rcs[1] != 0
    errors = [r.output().strip().splitlines()[-1] for r in pys]
    assert errors[0] == errors[1] == f"Exception: failed to fetch topic:{missing} route.", errors
    statuses = [sorted({re.sub(r"^\S+ \S+ ", "", ln) for ln in r.client_log().splitlines()
                        if "query topic raise exception" in ln}) for r in pys]
    assert statuses[0] == statuses[1] and statuses[0], statuses
    assert any("40402" in s for s in statuses[0]), statuses[0]

    assert r_fails[0] == r_fails[1] and r_fails[0], r_fails
    # what the Proxy answers a remoting client's route read (the client above turns it into its own message)
    answers = [native(p.remoting_port, 105, {"topic": missing}) for p in proxies]
    assert [(a.code, a.remark) for a in answers] == [(answers[1].code, answers[1].remark)] * 2
    assert answers[0].code == 17, (answers[0].code, answers[0].remark)  # TOPIC_NOT_EXIST


def _progress(deployment: Deployment, *groups: str) -> None:
    """On a failure: what the brokers say of each group's progress (mqadmin consumerProgress), for the log."""
    outs = deployment.clients.mqadmin([["consumerProgress", "-n", deployment.ours.addr(), "-g", g] for g in groups])
    for g, out in zip(groups, outs, strict=True):
        print(f"consumerProgress {g}:\n{out}")
