"""From Apache's NameServer to ours and back, live, with the real pieces (issue 42; the runbook is
docs/migrating.md): Apache's NameServer 5.5.0 with an ordered topic (its ORDER_TOPIC_CONFIG entry) and other
KV namespaces set through mqadmin, a stock 5.5.0 broker and a 4.9.7 broker registered there, Java and Go
producers and consumers sending and receiving throughout. The runbook's steps, through mqadmin and `namesrv
admin` only: the KV first (the file Apache's NameServer wrote), ours added beside Apache's (5.5.0: at runtime,
`updateBrokerConfig namesrvAddr`; 4.9.7: a rolling restart), `compare` clean, clients moved, Apache's removed and
stopped last, traffic going on through ours; then the rollback onto an Apache NameServer started from `kv
export`'s file. The ordered topic stays ordered on both brokers throughout, every acknowledged message is
consumed by each consumer group, and at the end neither NameServer holds anything the other lacks.

Also: the kvConfig.json of a 4.9.7 NameServer (written in its JVM's charset, here GBK) imports whole; and
`compare` finds ours and Apache's NameServer of each release line, fed by the same brokers, equal.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson
import pytest

from service.remoting import fastjson
from tests.interop import rocketmq as rmq
from tests.interop.conftest import Deployment, OurNameServer, apache_cluster_info, native, registered
from tests.redis_server import free_port

CLUSTER = "MigCluster"
TOPIC, ORDERED = "MIG_T", "MIG_ORDER"
JAVA_GROUP, GO_GROUP = "g_mig_java", "g_mig_go"
KEY = "键 名"  # a key Java keeps and ours took only since issue 42 (non-ASCII, a space)
CLIENT = {"timeout-s": 300, "poll-ms": 2000}


# ------------------------------------------------------------------ helpers

def admin(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """`namesrv admin` as the runbook runs it (our interop workers are open: no token)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NAMESRV_")}
    return subprocess.run([sys.executable, "-m", "service.cli", "admin", *args], env=env, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def ok(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 0, f"{r.args}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r.stdout


def compare(ours: str, apache: rmq.ApacheNameServer, *more: str) -> subprocess.CompletedProcess:
    return admin("--server", ours, "compare", "--with", f"rmq://{apache.addr}", "--namespace", "MIG_NS",
                 "--namespace", "MIG_EMPTY", *more)


def compare_clean(ours: str, apache: rmq.ApacheNameServer, timeout: float = 60) -> str:
    """Poll `compare` until it exits 0 (brokers register with the NameServer just added within their period)."""
    last: list[subprocess.CompletedProcess] = []

    def clean() -> bool:
        last[:] = [compare(ours, apache)]
        return last[0].returncode == 0

    try:
        rmq.wait_until(clean, timeout, f"compare {ours} with {apache.addr} clean", interval=1)
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\n{last[0].stdout}{last[0].stderr}") from None
    return last[0].stdout


def ordered(*brokers: rmq.Broker, timeout: float = 30) -> bool:
    """The ordered topic's flag is true on every broker; a broker not answering yet (just restarted) is asked again,
    a false flag fails at once."""
    flags = rmq.wait_until(lambda: order_flags(*brokers), timeout, "the brokers answer GET_ALL_TOPIC_CONFIG")
    assert flags == {b.broker_name: True for b in brokers}, flags
    return True


def order_flags(*brokers: rmq.Broker) -> dict[str, bool]:
    """The ordered topic's `order` flag as each broker itself holds it (GET_ALL_TOPIC_CONFIG, code 21)."""
    out = {}
    for b in brokers:
        reply = native(b.port, 21)
        assert reply.code == 0, (b.name, reply.code, reply.remark)
        out[b.broker_name] = fastjson.loads(reply.body)["topicConfigTable"][ORDERED]["order"]
    return out


class OrderWatch:
    """The ordered topic's flag on both brokers, read every half second for the whole migration (a broker being
    restarted is skipped): a 4.9.x broker applies the ORDER_TOPIC_CONFIG of whichever NameServer answers its
    registration first, so the trap shows only for moments (a run without the KV imported first had it false on
    the 4.9.7 broker for 16 s, then true again after Apache's NameServer answered first)."""

    def __init__(self, *brokers: rmq.Broker) -> None:
        self.brokers = brokers
        self.seen: list[tuple[float, dict[str, bool]]] = []
        self.checks = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            for b in self.brokers:
                try:
                    flags = order_flags(b)
                except (OSError, AssertionError, KeyError):
                    continue  # restarting
                self.checks += 1
                if not all(flags.values()):
                    self.seen.append((time.monotonic(), flags))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


def set_namesrv(broker: rmq.Broker, addrs: str) -> None:
    """broker.conf's namesrvAddr, for the broker's next start (a rolling restart)."""
    lines = [ln for ln in broker.conf_path.read_text().splitlines() if not ln.startswith("namesrvAddr=")]
    broker.conf_path.write_text("\n".join([*lines, f"namesrvAddr={addrs}"]) + "\n")


def rolling_restart(broker: rmq.Broker, addrs: str) -> None:
    set_namesrv(broker, addrs)
    broker.signal_stop()
    broker.wait_stopped(60)
    broker.start()


def point_brokers(clients: rmq.Clients, b5: rmq.Broker, b4: rmq.Broker, addrs: str, via: str) -> None:
    """Step 2 and 5 of the runbook: the 5.5.0 broker's list changed at runtime (mqadmin updateBrokerConfig through
    the NameServer `via`), the 4.9.7 one's by a rolling restart, both at once."""
    with ThreadPoolExecutor(1) as pool:
        restarted = pool.submit(rolling_restart, b4, addrs)
        out = clients.mqadmin([["updateBrokerConfig", "-n", via, "-b", b5.addr, "-k", "namesrvAddr", "-v", addrs]])
        assert "success" in out[0], out
        restarted.result()


def on_both(apache: rmq.ApacheNameServer, ours: OurNameServer, *brokers: rmq.Broker) -> None:
    """Every broker registered with both NameServers: `compare` is clean too while a restarting broker is missing
    from both, so a stage is compared only once each broker is back."""
    rmq.wait_until(lambda: registered_with(apache_cluster_info(apache), *brokers), 90,
                   f"the brokers registered with {apache.addr}")
    rmq.wait_until(lambda: registered_with(ours.cluster_info(), *brokers), 90, "the brokers registered with ours")


def registered_with(info: dict, *brokers: rmq.Broker) -> bool:
    return all(registered(info, b) for b in brokers)


class Traffic:
    """The producers and consumers of one phase (Java and Go, pointed at one NameServer list); every phase's
    consumers are in the same two groups, so a group moves from one phase's to the next as an application's
    rolling update does."""

    def __init__(self, clients: rmq.Clients, namesrv: str, phase: str) -> None:
        self.phase = phase
        with ThreadPoolExecutor(4) as pool:
            c = pool.submit(clients.consumer, namesrv, TOPIC, JAVA_GROUP, **CLIENT)
            gc = pool.submit(clients.go, "consume", namesrv, TOPIC, group=GO_GROUP, timeout="600s")
            p = pool.submit(clients.producer, namesrv, TOPIC, 100_000, prefix=f"j{phase}", **{
                "interval-ms": 100, "stdin-stop": "true", **CLIENT})
            gp = pool.submit(clients.go, "produce", namesrv, TOPIC, count=100_000, prefix=f"g{phase}",
                             **{"interval-ms": 100, "stdin-stop": 1, "timeout": "600s"})
            self.consumers = [c.result(), gc.result()]
            self.producers = [p.result(), gp.result()]
        for run in (*self.consumers, *self.producers):
            run.wait_started()

    def acked(self) -> set[str]:
        return {k for p in self.producers for k in p.acked()}

    def sending(self, more: int, timeout: float = 60) -> None:
        """Both producers get `more` acknowledgements from now on."""
        base = [len(p.acked()) for p in self.producers]
        rmq.wait_until(lambda: all(len(p.acked()) >= b + more for p, b in zip(self.producers, base, strict=True)),
                       timeout, f"phase {self.phase}: {more} more sends acknowledged by each producer")

    def stop_producers(self) -> None:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda p: p.stop(60), self.producers))

    def stop_consumers(self) -> None:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda c: c.stop(90), self.consumers))


def received(groups: list[Traffic], kind: int) -> set[str]:
    return {k for t in groups for k in t.consumers[kind].received()}


# ------------------------------------------------------------------ the migration and its rollback

@pytest.fixture
def migration_root(request) -> Path:
    """The JVMs' homes and logs: kept (and named) when the test failed."""
    root = rmq.temp_root("migration-")
    failed = request.session.testsfailed
    yield root
    if request.session.testsfailed > failed:
        print(f"migration logs kept in {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)


def test_from_apaches_nameserver_to_ours_and_back(interop_jars, go_client, interop_redis, migration_root):
    started = time.monotonic()
    steps: list[str] = []

    def step(what: str) -> None:
        steps.append(f"{time.monotonic() - started:6.1f} s  {what}")
        print(steps[-1], flush=True)

    root = migration_root
    line5, line4 = rmq.LINE5, rmq.LINE4
    apache = rmq.ApacheNameServer(line5, root, free_port()).start()
    ours = OurNameServer(interop_redis.url, "mig" + uuid.uuid4().hex[:8], {})
    procs: list[rmq.JavaProc] = [apache]
    phases: list[Traffic] = []
    try:
        with ThreadPoolExecutor(1) as pool:
            starting = pool.submit(ours.start)
            apache.wait_listening()
            # the stock brokers, registered with Apache's NameServer only; the 5.5.0 one applies a namesrvAddr
            # changed at runtime every 2 s (updateNameServerAddrPeriod, 5.3.1+) and both register every 10 s
            # (registerNameServerPeriod; 30 s by default)
            b5 = rmq.Broker(line5, root, CLUSTER, "broker-5", 0, apache.addr, updateNameServerAddrPeriod=2000,
                            registerNameServerPeriod=10_000)
            b4 = rmq.Broker(line4, root, CLUSTER, "broker-4", 0, apache.addr, registerNameServerPeriod=10_000)
            procs += [b5, b4]
            b5.start()
            b4.start()
            starting.result()
        rmq.wait_until(lambda: registered_with(apache_cluster_info(apache), b5, b4), 60,
                       "both brokers registered with Apache's NameServer")
        clients = rmq.Clients(line5, root)
        outs = clients.mqadmin([
            ["updateTopic", "-n", apache.addr, "-c", CLUSTER, "-t", ORDERED, "-r", "4", "-w", "4", "-o", "true"],
            ["updateTopic", "-n", apache.addr, "-c", CLUSTER, "-t", TOPIC, "-r", "4", "-w", "4"],
            ["updateKvConfig", "-n", apache.addr, "-s", "MIG_NS", "-k", KEY, "-v", "值"],
            ["updateKvConfig", "-n", apache.addr, "-s", "MIG_NS", "-k", "plain", "-v", "a=b;c"],
            ["updateKvConfig", "-n", apache.addr, "-s", "MIG_EMPTY", "-k", "gone", "-v", "x"],
            ["deleteKvConfig", "-n", apache.addr, "-s", "MIG_EMPTY", "-k", "gone"],
        ])
        assert all("success" in o for o in outs), outs
        assert ordered(b5, b4)
        watch = OrderWatch(b5, b4)
        rmq.wait_until(lambda: native(apache.port, 105, {"topic": TOPIC}).code == 0, 30, f"{TOPIC} routed")
        step("Apache's NameServer, two brokers, an ordered topic and KV set through mqadmin")

        # clients on Apache's NameServer, sending and receiving from here on
        phases.append(Traffic(clients, apache.addr, "A"))
        procs += [r.proc for r in (*phases[-1].consumers, *phases[-1].producers)]
        step("Java and Go producers and consumers on Apache's NameServer")

        # 1. the KV first: the file Apache's NameServer wrote, then the live copy shows nothing left to change
        kv_file = apache.kv_path.read_bytes()
        assert KEY.encode() in kv_file and b'"MIG_EMPTY":{}' in kv_file, kv_file
        http = ours.url(0)
        dry = ok(admin("--server", http, "kv", "import", str(apache.kv_path), "--dry-run"))
        assert "ORDER_TOPIC_CONFIG (new namespace)" in dry and f"  + {ORDERED} = " in dry
        assert f"  + {KEY} = 值" in dry and "MIG_EMPTY (new namespace, empty)" in dry, dry
        assert dry.splitlines()[-1] == "dry run: nothing written"
        assert ok(admin("--server", http, "kv", "import", str(apache.kv_path))).splitlines()[-1] == \
            "written in one step"
        copy = ok(admin("--server", http, "kv", "copy", "--from", f"rmq://{apache.addr}", "--namespace",
                        "ORDER_TOPIC_CONFIG", "--namespace", "MIG_NS", "--namespace", "MIG_EMPTY", "--dry-run"))
        assert copy.splitlines()[-1] == "nothing to change", copy
        r = compare(http, apache)  # ours has no broker yet: compare says what it lacks, exit 5
        assert r.returncode == 5 and "cluster MigCluster: only on B" in r.stdout, r.stdout
        assert not [ln for ln in r.stdout.splitlines() if ln.startswith(("KV ", "not compared"))], r.stdout
        step("KV imported from Apache's kvConfig.json; compare: only the brokers differ")

        # 2. ours added beside Apache's: 5.5.0 at runtime, 4.9.7 by a rolling restart
        point_brokers(clients, b5, b4, f"{apache.addr};{ours.addrs}", via=apache.addr)
        step("brokers given both NameServers (5.5.0: updateBrokerConfig; 4.9.7: restarted)")
        on_both(apache, ours, b5, b4)
        compare_clean(http, apache, timeout=90)
        assert ordered(b5, b4)
        step("compare clean; ordered topic still ordered on both brokers")

        # 3. clients moved to ours: the new ones start, the old ones stop
        phases.append(Traffic(clients, ours.addrs, "B"))
        procs += [r.proc for r in (*phases[-1].consumers, *phases[-1].producers)]
        phases[0].stop_producers()
        phases[-1].sending(5)
        phases[0].stop_consumers()
        step("clients moved to ours")

        # 4. Apache's removed from the brokers, then stopped last; traffic goes on through ours
        point_brokers(clients, b5, b4, ours.addrs, via=ours.addr())
        rmq.wait_until(lambda: not apache_cluster_info(apache).get("brokerAddrTable"), 60,
                       "no broker registered with Apache's NameServer any more")
        rmq.wait_until(lambda: registered_with(ours.cluster_info(), b5, b4), 60, "both brokers still on ours")
        apache.signal_stop()
        apache.wait_stopped(30)
        phases[-1].sending(10)
        assert ordered(b5, b4)
        step("Apache's NameServer removed from the brokers and stopped; traffic goes on through ours")

        # rollback: Apache's NameServer started from the file `kv export` wrote, added back, clients moved back
        rollback = root / "rollback"
        rollback.mkdir()
        exported = rollback / "kvConfig.json"
        ok(admin("--server", http, "kv", "export", str(exported)))
        apache2 = rmq.ApacheNameServer(line5, root, free_port(), kvConfigPath=exported).start()
        procs.append(apache2)
        apache2.wait_listening()
        r = admin("--server", f"rmq://{ours.addr(1)}", "--json", "compare", "--with", f"rmq://{apache2.addr}",
                  "--namespace", "MIG_NS", "--namespace", "MIG_EMPTY")
        diffs = orjson.loads(r.stdout)["differences"]
        assert r.returncode == 5 and diffs and not [d for d in diffs if d["kind"] == "kv"], r.stdout  # KV equal
        step("Apache's NameServer started from kv export's file: the same KV")
        point_brokers(clients, b5, b4, f"{apache2.addr};{ours.addrs}", via=ours.addr())
        on_both(apache2, ours, b5, b4)
        compare_clean(f"rmq://{ours.addr(1)}", apache2, timeout=90)
        step("rollback: brokers on both again, compare clean")
        phases.append(Traffic(clients, apache2.addr, "C"))
        procs += [r.proc for r in (*phases[-1].consumers, *phases[-1].producers)]
        phases[1].stop_producers()
        phases[-1].sending(5)
        phases[1].stop_consumers()
        phases[-1].stop_producers()
        step("clients moved back to Apache's NameServer")

        # every acknowledged message consumed by each group, whichever phase sent or read it
        acked = {k for t in phases for k in t.acked()}
        assert all(t.acked() for t in phases) and len(acked) > 100
        for kind, group in ((0, JAVA_GROUP), (1, GO_GROUP)):
            rmq.wait_until(lambda kind=kind: received(phases, kind) >= acked, 90,
                           f"{group}: every acknowledged message received")
        phases[-1].stop_consumers()
        for kind in (0, 1):
            assert received(phases, kind) == acked  # none missing, none invented
        assert ordered(b5, b4)
        watch.stop()
        assert watch.checks > 50 and watch.seen == [], watch.seen  # ordered the whole time
        assert "they agree" in compare_clean(http, apache2, timeout=30)
        step(f"{len(acked)} acknowledged messages, each consumed by both groups; compare clean at the end")
    finally:
        rmq.stop_all([p for p in procs if p.alive])
        ours.stop()
        print("\n".join(steps))


# ------------------------------------------------------------------ KV files and compare against Apache's, per line

def test_a_4_9_7_nameservers_kv_file_imports_whole_in_its_charset(interop_jars, interop_redis, tmp_path):
    """A 4.9.x NameServer writes kvConfig.json in its JVM's default charset (4.9.7 `MixAll.string2FileNotSafe`:
    FileWriter): here GBK. `kv import --encoding gbk` takes it whole; without it the import is refused saying
    where and why; `compare` then finds the KV equal to what Apache's NameServer serves."""
    apache = rmq.ApacheNameServer(rmq.LINE4, tmp_path, free_port(), props={"file.encoding": "GBK"}).start()
    ours = OurNameServer(interop_redis.url, "kv4" + uuid.uuid4().hex[:8], {}, count=1)
    try:
        ours.start()
        apache.wait_listening()
        outs = rmq.Clients(rmq.LINE4, tmp_path).mqadmin([
            ["updateKvConfig", "-n", apache.addr, "-s", "订单", "-k", KEY, "-v", "broker-a:4"],
            ["updateKvConfig", "-n", apache.addr, "-s", "ORDER_TOPIC_CONFIG", "-k", "T1", "-v", "broker-a:4"]])
        assert all("success" in o for o in outs), outs
        raw = apache.kv_path.read_bytes()
        assert KEY.encode("gbk") in raw and KEY.encode() not in raw, raw  # GBK, as its JVM's charset says
        r = admin("--server", ours.url(), "kv", "import", str(apache.kv_path))
        assert r.returncode == 2 and "not utf-8" in r.stderr and "--encoding" in r.stderr, r.stderr
        ok(admin("--server", ours.url(), "kv", "import", str(apache.kv_path), "--encoding", "gbk"))
        r = compare(ours.url(), apache, "--namespace", "订单")
        assert r.returncode == 0 and r.stdout.splitlines()[-1].endswith("they agree"), r.stdout + r.stderr
    finally:
        rmq.stop_all([apache])
        ours.stop()


def test_compare_finds_ours_and_apaches_nameserver_fed_by_the_same_brokers_equal(deployment: Deployment):
    """Both release lines: the deployment's brokers register with our two workers and with Apache's NameServer
    (5.5.0, and 4.9.7, whose BrokerData has no enableActingMaster: not compared, and said so)."""
    apache = deployment.apache
    r = admin("--server", deployment.ours.url(), "compare", "--with", f"rmq://{apache.addr}")
    if r.returncode != 0:  # a broker may be between registrations: compare_clean polls
        compare_clean(deployment.ours.url(), apache)
    r = admin("--server", f"rmq://{deployment.ours.addr(1)}", "--json", "compare", "--with", f"rmq://{apache.addr}")
    res = orjson.loads(r.stdout)
    assert res["agree"] and res["compared"]["brokers"] == 2 and res["compared"]["topics"] >= 10, r.stdout
    assert res["notCompared"] == ([] if deployment.line.is5 else ["enableActingMaster (B does not report it)"])
