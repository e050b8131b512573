"""RocketMQ's address server against three of our workers, with stock pieces only: a 5.5.0 broker with
`fetchNamesrvAddrByAddressServer=true` and a 5.5.0 Java producer, both given nothing but the JVM property
`rocketmq.namesrv.domain` (no `namesrvAddr`), which makes them fetch `http://<domain>/rocketmq/nsaddr`.

Workers share one Redis, so "uses all three" is shown per worker: each worker's own request counters
(`/metrics`) count the broker's registrations and heartbeats it received over its own connection.

How "stops using one that stopped" is proven within a bounded time:
- broker: its fetch interval is a broker setting (`fetchNamesrvAddrInterval`, 2 s here); after the stop its log
  says the list changed to the two others; a listener then opened on the stopped worker's remoting port receives
  not one connection while both remaining workers receive a whole registration round and several heartbeats (a
  broker with the stale list would connect there on every 1 s heartbeat and every registration). Counted from
  one registration round after the change: the stock broker sends heartbeats to the names its availability scan
  (NettyRemotingClient.scanAvailableNameSrv, every 3 s) found reachable, and a scan that began before the change
  may still reach the stopped worker's port once;
- client: its fetch schedule is fixed (at start, 10 s later, then every 2 minutes; no property shortens it). The
  worker is stopped right after the client started, so the client's own scheduled fetch 10 s after start (or, on a
  machine slow enough to miss that, the one 2 minutes later: the wait is bounded by whichever applies) must
  replace its list; and a fresh client started after the stop fetches the two others only and sends through them.
"""

from __future__ import annotations

import shutil
import signal
import socket
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from service.remoting.codec import decode_frame
from tests.interop import rocketmq as rmq
from tests.interop.conftest import OurNameServer

LINE = rmq.LINE5
TOPIC = "NsaddrTopic"
CLIENT_FIRST_FETCH_S = 10  # MQClientInstance.startScheduledTask: initial delay 10 s, then every 2 minutes
CLIENT_PERIOD_S = 120


def nsaddr(url: str) -> str:
    with urllib.request.urlopen(url + "/rocketmq/nsaddr", timeout=5) as r:
        return r.read().decode()


def counter(url: str, *codes: int) -> float:
    """This worker's own count of native requests with these codes (any result)."""
    with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
        text = r.read().decode()
    prefixes = tuple(f'namesrv_remoting_requests_total{{code="{code}"' for code in codes)
    return sum(float(ln.rsplit(" ", 1)[1]) for ln in text.splitlines() if ln.startswith(prefixes))


REGISTER = (103,)
HEARTBEAT = (322, 904)  # a 5.x broker's heartbeat: QUERY_DATA_VERSION (compatibleWithOldNameSrv, the default) or 904


def first_request_code(conn: socket.socket) -> int | None:
    """The code of the first remoting request on a connection, if one arrives within a second."""
    conn.settimeout(1)
    data = b""
    try:
        while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
            chunk = conn.recv(65536)
            if not chunk:
                return None
            data += chunk
    except OSError:
        return None
    return decode_frame(data[:4 + int.from_bytes(data[:4], "big")]).code


class CountingListener:
    """A TCP listener on a port, counting the connections it accepts."""

    def __init__(self, port: int) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.accepted = 0
        self.codes: list[int | None] = []  # the request code each connection sent first (None: nothing)
        self.stopped = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            self.codes.append(first_request_code(conn))
            conn.close()

    def close(self) -> None:
        self.stopped = True
        self.thread.join(5)
        self.sock.close()


class NsaddrClient(rmq.ClientRun):
    """Our AddressServerProducer (tests/interop/java) with only rocketmq.namesrv.domain set."""

    @classmethod
    def start(cls, root: Path, name: str, domain: str) -> NsaddrClient:
        home = root / name
        home.mkdir(parents=True, exist_ok=True)
        argv = rmq.java_argv(128, LINE.client_cp(), "rmqinterop.AddressServerProducer", "--topic", TOPIC,
                             "--interval-ms", "300", "--timeout-s", "400", "--instance", name, home=home,
                             props={**rmq.QUIET, "rocketmq.namesrv.domain": domain})
        return cls(rmq.JavaProc(name, home, argv, stdin=True).start())

    def stamp(self, tag: str) -> int:
        return int(self.lines(tag)[0][1])

    def lists(self) -> list[tuple[int, frozenset[str]]]:
        """Every name-server list the client held, in order, with when it was first seen (ms); as sets: the
        client shuffles the list it fetched (NettyRemotingClient.updateNameServerAddressList)."""
        return [(int(p[1]), frozenset(p[2].split(";")) if len(p) > 2 else frozenset())
                for p in self.lines("NSADDR")]

    def oks_after(self, ms: int) -> int:
        """Sends acknowledged after the client printed a list at `ms` (lines are in order)."""
        out, seen = 0, False
        for ln in self.proc.output().splitlines():
            if ln.startswith(f"NSADDR {ms} "):
                seen = True
            elif seen and ln.startswith("OK "):
                out += 1
        return out


@pytest.fixture
def three_workers(request, interop_jars, interop_redis, monkeypatch):
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)  # RocketMQ reads it as a namesrvAddr
    ours = OurNameServer(interop_redis.url, "ns" + uuid.uuid4().hex[:8], {"announce_lease_ms": 3000}, count=3).start()
    root = rmq.temp_root("interop-nsaddr-")
    procs: list[rmq.JavaProc] = []
    failed = request.session.testsfailed
    yield ours, root, procs
    rmq.stop_all([p for p in procs if p.alive])
    ours.stop()
    if request.session.testsfailed > failed:
        print(f"interop logs kept in {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)


def test_broker_and_client_find_every_worker_by_the_address_server_and_drop_a_stopped_one(three_workers):
    ours, root, procs = three_workers
    a, b, c = (ours.addr(i) for i in range(3))
    everyone, remaining = ";".join(sorted([a, b, c])), ";".join(sorted([a, b]))
    for i in range(3):
        assert nsaddr(ours.url(i)) == everyone
    domain = ours.url(0).removeprefix("http://")  # host:port: no ":8080" appended (MixAll.getWSAddr)

    # --- the broker uses all three: every worker receives its registrations and heartbeats on its own connection
    broker = rmq.Broker(LINE, root, "ClusterNs", "broker-ns", 0, "unused", heap_mb=256,
                        props={"rocketmq.namesrv.domain": domain},
                        fetchNamesrvAddrByAddressServer="true", fetchNamesrvAddrInterval=2000,
                        registerNameServerPeriod=10_000)
    # no namesrvAddr line at all: a configured one (even empty) would be used instead of the address server
    broker.conf_path.write_text("".join(ln + "\n" for ln in broker.conf_path.read_text().splitlines()
                                        if not ln.startswith("namesrvAddr=")))
    procs.append(broker.start())

    def on_workers(*indexes: int) -> bool:
        if not broker.alive:
            raise RuntimeError(f"the broker exited: {broker.tail()}")
        return all(counter(ours.url(i), *REGISTER) >= 1 and counter(ours.url(i), *HEARTBEAT) >= 1 for i in indexes)

    rmq.wait_until(lambda: on_workers(0, 1, 2), 90, "the broker registered with all three workers")
    assert f"new: {everyone}" in broker.output()  # it fetched the list, nobody configured it

    # --- worker c stops: it leaves the list at once, and the broker stops using it
    stopped = ours.procs[2]
    stopped.proc.send_signal(signal.SIGTERM)
    rmq.wait_until(lambda: nsaddr(ours.url(0)) == remaining, 10, "the stopped worker left /rocketmq/nsaddr",
                   interval=0.05)
    assert stopped.wait_exit() == 0
    rmq.wait_until(lambda: f"new: {remaining}" in broker.output(), 30, "the broker fetched the two remaining workers")
    listener = CountingListener(stopped.remoting_port)
    try:
        def registration_round() -> None:
            regs = [counter(ours.url(i), *REGISTER) for i in range(2)]
            rmq.wait_until(lambda: all(counter(ours.url(i), *REGISTER) > regs[i] for i in range(2)), 40,
                           "the broker registered again with both remaining workers")

        registration_round()  # >= 10 s: the broker's availability scan (every 3 s) has caught up with its list
        settled = listener.accepted
        beats = [counter(ours.url(i), *HEARTBEAT) for i in range(2)]
        registration_round()
        assert all(counter(ours.url(i), *HEARTBEAT) >= beats[i] + 3 for i in range(2))  # one a second
        assert listener.accepted == settled, f"the broker still sends the stopped worker requests {listener.codes}"
    finally:
        listener.close()

    # --- scaling out again: a new worker on c's ports is listed when ready, and the broker registers with it
    ours.restart(2, stop=False)
    assert nsaddr(ours.url(0)) == everyone
    rmq.wait_until(lambda: broker.output().count(f"new: {everyone}") == 2, 30, "the broker fetched c again")
    rmq.wait_until(lambda: on_workers(2), 40, "the broker registered with the new worker")

    # --- a client with only rocketmq.namesrv.domain: all three at start, sends through the route it reads
    out = rmq.Clients(LINE, root).mqadmin([["updateTopic", "-n", a, "-c", "ClusterNs", "-t", TOPIC, "-r", "4",
                                            "-w", "4"]])
    assert "success" in out[0], out
    first = NsaddrClient.start(root, "client-1", domain)
    procs.append(first.proc)
    first.wait_started(60)
    assert first.lists()[0][1] == {a, b, c}, first.proc.output()  # fetched at start
    rmq.wait_until(lambda: first.oks_after(first.lists()[0][0]) >= 3, 60, "client-1 sends through the route")

    stopped = ours.procs[2]
    stopped.proc.send_signal(signal.SIGTERM)
    rmq.wait_until(lambda: nsaddr(ours.url(0)) == remaining, 10, "the stopped worker left /rocketmq/nsaddr",
                   interval=0.05)
    withdrawn_ms = time.time() * 1000
    assert stopped.wait_exit() == 0

    # its own scheduled fetch replaces the list: the one 10 s after start, or, had the stop come later than
    # that, the one 2 minutes after it (the wait is bounded by whichever applies)
    starting, started = first.stamp("STARTING"), first.stamp("STARTED")
    next_fetch = CLIENT_FIRST_FETCH_S if withdrawn_ms < starting + CLIENT_FIRST_FETCH_S * 1000 else \
        CLIENT_FIRST_FETCH_S + CLIENT_PERIOD_S
    wait_s = max(1.0, (started + next_fetch * 1000 - time.time() * 1000) / 1000) + 10
    rmq.wait_until(lambda: first.lists()[-1][1] == {a, b}, wait_s, "client-1 fetched the two remaining workers")
    changed_at = first.lists()[-1][0]
    assert changed_at >= starting + CLIENT_FIRST_FETCH_S * 1000  # by its scheduled fetch, not at start
    rmq.wait_until(lambda: first.oks_after(changed_at) >= 3, 60, "client-1 sends after the change")

    # a fresh client fetches the two remaining workers only, and sends through them
    second = NsaddrClient.start(root, "client-2", domain)
    procs.append(second.proc)
    second.wait_started(60)
    assert [ls for _, ls in second.lists()][:1] == [{a, b}], second.proc.output()
    rmq.wait_until(lambda: second.oks_after(second.lists()[0][0]) >= 3, 60, "client-2 sends")

    for run in (first, second):
        run.stop(60)
        assert not run.lines("FAIL"), run.proc.tail()
