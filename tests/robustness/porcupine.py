"""Build and run the Porcupine checker (checker/, Go, Porcupine v1.3.1 pinned in checker/go.mod and go.sum).

The binary is built once per source digest into checker/bin/ (ignored by git) with `go build`; the module comes
from the Go module proxy into the machine's module cache. A checker that runs out of time answers Unknown, which the
tier counts as a failure.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import orjson

CHECKER = Path(__file__).resolve().parent / "checker"
TIMEOUT_S = 120.0  # per check; Unknown (timed out) fails the run


def binary() -> Path:
    digest = hashlib.sha256()
    for name in sorted(p.name for p in CHECKER.glob("*") if p.suffix in (".go", ".mod", ".sum")):
        digest.update(name.encode() + (CHECKER / name).read_bytes())
    out = CHECKER / "bin" / f"checker-{digest.hexdigest()[:16]}"
    if out.exists():
        return out
    go = shutil.which("go")
    if go is None:
        raise FileNotFoundError("go is not installed (the robustness tier builds its Porcupine checker with it)")
    out.parent.mkdir(exist_ok=True)
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    subprocess.run([go, "build", "-o", str(tmp), "."], cwd=CHECKER, check=True, capture_output=True, timeout=600,
                   env={**os.environ, "GOFLAGS": "-mod=mod"})
    os.replace(tmp, out)
    return out


def check(prepared: dict[str, Any], report: Path | None, timeout_s: float = TIMEOUT_S) -> list[dict[str, Any]]:
    """Porcupine's verdict per check: result Ok | Illegal | Unknown, operations, partitions, failed partitions and
    the HTML visualisation of them (written into `report`)."""
    exe = binary()
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        f.write(orjson.dumps({**prepared, "timeout_s": timeout_s}))
        path = f.name
    try:
        if report is not None:
            report.mkdir(parents=True, exist_ok=True)
        # each check gets the timeout, its failing partitions another; then the process is given up on
        limit = timeout_s * 2 * max(1, len(prepared["checks"])) + 60
        proc = subprocess.run([str(exe), "-in", path, "-report", str(report or "")], capture_output=True,
                              timeout=limit)
    finally:
        os.unlink(path)
    if proc.returncode != 0:
        raise RuntimeError(f"checker failed ({proc.returncode}): {proc.stderr.decode(errors='replace')[-2000:]}")
    return orjson.loads(proc.stdout)["checks"]
