"""Report files (modes, CSV rounding, Parquet precision) and the weights files (no Spark needed)."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from service.skew import outputs
from service.skew.weights import default_weight, load_weights


@pytest.fixture
def umask():
    """Set a umask for one test and restore it."""
    saved = os.umask(0o022)
    os.umask(saved)

    def set_(mask: int) -> None:
        os.umask(mask)

    yield set_
    os.umask(saved)


@pytest.mark.parametrize("mask,mode", [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)])
def test_files_respect_the_umask(tmp_path, umask, mask, mode):
    """Readers of a shared report directory can open the files (mkstemp alone gave 0600)."""
    umask(mask)
    assert outputs.current_umask() == mask
    outputs.write_json(tmp_path / "summary.json", {"a": 1})
    outputs.write_text(tmp_path / "report.html", "<p>")
    files = outputs.write_table(tmp_path, "t", pd.DataFrame({"x": [1.0]}))
    for p in [tmp_path / "summary.json", tmp_path / "report.html", *files]:
        assert stat.S_IMODE(p.stat().st_mode) == mode, p.name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html", "summary.json", "t.csv", "t.parquet"]


def test_csv_rounds_floats_parquet_keeps_them(tmp_path):
    pdf = pd.DataFrame(
        {
            "topic": ["A", "B"],
            "writeQueues": [3, 7],
            "maxShare": [1 / 3, 2 / 3],
            "gini": [0.123456789, np.nan],
            "load": [1234567.123456789, 0.0],
            "flags": [np.array(["CONCENTRATED", "READ_WRITE_MISMATCH"], dtype=object), np.array([], dtype=object)],
        }
    )
    outputs.write_table(tmp_path, "topics", pdf)
    text = (tmp_path / "topics.csv").read_text()
    assert text.splitlines() == [
        "topic,writeQueues,maxShare,gini,load,flags",
        "A,3,0.333333,0.123457,1234567.123457,CONCENTRATED|READ_WRITE_MISMATCH",
        "B,7,0.666667,,0.0,",
    ]
    back = pd.read_parquet(tmp_path / "topics.parquet")
    assert back["maxShare"].tolist() == [1 / 3, 2 / 3]  # full precision
    assert list(back["flags"][0]) == ["CONCENTRATED", "READ_WRITE_MISMATCH"]


def test_atomic_write_leaves_no_temp_file_on_failure(tmp_path):
    class Boom:
        pass

    with pytest.raises(TypeError):
        outputs.write_json(tmp_path / "x.json", {"bad": Boom()})
    assert list(tmp_path.iterdir()) == []


def test_load_weights_json_and_csv(tmp_path):
    j = tmp_path / "w.json"
    j.write_text('{"Orders": 120.5, "Audit": 0, "*": 1}')
    assert load_weights(j) == {"Orders": 120.5, "Audit": 0.0, "*": 1.0}
    assert default_weight(load_weights(j)) == 1.0

    c = tmp_path / "w.csv"
    c.write_text("topic,weight\nOrders,120.5\n# comment\n\nAudit, 2\n")
    assert load_weights(c) == {"Orders": 120.5, "Audit": 2.0}
    assert default_weight(load_weights(c)) == 0.0  # with weights, unknown traffic is not guessed
    assert default_weight(None) == 1.0

    headerless = tmp_path / "h.csv"
    headerless.write_text("Orders,3\n")
    assert load_weights(headerless) == {"Orders": 3.0}


def test_the_weights_files_docs_skew_report_shows_load_as_it_says(tmp_path):
    """docs/skew-report.md's two example files (its ```json and ```csv blocks under "Traffic weights"), read by the
    job's own loader: the same weights from both, and the JSON's "*" as the weight of every other topic."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "skew-report.md").read_text()
    section = doc.split("### Traffic weights", 1)[1].split("\n#", 1)[0]
    (j,) = re.findall(r"```json\n(.*?)```", section, re.S)
    (c,) = re.findall(r"```csv\n(.*?)```", section, re.S)
    (tmp_path / "w.json").write_text(j)
    (tmp_path / "w.csv").write_text(c)
    from_json, from_csv = load_weights(tmp_path / "w.json"), load_weights(tmp_path / "w.csv")
    assert from_json == {"Orders": 1200.0, "Audit": 3.5, "*": 1.0}
    assert from_csv == {k: v for k, v in from_json.items() if k != "*"}
    assert (default_weight(from_json), default_weight(from_csv)) == (1.0, 0.0)


@pytest.mark.parametrize(
    "name,text,match",
    [
        ("a.json", "[1, 2]", "expected a JSON object"),
        ("b.json", "{not json", "not valid JSON"),
        ("c.json", '{"T": -1}', "finite number >= 0"),
        ("d.json", '{"T": "lots"}', "not a number"),
        ("e.csv", "topic,weight\nT\n", "expected 'topic,weight'"),
        ("f.csv", "topic,weight\nT,nan\n", "finite number >= 0"),
    ],
)
def test_load_weights_rejects_bad_files(tmp_path, name, text, match):
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(ValueError, match=match):
        load_weights(p)
