"""`python -m service.monitoring` without the `helm` extra (pyyaml and the chart's test tools made unimportable, as
in an environment that installed only the package): `--help` works, and a run says which extra to install instead
of a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# what the `helm` extra installs, as import names
HELM_EXTRA_MODULES = ("yaml", "helm_python", "kubernetes_validate")


def _without_helm_extra(*args: str) -> subprocess.CompletedProcess:
    code = ("import runpy, sys\n"
            f"for m in {HELM_EXTRA_MODULES!r}: sys.modules[m] = None  # import m raises ModuleNotFoundError\n"
            f"sys.argv = ['python -m service.monitoring', *{list(args)!r}]\n"
            "runpy.run_module('service.monitoring', run_name='__main__', alter_sys=True)\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)


def test_help_works_without_the_helm_extra_and_names_it():
    r = _without_helm_extra("--help")
    assert r.returncode == 0, r.stderr
    assert "usage: python -m service.monitoring" in r.stdout and "pip install -e '.[helm]'" in r.stdout


def test_a_run_without_the_helm_extra_says_which_extra_to_install():
    for args in ((), ("--check",)):
        r = _without_helm_extra(*args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr
        assert r.stderr.strip() == ("python -m service.monitoring: the module 'yaml' is not installed; it comes with "
                                    "the `helm` extra: pip install -e '.[helm]'")
