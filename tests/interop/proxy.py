"""RocketMQ 5's Proxy (rocketmq-proxy 5.5.0, cluster mode) and the gRPC clients behind it as test peers: the Proxy
in a JVM of its own reading routes from the NameServer its `namesrvAddr` names; Apache's Java gRPC client
(rocketmq-client-java 5.0.8, our program tests/interop/java/grpc5) in one JVM; the README's Python examples
(rocketmq-python-client, the `interop` extra) as subprocesses, run from the README's own command lines.
"""

from __future__ import annotations

import json
import os
import random
import re
import shlex
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.interop import rocketmq as rmq

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
MODULES = ("proxy5", "grpc5")


def _classpath(module: str) -> list[str]:
    path = rmq.JAVA_DIR / module / "target" / "classpath.txt"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: build the harness (mvn -B -q -f {rmq.JAVA_DIR}/pom.xml package)")
    return path.read_text().strip().split(os.pathsep)


def built() -> bool:
    return all((rmq.JAVA_DIR / m / "target" / "classpath.txt").is_file() for m in MODULES)


def listen_port_outside_ephemeral_range() -> int:
    """A port free on every interface and below the kernel's ephemeral range. The Proxy binds 0.0.0.0: a port
    tests.redis_server.free_port() picks (an ephemeral one) may meanwhile be the local port of some outgoing
    connection (brokers, clients, Redis pools all make them), and the Proxy then dies with "Address already in
    use" (seen in CI)."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(10_000, max(low, 10_001))
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in 10000..{low - 1}")


class Proxy(rmq.JavaProc):
    """ProxyStartup -pm cluster with a generated rmq-proxy.json: routes from `namesrv` only (codes 105 and 106),
    gRPC and remoting ports of its own. It binds every interface (no setting narrows that); `remotingAccessAddr` is
    the address it gives remoting clients as the broker's in their routes (default empty), `localServeAddr` the one
    it knows itself by (default: the host's first address): both loopback. Routes are refreshed every second while
    used (default 20 s), so a NameServer killed mid-run is met within the run."""

    def __init__(self, root: Path, label: str, namesrv: str, cluster: str, **config: object) -> None:
        self.grpc_port = listen_port_outside_ephemeral_range()
        self.remoting_port = self.grpc_port
        while self.remoting_port == self.grpc_port:
            self.remoting_port = listen_port_outside_ephemeral_range()
        self.label = label
        home = root / f"proxy-{label}"
        home.mkdir(parents=True, exist_ok=True)
        conf = {"rocketMQClusterName": cluster, "namesrvAddr": namesrv, "grpcServerPort": self.grpc_port,
                "remotingListenPort": self.remoting_port, "remotingAccessAddr": "127.0.0.1",
                "localServeAddr": "127.0.0.1",
                "topicRouteServiceCacheRefreshSeconds": 1, **config}
        self.conf_path = home / "rmq-proxy.json"
        self.conf_path.write_text(json.dumps(conf, indent=2))
        cp = os.pathsep.join([str(rmq.LINE5.logging), *_classpath("proxy5")])
        super().__init__(f"proxy-{label}", home, rmq.java_argv(
            256, cp, "org.apache.rocketmq.proxy.ProxyStartup", "-pc", str(self.conf_path), "-pm", "cluster",
            home=home))

    @property
    def grpc(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def remoting(self) -> str:
        return f"127.0.0.1:{self.remoting_port}"

    def wait_up(self, timeout: float = 90) -> Proxy:
        def up() -> bool:
            if not self.alive:
                raise RuntimeError(f"{self.name} exited: {self.tail()}")
            if "rocketmq-proxy startup successfully" not in self.output():
                return False
            for port in (self.grpc_port, self.remoting_port):
                with socket.socket() as s:
                    s.settimeout(0.5)
                    if s.connect_ex(("127.0.0.1", port)) != 0:
                        return False
            return True

        rmq.wait_until(up, timeout, f"{self.name} up")
        return self


@dataclass
class GrpcRun(rmq.ClientRun):
    """The Java gRPC program's run (tests/interop/java/grpc5: GrpcClients), its lines parsed; lines, failures and
    stop (a "stop" line on its stdin) as the remoting programs'."""

    def acked(self) -> set[str]:  # type: ignore[override]
        return {p[1] for p in self.lines("OK")}

    def received(self, consumer: str) -> set[str]:  # type: ignore[override]
        """Keys delivered to the `push` or `simple` consumer (redeliveries included once)."""
        return {p[2] for p in self.lines("RECV") if p[1] == consumer}

    def probes(self) -> dict[tuple[str, str], str]:
        """(endpoint, send|simple) -> the outcome printed."""
        return {(p[1], p[2]): " ".join(p[3:]) for p in self.lines("PROBE")}

    def sent(self) -> bool:
        return bool(self.lines("SENT"))

    def done(self) -> bool:
        return "DONE" in self.proc.output().splitlines()

    def wait_started(self, timeout: float = 90) -> GrpcRun:
        def started() -> bool:
            if not self.proc.alive and not self.lines("STARTED") and "STARTED" not in self.proc.output():
                raise RuntimeError(f"{self.proc.name} died: {self.proc.tail()}")
            return "STARTED" in self.proc.output().splitlines()

        rmq.wait_until(started, timeout, f"{self.proc.name} started")
        return self

    def wait_done(self, timeout: float = 60) -> GrpcRun:
        super().wait_done(timeout)
        return self


def grpc_clients(root: Path, name: str, **args: object) -> GrpcRun:
    """Start GrpcClients (producer, SimpleConsumer, PushConsumer in one JVM; see its javadoc for the arguments)."""
    home = root / name
    home.mkdir(parents=True, exist_ok=True)
    cp = os.pathsep.join([str(rmq.JAVA_DIR / "grpc5" / "target" / "classes"), *_classpath("grpc5")])
    argv = [str(a) for k, v in args.items() for a in (f"--{k}", v)]
    proc = rmq.JavaProc(name, home, rmq.java_argv(128, cp, "rmqinterop.grpc.GrpcClients", *argv, home=home),
                        stdin=True)
    return GrpcRun(proc.start())


# -- the README's Python section, run as printed ---------------------------------------------------------------

@dataclass(frozen=True)
class ReadmePython:
    """What the README tells a Python developer: the pinned install, the environment, the two commands."""

    install: list[str]
    env: dict[str, str]
    consumer: list[str]
    producer: list[str]


def readme_python() -> ReadmePython:
    """The README's shell block that installs rocketmq-python-client: its `pip install`, `export` and
    `python examples/python/…` lines (comments dropped, words split as a shell would)."""
    text = README.read_text()
    blocks = re.findall(r"```bash[^\n]*\n(.*?)```", text, flags=re.S)
    block = next(b for b in blocks if "pip install rocketmq-python-client" in b)
    install: list[str] = []
    env: dict[str, str] = {}
    commands: dict[str, list[str]] = {}
    for line in block.splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        if words[0] == "export":
            k, v = words[1].split("=", 1)
            env[k] = v
        elif words[:2] == ["pip", "install"]:
            install = words
        elif words[0] == "python" and len(words) > 1 and words[1].startswith("examples/python/"):
            commands[Path(words[1]).stem] = words
        else:
            raise AssertionError(f"a line of the README's Python block the test does not know how to run: {line!r}")
    return ReadmePython(install, env, commands["consumer"], commands["producer"])


def example_listings() -> dict[str, str]:
    """examples/python/*.py by name, and whether the README prints each one whole."""
    return {p.name: p.read_text() for p in sorted((REPO / "examples" / "python").glob("*.py"))}


@dataclass
class PyRun:
    """One of the Python examples as a subprocess (output to a file; HOME of its own: the client logs to
    ~/logs/rocketmq_python/rocketmq_client.log)."""

    name: str
    home: Path
    proc: subprocess.Popen

    @property
    def log_path(self) -> Path:
        return self.home / f"{self.name}.out"

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def client_log(self) -> str:
        path = self.home / "logs" / "rocketmq_python" / "rocketmq_client.log"
        return path.read_text(errors="replace") if path.is_file() else ""

    def words(self, tag: str) -> list[list[str]]:
        return [ln.split(" ") for ln in self.output().splitlines() if ln.startswith(tag + " ")]

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)
            raise AssertionError(f"{self.name} still running after {timeout:.0f} s: {self.output()[-2000:]}") from None

    def interrupt(self, timeout: float = 30) -> int:
        """Ctrl-C, as the README says to stop the consumer."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        return self.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


def run_example(argv: list[str], env: dict[str, str], root: Path, name: str) -> PyRun:
    """Run a README command line: `python` is this interpreter (the virtualenv with the `interop` extra), the
    working directory the repository (the README's paths are relative to it)."""
    assert argv[0] == "python"
    home = root / name
    home.mkdir(parents=True, exist_ok=True)
    out = open(home / f"{name}.out", "wb")  # noqa: SIM115 - owned by the child for its life
    try:
        proc = subprocess.Popen([sys.executable, *argv[1:]], cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL,
                                env={**os.environ, "HOME": str(home), "PYTHONUNBUFFERED": "1", **env})
    finally:
        out.close()
    return PyRun(name, home, proc)
