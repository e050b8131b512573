"""The report's files: atomic writes that respect the umask, and tables as CSV (rounded) and Parquet (full
precision). No Spark here.
"""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pandas as pd

# Shares, ratios, CV and Gini in the CSV: 6 decimals (a share to a millionth; the summary rounds the same way).
# Parquet keeps full precision for anyone who recomputes from it.
CSV_DECIMALS = 6


def current_umask() -> int:
    """The process umask, read without changing it where the OS tells (Linux); else the set-and-restore dance."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def atomic_write(path: Path, data: bytes) -> None:
    """Readers (a web server, a planner's browser) never see a half-written file, also under --every.
    mkstemp creates the file 0600; it gets the mode an ordinary open() would give (0666 & ~umask), so a
    shared report directory stays readable by whom the umask allows."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, obj: Any) -> None:
    atomic_write(path, orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))


def write_text(path: Path, text: str) -> None:
    atomic_write(path, text.encode("utf-8"))


def _is_sequence(v: Any) -> bool:
    return v is not None and not isinstance(v, str | bytes) and hasattr(v, "__iter__")


def csv_frame(pdf: pd.DataFrame) -> pd.DataFrame:
    """The CSV form of a table: list columns (flags) joined with '|', floats rounded to CSV_DECIMALS."""
    out = pdf.copy()
    for col in out.columns:
        s = out[col]
        if pd.api.types.is_float_dtype(s.dtype):
            out[col] = s.round(CSV_DECIMALS)
        elif s.dtype == object and s.map(_is_sequence).any():
            out[col] = s.map(lambda v: "|".join(map(str, v)) if _is_sequence(v) else "")
    return out


def write_table(out: Path, name: str, pdf: pd.DataFrame) -> list[Path]:
    """One pandas table as <name>.csv (rounded) and <name>.parquet (full precision)."""
    buf = io.StringIO()
    csv_frame(pdf).to_csv(buf, index=False)
    csv_path, pq_path = out / f"{name}.csv", out / f"{name}.parquet"
    atomic_write(csv_path, buf.getvalue().encode("utf-8"))
    pq_buf = io.BytesIO()
    pdf.to_parquet(pq_buf, index=False)
    atomic_write(pq_path, pq_buf.getvalue())
    return [csv_path, pq_path]


RUNS_DIR = "runs"


def write_run(out: Path, run_id: str, summary: Any, html: str, keep: int) -> list[Path]:
    """This run's summary and page under out/runs/<run_id>/; only the newest `keep` run directories stay."""
    runs = out / RUNS_DIR
    run_dir = runs / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json(run_dir / "summary.json", summary)
    write_text(run_dir / "report.html", html)
    for old in sorted((p for p in runs.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name),
                      reverse=True)[max(1, keep):]:
        for f in old.iterdir():
            f.unlink()
        old.rmdir()
    return [run_dir / "summary.json", run_dir / "report.html"]
