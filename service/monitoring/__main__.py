"""`python -m service.monitoring [--check]`: write (or check) the files rendered from this package."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from service.monitoring import dashboard, rules

ROOT = Path(__file__).resolve().parents[2]
OUTPUTS = {
    ROOT / "helm" / "monitoring" / "prometheus-rules.yaml": rules.plain,
    ROOT / "helm" / "templates" / "prometheusrule.yaml": rules.helm_template,
    ROOT / "helm" / "monitoring" / "grafana-dashboard.json": dashboard.render,
}


def stale() -> list[Path]:
    return [p for p, make in OUTPUTS.items() if not p.exists() or p.read_text() != make()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m service.monitoring", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 when a rendered file is out of date")
    args = parser.parse_args(argv)
    out = stale()
    if args.check:
        for p in out:
            print(f"out of date: {p.relative_to(ROOT)} (run python -m service.monitoring)", file=sys.stderr)
        return 1 if out else 0
    for p in out:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(OUTPUTS[p]())
        print(f"wrote {p.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
