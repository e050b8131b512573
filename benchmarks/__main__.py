"""Run every benchmark: `python -m benchmarks` (quick, under 5 minutes here) or `python -m benchmarks --full`.

Each one starts its own redis-server (and workers, and Spark) on loopback and writes JSON, markdown and PNG into
benchmarks/results/; see benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

PLANS = {
    "quick": [["benchmarks.store_bench", "--quick"], ["benchmarks.http_bench", "--quick"],
              ["benchmarks.skew_bench", "--rows", "1000000", "--repeat", "1"]],
    "full": [["benchmarks.store_bench", "--full"], ["benchmarks.http_bench", "--full"],
             ["benchmarks.skew_bench", "--rows", "1000000,2000000,5000000,10000000", "--repeat", "2"],
             ["benchmarks.redis_capacity"], ["benchmarks.faults"], ["benchmarks.failover_bench", "--rounds", "3"],
             ["benchmarks.instructions", "--quick"], ["benchmarks.register_bench", "--quick"]],
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    p.add_argument("--full", action="store_true", help="the longer runs (about 20 minutes)")
    p.add_argument("--skip", action="append", default=[], help="skip a benchmark: store, http, skew (full also: "
                   "redis_capacity, faults, failover, instructions, register)")
    args = p.parse_args(argv)
    failed = []
    for module, *rest in PLANS["full" if args.full else "quick"]:
        name = module.split(".")[1].removesuffix("_bench")
        if name in args.skip:
            continue
        started = time.monotonic()
        print(f"== {name}: python -m {module} {' '.join(rest)}", flush=True)
        code = subprocess.call([sys.executable, "-m", module, *rest])
        print(f"== {name}: exit {code} after {time.monotonic() - started:.0f} s", flush=True)
        if code:
            failed.append(name)
    if failed:
        print("failed: " + ", ".join(failed), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
