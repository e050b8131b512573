"""namesrv_gc_pause_seconds: each cyclic collection the worker makes, timed by generation, while hooked."""

import gc

from prometheus_client import generate_latest

from service.metrics import Metrics


def _count(text: str, generation: int) -> float:
    name = f'namesrv_gc_pause_seconds_count{{generation="{generation}"}}'
    line = next(x for x in text.splitlines() if x.startswith(name))
    return float(line.split()[-1])


def test_full_collections_are_counted_and_timed_only_while_hooked():
    m = Metrics()
    before = _count(generate_latest(m.registry).decode(), 2)
    gc.collect()  # not hooked yet
    assert _count(generate_latest(m.registry).decode(), 2) == before == 0
    m.gc_pauses.start()
    m.gc_pauses.start()  # hooked once however often started
    try:
        cycle = [[]]
        cycle[0].append(cycle)  # something for it to find
        del cycle
        gc.collect()
        gc.collect(1)
        text = generate_latest(m.registry).decode()
        full = _count(text, 2)
        assert full >= 1  # ours (and any the interpreter made meanwhile)
        assert _count(text, 1) >= 1
        assert m.gc_pauses.worst[2] > 0
        assert 'namesrv_gc_pause_max_seconds{generation="2"}' in text
    finally:
        m.gc_pauses.stop()
    gc.collect()
    assert _count(generate_latest(m.registry).decode(), 2) == full
