"""Time the garbage collector in any Python process started with PYTHONPATH=benchmarks/gc_probe.

Python imports `sitecustomize` at start-up; this one times every collection through gc.callbacks and, at a clean
exit, writes one line to $GC_PROBE_DIR/gc-<pid>.txt (default /tmp): the command, seconds spent collecting, how
many collections (full ones apart), the process's CPU seconds and the objects tracked. Used to check whether the
worker's larger heap explains the HTTP route-read gap to the bare aiohttp ceiling (it did not: benchmarks/README.md).

    PYTHONPATH=benchmarks/gc_probe namesrv serve ...   # then SIGTERM it
"""

import atexit
import gc
import os
import sys
import time

_acc = {"seconds": 0.0, "collections": 0, "full": 0, "started": 0.0}


def _on_gc(phase: str, info: dict) -> None:
    if phase == "start":
        _acc["started"] = time.perf_counter()
        return
    _acc["seconds"] += time.perf_counter() - _acc["started"]
    _acc["collections"] += 1
    _acc["full"] += info.get("generation") == 2


def _report() -> None:
    path = os.path.join(os.environ.get("GC_PROBE_DIR", "/tmp"), f"gc-{os.getpid()}.txt")
    with open(path, "w") as fh:
        fh.write(f"{' '.join(sys.argv)[:80]} gc_seconds={_acc['seconds']:.3f} collections={_acc['collections']} "
                 f"full={_acc['full']} cpu_seconds={time.process_time():.3f} objects={len(gc.get_objects())}\n")


gc.callbacks.append(_on_gc)
atexit.register(_report)
