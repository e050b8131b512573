"""Planted bugs, one per class the designs risk (issue 41, item 5): each is a patch in planted/, applied to a copy of
the source tree (service/ and lua/) in a temporary folder; the scenario that should catch it runs its workers from
that copy (PYTHONPATH), never from this checkout, so no switch or test-only code path exists in the product.

    python -m tests.robustness --planted memory-answer-kept      # one, printing which check failed
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.robustness.cluster import ROOT
from tests.robustness.scenario import Scenario, catalogue

PATCHES = Path(__file__).resolve().parent / "planted"


@dataclass(frozen=True)
class Planted:
    name: str
    scenario: str  # the catalogue's scenario that runs it
    what: str  # the class of bug (issue 41, item 5)


PLANTED = {p.name: p for p in [
    Planted("cache-misses-invalidation", "pubsub-kill", "a cache that misses an invalidation"),
    Planted("unregister-not-applied", "worker-kill", "an acknowledged unregistration not applied"),
    Planted("heartbeat-never-written", "flush-lag", "an acknowledged heartbeat never written"),
    Planted("memory-answer-kept", "broker-pause", "an answer from memory kept past a change to its broker"),
    Planted("expiry-ignores-pending", "flush-lag", "an expiry that ignores heartbeats still on their way"),
    Planted("expiry-trusts-deadline", "flush-lag", "an expiry that trusts a deadline the batched heartbeats outran"),
    Planted("fill-keeps-stale", "hot-topics", "a cache fill that keeps a route read before a change"),
]}
# the rest: python -m tests.robustness --planted all (memory-answer-kept's failing history is re-checked in CI too)
IN_CI = ("heartbeat-never-written", "fill-keeps-stale")


def tree_with(name: str) -> Path:
    """A copy of service/ and lua/ (as the package's service.lua) with planted/<name>.patch applied, in a temporary
    folder the caller removes."""
    tmp = Path(tempfile.mkdtemp(prefix=f"nsrv-planted-{name}-"))
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "service", tmp / "service", ignore=ignore)
    shutil.copytree(ROOT / "lua", tmp / "lua", ignore=ignore)
    (tmp / "service" / "lua").symlink_to(tmp / "lua", target_is_directory=True)
    patch = PATCHES / f"{name}.patch"
    try:
        subprocess.run(["patch", "-p1", "-s", "-d", str(tmp), "-i", str(patch)], check=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return tmp


def scenario_for(name: str, seed: int = 1) -> Scenario:
    return catalogue(seed)[PLANTED[name].scenario]
