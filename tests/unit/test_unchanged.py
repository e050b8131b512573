"""UnchangedOdds (service/core/unchanged.py): when trying a registration as unchanged first is worth a Redis call."""

from __future__ import annotations

from service.core.unchanged import UnchangedOdds


def tries(odds: UnchangedOdds, n: int, size: int = 34_000) -> int:
    return sum(odds.worth_trying(size) for _ in range(n))


def test_a_cold_start_stops_trying_but_probes_and_large_bodies_are_always_tried():
    odds = UnchangedOdds()
    for _ in range(odds.WINDOW):  # a fleet's first registrations: every try misses
        assert odds.worth_trying(34_000)
        odds.tried(False)
    assert tries(odds, 80) == 80 // odds.PROBE and odds.skipped == 80 - 80 // odds.PROBE
    assert odds.worth_trying(odds.SMALL + 1)  # not decoding a large body is what the path is for


def test_the_odds_recover_when_the_probes_apply():
    odds = UnchangedOdds()
    for _ in range(odds.WINDOW):
        odds.tried(False)
    probes = 0
    while not all(odds.worth_trying(34_000) for _ in range(odds.PROBE)):
        odds.tried(True)  # a probe: the fleet re-registers the same bytes
        probes += 1
        assert probes <= odds.WINDOW
    assert probes == int(odds.LOW * odds.WINDOW)  # a quarter of the window applied: tried again every time


def test_a_steady_fleet_is_always_tried():
    odds = UnchangedOdds()
    for i in range(500):
        assert odds.worth_trying(34_000)
        odds.tried(i % 3 != 0)  # two in three apply
    assert odds.skipped == 0
