"""Real `namesrv serve` processes on loopback over the session's real redis-server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest

from tests.redis_server import free_port
from tests.topology.conftest import make_cluster_topology, make_sentinel_topology  # noqa: F401 (fixtures)


class Namesrv:
    def __init__(self, redis_url: str, prefix: str, workers: int = 1, port: int | None = None, **env: object) -> None:
        self.port = port or free_port()
        self.remoting_port = int(env.pop("remoting_port", free_port()))
        self.url = f"http://127.0.0.1:{self.port}"
        full_env = {**os.environ, "NAMESRV_REDIS_URL": redis_url, "NAMESRV_KEY_PREFIX": prefix,
                    "NAMESRV_HOST": "127.0.0.1", "NAMESRV_PORT": str(self.port), "NAMESRV_WORKERS": str(workers),
                    "NAMESRV_REMOTING_PORT": str(self.remoting_port),
                    "NAMESRV_SNAPSHOT_INTERVAL_S": "0", "NAMESRV_LOG_LEVEL": "INFO"}
        full_env.update({f"NAMESRV_{k.upper()}": str(v) for k, v in env.items()})
        self.log = open(f"/tmp/namesrv-{self.port}.log", "w+b")  # noqa: SIM115
        self.proc = subprocess.Popen([sys.executable, "-m", "service.cli", "serve"], env=full_env,
                                     stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 60.0) -> Namesrv:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"namesrv exited {self.proc.returncode}: {self.output()}")
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=1) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.05)
        raise TimeoutError(f"namesrv not ready: {self.output()}")

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-4000:]

    def wait_exit(self, timeout: float = 30.0) -> int:
        """The exit status of a worker already sent its signal, without signalling it again (a second SIGTERM that
        lands while the event loop closes meets Python's default handler: -15)."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        return self.proc.returncode

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.wait_exit(timeout)


def refused_start(**settings: object) -> subprocess.CompletedProcess:
    """`namesrv serve` that is expected to refuse to start: its exit status and what it printed. `settings` as
    NAMESRV_* (redis_url="" is embedded); host 127.0.0.1, and no other NAMESRV_ variable of this environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NAMESRV_")}
    env.update({f"NAMESRV_{k.upper()}": str(v) for k, v in {"host": "127.0.0.1", **settings}.items()})
    return subprocess.run([sys.executable, "-m", "service.cli", "serve"], env=env, capture_output=True, text=True,
                          timeout=60)


@pytest.fixture
def namesrv_factory(redis_server):
    started: list[Namesrv] = []
    prefix = "it" + uuid.uuid4().hex[:8]

    def start(workers: int = 1, wait: bool = True, **env) -> Namesrv:
        n = Namesrv(redis_server.url, env.pop("prefix", prefix), workers, **env)
        started.append(n)
        return n.wait_ready() if wait else n

    yield start
    for n in started:
        n.stop()
