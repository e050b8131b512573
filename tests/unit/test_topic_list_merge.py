"""The all-topics walk sorts its pages as they come (service/store/routes.py, _add_sorted_run / _merged): the result
must be exactly sorted(set(names)) whatever the page sizes and order, duplicates across pages included."""

import random

import pytest

from service.store.routes import _add_sorted_run, _merged


@pytest.mark.parametrize("seed", range(30))
def test_pages_merged_as_they_come_give_the_sorted_set(seed):
    rng = random.Random(seed)
    names = [f"T{rng.randrange(5000)}" for _ in range(rng.randrange(0, 4000))]  # repeats: a cursor may return twice
    runs: list[list[str]] = []
    seen: set[str] = set()
    i = 0
    while i < len(names):
        page = names[i:i + rng.randrange(1, 700)]
        i += len(page)
        seen.update(page)
        _add_sorted_run(runs, page)
        assert all(len(a) > len(b) for a, b in zip(runs, runs[1:], strict=False)), "runs shrink from first to last"
        assert all(r == sorted(r) for r in runs)
    assert _merged(runs, seen) == sorted(set(names))


def test_no_page_at_all():
    assert _merged([], set()) == []
