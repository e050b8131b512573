"""The job's Spark session: executors start the interpreter running the job, whatever `python3` is first on
the PATH; and a run prints no pandas-3 FutureWarning."""

from __future__ import annotations

import os
import site
import stat
import subprocess
import sys
import sysconfig
import uuid
import venv
from pathlib import Path

import orjson
import pytest
import redis

from service.skew.session import python_interpreters
from tests.spark.conftest import put_snapshot


def test_interpreters_default_to_this_one_unless_the_user_chose():
    me = sys.executable
    assert python_interpreters({}, {}) == (me, me)
    assert python_interpreters({}, {"PYSPARK_PYTHON": "/opt/py"}) == ("/opt/py", me)
    assert python_interpreters({}, {"PYSPARK_DRIVER_PYTHON": "/opt/drv"}) == (me, "/opt/drv")
    conf = {"spark.pyspark.python": "/c/py", "spark.pyspark.driver.python": "/c/drv"}
    assert python_interpreters(conf, {"PYSPARK_PYTHON": "/opt/py"}) == ("/c/py", "/c/drv")


def make_venv_app(root: Path) -> Path:
    """A virtualenv that sees this interpreter's packages, with a `namesrv` console script as pip writes it.
    It is never activated: only its bin/namesrv is run.

    venv builds it on the *base* interpreter, so system_site_packages alone shows the base's packages, not
    those of a virtualenv this suite may itself run from (a user's usual setup): a .pth file adds this
    interpreter's site directories (their own .pth files included, e.g. the editable install of `service`)."""
    venv.create(root, system_site_packages=True, with_pip=False, symlinks=True)
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(root), "platbase": str(root)}))
    mine = [p for p in dict.fromkeys([*site.getsitepackages(), site.getusersitepackages()]) if Path(p).is_dir()]
    (purelib / "_namesrv_test_parent.pth").write_text(
        "import site; " + "; ".join(f"site.addsitedir({p!r})" for p in mine) + "\n")
    script = root / "bin" / "namesrv"
    script.write_text(
        f"#!{root / 'bin' / 'python'}\nimport sys\nfrom service.cli import main\nsys.exit(main())\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_the_app_virtualenv_sees_this_interpreters_packages(tmp_path):
    """What the test below builds on, checked without Spark: from a base interpreter or from a virtualenv (the
    suite run as a user runs it), the app's virtualenv imports the project and its dependencies."""
    namesrv = make_venv_app(tmp_path / "app")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    p = subprocess.run([str(namesrv.parent / "python"), "-c", "import service.cli, redis, pyspark"], env=env,
                       cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr[-2000:]


@pytest.mark.redis
@pytest.mark.timeout(240)
def test_unactivated_virtualenv_executors_get_its_python(redis_server, tmp_path):
    """`/path/venv/bin/namesrv skew-report` with another python3 first on the PATH: a bare virtualenv with no
    packages, as a system python3 without redis would be. pyspark's default (`python3`) made the executors
    fail with ModuleNotFoundError; they must run the venv's interpreter."""
    namesrv = make_venv_app(tmp_path / "app")
    bare = tmp_path / "bare"
    venv.create(bare, system_site_packages=False, with_pip=False, symlinks=True)
    probe = subprocess.run([str(bare / "bin" / "python3"), "-c", "import redis"], capture_output=True, text=True)
    assert "ModuleNotFoundError" in probe.stderr  # the trap is set

    prefix = "venv" + uuid.uuid4().hex[:8]
    client = redis.Redis.from_url(redis_server.url)
    sec, usec = client.time()
    now = int(sec) * 1000 + int(usec) // 1000
    put_snapshot(client, prefix, now - 1000, [["c", "b1", "T", 4, 4, 6, 0], ["c", "b2", "T", 4, 4, 6, 0]])
    client.close()

    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV", "PYTHONPATH", "SPARK_HOME")}
    env["PATH"] = f"{bare / 'bin'}:{env['PATH']}"
    env["PYTHONWARNINGS"] = "always::FutureWarning"
    out = tmp_path / "report"
    p = subprocess.run(
        [str(namesrv), "skew-report", "--redis-url", redis_server.url, "--key-prefix", prefix, "--since", "1h",
         "--out", str(out), "--master", "local[1]", "--conf", "spark.ui.enabled=false"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=200,
    )
    assert p.returncode == 0, p.stderr[-4000:]
    assert "ModuleNotFoundError" not in p.stderr
    assert "FutureWarning" not in p.stderr, [line for line in p.stderr.splitlines() if "Warning" in line]
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert (summary["window"]["rows"], summary["topics"][0]["topic"]) == (2, "T")
