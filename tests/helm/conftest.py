"""Fixtures of the chart tests (helpers in chartkit.py, a unique module name beside this file)."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

# Not importorskip: CI must install the [helm] extra (helm-python-sdk, kubernetes-validate); a missing
# package has to fail loudly rather than skip the chart checks.
import helm_python as helm
import pytest
import yaml

# chartkit sits beside this file; make it importable under --import-mode=importlib too.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from chartkit import CHART_DIR, NAMESPACE, RELEASE, Rendered  # noqa: E402


@pytest.fixture(scope="session")
def chart():
    with helm.Chart.load(CHART_DIR) as loaded:
        yield loaded


@pytest.fixture(scope="session")
def render(chart):
    def _render(values: dict[str, Any] | None = None, *, check_schema: bool = True) -> Rendered:
        values = copy.deepcopy(values or {})
        if check_schema:
            chart.validate_schema(values)
        manifests = chart.render(values, name=RELEASE, namespace=NAMESPACE)
        out = Rendered(values=values, merged=chart.merge_values(values))
        for path, text in sorted(manifests.items()):
            if path.endswith("NOTES.txt"):
                out.notes = text
                continue
            for doc in yaml.safe_load_all(text):
                if doc:
                    out.docs.append(doc)
                    out.sources[id(doc)] = path
        return out

    return _render
