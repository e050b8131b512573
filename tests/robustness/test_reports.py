"""Saved histories checked again offline (as etcd's TestDataReports): the checker must keep reaching the same
verdicts on histories it judged before — the finding it caught (before its fix), planted bugs it caught, and faults
the product passed. testdata/expected.json says what each one must give and why."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.robustness import checks, porcupine
from tests.robustness.history import History

pytestmark = pytest.mark.robustness
DATA = Path(__file__).resolve().parent / "testdata"
EXPECTED = orjson.loads((DATA / "expected.json").read_bytes())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_saved_history(name, checker, tmp_path):
    want = EXPECTED[name]
    hist = History.load(DATA / name)
    verdicts = {v["name"]: v for v in porcupine.check(checks.prepare(hist), tmp_path)}
    assert {k: v["result"] for k, v in verdicts.items()} == {"staleness": want["staleness"],
                                                            "session": want["session"]}, want["why"]
    for v in verdicts.values():
        if v["result"] != "Ok":  # a failure always comes with Porcupine's picture of it
            assert v["failed_partitions"] and Path(v["html"]).stat().st_size > 1000
    missing = checks.liveness(hist)
    assert sorted({line.split()[0] for line in missing}) == want["liveness"], missing
