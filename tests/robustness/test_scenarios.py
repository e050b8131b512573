"""One scenario per fault class, through real workers on a real Redis, every history checked by Porcupine
(tests/robustness/README.md). A failure prints the scenario's summary and the report folder: the history, Porcupine's
visualisation of the failing partitions and the workers' logs.

The seed is fixed (NAMESRV_ROBUSTNESS_SEED overrides it) so that a CI failure is re-run with the same traffic
choices; `python -m tests.robustness` draws random ones.
"""

from __future__ import annotations

import os

import pytest

from tests.robustness.conftest import OUTCOMES
from tests.robustness.faults import FaultMissed
from tests.robustness.scenario import EXPLORATORY_ONLY, catalogue, run_scenario

pytestmark = [pytest.mark.robustness, pytest.mark.timeout(300)]
SEED = int(os.environ.get("NAMESRV_ROBUSTNESS_SEED", "1"))


async def run_once_more_if_missed(scenario, reports):
    """etcd rejects a run whose fault did not happen as meant rather than pass it: one more try, another seed."""
    try:
        return await run_scenario(scenario, reports)
    except FaultMissed as exc:
        print(f"fault missed ({exc}); again with seed {scenario.seed + 1000}")
        scenario.seed += 1000
        return await run_scenario(scenario, reports)


@pytest.mark.parametrize("name", [n for n in catalogue() if n not in EXPLORATORY_ONLY])
async def test_scenario(name, reports, checker):
    outcome = await run_once_more_if_missed(catalogue(SEED)[name], reports)
    OUTCOMES.append(outcome)
    print(outcome.summary())
    assert outcome.ok, outcome.summary()
