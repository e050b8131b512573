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
