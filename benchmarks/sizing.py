"""Capacity for planners (issue 40 item 5): the README's "Sizing" table, computed from the measurements in
benchmarks/results/ so it can be re-made after every re-measurement.

    python -m benchmarks.sizing            # → service/core/capacity_model.py, results/sizing.json, sizing.md, and
                                           #   the README's table between its sizing markers
    python -m benchmarks.sizing --check    # exit 1 if any of those would change (nothing written)

Reads peers.json (CPU per request on the native door, ours with 1 worker, Redis apart), redis-capacity.json (a
broker's liveness in the worker's batch: the touchLive batch, or the heartbeat batch of 50 in results measured
before it had that case), register.json (plain registration bodies'
bytes per topic), http.json (Redis bytes per entry at 1 000 topics × 100 brokers), write-profiles.json (the change
events' share of a mixed load: applying a change to cached routes) and fleet.json (a whole fleet: its CPU per
simulated minute, which calibrates the formula, and its memory). The formula is service/core/capacity.py; the
parameters it derives go to service/core/capacity_model.py, which `namesrv admin capacity` evaluates.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from service.core.capacity import (
    EVENT_CORE_LIMIT,
    LINK_BYTES_PER_S,
    REDIS_CORE_TARGET,
    WORKER_CORE_TARGET,
    Fleet,
    Model,
    predict,
)

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
ROOT = HERE.parent
MODEL_PY = ROOT / "service" / "core" / "capacity_model.py"
README = ROOT / "README.md"
BEGIN, END = "<!-- sizing: made by python -m benchmarks.sizing -->", "<!-- sizing: end -->"
OURS1, OURS2 = "rmq-namesrv, 1 worker", "rmq-namesrv, 2 workers"
BROKERS_PER_TOPIC = 10  # the fleet's shape: every broker of a cluster of 10 serves its cluster's topics
ROWS = [(b, t, round(b * t / BROKERS_PER_TOPIC)) for b in (1_000, 10_000, 50_000) for t in (100, 1_000)]
ROWS.append((10_000, 200, 1_000_000))  # 1 M topics in all, each on 2 brokers


def load(name: str) -> dict[str, Any] | None:
    path = RESULTS / name
    return json.loads(path.read_text()) if path.is_file() else None


def ours(peers: dict, workload: str) -> tuple[float, float]:
    r = peers["results"][workload][OURS1]
    redis = r["redis_cpu_us_per_request"] or 0.0
    return r["cpu_us_per_request"] - redis, redis


def failed_share(server: dict) -> float:
    """Requests of a fleet run that got an error, went unanswered, or were not made, over those due."""
    sent = bad = 0
    for t in server["load"]["types"]:
        sent += t["sent"] + t.get("window_skipped", 0)
        bad += sum(n for code, n in t["codes"].items() if code != "0")
        bad += sum(t.get(k, 0) for k in ("no_reply", "no_reply_dropped", "skipped", "timed_out", "window_skipped"))
    return bad / sent if sent else 1.0


def liveness_case(cap: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """The redis_capacity row a broker's liveness is priced by, and its brokers per call: the touchLive batch (how
    every heartbeat and unchanged registration reaches Redis), else (results measured before that case) the
    heartbeat batch of 50."""
    for r in cap["results"]:
        if r["case"].startswith("touchLive, batch of "):
            return r, int(r["case"].split()[3])
    return next(r for r in cap["results"] if r["case"] == "heartbeat, batch of 50"), 50


def derive() -> tuple[Model, dict[str, Any]]:
    """The model's parameters from the results, and the measured points they come from."""
    peers, cap, reg, http, prof, fleet = (load(n) for n in ("peers.json", "redis-capacity.json", "register.json",
                                                           "http.json", "write-profiles.json", "fleet.json"))
    missing = [n for n, d in (("peers", peers), ("redis-capacity", cap), ("register", reg), ("http", http),
                              ("write-profiles", prof)) if d is None]
    if missing:
        sys.exit(f"benchmarks/results lacks {', '.join(missing)}: run those benchmarks first")
    same = [ours(peers, f"register {n} topics, unchanged (103)") for n in (100, 1000)]
    changed = [ours(peers, f"register {n} topics, changed (103)") for n in (100, 1000)]
    hb_worker, _ = ours(peers, "heartbeat (904)")
    read_worker, _ = ours(peers, "route read (105)")
    batch, per = liveness_case(cap)
    liveness = batch["redis_usec_per_call"] / per
    plain = {r["topics"]: r["body_bytes"] for r in reg["results"] if r["form"] == "plain"}
    zipped = {r["topics"]: r["body_bytes"] for r in reg["results"] if r["form"] == "compressed"}
    body_per_topic = (plain[1000] - plain[100]) / 900
    mix = prof["results"]["mix 95 % read / 5 % register"]
    # the mix sends one changed registration of a broker serving 100 read (so cached) topics every 20 requests
    event_per_topic = (mix["shares_pct"]["change events received"] / 100
                       * (mix["cpu_us_per_request"] - mix["redis_cpu_us_per_request"]) * 20 / 100)
    per_entry_http = http["memory"]["bytes_per_entry"]
    basis = {
        "per request": f"benchmarks.peers, {OURS1} (git {peers['git_sha']}, {peers['date']}, "
                       f"{peers['machine']['summary']})",
        "liveness in Redis": f"benchmarks.redis_capacity, {batch['case'].split(' (')[0].replace(', ', ' ', 1)}: "
                             f"{batch['redis_usec_per_call']} µs (git {cap['git']['sha'][:10]})",
        "registration bytes": f"benchmarks.register_bench, plain bodies: {plain[100]:,} B at 100 topics, "
                              f"{plain[1000]:,} B at 1 000; zipped {zipped.get(100, 0):,} and {zipped.get(1000, 0):,} "
                              f"B (git {reg['git_sha']})",
        "change events": f"benchmarks.write_profiles, the mix: {mix['shares_pct']['change events received']} % of "
                         f"the worker's samples (git {prof['git_sha']})",
    }
    model = Model(
        reg_same_worker_us=(same[0][0], same[1][0]), reg_changed_worker_us=(changed[0][0], changed[1][0]),
        reg_changed_redis_us=(changed[0][1], changed[1][1]), liveness_redis_us=liveness,
        heartbeat_worker_us=hb_worker, read_worker_us=read_worker, event_worker_us_per_topic=event_per_topic,
        redis_bytes_per_entry=per_entry_http, redis_bytes_per_topic=0.0, redis_base_mb=1.0, worker_base_mb=75.0,
        worker_bytes_per_broker=0.0, worker_bytes_per_route=2048.0, brokers_per_topic_measured=BROKERS_PER_TOPIC,
        body_bytes_per_topic=body_per_topic, basis=basis)
    points: dict[str, Any] = {}
    if fleet is None:
        basis["fleet"] = ("none: no fleet run in benchmarks/results (python -m benchmarks.fleet writes one); the "
                          "formula is not calibrated and memory per worker is a guess")
        return model, points
    one = next((s for s in fleet["servers"] if s["server"] == OURS1), None)
    two = next((s for s in fleet["servers"] if s["server"] == OURS2), None)
    if one is None:
        sys.exit("fleet.json has no run of ours with 1 worker")
    plan = fleet["plan"]
    # an overloaded day says what overload costs, not what the fleet does: calibrate on ours with 1 worker, or, if
    # that day was overloaded (other work on the machine), on ours with 2 workers (their CPU summed: the second
    # worker's own cost then sits in the factor, on the safe side; their memory per worker)
    overloaded = {s["server"]: (failed_share(s), s["load_average_before"][0]) for s in (one, two) if s is not None
                  and failed_share(s) > 0.01}
    cal = next((s for s in (one, two) if s is not None and s["server"] not in overloaded), None)
    skipped = "; ".join(f"{name} not used, {bad:.1%} of its requests failed or were not made (load average {avg} "
                        "before it)" for name, (bad, avg) in overloaded.items())
    if cal is None:
        basis["fleet"] = (f"not used: in the fleet run (git {fleet['git_sha']}, {fleet['date']}) {skipped} "
                          "(fleet.md); the formula is not calibrated and memory per worker is a guess")
        return model, points
    n = 1 if cal is one else 2
    shape = Fleet(brokers=plan["brokers"], topics_per_broker=plan["topics"], topics=fleet["fleet"]["topics"],
                  clients_per_broker=plan["clients"] / plan["brokers"], client_topics=plan["client_topics"],
                  acting_share=1 / plan["acting_every"], change_per_minute=plan["change_per_minute"])
    samples, half = cal["samples"], 15.0  # a sample every half period (15 simulated seconds)

    def sample(sim_s: float) -> dict:
        return samples[min(len(samples) - 1, round(sim_s / half))]

    start, clients, day = samples[0], sample(fleet["markers"]["ramp"]), sample(fleet["markers"]["day"])
    used = cal["memory_mb"]["redis_used_peak"] - (start.get("redis_used_mb") or 0)
    entries, topics = shape.entries, shape.topics
    # two points, two unknowns: bytes = a·entries + b·topics (http: 100 000 entries on 1 000 topics)
    e1, t1, b1 = http["memory"]["entries"], http["memory"]["entries"] / 100, http["memory"]["bytes"]
    e2, t2, b2 = entries, topics, used * 2**20
    det = e1 * t2 - e2 * t1
    a, b = ((b1 * t2 - b2 * t1) / det, (e1 * b2 - e2 * b1) / det) if det else (b2 / e2, 0.0)
    if a <= 0 or b < 0:  # the two points disagree with the shape of the formula: one figure per entry
        a, b = b2 / e2, 0.0
    body = plan["topics"] * body_per_topic
    per_broker = max(0.0, (clients["rss_mb"] - start["rss_mb"]) * 2**20 / plan["brokers"] - body)
    per_route = max(0.0, (day["rss_mb"] - clients["rss_mb"]) * 2**20 / topics / n)  # each worker caches its own
    cache = (cal.get("capacity") or {}).get("routeCache") or {}
    counted = cache["bytes"] / cache["entries"] if cache.get("entries") else model.cache_bytes_per_route
    model = replace(model, redis_bytes_per_entry=a, redis_bytes_per_topic=b,
                    redis_base_mb=start.get("redis_used_mb") or 1.0, worker_base_mb=start["rss_mb"] / n,
                    worker_bytes_per_broker=per_broker, worker_bytes_per_route=per_route,
                    cache_bytes_per_route=counted)
    raw = predict(model, shape)
    worker_measured = (cal["cpu_per_minute"]["steady"] - cal["cpu_per_minute"]["steady_redis"]) / 60
    redis_measured = cal["cpu_per_minute"]["steady_redis"] / 60
    extra = 0.0
    if two is not None and cal is one and two["server"] not in overloaded:
        extra = max(0.0, (two["cpu_per_minute"]["steady"] - one["cpu_per_minute"]["steady"]) / 60)
    # the rolling restart: its minutes' CPU beyond a steady minute, per restarted broker and topic it serves
    lo, hi = fleet["markers"]["restart"]
    minutes = [r for r in cal["per_minute"] if lo <= r["minute"] * 60 < hi]
    restarted = fleet["fleet"]["restarted"]
    steady_worker = cal["cpu_per_minute"]["steady"] - cal["cpu_per_minute"]["steady_redis"]
    extra_worker = sum(r["cpu_s"] - steady_worker for r in minutes)
    extra_redis = sum((r["redis_cpu_s"] or 0) - cal["cpu_per_minute"]["steady_redis"] for r in minutes)
    per = restarted * plan["topics"]
    model = replace(model, worker_factor=worker_measured / raw.worker_cores if raw.worker_cores else 1.0,
                    redis_factor=redis_measured / raw.redis_cores if raw.redis_cores else 1.0,
                    extra_worker_cores=extra,
                    restart_worker_us_per_topic=max(0.0, extra_worker) * 1e6 / per if per and minutes else 0.0,
                    restart_redis_us_per_topic=max(0.0, extra_redis) * 1e6 / per if per and minutes else 0.0)
    basis["fleet"] = (f"benchmarks.fleet, {plan['brokers']:,} brokers × {plan['topics']} topics, {plan['clients']:,} "
                      f"clients (git {fleet['git_sha']}, {fleet['date']}, load average "
                      f"{cal['load_average_before'][0]} before it): calibrated on {cal['server']}, "
                      f"{cal['cpu_per_minute']['steady']:.2f} CPU-s per simulated minute "
                      f"(Redis {cal['cpu_per_minute']['steady_redis']:.2f})"
                      + (f", with 2 workers {two['cpu_per_minute']['steady']:.2f}" if two and cal is one else "")
                      + (f"; {skipped}" if skipped else "")
                      + f"; its rolling restart of {restarted:,} brokers {extra_worker:.1f} worker and "
                        f"{extra_redis:.1f} Redis CPU-s beyond steady minutes")
    points = {"fleet": {"shape": asdict(shape), "worker_cores_measured": worker_measured,
                        "redis_cores_measured": redis_measured, "worker_cores_formula": raw.worker_cores,
                        "redis_cores_formula": raw.redis_cores, "extra_worker_cores": extra,
                        "redis_used_mb": used, "calibrated_on": cal["server"],
                        "worker_rss_mb": {"start": start["rss_mb"], "brokers up": clients["rss_mb"],
                                          "clients up": day["rss_mb"]}}}
    return model, points


# ---------------------------------------------------------------------------- outputs

def model_source(model: Model) -> str:
    fields = asdict(model)
    lines = ['"""The sizing model\'s measured parameters, generated by `python -m benchmarks.sizing` from',
             "benchmarks/results/*.json: do not edit by hand, re-run it after re-measuring. The formula that uses",
             'them is service/core/capacity.py; `basis` says what each figure was measured with."""', "",
             "from service.core.capacity import Model", "", "MODEL = Model("]
    for k, v in fields.items():
        if isinstance(v, float):
            v = round(v, 4)
        elif isinstance(v, tuple | list) and all(isinstance(x, float) for x in v):
            v = tuple(round(x, 4) for x in v)
        if k == "basis":
            lines.append("    basis={")
            for kk, vv in v.items():
                parts = textwrap.wrap(vv, 80, drop_whitespace=False) or [""]
                lines.append(f"        {kk!r}: " + "\n            ".join(repr(x) for x in parts) + ",")
            lines.append("    },")
        else:
            lines.append(f"    {k}={v!r},")
    lines.append(")")
    return "\n".join(lines) + "\n"


def rows(model: Model) -> list[dict[str, Any]]:
    out = []
    for brokers, per_broker, topics in ROWS:
        f = Fleet(brokers=brokers, topics_per_broker=per_broker, topics=topics)
        load_ = predict(model, f)
        out.append({"brokers": brokers, "topics_per_broker": per_broker, "topics": topics, "entries": f.entries,
                    **{k: v for k, v in asdict(load_).items()}})
    return out


def fmt_mb(mb: float) -> str:
    return f"{mb / 1024:.1f} GB" if mb >= 1024 else f"{mb:.0f} MB"


def table(model: Model, points: dict[str, Any]) -> str:
    head = ("| brokers × topics each (topics in all) | workers (cores: steady / restart peak) | Redis CPU, cores "
            "(steady / peak) | Redis memory | memory per worker | registrations in | nearest limit (use of it; "
            "**bold**: reached) | extrapolated from |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows(model):
        util = r["utilisation"]
        first = r["breaks_first"]
        rest = ", ".join(f"{k} {v:.0%}" for k, v in util.items() if k != first)
        point = "the fleet point" if points.get("fleet") else "no fleet point (not calibrated)"
        if r["topics_per_broker"] <= 100:
            src = f"{point}; per-request costs at 100 topics (peers)"
        elif r["topics_per_broker"] >= 1000:
            src = f"{point}; per-request costs at 1 000 topics (peers)"
        else:
            src = f"{point}; per-request costs between 100 and 1 000 topics (peers)"
        lines.append(
            f"| {r['brokers']:,} × {r['topics_per_broker']:,} ({r['topics']:,}) | {r['workers']} "
            f"({r['worker_cores']:.2f} / {r['worker_cores_peak']:.2f}) | {r['redis_cores']:.3f} / "
            f"{r['redis_cores_peak']:.3f} | {fmt_mb(r['redis_mb'])} | {fmt_mb(r['worker_mb'])} "
            f"(routes {fmt_mb(r['route_cache_mb'])}) | {r['registration_bytes_per_s'] / 2**20:.1f} MB/s | "
            f"{'**' if util[first] >= 1 else ''}{first} {util[first]:.0%}{'**' if util[first] >= 1 else ''} "
            f"(then {rest}) | {src} |")
    m = model
    fleet = points.get("fleet")
    notes = [
        "",
        "Formula (service/core/capacity.py), per second, for B brokers of T topics each, 5 clients per broker "
        "reading 2 routes every 30 s, a tenth of the brokers heart-beating every second, 1 % changing a minute:",
        "",
        f"- worker CPU = (B/30 · reg(T) + 0.1·B · {m.heartbeat_worker_us:.1f} µs + 10·B/30 · "
        f"{m.read_worker_us:.1f} µs + 0.01·B/60 · chg(T)) × {m.worker_factor:.2f} + (workers − 1) × "
        f"{m.extra_worker_cores:.3f} cores; reg(T) = {m.reg_same_worker_us[0]:.1f} → {m.reg_same_worker_us[1]:.1f} "
        f"µs and chg(T) = {m.reg_changed_worker_us[0]:.0f} → {m.reg_changed_worker_us[1]:.0f} µs from 100 to 1 000 "
        "topics (linear); at the peak add a rolling restart of 10 % of the brokers in 2 minutes: "
        + (f"{m.restart_worker_us_per_topic:.0f} µs per topic of a restarted broker, as the fleet's restart measured "
           "(its unregister, its first registration and the route-cache misses of its topics' readers);"
           if m.restart_worker_us_per_topic else "a first registration each;"),
        f"- Redis CPU = ((B/30 + 0.1·B) · {m.liveness_redis_us:.2f} µs + 0.01·B/60 · {m.reg_changed_redis_us[0]:.0f} "
        f"→ {m.reg_changed_redis_us[1]:.0f} µs) × {m.redis_factor:.2f}; at the peak add the restart's "
        + (f"{m.restart_redis_us_per_topic:.0f} µs per topic of a restarted broker;" if m.restart_worker_us_per_topic
           else "unregisters and first registrations;"),
        f"- Redis memory = {m.redis_base_mb:.1f} MB + {m.redis_bytes_per_entry:.0f} B per (topic, broker) entry + "
        f"{m.redis_bytes_per_topic:.0f} B per topic;",
        f"- memory per worker = {m.worker_base_mb:.0f} MB + its share of B × ({m.worker_bytes_per_broker:.0f} B + "
        f"the broker's last registration body, ~{m.body_bytes_per_topic:.0f} B per topic, kept up to 1 MiB) + every "
        f"route read, {m.worker_bytes_per_route:.0f} B each at {m.brokers_per_topic_measured:g} brokers per topic (of "
        f"which the route cache counts {m.cache_bytes_per_route:.0f} B against its byte bound);",
        f"- workers = enough to keep each under {WORKER_CORE_TARGET} core at the peak and the registration stream "
        f"under {LINK_BYTES_PER_S / 2**20:.0f} MB/s each; limits that adding workers does not lift: Redis CPU "
        f"{REDIS_CORE_TARGET} core, a worker's event application (every worker applies every change to its cached "
        f"routes: {m.event_worker_us_per_topic:.2f} µs per topic) {EVENT_CORE_LIMIT} core, the route cache's "
        "default bounds (100 000 routes, 256 MB: raise NAMESRV_ROUTE_CACHE_MAX_ENTRIES / _BYTES beyond).",
        "- The network is the registration stream (*registrations in*, the plain bodies 5.x sends by default): each "
        "broker registers with one worker, so it spreads over the workers' hosts; brokers with "
        "`compressedRegister=true` send the zipped form, far smaller (this bench's synthetic tables zip to a few bytes "
        "per topic, real ones less well), and the route reads' replies go out at about the same rate as they come "
        "in, a few kB each.",
    ]
    if fleet:
        notes.append(
            f"- Calibration: at the fleet's point the formula gives {fleet['worker_cores_formula']:.3f} worker cores "
            f"and {fleet['redis_cores_formula']:.4f} Redis cores; the fleet measured "
            f"{fleet['worker_cores_measured']:.3f} and {fleet['redis_cores_measured']:.4f} (its admin reads and "
            "background work included), hence the factors.")
    notes.append("")
    notes += [f"- {k}: {v}" for k, v in m.basis.items()]
    return "\n".join(lines + notes) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.sizing", description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 if an output is not what the results make")
    args = p.parse_args(argv)
    model, points = derive()
    source = model_source(model)
    md = table(model, points)
    doc = {"benchmark": "sizing", "model": asdict(model), "points": points, "rows": rows(model)}
    readme = README.read_text()
    if BEGIN in readme and END in readme:
        before, rest = readme.split(BEGIN, 1)
        new_readme = before + BEGIN + "\n\n" + md + "\n" + END + rest.split(END, 1)[1]
    else:
        new_readme = readme
    outputs = {MODEL_PY: source, RESULTS / "sizing.md": md,
               RESULTS / "sizing.json": json.dumps(doc, indent=2, sort_keys=True) + "\n", README: new_readme}
    if args.check:
        stale = [str(path.relative_to(ROOT)) for path, text in outputs.items()
                 if not path.is_file() or path.read_text() != text]
        if stale:
            print("out of date: " + ", ".join(stale), file=sys.stderr)
            return 1
        return 0
    for path, text in outputs.items():
        path.write_text(text)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
