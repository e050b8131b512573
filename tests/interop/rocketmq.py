"""Apache RocketMQ's own Java pieces as test peers: brokers, Apache's NameServer, our producer and consumer
programs on RocketMQ's client, and mqadmin (rocketmq-tools' MQAdminStartup), each in a JVM of its own with a
small heap, temporary directories and loopback ports.

The jars come from tests/interop/java (Maven, exact versions; `.ci/run` builds it); each module there writes its
runtime classpath to target/classpath.txt.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

JAVA_DIR = Path(__file__).parent / "java"


@dataclass(frozen=True)
class Line:
    """One RocketMQ release line: the server jars' version and the clients' (4.9.8 servers were never published)."""

    name: str
    server_version: str
    client_version: str

    def _classpath(self, module: str) -> list[str]:
        path = JAVA_DIR / module / "target" / "classpath.txt"
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing: build the harness (mvn -B -q -f {JAVA_DIR}/pom.xml package)")
        return path.read_text().strip().split(os.pathsep)

    @property
    def logging(self) -> Path:
        return JAVA_DIR / "logging" / f"v{self.name}"

    def server_cp(self) -> str:
        return os.pathsep.join([str(self.logging), *self._classpath(f"server{self.name}")])

    def client_cp(self) -> str:
        own = JAVA_DIR / f"client{self.name}" / "target" / "classes"
        return os.pathsep.join([str(self.logging), str(own), *self._classpath(f"client{self.name}")])

    @property
    def is5(self) -> bool:
        return self.name == "5"


LINE5 = Line("5", "5.5.0", "5.5.0")
LINE4 = Line("4", "4.9.7", "4.9.8")


GO_DIR = Path(__file__).parent / "go"
GO_BIN = GO_DIR / "bin" / "rmqgo"


def build_go() -> None:
    """The Go client program (rocketmq-client-go v2.1.2, pinned in tests/interop/go/go.mod)."""
    subprocess.run(["go", "-C", str(GO_DIR), "build", "-o", "bin/rmqgo", "."], check=True, timeout=900)


def built() -> bool:
    modules = ("server5", "client5", "server4", "client4")
    return all((JAVA_DIR / m / "target" / "classpath.txt").is_file() for m in modules)


def build() -> None:
    subprocess.run(["mvn", "-B", "-q", "-f", str(JAVA_DIR / "pom.xml"), "package"], check=True, timeout=900)


# JDK 17 closes the internals 4.9.x's mmap cleaner and both lines' Netty reach for; opening them is what
# RocketMQ's own start scripts do on newer JDKs.
_OPENS = ["--add-opens=java.base/java.nio=ALL-UNNAMED", "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
          "--add-opens=java.base/java.lang=ALL-UNNAMED", "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
          "--add-opens=java.base/jdk.internal.misc=ALL-UNNAMED", "-Dio.netty.tryReflectionSetAccessible=true"]
# A 2-core machine: C1 only (starts faster, compiles less), serial GC, few GC/compiler threads.
_SMALL = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:CICompilerCount=1", "-Xss512k",
          "-XX:-UsePerfData", "-Djava.net.preferIPv4Stack=true"]


# The clients' and mqadmin's own logging at WARN (tests/interop/java/logging reads this property).
QUIET = {"rmq.interop.level": "WARN"}


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


_taken: set[int] = set()
_taken_lock = threading.Lock()


def broker_port() -> int:
    """A broker's listenPort P below the kernel's outgoing range, with P-2 (fast port) and P+1 (HA) free too,
    never handed out twice in this process."""
    with _taken_lock:
        for _ in range(500):
            p = random.randrange(20000, 31000, 4)
            if not any(q in _taken for q in range(p - 4, p + 4)) and all(_port_free(q) for q in (p - 2, p, p + 1)):
                _taken.add(p)
                return p
    raise RuntimeError("no free broker port range")


def wait_until(check: Callable[[], object], timeout: float, what: str, interval: float = 0.2) -> object:
    """Poll `check` until it returns something truthy; fail with `what` (and the last error) at the deadline."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = check()
            if value:
                return value
            last = value
        except Exception as exc:  # noqa: BLE001 - the last error is reported at the deadline
            last = exc
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:.0f} s (last: {last!r})")
        time.sleep(interval)


@dataclass
class JavaProc:
    """A JVM writing its standard output and error to `home/<name>.out`."""

    name: str
    home: Path
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen | None = None
    stdin: bool = False

    @property
    def log_path(self) -> Path:
        return self.home / f"{self.name}.out"

    def start(self) -> JavaProc:
        self.home.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child for its life
        env = {**os.environ, "ROCKETMQ_HOME": str(self.home), **self.env}
        self.proc = subprocess.Popen(self.argv, cwd=self.home, env=env, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.PIPE if self.stdin else subprocess.DEVNULL)
        log.close()
        return self

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.output().splitlines()[-n:])

    def kill(self) -> None:
        """SIGKILL: no shutdown hook, no unregistration; sockets are closed by the kernel."""
        if self.alive:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait(30)

    def signal_stop(self) -> None:
        if self.alive:
            self.proc.send_signal(signal.SIGTERM)

    def wait_stopped(self, timeout: float = 40) -> None:
        if self.proc is None:
            return
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)


def stop_all(procs: Iterable[JavaProc], timeout: float = 40) -> None:
    """SIGTERM every process first and then wait: 5.x brokers take 11-18 s each to shut down."""
    procs = list(procs)
    for p in procs:
        p.signal_stop()
    for p in procs:
        p.wait_stopped(timeout)


def java_argv(heap_mb: int, classpath: str, main: str, *args: str, props: dict[str, str] | None = None,
              home: Path | None = None) -> list[str]:
    java = shutil.which("java") or "java"
    argv = [java, f"-Xms{heap_mb}m", f"-Xmx{heap_mb}m", *_SMALL, *_OPENS]
    if home is not None:
        argv += [f"-Duser.home={home}", f"-Drocketmq.home.dir={home}"]
    argv += [f"-D{k}={v}" for k, v in (props or {}).items()]
    return [*argv, "-cp", classpath, main, *args]


def _home(root: Path, name: str, line: Line) -> Path:
    home = root / name
    (home / "conf").mkdir(parents=True, exist_ok=True)
    if not line.is5:
        for f in line.logging.iterdir():
            shutil.copy(f, home / "conf" / f.name)
    return home


class ApacheNameServer(JavaProc):
    """Apache's own NameServer (NamesrvStartup), the oracle beside ours."""

    def __init__(self, line: Line, root: Path, port: int, props: dict[str, str] | None = None,
                 **config: object) -> None:
        home = _home(root, f"apache-namesrv-{port}", line)
        conf = home / "namesrv.properties"
        conf.write_text("".join(f"{k}={v}\n" for k, v in {"listenPort": port, **config}.items()))
        super().__init__(f"apache-namesrv-{port}", home, java_argv(
            256, line.server_cp(), "org.apache.rocketmq.namesrv.NamesrvStartup", "-c", str(conf), props=props,
            home=home))
        self.port = port
        self.addr = f"127.0.0.1:{port}"
        # KVConfigManager's file unless namesrv.properties names another (kvConfigPath)
        self.kv_path = Path(str(config.get("kvConfigPath", home / "namesrv" / "kvConfig.json")))

    def wait_listening(self, timeout: float = 60) -> ApacheNameServer:
        def up() -> bool:
            if not self.alive:
                raise RuntimeError(f"Apache NameServer exited: {self.tail()}")
            with socket.socket() as s:
                s.settimeout(0.5)
                return s.connect_ex(("127.0.0.1", self.port)) == 0

        wait_until(up, timeout, "Apache NameServer listening")
        return self


class Broker(JavaProc):
    """A stock BrokerStartup with a generated broker.conf: small commit-log files, a temp store, loopback
    addresses. `extra` adds or overrides broker.conf entries; `props` adds JVM system properties (TLS)."""

    def __init__(self, line: Line, root: Path, cluster: str, name: str, broker_id: int, namesrv: str,
                 port: int | None = None, heap_mb: int = 384, props: dict[str, str] | None = None,
                 **extra: object) -> None:
        self.line = line
        self.cluster, self.broker_name, self.broker_id = cluster, name, broker_id
        self.port = port or broker_port()
        self.addr = f"127.0.0.1:{self.port}"
        # controller mode: every broker of a group says brokerId=-1 (the controller assigns ids): the port tells
        # them apart
        label = f"broker-{cluster}-{name}-{broker_id if broker_id >= 0 else self.port}"
        home = _home(root, label, line)
        store = home / "store"
        conf: dict[str, object] = {
            "brokerClusterName": cluster, "brokerName": name, "brokerId": broker_id, "namesrvAddr": namesrv,
            "listenPort": self.port, "haListenPort": self.port + 1, "brokerIP1": "127.0.0.1",
            "brokerIP2": "127.0.0.1", "storePathRootDir": store, "storePathCommitLog": store / "commitlog",
            "mappedFileSizeCommitLog": 16 * 1024 * 1024, "mappedFileSizeConsumeQueue": 60000,
            "brokerRole": "ASYNC_MASTER" if broker_id == 0 else "SLAVE", "flushDiskType": "ASYNC_FLUSH",
            "autoCreateTopicEnable": "false", "slaveReadEnable": "true", "deleteWhen": "04",
            "fetchNamesrvAddrByAddressServer": "false", "diskMaxUsedSpaceRatio": 99,
            "sendMessageThreadPoolNums": 2, "pullMessageThreadPoolNums": 4, "waitTimeMillsInSendQueue": 3000,
        }
        if line.is5:
            conf |= {"bindAddress": "127.0.0.1", "enableSlaveActingMaster": "true", "brokerHeartbeatInterval": 1000}
        conf |= extra
        self.conf_path = home / "broker.conf"
        self.conf_path.write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
        super().__init__(label, home, java_argv(heap_mb, line.server_cp(), "org.apache.rocketmq.broker.BrokerStartup",
                                                "-c", str(self.conf_path), props=props, home=home))

    def restart(self) -> Broker:
        """Start again on the same store, ports and configuration (after a kill or a stop)."""
        if self.alive:
            raise RuntimeError(f"{self.name} is still running")
        return self.start()


@dataclass
class ClientRun:
    """A producer or consumer program's run: its lines, parsed."""

    proc: JavaProc

    def lines(self, tag: str) -> list[list[str]]:
        """The complete lines with this tag (a line the program is still writing is left for the next read)."""
        text = self.proc.output()
        return [ln.split(" ") for ln in text[:text.rfind("\n") + 1].splitlines() if ln.startswith(tag + " ")]

    def done(self) -> bool:
        return any(ln.startswith("DONE ") for ln in self.proc.output().splitlines())

    def wait_done(self, timeout: float) -> ClientRun:
        wait_until(lambda: self.done() or not self.proc.alive, timeout, f"{self.proc.name} finished")
        if not self.done():
            raise RuntimeError(f"{self.proc.name} died: {self.proc.tail()}")
        self.proc.wait_stopped(30)
        return self

    def wait_started(self, timeout: float = 60) -> ClientRun:
        def started() -> bool:
            if not self.proc.alive and "STARTED" not in self.proc.output():
                raise RuntimeError(f"{self.proc.name} died: {self.proc.tail()}")
            return "STARTED" in self.proc.output()

        wait_until(started, timeout, f"{self.proc.name} started")
        return self

    # producer
    def acked(self) -> dict[str, tuple[str, int]]:
        """key -> (brokerName, queueId) of every message the broker acknowledged."""
        return {p[1]: (p[3], int(p[4])) for p in self.lines("OK")}

    def failures(self) -> list[str]:
        return [" ".join(p[1:]) for p in self.lines("FAIL")]

    # consumer
    def received(self) -> dict[str, set[str]]:
        """key -> the brokers it was delivered from (redeliveries included)."""
        got: dict[str, set[str]] = {}
        for p in self.lines("RECV"):
            got.setdefault(p[1], set()).add(p[2])
        return got

    def stop(self, timeout: float = 60) -> ClientRun:
        if self.proc.alive:
            try:
                self.proc.proc.stdin.write(b"stop\n")
                self.proc.proc.stdin.flush()
                self.proc.proc.stdin.close()
            except OSError:
                pass
        return self.wait_done(timeout)


class Clients:
    """Starts our producer/consumer programs and mqadmin batches on one line's client jars."""

    def __init__(self, line: Line, root: Path) -> None:
        self.line = line
        self.root = root
        self._n = 0

    def _proc(self, kind: str, main: str, args: dict[str, object], stdin: bool = False,
              heap_mb: int = 128) -> JavaProc:
        self._n += 1
        name = f"{kind}-{self._n}"
        home = _home(self.root, name, self.line)
        argv = [str(a) for k, v in args.items() for a in (f"--{k}", v)]
        return JavaProc(name, home, java_argv(heap_mb, self.line.client_cp(), main, *argv, home=home, props=QUIET),
                        stdin=stdin).start()

    def producer(self, namesrv: str, topic: str, count: int, **kw: object) -> ClientRun:
        """`stdin-stop=True`: it also ends before its next key once ClientRun.stop() tells it to."""
        return ClientRun(self._proc("producer", "rmqinterop.Producer",
                                    {"namesrv": namesrv, "topic": topic, "count": count, **kw},
                                    stdin=bool(kw.get("stdin-stop"))))

    def consumer(self, namesrv: str, topic: str, group: str, **kw: object) -> ClientRun:
        return ClientRun(self._proc("consumer", "rmqinterop.Consumer",
                                    {"namesrv": namesrv, "topic": topic, "group": group, **kw}, stdin=True))

    def go(self, mode: str, namesrv: str, topic: str, **kw: object) -> ClientRun:
        """Our Go program (tests/interop/go) on the official Go client: `produce` or `consume`, same lines."""
        self._n += 1
        name = f"go-{mode}-{self._n}"
        home = self.root / name
        argv = [str(GO_BIN), mode, "-namesrv", namesrv, "-topic", topic,
                *[str(a) for k, v in kw.items() for a in (f"-{k}", v)]]
        return ClientRun(JavaProc(name, home, argv, stdin=mode == "consume" or bool(kw.get("stdin-stop"))).start())

    def mqadmin(self, commands: list[list[str]], tools_yml: str | None = None, timeout: float = 300) -> list[str]:
        """Run mqadmin commands (each a list of words, without `mqadmin`) in one JVM; their outputs in order.
        `tools_yml`: the contents of $ROCKETMQ_HOME/conf/tools.yml (mqadmin's stock ACL credentials)."""
        self._n += 1
        home = _home(self.root, f"mqadmin-{self._n}", self.line)
        if tools_yml is not None:
            (home / "conf" / "tools.yml").write_text(tools_yml)
        argv = java_argv(128, self.line.client_cp(), "rmqinterop.AdminBatch", home=home, props=QUIET)
        stdin = "".join("\t".join(c) + "\n" for c in commands)
        done = subprocess.run(argv, input=stdin.encode(), cwd=home, capture_output=True, timeout=timeout,
                              env={**os.environ, "ROCKETMQ_HOME": str(home)})
        out = done.stdout.decode(errors="replace")
        results: list[str] = []
        for i in range(len(commands)):
            begin, end = f"=== BEGIN {i}\n", f"=== END {i}\n"
            if begin not in out or end not in out:
                raise RuntimeError(f"mqadmin batch stopped at command {i} ({commands[i]}): "
                                   f"{out[-3000:]}{done.stderr.decode(errors='replace')[-3000:]}")
            results.append(out.split(begin, 1)[1].split(end, 1)[0])
        return results


def temp_root(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix))
