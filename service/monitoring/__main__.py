"""`python -m service.monitoring [--check]`: write (or check) the files rendered from this package."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXTRA = "helm"  # pyyaml renders the rules; the `helm` extra installs it with the chart's test tools


def outputs() -> dict[Path, Callable[[], str]]:
    """Each rendered file and what renders it (imported here, not at start: `--help` needs no extra)."""
    from service.monitoring import dashboard, rules

    return {
        ROOT / "helm" / "monitoring" / "prometheus-rules.yaml": rules.plain,
        ROOT / "helm" / "templates" / "prometheusrule.yaml": rules.helm_template,
        ROOT / "helm" / "monitoring" / "grafana-dashboard.json": dashboard.render,
    }


def stale() -> list[Path]:
    return [p for p, make in outputs().items() if not p.exists() or p.read_text() != make()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m service.monitoring", description=__doc__,
        epilog=f"Needs the `{EXTRA}` extra (pyyaml): pip install -e '.[{EXTRA}]' in a clone of the repository.")
    parser.add_argument("--check", action="store_true", help="exit 1 when a rendered file is out of date")
    args = parser.parse_args(argv)
    try:
        out = stale()
    except ModuleNotFoundError as e:
        print(f"python -m service.monitoring: the module {e.name!r} is not installed; it comes with the `{EXTRA}` "
              f"extra: pip install -e '.[{EXTRA}]'", file=sys.stderr)
        return 2
    if args.check:
        for p in out:
            print(f"out of date: {p.relative_to(ROOT)} (run python -m service.monitoring)", file=sys.stderr)
        return 1 if out else 0
    made = outputs()
    for p in out:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(made[p]())
        print(f"wrote {p.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
