"""`namesrv admin` as operators run it: a subprocess against a real `namesrv serve` on a real Redis with real
brokers registered, over HTTP and over the native door; tables, JSON, exit codes, confirmations on a terminal."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
import uuid

import orjson
import pytest

from service import display
from tests.console import fleet
from tests.console.conftest import HISTORY, hostile_summary, store_summary
from tests.integration.conftest import Namesrv
from tests.redis_server import free_port

pytestmark = [pytest.mark.integration, pytest.mark.redis]
ADMIN = "admin-token-cli-000001"
READ = "read-token-cli-0000001"


@pytest.fixture(scope="module")
def server(redis_server):
    prefix = "cli" + uuid.uuid4().hex[:8]
    # registered once and never again: no expiry scan past the first (at 5 s) while the module runs (minutes)
    n = Namesrv(redis_server.url, prefix, admin_token=ADMIN, read_token=READ, scan_interval_ms=3_600_000).wait_ready()
    try:
        fleet.register_all(n.url, ADMIN)
        store_summary(redis_server.url, prefix, hostile_summary(), orjson.loads(HISTORY.read_bytes()))
        yield n
    finally:
        n.stop()


def env_for(server, token: str | None = ADMIN, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NAMESRV_")}
    env.update({"NAMESRV_SERVER": server.url, "COLUMNS": "400", **extra})
    if token == ADMIN:
        env["NAMESRV_ADMIN_TOKEN"] = token
    elif token == READ:
        env["NAMESRV_READ_TOKEN"] = token
    return env


def admin(server, *args: str, token: str | None = ADMIN, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "service.cli", "admin", *args], env=env_for(server, token, **extra),
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)


def table(text: str) -> list[list[str]]:
    """Rows of a plain table, split on runs of 2+ spaces; the header rule line dropped."""
    return [re.split(r"\s{2,}", line.strip()) for line in text.splitlines() if line.strip() and "───" not in line]


def test_clusters_and_brokers(server):
    r = admin(server, "clusters")
    assert r.returncode == 0, r.stderr
    rows = table(r.stdout)
    assert rows[0] == ["CLUSTER", "BROKER GROUPS", "MASTERS", "ADDRESSES", "LIVE", "OLDEST HEARTBEAT", "BROKERS"]
    assert rows[1][:5] == ["ClusterA", "3", "3", "5", "5"] and rows[1][6] == "broker-a, broker-b, broker-c"
    assert rows[2][:5] == ["ClusterB", "2", "2", "3", "3"]
    r = admin(server, "brokers", "--cluster", "ClusterB")
    rows = table(r.stdout)
    assert [row[:5] for row in rows[1:]] == [["ClusterB", "broker-d", "0", "master", "10.0.2.11:10911"],
                                            ["ClusterB", "broker-d", "1", "slave", "10.0.2.12:10911"],
                                            ["ClusterB", "broker-e", "0", "master", "10.0.2.21:10911"]]
    assert all(row[5].endswith((" s", " ms")) and row[6] == "2 min" for row in rows[1:])
    data = orjson.loads(admin(server, "--json", "brokers").stdout)
    assert len(data["brokers"]) == 8 and data["now"] >= max(b["lastHeartbeat"] for b in data["brokers"])


def test_capacity(server):
    """The registry's standing against the sizing model: its counts as Redis holds them (entries: every topic's
    queue data, counted here through the API), Redis's own memory, the model's load and the headroom; rmq:// has
    no request code for it."""
    data = orjson.loads(admin(server, "--json", "capacity").stdout)
    topics = fleet.call(server.url, "GET", "/v1/topics", token=ADMIN)["topicList"]
    entries = sum(len(fleet.call(server.url, "GET", f"/v1/topics/{t}/route", token=ADMIN)["queueDatas"])
                  for t in topics)
    assert (data["brokers"], data["brokerNames"], data["clusters"]) == (8, 5, 2)
    assert (data["topics"], data["entries"]) == (len(topics), entries) and data["workers"] == 1
    assert data["topicsPerBroker"] == round(entries / 5, 1)
    assert data["redis"]["usedMemoryMb"] > 0.5 and data["redis"]["version"] and data["redis"]["maxmemoryMb"] is None
    model, room = data["model"], data["headroom"]
    assert 0 < model["redisCores"] <= model["redisCoresPeak"] and model["workersNeeded"] == 1
    assert room["maxBrokers"] > 8 and room["moreBrokers"] == room["maxBrokers"] - 8
    assert room["limit"] in model["utilisation"] and data["basis"]["per request"].startswith("benchmarks.peers")
    text = admin(server, "capacity").stdout
    assert f"Headroom: {room['moreBrokers']:,} more brokers of this shape" in text
    assert ["live brokers (addresses)", "8"] in table(text) and ["(topic, broker) entries", f"{entries}"] in table(text)
    r = admin(server, "--server", f"rmq://127.0.0.1:{server.remoting_port}", "capacity", token=READ)
    assert r.returncode == 2 and "use the HTTP door" in r.stderr
    assert admin(server, "capacity", token=None).returncode == 4  # reads need a token here


def test_topics_route_and_filters(server):
    rows = table(admin(server, "topics").stdout)
    assert rows[0] == ["TOPIC", "KIND"]
    assert {r[0]: r[1] for r in rows[1:]}["%DLQ%order-service"] == "dlq"
    assert [r[0] for r in table(admin(server, "topics", "--cluster", "ClusterB", "--match", "click").stdout)[1:]] == [
        "ClickStream"]
    system = orjson.loads(admin(server, "topics", "--system", "--json").stdout)
    assert {"ClusterA", "ClusterB", "broker-a"} <= set(system["topicList"])
    assert admin(server, "topics", "--system", "--cluster", "ClusterA").returncode == 2
    r = admin(server, "route", "OrderPaid")
    rows = table(r.stdout)
    assert rows[0] == ["Route of OrderPaid"]
    assert rows[2] == ["broker-a", "ClusterA", "10.0.1.11:10911 (master), 10.0.1.12:10911 (slave)", "16", "16", "RW",
                       "0"]
    route = orjson.loads(admin(server, "route", "%RETRY%order-service", "--json").stdout)
    assert sorted(b["brokerName"] for b in route["brokerDatas"]) == ["broker-a", "broker-b", "broker-c"]


def test_exit_codes(server):
    r = admin(server, "route", "NoSuchTopic")
    assert (r.returncode, r.stdout) == (1, "")
    assert "TOPIC_NOT_EXIST" in r.stderr
    assert admin(server, "route", "bad name").returncode == 2  # the server's INVALID_ARGUMENT
    assert admin(server, "no-such-command").returncode == 2
    assert admin(server, "--server", "http://127.0.0.1:1", "clusters").returncode == 3
    r = admin(server, "clusters", token=None)  # reads need the read token on this server
    assert r.returncode == 4 and "UNAUTHORIZED" in r.stderr
    r = admin(server, "wipe-write-perm", "broker-a", "--yes", token=READ)
    assert r.returncode == 4 and "FORBIDDEN" in r.stderr
    assert admin(server, "kv", "get", "nope", "nope").returncode == 1
    assert admin(server, "config", "set", "adminToken", "x").returncode == 4  # blacklisted


def test_kv_and_config(server):
    assert admin(server, "kv", "put", "ORDER_TOPIC_CONFIG", "OrderPaid", "broker-a:16;broker-b:4").returncode == 0
    assert admin(server, "kv", "get", "ORDER_TOPIC_CONFIG", "OrderPaid").stdout == "broker-a:16;broker-b:4\n"
    assert table(admin(server, "kv", "list", "ORDER_TOPIC_CONFIG").stdout)[2] == ["OrderPaid", "broker-a:16;broker-b:4"]
    assert "ORDER_TOPIC_CONFIG" in orjson.loads(admin(server, "kv", "list", "--json").stdout)["namespaces"]
    rows = {r[0]: r[1:] for r in table(admin(server, "config", "get").stdout)[1:]}
    assert rows["admin_token"] == ["***"] and rows["support_acting_master"] == ["false", "yes"]
    assert admin(server, "config", "set", "supportActingMaster", "true").returncode == 0
    assert admin(server, "config", "get", "supportActingMaster").stdout == "true\n"
    assert admin(server, "config", "set", "supportActingMaster", "false").returncode == 0


def test_skew_report(server):
    r = admin(server, "skew", "--top", "3")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("Skew report generated ")
    topics = r.stdout.split("Most skewed topics (top 3)")[1]
    assert "<script>window.__pwned=3</script>" in topics  # printed as written, markup or not
    assert len(table(topics.split("Worsening")[0])) == 4  # header + 3 topics
    assert orjson.loads(admin(server, "skew", "--json").stdout)["totals"]["topics"] == 10


def test_skew_history(server):
    """The kept runs, newest first, one line each, from what the job stored (tests/console/skew_history.json)."""
    runs = orjson.loads(HISTORY.read_bytes())
    r = admin(server, "skew", "--history", token=READ)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"Skew runs (newest first, {len(runs)})")
    rows = table(r.stdout)[2:]  # title, header
    # the run's time in the form every other column takes ("2026-11-28 06:41:18 UTC"), not the report's ISO text
    assert [row[0] for row in rows] == [display.when_iso(run["generatedAt"]) for run in runs]
    assert rows[0][0].endswith(" UTC") and rows[0][1].endswith(" UTC")
    newest = runs[0]
    gini = ", ".join(f"{c['cluster']} {c['gini']:.3f}".rstrip("0") for c in newest["clusters"])
    assert rows[0][-1] == gini and rows[0][4] == str(newest["totals"]["topics"])
    assert rows[0][6] == "CONCENTRATED 4, SINGLE_BROKER 2"  # flags counted zero are left out
    one = table(admin(server, "skew", "--history", "1", token=READ).stdout)
    assert len(one) == 3 and one[2][0] == display.when_iso(newest["generatedAt"])
    as_json = orjson.loads(admin(server, "skew", "--history", "2", "--json", token=READ).stdout)
    assert [run["runId"] for run in as_json["runs"]] == [run["runId"] for run in runs]
    assert "topics" not in as_json["runs"][0]  # the history carries totals and clusters, not the full lists
    bad = admin(server, "skew", "--history", "0", token=READ)
    assert bad.returncode == 2 and "--history: 1..48 runs" in bad.stderr
    native = admin(server, "--server", f"rmq://127.0.0.1:{server.remoting_port}", "skew", "--history", token=READ)
    assert native.returncode == 2 and "use the HTTP door" in native.stderr


def run_on_terminal(server, args: list[str], answer: bytes, columns: int = 400) -> tuple[int, str]:
    """Run with stdin, stdout and stderr on a pseudo-terminal `columns` wide; type `answer` once the question is
    asked."""
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "service.cli", "admin", *args],
                            env=env_for(server, COLUMNS=str(columns)), stdin=child, stdout=child, stderr=child,
                            close_fds=True)
    os.close(child)
    seen, answered = b"", False
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(main, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        if not answered and b"[y/N]" in seen:
            os.write(main, answer)
            answered = True
        if proc.poll() is not None and not ready:
            break
    os.close(main)
    return proc.wait(10), seen.decode(errors="replace")


def topics_of(broker: str) -> int:
    return sum(1 for queues in fleet.TOPICS.values() if broker in queues)


def topic_exists(server, name: str) -> bool:
    return admin(server, "route", name).returncode == 0


def test_destructive_commands_ask_on_a_terminal_and_need_yes_elsewhere(server):
    fleet.call(server.url, "PUT", "/v1/topics/Doomed/route", {"queueDatas": [
        {"brokerName": "broker-d", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}]}, ADMIN)
    r = admin(server, "delete-topic", "Doomed")  # stdin is not a terminal
    assert r.returncode == 2 and "--yes" in r.stderr and topic_exists(server, "Doomed")
    code, seen = run_on_terminal(server, ["delete-topic", "Doomed"], b"n\n")
    assert code == 4 and "Delete topic Doomed from every cluster (1 broker(s): broker-d)?" in seen
    assert "aborted" in seen and topic_exists(server, "Doomed")
    code, seen = run_on_terminal(server, ["delete-topic", "Doomed", "--cluster", "ClusterB"], b"y\n")
    assert code == 0 and "deleted topic Doomed from cluster ClusterB: 1 queue data removed" in seen
    assert not topic_exists(server, "Doomed")
    assert admin(server, "delete-topic", "Doomed", "--yes").returncode == 1  # gone: not found, nothing asked

    assert admin(server, "wipe-write-perm", "broker-e").returncode == 2
    r = admin(server, "wipe-write-perm", "broker-e", "--yes")
    assert r.stdout == f"broker-e: write permission wiped on {topics_of('broker-e')} topic(s)\n"
    route = orjson.loads(admin(server, "route", "UserSignup", "--json").stdout)
    assert {q["brokerName"]: q["perm"] for q in route["queueDatas"]}["broker-e"] == 4
    assert admin(server, "add-write-perm", "broker-e").stdout == (
        f"broker-e: write permission restored on {topics_of('broker-e')} topic(s)\n")

    admin(server, "kv", "put", "tmp", "k", "v")
    assert admin(server, "kv", "delete", "tmp", "k").returncode == 2
    assert admin(server, "kv", "delete", "tmp", "k", "-y").stdout == "tmp k: deleted\n"


def test_add_write_perm_takes_yes_and_kv_list_leaves_out_emptied_namespaces(server):
    assert admin(server, "wipe-write-perm", "broker-e", "--yes").returncode == 0
    r = admin(server, "add-write-perm", "broker-e", "--yes")
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"broker-e: write permission restored on {topics_of('broker-e')} topic(s)\n"

    assert admin(server, "kv", "put", "EmptiedSoon", "only-key", "v").returncode == 0
    assert admin(server, "kv", "put", "EmptiedSoon", "second", "v").returncode == 0
    assert "EmptiedSoon" in orjson.loads(admin(server, "kv", "list", "--json").stdout)["namespaces"]
    assert admin(server, "kv", "delete", "EmptiedSoon", "only-key", "--yes").returncode == 0
    assert "EmptiedSoon" in admin(server, "kv", "list").stdout  # one key left: still listed
    assert admin(server, "kv", "delete", "EmptiedSoon", "second", "--yes").returncode == 0
    assert "EmptiedSoon" not in orjson.loads(admin(server, "kv", "list", "--json").stdout)["namespaces"]
    assert "EmptiedSoon" not in admin(server, "kv", "list").stdout
    # by name it still reads as Java's GET_KVLIST_BY_NAMESPACE reads an emptied namespace: an empty table
    assert orjson.loads(admin(server, "kv", "list", "EmptiedSoon", "--json").stdout)["table"] == {}


def test_watch_refreshes(server):
    r = admin(server, "watch", "--count", "2", "--interval", "0.1", "--cluster", "ClusterA")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("Live brokers, cluster ClusterA, as of ") == 2
    assert r.stdout.count("10.0.1.31:10911") == 2
    lines = admin(server, "watch", "--count", "2", "--interval", "0.1", "--json").stdout.splitlines()
    assert [len(orjson.loads(line)["brokers"]) for line in lines] == [8, 8]
    code, seen = run_on_terminal(server, ["watch", "--count", "2", "--interval", "0.1"], b"")
    assert code == 0 and "LAST HEARTBEAT" in seen and "10.0.2.21:10911" in seen
    # redrawn in place, a line wider than the terminal is cut, not wrapped: at 60 columns the heartbeat ages, what
    # `watch` is for, were cut off every refresh (issue 39, second round); now the table fits, every value whole
    code, seen = run_on_terminal(server, ["watch", "--count", "1", "--cluster", "ClusterA"], b"", columns=54)
    lines = [re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", line).rstrip() for line in seen.splitlines()]
    assert code == 0 and all(len(line) <= 54 for line in lines), seen
    rows = [line.split() for line in lines if ":10911" in line]
    assert rows and all(re.fullmatch(r"[0-9.]+", row[-2]) and row[-1] in ("ms", "s") for row in rows), seen


def test_the_token_is_never_on_the_command_line(server, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(READ + "\n")
    token_file.chmod(0o600)
    proc = subprocess.Popen([sys.executable, "-m", "service.cli", "admin", "--token-file", str(token_file), "watch",
                             "--interval", "0.2", "--count", "20"], env=env_for(server, token=None),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        cmdline = b""
        while time.monotonic() < deadline and not cmdline:
            cmdline = open(f"/proc/{proc.pid}/cmdline", "rb").read()  # what `ps` shows
        assert b"watch" in cmdline and READ.encode() not in cmdline
    finally:
        proc.kill()
        proc.wait()


def test_native_door(server):
    rmq = f"rmq://127.0.0.1:{server.remoting_port}"
    r = admin(server, "--server", rmq, "route", "OrderPaid", token=READ)  # signed with AccessKey "read"
    assert r.returncode == 0, r.stderr
    assert table(r.stdout)[2] == ["broker-a", "ClusterA", "10.0.1.11:10911 (master), 10.0.1.12:10911 (slave)", "16",
                                  "16", "RW", "0"]
    http = orjson.loads(admin(server, "route", "OrderPaid", "--json").stdout)
    assert orjson.loads(admin(server, "--server", rmq, "route", "OrderPaid", "--json").stdout) == http
    assert table(admin(server, "--server", rmq, "clusters").stdout)[1][:4] == ["ClusterA", "3", "3", "5"]
    assert admin(server, "--server", rmq, "route", "NoSuchTopic").returncode == 1
    assert admin(server, "--server", rmq, "route", "OrderPaid", token=None).returncode == 4  # reads need a token
    assert admin(server, "--server", rmq, "wipe-write-perm", "broker-c", "-y", token=READ).returncode == 4
    r = admin(server, "--server", rmq, "brokers")
    assert r.returncode == 2 and "use the HTTP door" in r.stderr
    assert admin(server, "--server", rmq, "wipe-write-perm", "broker-c", "-y").stdout == (
        f"broker-c: write permission wiped on {topics_of('broker-c')} topic(s)\n")
    assert admin(server, "--server", rmq, "add-write-perm", "broker-c").returncode == 0
    assert admin(server, "--server", rmq, "kv", "put", "native", "k", "v 1").returncode == 0
    assert admin(server, "kv", "get", "native", "k").stdout == "v 1\n"
    assert admin(server, "--server", rmq, "config", "get", "broker_timeout_ms").stdout == "120000\n"


def test_route_watch_prints_each_change(server):
    """`route TOPIC --watch`: the route now (here: none), then each change as the server streams it."""
    import urllib.request

    topic = "WatchedByCli" + uuid.uuid4().hex[:6]
    proc = subprocess.Popen([sys.executable, "-m", "service.cli", "admin", "route", topic, "--watch", "--json",
                             "--count", "3"], env=env_for(server, READ), stdout=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)

    def send(method: str, body: dict | None = None) -> None:
        req = urllib.request.Request(f"{server.url}/v1/topics/{topic}" + ("/route" if body else ""), method=method,
                                     data=orjson.dumps(body) if body else None,
                                     headers={"Authorization": f"Bearer {ADMIN}", "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.status == 200

    try:
        first = orjson.loads(proc.stdout.readline())
        assert first == {"topic": topic, "etag": '"absent"', "route": None}
        send("PUT", {"queueDatas": [{"brokerName": "broker-c", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}]})
        second = orjson.loads(proc.stdout.readline())
        assert second["route"]["queueDatas"][0]["writeQueueNums"] == 2
        send("DELETE")
        third = orjson.loads(proc.stdout.readline())
        assert third["route"] is None
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    native = admin(server, "route", "X", "--watch", "--server", f"rmq://127.0.0.1:{server.remoting_port}")
    assert native.returncode == 2 and "--watch needs the HTTP door" in native.stderr


def doors(server) -> dict[str, str]:
    return {"http": server.url, "rmq": f"rmq://127.0.0.1:{server.remoting_port}"}


@pytest.mark.parametrize("door", ["http", "rmq"])
def test_every_documented_exit_code_on_both_doors(server, door):
    """docs/operating.md "Exit codes", each through each door: the same meaning ends with the same code."""
    at = ("--server", doors(server)[door])
    assert admin(server, *at, "route", "OrderPaid", token=READ).returncode == 0
    assert admin(server, *at, "route", "NoSuchTopic").returncode == 1
    assert admin(server, *at, "kv", "get", "nope", "nope").returncode == 1
    r = admin(server, *at, "kv", "put", "bad\tnamespace", "k", "v")  # the server refuses the name (a control character)
    assert r.returncode == 2 and "INVALID_ARGUMENT" in r.stderr, r.stderr
    assert admin(server, *at, "kv", "delete", "tmp", "k").returncode == 2  # destructive, nobody to ask
    assert admin(server, *at, "no-such-command").returncode == 2
    free = f"{'http' if door == 'http' else 'rmq'}://127.0.0.1:{free_port()}"
    assert admin(server, "--server", free, "route", "OrderPaid").returncode == 3  # connection refused
    assert admin(server, *at, "route", "OrderPaid", token=None).returncode == 4  # reads need a token here
    r = admin(server, *at, "wipe-write-perm", "broker-a", "--yes", token=READ)
    assert r.returncode == 4, r.stderr
    assert admin(server, *at, "config", "set", "adminToken", "x").returncode == 4  # blacklisted
    code, seen = run_on_terminal(server, [*at, "kv", "delete", "tmp", "k"], b"n\n")
    assert code == 4 and "aborted" in seen


def test_an_unavailable_registry_is_exit_3_on_both_doors(tmp_path):
    """Redis down behind a running server: HTTP answered 503 (exit 3), the native door SYSTEM_ERROR (was exit 4,
    "refused"); both now say the same thing and exit 3."""
    from tests.redis_server import RedisServer

    redis = RedisServer().start()
    n = Namesrv(redis.url, "down" + uuid.uuid4().hex[:6]).wait_ready()
    try:
        redis.stop()
        answers = [admin(n, "--server", url, "clusters", token=None) for url in doors(n).values()]
        assert [a.returncode for a in answers] == [3, 3], [a.stderr for a in answers]
        assert answers[0].stderr == answers[1].stderr and "(STORE_UNAVAILABLE)" in answers[0].stderr
    finally:
        n.stop()
        redis.cleanup()


@pytest.fixture
def not_a_namesrv():
    """A TCP port that greets with a line of something else, as an SSH or SMTP server would, then closes."""
    import socket
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def greet() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")

    thread = threading.Thread(target=greet, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join()
    listener.close()


def test_the_wrong_door_is_named_with_the_scheme_to_use(server, not_a_namesrv):
    """The HTTP port given as rmq:// used to end in a FrameTooLarge traceback and exit 1; the native port given as
    http:// in "Remote end closed connection". Each now says what answered and which scheme to use; exit 3."""
    r = admin(server, "--server", f"rmq://127.0.0.1:{server.port}", "clusters")
    assert r.returncode == 3 and "Traceback" not in r.stderr, r.stderr
    assert f"it answered HTTP: use --server http://127.0.0.1:{server.port}" in r.stderr
    r = admin(server, "--server", f"http://127.0.0.1:{server.remoting_port}", "clusters")
    assert r.returncode == 3 and "Traceback" not in r.stderr, r.stderr
    assert "is a RocketMQ remoting door, not HTTP" in r.stderr
    assert f"use --server rmq://127.0.0.1:{server.remoting_port}" in r.stderr
    r = admin(server, "--server", f"rmq://127.0.0.1:{not_a_namesrv}", "clusters")
    assert r.returncode == 3 and "is not a RocketMQ remoting door" in r.stderr and "Traceback" not in r.stderr
    r = admin(server, "--server", f"http://127.0.0.1:{not_a_namesrv}", "clusters")
    assert r.returncode == 3 and "did not answer HTTP" in r.stderr and "Traceback" not in r.stderr


def test_answers_that_looked_right_but_were_not(server):
    """Each was an answer with exit 0 that misled: `?` for every setting's "change at run time" over rmq://,
    registration_chunk_topics 0 where 1 000 is in force, cluster and broker names as KIND normal in the system
    list, an empty table for a cluster that does not exist."""
    for url in doors(server).values():
        rows = {r[0]: r[1:] for r in table(admin(server, "--server", url, "config", "get").stdout)[1:]}
        assert rows["support_acting_master"] == ["false", "yes"] and rows["broker_timeout_ms"][1] == "yes", url
        assert rows["port"] == [str(server.port)], url  # a start-up setting: nothing in the third column
        assert rows["registration_chunk_topics"] == ["1000"], url  # 0 in the settings: 1 000 with Redis
        r = admin(server, "--server", url, "config", "get", "registration_chunk_topics")
        assert r.stdout == "1000\n"
    kinds = {r[0]: r[1] for r in table(admin(server, "topics", "--system").stdout)[1:]}
    assert kinds["ClusterA"] == kinds["ClusterB"] == "cluster" and kinds["broker-a"] == "broker"
    assert set(kinds.values()) <= {"cluster", "broker", "system"}, kinds
    for args in (["brokers", "--cluster", "Nope"], ["topics", "--cluster", "Nope"],
                 ["watch", "--cluster", "Nope", "--count", "1"], ["delete-topic", "OrderPaid", "--cluster", "Nope"]):
        r = admin(server, *args)
        assert (r.returncode, r.stdout) == (1, ""), (args, r.stdout, r.stderr)
        assert "no cluster named 'Nope' is registered (clusters: ClusterA, ClusterB)" in r.stderr
    r = admin(server, "delete-topic", "OrderPaid", "--cluster", "ClusterB")  # no queues there: nothing to ask
    assert r.returncode == 1 and "has no queues in cluster ClusterB" in r.stderr


def test_tables_on_an_80_column_terminal_keep_every_name_id_role_and_address(server):
    """`brokers` at 80 columns printed `B…` and `10.0.0.…` and dropped ID and ROLE; `clusters` and `route` cut
    names. On a real terminal of 80 columns every one is whole and no line is longer; piped, every column is
    there whatever COLUMNS says."""
    code, seen = run_on_terminal(server, ["brokers"], b"", columns=80)
    assert code == 0, seen
    lines = [re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", line) for line in seen.splitlines()]
    assert "…" not in seen and all(len(line.rstrip()) <= 80 for line in lines), seen
    shown = {line.split()[4]: line.split()[:4] for line in lines if ":10911" in line}
    live = orjson.loads(admin(server, "--json", "brokers").stdout)["brokers"]
    assert shown == {b["brokerAddr"]: [b["cluster"], b["brokerName"], str(b["brokerId"]),
                                       "master" if b["brokerId"] == 0 else "slave"] for b in live}
    for args in (["clusters"], ["route", "OrderPaid"]):
        code, seen = run_on_terminal(server, args, b"", columns=80)
        assert code == 0 and "…" not in seen, seen
    assert "broker-a, broker-b, broker-c" in run_on_terminal(server, ["clusters"], b"", columns=80)[1]
    piped = admin(server, "brokers", COLUMNS="80").stdout
    assert table(piped)[0][-2:] == ["DATA VERSION", "TOPICS"] and "…" not in piped


def in_process(server, capsys, *args: str, token: str | None = ADMIN) -> tuple[int, str, str]:
    """`namesrv admin ARGS` run in this process (what a subprocess does, minus its start-up second)."""
    from service.admin.commands import run
    from service.cli import build_parser

    capsys.readouterr()
    code = run(build_parser().parse_args(["admin", *args]), env_for(server, token))
    said = capsys.readouterr()
    return code, said.out, said.err


def test_both_doors_answer_a_mistake_alike(server, capsys):
    """Round two of issue 39, each seen on one door and not the other: an empty KV key went to the server (HTTP
    `no route for PUT /v1/kv/NS1/`, exit 1; rmq:// `namespace or key is null`, exit 3 "unreachable"); an invalid
    topic name was a usage error over HTTP and "not found" over rmq://; rmq:// printed `(RMQ_17)` and Java's FAQ
    line where HTTP printed `(TOPIC_NOT_EXIST)`; a broker name nobody registered was "wiped on 0 topic(s)", exit 0;
    deleting an unset key said `deleted` over rmq://; `config set supportActingMaster` echoed the name as typed."""
    for door, url in doors(server).items():
        def ask(*args: str) -> tuple[int, str, str]:
            return in_process(server, capsys, "--server", url, *args)  # noqa: B023 (used at once)

        assert ask("kv", "put", "ns", "", "v")[::2] == (2, "namesrv admin kv: key: required, a non-empty string "
                                                           "(INVALID_ARGUMENT)\n"), door
        assert ask("kv", "get", "", "k")[::2] == (2, "namesrv admin kv: namespace: required, a non-empty string "
                                                     "(INVALID_ARGUMENT)\n"), door
        assert ask("route", "")[0] == 2, door
        assert ask("route", "bad topic")[::2] == (2, "namesrv admin route: topic: only letters, digits, '%', '|', "
                                                     "'_' and '-' are allowed (INVALID_ARGUMENT)\n"), door
        assert ask("brokers", "--cluster", "")[0] == 2, door
        assert ask("route", "NoSuchTopic")[::2] == (1, "namesrv admin route: No topic route info in name server for "
                                                       "the topic: NoSuchTopic (TOPIC_NOT_EXIST)\n"), door
        assert ask("kv", "get", "nope", "nope")[::2] == (1, "namesrv admin kv: No config item, Namespace: nope Key: "
                                                           "nope (QUERY_NOT_FOUND)\n"), door
        for command in ("wipe-write-perm", "add-write-perm"):
            code, out, err = ask(command, "brokr-a", "--yes")
            assert (code, out) == (1, ""), (door, err)
            assert err == f"namesrv admin {command}: no broker named 'brokr-a' is registered (brokers: broker-a, " \
                          "broker-b, broker-c, broker-d, broker-e) (BROKER_NOT_FOUND)\n", door
        assert ask("kv", "delete", "ns-never-set", "k", "--yes")[:2] == (0, "ns-never-set k: was not set\n"), door
        assert ask("config", "set", "supportActingMaster", "false")[:2] == (
            0, "updated for every worker: support_acting_master=false\n"), door


def test_a_wrong_address_or_credential_says_what_to_change(server, capsys, tmp_path):
    """Round two of issue 39: https:// on the plain HTTP port printed OpenSSL's `[SSL: WRONG_VERSION_NUMBER] wrong
    version number (_ssl.c:1006)`, rmqs:// on the plain native door `[SSL: UNEXPECTED_EOF_WHILE_READING]` under the
    name rmq://; a path under --server (`/console`) read "not found"; a read token in a file, signed as the
    default AccessKey admin, `signature … does not verify` with no word of --access-key."""
    host = f"127.0.0.1:{server.port}"
    code, _, err = in_process(server, capsys, "--server", f"https://{host}", "clusters")
    assert (code, err) == (3, f"namesrv admin clusters: https://{host} does not answer TLS: if it serves plain "
                              f"HTTP, use --server http://{host}\n")
    native = f"127.0.0.1:{server.remoting_port}"
    code, _, err = in_process(server, capsys, "--server", f"rmqs://{native}", "clusters")
    assert (code, err) == (3, f"namesrv admin clusters: rmqs://{native} does not answer TLS: if its native door "
                              f"runs without TLS, use --server rmq://{native}\n")
    code, _, err = in_process(server, capsys, "--server", f"http://{host}/console", "clusters")
    assert (code, err) == (2, f"namesrv admin clusters: http://{host}/console is not the HTTP API: the server has no "
                              "route for /console/v1/…; --server is the API's root, scheme://host:port (or the prefix "
                              "a proxy serves it under) (NOT_FOUND)\n")
    token_file = tmp_path / "read-token"
    token_file.write_text(READ + "\n")
    token_file.chmod(0o600)
    code, _, err = in_process(server, capsys, "--server", f"rmq://{native}", "--token-file", str(token_file),
                              "clusters", token=None)
    assert code == 4 and err.endswith("(NO_PERMISSION); a read token signs as --access-key read\n"), err
    assert in_process(server, capsys, "--server", f"rmq://{native}", "--token-file", str(token_file),
                      "--access-key", "read", "clusters", token=None)[0] == 0
