"""The robustness tier's fixtures: where failure reports go (printed, so CI's log names the folder), and the tools it
needs (redis-server; Go to build the Porcupine checker): missing in CI is a failure, never a skip."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import need
from tests.robustness import porcupine

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def reports() -> Path:
    """NAMESRV_ROBUSTNESS_REPORTS, else robustness-reports/ in the checkout (ignored by git)."""
    path = Path(os.environ.get("NAMESRV_ROBUSTNESS_REPORTS") or ROOT / "robustness-reports").resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def checker() -> Path:
    need("go")
    need("redis-server")
    return porcupine.binary()


OUTCOMES: list = []  # every scenario's outcome this session (test_scenarios appends), summed up at the end


def pytest_terminal_summary(terminalreporter) -> None:
    """One line per scenario in CI's log: operations checked, the staleness observed against Δ, the report."""
    if not OUTCOMES:
        return
    tr = terminalreporter
    tr.section("robustness")
    total = 0
    for o in OUTCOMES:
        total += o.checked_ops()
        s = o.staleness
        verdict = "ok" if o.ok else "FAILED"
        tr.write_line(f"{o.scenario.name}: {verdict} {o.seconds:.1f} s, {o.checked_ops()} operations "
                      f"checked; staleness p50/p99/max {s.get('p50_ms')}/{s.get('p99_ms')}/{s.get('max_ms')} ms "
                      f"(Δ {o.scenario.settings.staleness_ms} ms)" + (f"; report {o.report}" if o.report else ""))
    tr.write_line(f"{total} operations checked by Porcupine (each twice: staleness, session)")
