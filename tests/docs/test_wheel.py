"""The wheel, as docs/skew-report.md tells operators to ship it to Spark executors: `python -m build --wheel` in the
clone (the doc's own line), installed with pip into a fresh virtualenv (its dependencies resolved by pip, as on an
executor host), then run from there and not from the source tree: `namesrv --help`, the package data (every Lua
script, the console's templates and assets) read from the installed package, and `namesrv serve` answering a
registration and a route read, which runs the shipped Lua scripts."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.docs.doccheck import REPO, blocks
from tests.redis_server import free_port

SKEW_DOC = REPO / "docs" / "skew-report.md"
PACKAGE_SOURCES = ("pyproject.toml", "README.md", "LICENSE", "service", "lua")  # .dockerignore's allow-list


def shipping_block() -> list[list[str]]:
    """The commands of the doc's block that builds and installs the wheel (comments dropped)."""
    block = next(b for b in blocks(SKEW_DOC) if any("python -m build" in x for x in b.lines))
    return [shlex.split(c.text, comments=True) for c in block.commands()]


def _run(args: list, cwd: Path, timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    r = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=timeout, **kw)
    assert r.returncode == 0, f"{args}: exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


CHECK_PACKAGE_DATA = """
import json
from importlib import resources
from pathlib import Path
import service
from service.http import console
from service.store import scripts
root = Path(str(resources.files("service.lua")))
print(json.dumps({
    "service": service.__file__,
    "lua": sorted(str(p.relative_to(root)) for p in root.rglob("*.lua")),
    "scripts": sorted(scripts.load_all()),
    "templates": sorted(console.environment().list_templates()),
    "assets": sorted(console.assets()),
}))
"""

def test_the_sources_copied_are_what_the_image_build_copies():
    allowed = [x[1:] for x in (REPO / ".dockerignore").read_text().split() if x.startswith("!")]
    assert sorted(allowed) == sorted(PACKAGE_SOURCES)


def test_the_wheel_the_docs_ship_builds_installs_and_runs_from_a_fresh_virtualenv(tmp_path):
    build, *rest = shipping_block()
    assert build == ["python", "-m", "build", "--wheel"], build
    doc_wheel = next(Path(w).name for cmd in rest for w in cmd if w.endswith(".whl"))
    assert any(cmd[:2] == ["pip", "install"] for cmd in rest), rest

    # the doc's build line, run in a copy of what the package is built from (what .dockerignore lets into the image
    # build too), so the clone gets no build/ and the wheel can rely on nothing else of the clone
    src = tmp_path / "src"
    src.mkdir()
    for name in PACKAGE_SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif (REPO / name).exists():
            shutil.copy2(REPO / name, src / name)
    _run([sys.executable, "-m", "build", "--wheel", "--outdir", tmp_path / "dist"], cwd=src)
    wheels = list((tmp_path / "dist").glob("*.whl"))
    assert [w.name for w in wheels] == [doc_wheel], "the doc names another wheel than the build makes"

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", venv], cwd=tmp_path)
    py, namesrv = venv / "bin" / "python", venv / "bin" / "namesrv"
    _run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", wheels[0]], cwd=tmp_path)

    # from tmp_path, with nothing of the clone on sys.path: only the installed package can answer
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")
           and not k.startswith("NAMESRV_")}
    assert "serve" in _run([namesrv, "--help"], cwd=tmp_path, env=env).stdout
    data = json.loads(_run([py, "-c", CHECK_PACKAGE_DATA], cwd=tmp_path, env=env).stdout)
    assert data["service"].startswith(str(venv)), data["service"]
    assert data["lua"] == sorted(str(p.relative_to(REPO / "lua")) for p in (REPO / "lua").rglob("*.lua"))
    assert data["scripts"], "no Lua script loads from the installed package"
    templates = REPO / "service" / "http" / "console_templates"
    assert data["templates"] == sorted(p.name for p in templates.iterdir() if p.is_file())
    assert data["assets"], "no console asset in the installed package"

    port, remoting = free_port(), free_port()
    proc = subprocess.Popen([namesrv, "serve", "--host", "127.0.0.1", "--port", str(port), "--remoting-port",
                             str(remoting)], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(base + "/readyz", timeout=1):
                    break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read().decode()[-3000:]
                time.sleep(0.1)
        body = {"clusterName": "C", "brokerName": "b", "brokerId": 0, "brokerAddr": "10.0.0.1:10911",
                "haServerAddr": "10.0.0.1:10912", "dataVersion": {"timestamp": 1, "counter": 1, "stateVersion": 0},
                "topicConfigTable": {"T": {"readQueueNums": 2, "writeQueueNums": 2, "perm": 6}}}
        req = urllib.request.Request(base + "/v1/brokers/register", data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=5).close()
        with urllib.request.urlopen(base + "/v1/topics/T/route", timeout=5) as r:
            assert json.loads(r.read())["queueDatas"][0]["writeQueueNums"] == 2
        with urllib.request.urlopen(base + "/console/", timeout=5) as r:
            assert b"<html" in r.read().lower()
    finally:
        proc.terminate()
        proc.wait(30)


def test_every_package_of_the_source_tree_is_listed_for_the_wheel():
    """pyproject lists the packages by hand (the Lua folders are mapped from lua/): a package left out is silently
    missing from the wheel (service.monitoring was, until a split of service/models.py made us look)."""
    import tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    in_tree = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "service").rglob("__init__.py")}
    assert in_tree - listed == set(), "packages missing from pyproject's [tool.setuptools] packages"
