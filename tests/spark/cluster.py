"""A Spark standalone cluster on loopback for tests and benchmarks: one master and N workers started with
`spark-class` from the pyspark wheel (SPARK_HOME = the wheel's directory), on free ports, logs and work dirs in
a temp dir, started and stopped within bounded times by polling the master's JSON endpoint.

    with StandaloneCluster(workers=2).start() as cluster:
        ...  # cluster.master_url == "spark://127.0.0.1:<port>"
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.redis_server import free_port

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@dataclass
class StandaloneCluster:
    workers: int = 2
    cores: int = 1
    memory: str = "1g"
    root: Path | None = None
    master_port: int = field(default_factory=free_port)
    master_ui_port: int = field(default_factory=free_port)
    procs: list[subprocess.Popen] = field(default_factory=list)
    _own_root: bool = False

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def master_json_url(self) -> str:
        return f"http://127.0.0.1:{self.master_ui_port}/json/"

    def worker_dir(self, i: int) -> Path:
        assert self.root is not None
        return self.root / f"worker-{i}"

    def _env(self) -> dict[str, str]:
        assert self.root is not None
        env = dict(os.environ)
        env.update(
            SPARK_HOME=str(spark_home()),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOG_DIR=str(self.root / "logs"),
            SPARK_NO_DAEMONIZE="1",
            SPARK_DAEMON_MEMORY="256m",
        )
        return env

    def _spawn(self, name: str, *args: str) -> None:
        assert self.root is not None
        log = open(self.root / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        cmd = [str(spark_home() / "bin" / "spark-class"), *args]
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self._env(),
                                cwd=self.root, start_new_session=True)
        proc.log_file = log  # type: ignore[attr-defined]
        proc.name = name  # type: ignore[attr-defined]
        self.procs.append(proc)

    def state(self) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(self.master_json_url, timeout=2) as r:
                return json.loads(r.read())
        except (OSError, ValueError):
            return None

    def _wait(self, what: str, ready, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{p.name} exited with {p.returncode}: {self.log_tail(p.name)}")  # type: ignore[attr-defined]
            st = self.state()
            if st is not None and ready(st):
                return st
            time.sleep(0.2)
        raise TimeoutError(f"Spark standalone {what} not ready in {timeout:.0f}s; master log: "
                           f"{self.log_tail('master')}")

    def log_tail(self, name: str, chars: int = 2000) -> str:
        assert self.root is not None
        p = self.root / f"{name}.log"
        return p.read_text(errors="replace")[-chars:] if p.exists() else ""

    def start(self, timeout: float = 90.0) -> StandaloneCluster:
        if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
            raise FileNotFoundError("java is not installed (a JRE 17+ is needed for Spark)")
        if self.root is None:
            self.root = Path(tempfile.mkdtemp(prefix="spark-standalone-"))
            self._own_root = True
        (self.root / "logs").mkdir(parents=True, exist_ok=True)
        try:
            self._spawn("master", MASTER_CLASS, "--host", "127.0.0.1", "--port", str(self.master_port),
                        "--webui-port", str(self.master_ui_port))
            self._wait("master", lambda st: st.get("status") == "ALIVE", timeout)
            for i in range(self.workers):
                self.worker_dir(i).mkdir(parents=True, exist_ok=True)
                self._spawn(f"worker-{i}", WORKER_CLASS, "--host", "127.0.0.1", "--cores", str(self.cores),
                            "--memory", self.memory, "--webui-port", str(free_port()),
                            "--work-dir", str(self.worker_dir(i)), self.master_url)
            self._wait(f"workers ({self.workers})",
                       lambda st: sum(w.get("state") == "ALIVE" for w in st.get("workers", [])) == self.workers,
                       timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 15.0) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(5)
            p.log_file.close()  # type: ignore[attr-defined]
        self.procs.clear()

    def cleanup(self) -> None:
        self.stop()
        if self._own_root and self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> StandaloneCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()
