"""Planted bugs make the tier fail (issue 41, item 5). Each is a patch (planted/) applied to a copy of the source
tree; the scenario runs its workers from that copy. CI runs two of them (about 25-35 s each); every one, with the
failure each gives, is in tests/robustness/README.md and runs with `python -m tests.robustness --planted all`."""

from __future__ import annotations

import shutil

import pytest

from tests.robustness.planted import IN_CI, PLANTED, scenario_for, tree_with
from tests.robustness.scenario import run_scenario

pytestmark = [pytest.mark.robustness, pytest.mark.timeout(300)]


def test_every_planted_bug_applies_to_this_tree():
    """A patch that no longer applies would make its planted bug a silent no-op."""
    for name in PLANTED:
        tree = tree_with(name)
        try:
            planted = [*(tree / "service").rglob("*.py"), *(tree / "lua").rglob("*.lua")]
            assert "PLANTED" in "".join(p.read_text() for p in planted)
        finally:
            shutil.rmtree(tree)


@pytest.mark.parametrize("name", IN_CI)
async def test_planted_bug_fails_the_tier(name, reports, checker):
    tree = tree_with(name)
    try:
        outcome = await run_scenario(scenario_for(name), reports / "planted", source=tree)
    finally:
        shutil.rmtree(tree)
    print(f"planted {name} ({PLANTED[name].what}):\n{outcome.summary()}")
    assert not outcome.ok, f"planted bug {name} ({PLANTED[name].what}) was not caught"
    assert outcome.report is not None and (outcome.report / "history.json.gz").exists()
    if any(v["result"] != "Ok" for v in outcome.verdicts):
        assert any(v.get("html") for v in outcome.verdicts)  # Porcupine's visualisation is in the report
