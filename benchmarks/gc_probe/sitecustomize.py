"""Time the garbage collector in any Python process started with PYTHONPATH=benchmarks/gc_probe.

Python imports `sitecustomize` at start-up; this one times every collection through gc.callbacks and, at a clean
exit, writes one line to $GC_PROBE_DIR/gc-<pid>.txt (default /tmp): the command, seconds spent collecting, how
many collections (full ones apart), the longest one, the process's CPU seconds, the objects tracked, and each
collection over 10 ms (generation@time.monotonic():ms). Used to check whether the worker's larger heap explains
the HTTP route-read gap to the bare aiohttp ceiling (it did not: benchmarks/README.md), and whether collections
fall on a route stream's changes (watch_bench records when its changes ran).

    PYTHONPATH=benchmarks/gc_probe namesrv serve ...   # then SIGTERM it
"""

import atexit
import gc
import os
import sys
import time

_acc = {"seconds": 0.0, "collections": 0, "full": 0, "started": 0.0, "longest": 0.0}
_long: list[str] = []  # collections over 10 ms: "<generation>@<time.monotonic() at its end>:<ms>"


def _on_gc(phase: str, info: dict) -> None:
    if phase == "start":
        _acc["started"] = time.perf_counter()
        return
    took = time.perf_counter() - _acc["started"]
    _acc["seconds"] += took
    _acc["longest"] = max(_acc["longest"], took)
    if took > 0.010:
        _long.append(f"{info.get('generation')}@{time.monotonic():.3f}:{took * 1000:.1f}")
    _acc["collections"] += 1
    _acc["full"] += info.get("generation") == 2


def _report() -> None:
    path = os.path.join(os.environ.get("GC_PROBE_DIR", "/tmp"), f"gc-{os.getpid()}.txt")
    with open(path, "w") as fh:
        fh.write(f"{' '.join(sys.argv)[:80]} gc_seconds={_acc['seconds']:.3f} collections={_acc['collections']} "
                 f"full={_acc['full']} longest_ms={_acc['longest'] * 1000:.1f} cpu_seconds={time.process_time():.3f} "
                 f"objects={len(gc.get_objects())} over_10ms={','.join(_long)}\n")


gc.callbacks.append(_on_gc)
atexit.register(_report)
