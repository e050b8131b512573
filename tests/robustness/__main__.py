"""The exploratory mode: every fault, random seeds, for as long as asked; every failure leaves a report folder.

    python -m tests.robustness --duration 600 [--seed N] [--scenario NAME ...] [--reports DIR]
    python -m tests.robustness --planted all|NAME ...      # the planted bugs: each must make its scenario fail
    python -m tests.robustness --check DIR/history.json.gz # check a saved history again (offline)

A seed reproduces a run's choices (which faults, which traffic); `--seed N` with `--duration` runs scenario after
scenario with seeds N, N+1, ...; without it the seeds are random (each printed).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import sys
import time
from pathlib import Path

from tests.robustness import checks, porcupine
from tests.robustness.faults import FaultMissed
from tests.robustness.history import History
from tests.robustness.planted import PLANTED, scenario_for, tree_with
from tests.robustness.scenario import catalogue, run_scenario


async def explore(args: argparse.Namespace) -> int:
    names = args.scenario or list(catalogue())
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    deadline = time.monotonic() + args.duration
    failed = runs = ops = 0
    pick = random.Random(seed)
    while time.monotonic() < deadline:
        name = pick.choice(names)
        sc = catalogue(seed)[name]
        print(f"== {name} seed {seed}", flush=True)
        try:
            outcome = await run_scenario(sc, args.reports)
        except FaultMissed as exc:
            print(f"   fault missed: {exc}")
            seed += 1
            continue
        runs += 1
        ops += outcome.checked_ops()
        print(outcome.summary(), flush=True)
        failed += not outcome.ok
        seed += 1
    print(f"{runs} runs, {failed} failed, {ops} operations checked")
    return 1 if failed else 0


async def planted(args: argparse.Namespace) -> int:
    names = list(PLANTED) if args.planted == ["all"] else args.planted
    missed = []
    for name in names:
        tree = tree_with(name)
        sc = scenario_for(name, args.seed or 1)
        print(f"== planted {name} ({PLANTED[name].what}) in scenario {sc.label}", flush=True)
        try:
            outcome = await run_scenario(sc, args.reports, source=tree)
        finally:
            shutil.rmtree(tree, ignore_errors=True)
        print(outcome.summary(), flush=True)
        if outcome.ok:
            missed.append(name)
    print(f"planted bugs not caught: {missed or 'none'}")
    return 1 if missed else 0


def check(args: argparse.Namespace) -> int:
    hist = History.load(args.check)
    verdicts = porcupine.check(checks.prepare(hist), args.check.parent / "recheck")
    for v in verdicts:
        print(v)
    problems = checks.liveness(hist)
    print("\n".join(problems) or "liveness: ok")
    return 0 if all(v["result"] == "Ok" for v in verdicts) and not problems else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.robustness", description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=float, default=600.0, help="seconds of scenarios (exploratory mode)")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--scenario", action="append", help="only these (repeat); default: every one")
    p.add_argument("--reports", type=Path, default=Path("robustness-reports"))
    p.add_argument("--planted", nargs="+", help="run planted bugs: all, or names")
    p.add_argument("--check", type=Path, help="check a saved history.json.gz again")
    args = p.parse_args(argv)
    args.reports = args.reports.resolve()
    if args.check:
        return check(args)
    if args.planted:
        return asyncio.run(planted(args))
    return asyncio.run(explore(args))


if __name__ == "__main__":
    sys.exit(main())
