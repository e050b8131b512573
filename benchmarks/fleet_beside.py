"""A fleet's everyday traffic beside another benchmark (`stall_bench --fleet`, issue 40 item 2): the quality bars
are only worth what the load they were shown under, so the bench's phases run while a fleet goes on against the
same workers and Redis.

The fleet is benchmarks.fleet's (its Plan, frames, schedule and load tool, fleetload.c): stock-shaped
REGISTER_BROKERs of the same bytes every period on kept connections, 1 % of the brokers changing a topic a
minute, a tenth of them sending BROKER_HEARTBEAT every simulated second, clients multiplexed on sockets reading
their topics' routes every period, admin reads of cluster info and the topic list. Not its day's rolling restart
and dying brokers: this is the everyday traffic, and the bench's own broker does the removals. Its warm-up (the
brokers' first registrations, then the clients' first reads) runs once, before the bench's first phase; its
schedule then runs until `stop`. fleetload reports per second of real time, so each phase gets the fleet's
request rate, errors and route-read latency over the seconds it ran.
"""

from __future__ import annotations

import json
import math
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from benchmarks import fleet
from benchmarks.fleet import READ, TYPES, Plan

# fleet's --quick size; the period: every rate 5x a real fleet's, as fleet's full size runs (2 000 brokers then send
# what 10 000 send, 10 000 clients read as 50 000 do), which leaves the bench's processes room on 2 cores
SIZES = {
    "default": dict(brokers=2_000, topics=100, cluster_size=10, clients=10_000, period=6.0),
    "tiny": dict(brokers=40, topics=10, cluster_size=4, clients=200, clients_per_conn=20, period=1.0),
}
INTERVAL_S = 1.0  # fleetload's reporting interval, real seconds: what a phase's figures are summed from
REGISTRATIONS = (fleet.REG, fleet.CHANGED, fleet.FIRST)


def plan_for(size: dict[str, Any], seconds: float) -> Plan:
    """The fleet's plan for a bench that needs it for `seconds` after the warm-up (whole simulated minutes)."""
    plan = Plan(**{**size, "minutes": 1, "restart_share": 0.0, "die_share": 0.0})
    plan.minutes = max(1, math.ceil(seconds / plan.real(60)))
    plan.check()
    return plan


class FleetBeside:
    """fleetload against the bench's workers (their native ports, connections spread over them) from `start` to
    `stop`; `mark` names a stretch of it (a phase) whose figures `stop` returns."""

    def __init__(self, plan: Plan, ports: list[int], tmp: Path) -> None:
        self.plan, self.ports, self.tmp = plan, ports, tmp
        self.proc: subprocess.Popen | None = None
        self.t0 = 0.0
        self.warmup_s = 0.0
        self.marks: dict[str, tuple[float, float, bool]] = {}
        self.load: fleet.Load | None = None

    @property
    def schedule_end(self) -> float:
        """time.monotonic() when the fleet's schedule runs out."""
        return self.t0 + self.plan.real(self.plan.end_s)

    def start(self) -> float:
        """Build the frames and schedule, start the load tool and wait out its warm-up (the brokers' first
        registrations and the clients' first reads); the seconds that took."""
        self.load = fleet.prepare(self.plan, self.tmp, "stall_bench --fleet")
        self.t0 = time.monotonic() + 1.0
        intervals = math.ceil(self.plan.real(self.plan.end_s) / INTERVAL_S) + 1
        self.proc = fleet.start_loader(self.load, self.plan, self.ports, self.t0, INTERVAL_S, intervals,
                                       drain=max(5.0, self.plan.period))
        warm = self.t0 + self.plan.real(self.plan.day_s)
        while time.monotonic() < warm:
            if self.proc.poll() is not None:
                raise RuntimeError(f"fleetload exited {self.proc.returncode} in the warm-up: "
                                   f"{self.proc.stderr.read().strip()[-400:]}")
            time.sleep(min(0.2, max(0.0, warm - time.monotonic())))
        self.warmup_s = round(time.monotonic() - self.t0, 1)
        return self.warmup_s

    def mark(self, name: str, began: float, ended: float) -> None:
        """A phase ran from `began` to `ended` (time.monotonic()); whether the fleet's schedule covered it."""
        running = self.proc is not None and self.proc.poll() is None
        self.marks[name] = (began, ended, running and ended <= self.schedule_end)

    def stop(self) -> dict[str, Any]:
        """End the schedule (SIGUSR1: no more sends, replies drained), read fleetload's report; the fleet's size,
        its whole run's figures and each marked phase's."""
        assert self.proc is not None and self.load is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGUSR1)
        try:
            out, err = self.proc.communicate(timeout=120)
        finally:
            self.close()
        if self.proc.returncode:
            raise RuntimeError(f"fleetload exited {self.proc.returncode}: {err.strip()[-400:]}")
        load = json.loads(out)
        plan, sched = self.plan, self.load.sched
        return {"brokers": plan.brokers, "topics_per_broker": plan.topics, "cluster_size": plan.cluster_size,
                "topics": plan.clusters * plan.topics, "clients": plan.clients, "client_topics": plan.client_topics,
                "client_sockets": sched.connections["client sockets"], "period_s": plan.period,
                "speed": round(fleet.SIM_PERIOD / plan.period, 2), "acting_every": plan.acting_every,
                "change_per_minute": plan.change_per_minute, "ports": len(self.ports),
                "frame_mb": round(self.load.frames.bytes / 2**20, 1), "warmup_s": self.warmup_s,
                "timeouts_ms": {"broker": plan.timeout_ms, "acting": plan.acting_timeout_ms},
                "loader": {"cpu_s": load["cpu_s"], "elapsed_s": load["elapsed_s"], "lag_ms": load["lag_ms"],
                           "connects": load["connects"], "connect_errors": load["connect_errors"],
                           "dropped_by_server": load["dropped_by_server"], "unmatched": load["unmatched"]},
                "errors": fleet.load_errors(load),
                "phases": {name: {**self._phase(load, a, b), "covered": covered}
                           for name, (a, b, covered) in self.marks.items()}}

    def _phase(self, load: dict, began: float, ended: float) -> dict[str, Any]:
        """The fleet's figures over the whole seconds of fleetload's report that fall in [began, ended)."""
        lo, hi = (began - self.t0) / INTERVAL_S, (ended - self.t0) / INTERVAL_S
        ivs = [i for i in range(len(load["types"][0]["intervals"])) if lo <= i + 0.5 < hi]
        seconds = len(ivs) * INTERVAL_S or 1.0
        sent = [sum(t["intervals"][i]["sent"] for i in ivs) for t in load["types"]]
        errors: dict[str, int] = {}
        for k, t in enumerate(load["types"]):
            for i in ivs:
                iv = t["intervals"][i]
                for code, n in iv["codes"].items():
                    if code != "0":
                        errors[f"code {code}"] = errors.get(f"code {code}", 0) + n
                gone = {"timed out": iv["timed_out"], "not made": iv["skipped"],
                        "unanswered": iv["sent"] - iv["replies"] - iv["timed_out"] if k != fleet.HEARTBEAT else 0}
                for key, n in gone.items():
                    if n:
                        errors[key] = errors.get(key, 0) + n
        reads = [load["types"][READ]["intervals"][i] for i in ivs]
        p99 = [r["p99_ms"] for r in reads if r["p99_ms"] is not None]
        worst = [r["max_ms"] for r in reads if r["max_ms"] is not None]
        return {"seconds": round(seconds, 1), "requests_per_s": round(sum(sent) / seconds),
                "per_s": {name: round(n / seconds, 1) for name, n in zip(TYPES, sent, strict=True)},
                "route_reads_per_s": round(sent[READ] / seconds), "heartbeats_per_s": round(sent[fleet.HEARTBEAT]
                                                                                              / seconds),
                "registrations_per_s": round(sum(sent[k] for k in REGISTRATIONS) / seconds),
                "errors": errors, "route_read_p99_ms_worst_second": max(p99, default=None),
                "route_read_max_ms": max(worst, default=None),
                "route_read_max_ms_by_second": [r["max_ms"] for r in reads]}

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def describe(f: dict[str, Any]) -> str:
    """The report's sentence saying what ran beside the bench."""
    return (f"Beside it, a fleet's everyday traffic (`benchmarks.fleet`'s load tool, frames as stock 5.x brokers "
            f"and clients send them, its connections spread over the {f['ports']} workers' native doors): "
            f"{f['brokers']:,} brokers × {f['topics_per_broker']} topics in clusters of {f['cluster_size']} "
            f"({f['topics']:,} topics) re-registering the same bytes every period, 1 in {f['acting_every']} "
            f"sending BROKER_HEARTBEAT every simulated second, {f['change_per_minute']:.0%} of them changing a topic "
            f"a simulated minute; {f['clients']:,} clients on {f['client_sockets']:,} sockets reading "
            f"{f['client_topics']} routes each every period; cluster info every 10 s and the topic list every "
            f"minute; a 30 s period in {f['period_s']:g} s (every rate {f['speed']:g}× a real fleet's); no rolling "
            f"restart or dying brokers. Its warm-up (first registrations, then first reads) took {f['warmup_s']} s "
            f"before the quiet phase; the load tool used {f['loader']['cpu_s']:.1f} CPU-s in "
            f"{f['loader']['elapsed_s']:.0f} s (its lag behind schedule p99 {f['loader']['lag_ms']['p99']:.1f} ms). "
            "The fleet per phase (whole seconds of the phase):")


def table(f: dict[str, Any]) -> list[str]:
    rows = ["| phase | fleet requests/s | route reads/s | registrations/s | heartbeats/s | errors | fleet route "
            "reads p99, worst second / max ms |", "|---|---|---|---|---|---|---|"]
    for name, ph in f["phases"].items():
        errors = ", ".join(f"{k} {v:,}" for k, v in ph["errors"].items()) or "0"
        p99, top = ph["route_read_p99_ms_worst_second"], ph["route_read_max_ms"]
        rows.append(f"| {name}{'' if ph['covered'] else ' (fleet had stopped)'} | {ph['requests_per_s']:,} | "
                    f"{ph['route_reads_per_s']:,} | {ph['registrations_per_s']:,} | {ph['heartbeats_per_s']:,} | "
                    f"{errors} | {'—' if p99 is None else f'{p99:.1f}'} / {'—' if top is None else f'{top:.1f}'} |")
    return rows
