"""Per-topic traffic weights (`--weights FILE`): JSON {"topic": weight} or CSV topic,weight."""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path
from typing import Any

import orjson

DEFAULT_KEY = "*"  # the weight of topics the file does not name (0 when absent)


def _weight(topic: str, raw: Any, source: str) -> float:
    try:
        w = float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"{source}: weight of topic {topic!r} is not a number: {raw!r}") from None
    if not math.isfinite(w) or w < 0:
        raise ValueError(f"{source}: weight of topic {topic!r} must be a finite number >= 0, got {raw!r}")
    return w


def _is_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def load_weights(path: str | os.PathLike[str]) -> dict[str, float]:
    """Topic -> traffic weight, from JSON ({"topic": weight, ...}) or CSV (topic,weight; header optional).
    The entry "*" (if any) is the weight of topics the file does not name. ValueError on a bad file."""
    p = Path(path)
    text = p.read_text(encoding="utf-8")
    source = str(p)
    weights: dict[str, float] = {}
    if p.suffix.lower() == ".json" or text.lstrip().startswith("{"):
        try:
            data = orjson.loads(text)
        except orjson.JSONDecodeError as e:
            raise ValueError(f"{source}: not valid JSON: {e}") from None
        if not isinstance(data, dict):
            raise ValueError(f'{source}: expected a JSON object {{"topic": weight, ...}}')
        for topic, raw in data.items():
            weights[str(topic)] = _weight(str(topic), raw, source)
        return weights
    for lineno, row in enumerate(csv.reader(text.splitlines()), start=1):
        if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
            continue
        if len(row) < 2:
            raise ValueError(f"{source}:{lineno}: expected 'topic,weight'")
        topic, raw = row[0].strip(), row[1].strip()
        if lineno == 1 and not _is_number(raw):
            continue  # header
        weights[topic] = _weight(topic, raw, f"{source}:{lineno}")
    return weights


def default_weight(weights: dict[str, float] | None) -> float:
    """Without a weights file every topic weighs 1; with one, an unlisted topic weighs "*" or 0."""
    if weights is None:
        return 1.0
    return weights.get(DEFAULT_KEY, 0.0)
