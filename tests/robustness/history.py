"""Every request of a run, recorded: invoke and return on one monotonic clock (this process's), what it asked, what
came back. A write that failed or timed out is an unknown outcome (`status` "unknown": it may or may not have
happened); a read that failed is kept with status "failed" and dropped by the checks. Faults are recorded on the
same clock. A history is saved as JSON (gzip) and can be checked again offline (tests/robustness/test_reports.py).
"""

from __future__ import annotations

import gzip
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

READS = ("read", "list", "members", "kvget")
WRITES = ("reg", "hb", "unreg", "close", "delete", "wipe", "add", "kvput", "kvdel")


@dataclass
class Op:
    id: int
    stream: str  # the client stream (one request at a time)
    kind: str  # one of READS or WRITES
    worker: int  # the worker it went to
    door: str  # native | http
    call: int  # ns, time.monotonic_ns
    ret: int = -1  # ns; -1: no answer (unknown outcome, or still open)
    status: str = "open"  # ok | unknown (a write that failed or timed out) | failed (a read that failed)
    args: dict[str, Any] = field(default_factory=dict)
    result: Any = None
    error: str = ""


@dataclass
class Fault:
    kind: str
    start: int
    end: int
    detail: str = ""


@dataclass
class History:
    """A run: its settings, operations, faults, and the change events the observer saw (to date expiries)."""

    meta: dict[str, Any] = field(default_factory=dict)
    ops: list[Op] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    events: list[tuple[int, str]] = field(default_factory=list)
    event_gaps: list[tuple[int, int]] = field(default_factory=list)

    @staticmethod
    def now() -> int:
        return time.monotonic_ns()

    def begin(self, stream: str, kind: str, worker: int, door: str, **args: Any) -> Op:
        op = Op(len(self.ops), stream, kind, worker, door, self.now(), args=args)
        self.ops.append(op)
        return op

    def end(self, op: Op, status: str, result: Any = None, error: str = "") -> Op:
        op.ret = self.now()
        op.status, op.result, op.error = status, result, error
        return op

    def fault(self, kind: str, start: int, detail: str = "") -> Fault:
        f = Fault(kind, start, self.now(), detail)
        self.faults.append(f)
        return f

    def save(self, path: Path) -> Path:
        data = {"meta": self.meta, "ops": [asdict(o) for o in self.ops], "faults": [asdict(f) for f in self.faults],
                "events": self.events, "event_gaps": self.event_gaps}
        path.write_bytes(gzip.compress(orjson.dumps(data), 6))
        return path

    @classmethod
    def load(cls, path: Path) -> History:
        data = orjson.loads(gzip.decompress(path.read_bytes()))
        return cls(meta=data["meta"], ops=[Op(**o) for o in data["ops"]],
                   faults=[Fault(**f) for f in data["faults"]], events=[tuple(e) for e in data["events"]],
                   event_gaps=[tuple(g) for g in data["event_gaps"]])
