"""A worker raises the cyclic GC's first-generation threshold (service/server.py, tune_gc): decoding a large
registration allocates many short-lived objects, and the default of 700 set off several collections per call."""

from __future__ import annotations

import gc

from service.server import GC_GEN0_THRESHOLD, tune_gc


def test_tune_gc_raises_only_the_first_generation_threshold():
    before = gc.get_threshold()
    try:
        tune_gc()
        assert gc.get_threshold() == (GC_GEN0_THRESHOLD, before[1], before[2]) and GC_GEN0_THRESHOLD > before[0]
    finally:
        gc.set_threshold(*before)
