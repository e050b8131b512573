"""From a recorded history to verdicts.

- `prepare`: the history as Porcupine's input (checker/): every operation projected onto the partitions it
  touches (a topic's route, a KV key, the cluster's broker membership), each read's invocation moved Δ earlier
  (bounded staleness), failed reads dropped, failed writes open to the end (unknown outcome), and the writes no
  client makes: a broker's possible expiry wherever its acknowledged contacts were more than its timeout apart.
  Two checks: `staleness` (writes linearizable, reads at most Δ stale) and `session` (the same, and each reader's
  reads linearized in the order it made them: monotonic reads through one worker and door).
- `liveness`: a broker whose acknowledged contacts were never more than its timeout apart is in the live table at
  every sample taken meanwhile, except for the one declared loss (heartbeats a SIGKILLed worker acknowledged
  within its flush period before dying, and what a failover without WAIT loses).
- `staleness_observed`: how stale the reads were (for the README's numbers).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from tests.robustness.history import History, Op

NS = 1_000_000_000
MS = 1_000_000
OPEN = -1


@dataclass
class Bounds:
    """The documented bounds the checks use (all ns)."""

    delta: int  # Δ: the route cache's staleness bound
    flush: int  # heartbeat_flush_ms: a SIGKILLed worker may lose what it acknowledged in this long before dying
    default_timeout: int  # the registry's broker timeout (brokers that send none)
    chunk_topics: int
    failover_window: int = 0  # a failover without WAIT may lose the writes acknowledged this long before the kill
    waited: tuple[str, ...] = ()  # with WAIT: the kinds acknowledged only once replicated (never lost)

    @classmethod
    def of(cls, meta: dict[str, Any]) -> Bounds:
        s = meta["settings"]
        waited: tuple[str, ...] = ()
        if s.get("wait_replicas"):
            waited = ("delete", "wipe", "add", "kvput", "kvdel") + (("reg",) if s.get("wait_registrations") else ())
        return cls(delta=s["staleness_ms"] * MS, flush=s["heartbeat_flush_ms"] * MS,
                   default_timeout=s["broker_timeout_ms"] * MS, chunk_topics=s["chunk_topics"],
                   failover_window=meta.get("failover_window_ms", 1000) * MS, waited=waited)


def kills(hist: History, kind: str) -> list[tuple[int, int]]:
    """(worker index or -1, time) of each fault of this kind."""
    out = []
    for f in hist.faults:
        if f.kind == kind:
            w = int(f.detail.split("w", 1)[1].split()[0]) if f.detail.startswith("w") else -1
            out.append((w, f.start))
    return out


@dataclass
class BrokerLife:
    """One broker's contacts and removals, in the order they were made."""

    name: str
    timeout: int
    topics: set[str] = field(default_factory=set)
    contacts: list[Op] = field(default_factory=list)  # certain ones (acknowledged, not possibly lost)
    removals: list[Op] = field(default_factory=list)  # unregisters and closed connections (any outcome)


def possibly_lost(op: Op, hist: History, b: Bounds) -> bool:
    """An acknowledged contact the declared losses allow to vanish: acknowledged from memory by a worker SIGKILLed
    within its flush period (plus the time a flush takes), or written shortly before a failover that does not
    wait for replicas."""
    from_memory = op.kind == "hb" and op.door == "native" or op.kind == "reg" and op.args.get("same")
    for w, at in kills(hist, "worker-kill"):
        if from_memory and op.worker == w and at - (b.flush + 200 * MS) <= op.ret <= at:
            return True
    for f in hist.faults:
        if f.kind not in FAILOVERS:
            continue
        lo, hi = f.start - b.failover_window, f.start if f.kind == "primary-kill" else f.end
        if lo <= op.ret <= hi and (op.kind == "hb" or from_memory or op.kind not in b.waited or f.kind == "failover"):
            return True
    return False


FAILOVERS = ("primary-kill", "failover")  # the scenario's kill, and a failover the sentinels made by themselves


def failover_windows(hist: History, b: Bounds) -> list[tuple[int, int]]:
    """Where a failover may undo writes: those acknowledged in the `failover_window` before the primary was killed
    (it was dead from then on); for a failover the sentinels made by themselves (cluster.SentinelWatch), also
    everything up to its end, the old primary having taken writes until the workers left it."""
    return [(f.start - b.failover_window, f.start if f.kind == "primary-kill" else f.end)
            for f in hist.faults if f.kind in FAILOVERS]


def lives(hist: History, b: Bounds) -> dict[str, BrokerLife]:
    out: dict[str, BrokerLife] = {}
    for op in hist.ops:
        name = op.args.get("broker")
        if op.kind not in ("reg", "hb", "unreg", "close") or name is None:
            continue
        life = out.get(name)
        if life is None:
            life = out[name] = BrokerLife(name, b.default_timeout)
        if op.kind == "reg":
            life.topics |= set(op.args["topics"])
            if op.args.get("timeout_ms"):
                life.timeout = op.args["timeout_ms"] * MS
        if op.kind in ("reg", "hb") and op.status == "ok" and not possibly_lost(op, hist, b):
            life.contacts.append(op)
        if op.kind in ("unreg", "close"):
            life.removals.append(op)
    for life in out.values():
        life.contacts.sort(key=lambda o: o.call)
    return out


def timeouts(hist: History) -> dict[str, int]:
    """brokerName -> the timeout its registrations carry (ms), from the scenario's broker specs."""
    return {name: spec["timeout_ms"] for name, spec in hist.meta.get("brokers", {}).items() if spec.get("timeout_ms")}


def expiries(hist: History, b: Bounds, life: BrokerLife, end: int) -> list[tuple[int, int, int]]:
    """(earliest, latest or OPEN, contact number it must precede) of every expiry the broker's contacts allow:
    wherever two certain contacts were further apart than its timeout (measured the long way: from the first's
    invoke to the second's return), and after its last one."""
    out = []
    cs = life.contacts
    for prev, nxt in zip(cs, cs[1:], strict=False):
        if nxt.ret - prev.call > life.timeout:
            out.append((prev.call + life.timeout, nxt.ret, nxt.args["seq"]))
    if cs and end - cs[-1].call > life.timeout:
        out.append((cs[-1].call + life.timeout, OPEN, 1 << 60))
    return out


def changes_to(hist: History, life: BrokerLife) -> list[Op]:
    """The client writes that change what a registration of the broker's same bytes must do (its removal, a
    deletion of one of its topics, other bytes of it), whichever worker made them."""
    return [o for o in hist.ops if o.kind in ("unreg", "close") and o.args.get("broker") == life.name
            or o.kind == "reg" and o.args["broker"] == life.name and not o.args.get("same")
            or o.kind == "delete" and o.args["topic"] in life.topics]


def may_lose(op: Op, b: Bounds, changes: list[Op], expiries: list[tuple[int, int, int]]) -> bool:
    """The declared loss (docs/deviations.md): a registration of the same bytes on the same connection, answered
    from memory in the instant between a change to its broker made elsewhere and the worker hearing of it (within Δ:
    a worker whose change feed is not confirmed within Δ answers nothing from memory) is acknowledged but not
    applied. Elsewhere: through another worker (an unregistration, a closed connection it holds, a deletion of one
    of the broker's topics, other bytes of the broker), or an expiry (whichever worker's scan ran it: the history
    does not say). A worker's own changes end its answers before they are acknowledged: they allow no loss."""
    if not op.args.get("same"):
        return False
    lo, hi = op.call - b.delta, (op.ret if op.ret != OPEN else 1 << 62) + 200 * MS
    for x in changes:
        x_end = x.ret if x.ret != OPEN and x.status == "ok" else 1 << 62
        if x.worker != op.worker and x.call <= hi and x_end >= lo:
            return True
    return any(earliest <= hi and (latest == OPEN or latest >= lo) for earliest, latest, _ in expiries)


def lanes(ops: list[dict[str, Any]]) -> None:
    """Client ids such that one client's operations never overlap (Porcupine's visualisation expects it)."""
    free: list[tuple[int, int]] = []  # (free from, lane)
    n = 0
    import heapq

    for o in sorted(ops, key=lambda o: o["call"]):
        if free and free[0][0] < o["call"]:
            _, lane = heapq.heappop(free)
        else:
            lane, n = n, n + 1
        o["c"] = lane
        heapq.heappush(free, ((1 << 62) if o["ret"] == OPEN else o["ret"], lane))


def prepare(hist: History, b: Bounds | None = None) -> dict[str, Any]:
    b = b or Bounds.of(hist.meta)
    end = max(o.ret for o in hist.ops if o.ret != OPEN) + 1
    life = lives(hist, b)
    for name, ms in timeouts(hist).items():
        if name in life:
            life[name].timeout = ms * MS
    read_topics = {o.args["topic"] for o in hist.ops if o.kind == "read"}
    small = set(hist.meta.get("small_topics", []))
    base: list[dict[str, Any]] = []
    sess_of: dict[str, int] = {}

    def add(p: str, o: Op, inp: dict[str, Any], out: dict[str, Any] | None = None) -> None:
        is_read = inp["k"] in ("read", "exists", "members", "kvget")
        call = o.call - b.delta if is_read else o.call
        ret = o.ret if (o.status == "ok" and o.ret != OPEN) else OPEN
        if not is_read and o.status != "ok":
            inp = {**inp, "unknown": True}
        inp["desc"] = f"{o.stream} w{o.worker} {o.door} #{o.id}"
        if is_read:
            inp["sess"] = sess_of.setdefault(o.stream, len(sess_of) + 1)
        base.append({"p": p, "call": call, "ret": ret, "in": inp, "out": out or {}, "_read": is_read,
                     "_stream": o.stream})

    changes = {name: changes_to(hist, lf) for name, lf in life.items()}
    may_expire = {name: expiries(hist, b, lf, end) for name, lf in life.items()}
    # what only some brokers need (and would otherwise make every order of their no-op registrations a state of
    # its own): contact numbers for those that may expire, connections for those whose connection closed
    silent = {name for name, windows in may_expire.items() if windows}
    closing = {o.args["broker"] for o in hist.ops if o.kind == "close"}

    for o in hist.ops:
        k = o.kind
        if k in ("read", "list", "members", "kvget") and o.status != "ok":
            continue  # a failed read says nothing
        if k == "reg":
            name = o.args["broker"]
            lose = may_lose(o, b, changes[name], may_expire[name])
            common = {"b": name, "dv": o.args["dv"], "conn": (o.args.get("conn") or "") if name in closing else "",
                      "seq": o.args["seq"] if name in silent else 0,
                      "lose": lose, "chunked": o.args.get("chunked", False), "sticky": bool(o.args.get("same"))}
            for t, q in o.args["topics"].items():
                if t in read_topics:
                    add(f"route:{t}", o, {"k": "reg", "q": q, **common})
            add("cluster", o, {"k": "reg", **common})
        elif k in ("unreg", "close"):
            name = o.args["broker"]
            inp = {"k": "unreg" if k == "unreg" else "drop", "b": name, "conn": o.args.get("conn", "")}
            for t in life[name].topics & read_topics:
                add(f"route:{t}", o, dict(inp))
            add("cluster", o, dict(inp))
        elif k == "delete":
            if o.args["topic"] in read_topics:
                add(f"route:{o.args['topic']}", o, {"k": "delete"})
        elif k in ("wipe", "add"):
            name = o.args["broker"]
            for t in life.get(name, BrokerLife(name, 0)).topics & read_topics:
                add(f"route:{t}", o, {"k": k, "b": name})
        elif k in ("kvput", "kvdel"):
            add(f"kv:{o.args['key']}", o, {"k": k, "v": o.args.get("value", "")})
        elif k == "read":
            add(f"route:{o.args['topic']}", o, {"k": "read"}, {"route": o.result})
        elif k == "list":
            for t in small & read_topics:
                add(f"route:{t}", o, {"k": "exists"}, {"exists": t in o.result})
        elif k == "members":
            add("cluster", o, {"k": "members"}, {"members": o.result})
        elif k == "kvget":
            add(f"kv:{o.args['key']}", o, {"k": "kvget"}, {"value": o.result})

    for name, lf in life.items():  # the expiries the broker's contacts allow
        for earliest, latest, before in may_expire[name]:
            inp = {"k": "expire", "b": name, "seq": before, "desc": f"{name} silent past its timeout"}
            for p in [f"route:{t}" for t in lf.topics & read_topics] + ["cluster"]:
                base.append({"p": p, "call": earliest, "ret": latest, "in": dict(inp), "out": {}, "_read": False,
                             "_stream": ""})
    for f in hist.faults:  # a failover: the state may go back to before any write acknowledged in its window
        if f.kind in FAILOVERS:
            for p in {o["p"] for o in base}:
                base.append({"p": p, "call": f.start, "ret": f.end, "in": {"k": "failover", "desc": f.detail},
                             "out": {}, "_read": False, "_stream": ""})
    windows = failover_windows(hist, b)
    unplanned = [(f.start - b.failover_window, f.end) for f in hist.faults if f.kind == "failover"]

    def in_unplanned(o: dict[str, Any]) -> bool:
        """A write in the window of a failover the sentinels made against a live primary: WAIT counted a replica,
        not necessarily the one promoted (README, "No acknowledged write lost"), so even a waited one may go."""
        return any(lo <= (o["ret"] if o["ret"] != OPEN else 1 << 62) and o["call"] <= hi for lo, hi in unplanned)

    for o in base:
        if o["_read"] or o["in"]["k"] in ("expire", "failover"):
            continue
        if any(lo <= (o["ret"] if o["ret"] != OPEN else 1 << 62) and o["call"] <= hi for lo, hi in windows):
            kind = o["in"]["k"]
            if kind not in b.waited or o["in"].get("unknown") or in_unplanned(o):
                o["in"]["window"] = True

    staleness = [dict(o) for o in base]
    session = [dict(o, **{"in": dict(o["in"])}) for o in base]
    seqs: dict[tuple[str, str], int] = defaultdict(int)
    for o in sorted(session, key=lambda o: o["call"]):
        if o["_read"]:
            key = (o["p"], o["_stream"])
            seqs[key] += 1
            o["in"]["sseq"] = seqs[key]
    checks = []
    for name, ops, is_session in (("staleness", staleness, False), ("session", session, True)):
        for o in ops:
            o.pop("_read", None)
            o.pop("_stream", None)
        lanes(ops)
        checks.append({"name": name, "session": is_session, "ops": ops})
    notes = [{"tag": "fault", "start": f.start, "end": max(f.end, f.start + 1), "text": f"{f.kind} {f.detail}"}
             for f in hist.faults]
    return {"checks": checks, "annotations": notes}


# ------------------------------------------------------------------------------------------------ liveness

def liveness(hist: History, b: Bounds | None = None) -> list[str]:
    """Violations of: a broker whose acknowledged contacts were never more than its timeout apart stays in the
    live table (and so in its routes). Checked against the live-table samples taken during the run."""
    b = b or Bounds.of(hist.meta)
    life = lives(hist, b)
    for name, ms in timeouts(hist).items():
        if name in life:
            life[name].timeout = ms * MS
    addr = {name: spec["addr"] for name, spec in hist.meta.get("brokers", {}).items()}
    samples = hist.meta.get("live_samples", [])
    bad = []
    for name, lf in life.items():
        member = f"{hist.meta.get('cluster')}|{addr.get(name)}"
        for start, stop in protected(lf):
            for call, ret, members in samples:
                if start <= call and ret <= stop and member not in members:
                    bad.append(f"{name} missing from the live table at {(call - hist.meta['t0']) / NS:.3f} s, "
                               f"within its protected interval {(start - hist.meta['t0']) / NS:.3f}–"
                               f"{(stop - hist.meta['t0']) / NS:.3f} s")
                    break
    return bad


def protected(lf: BrokerLife) -> list[tuple[int, int]]:
    """The intervals in which the broker must be live: from a certain registration on, between consecutive certain
    contacts at most its timeout apart (the long way), until a removal it asked for (an unregister, a closed
    connection: a worker may unregister it when it handles the close) — after which only a registration on a
    connection opened after it protects it again."""
    out = []
    registered = False
    fresh_after = 0  # a registration protects again only if its connection is newer than the last removal
    removals = sorted(lf.removals, key=lambda o: o.call)
    conn_opened: dict[str, int] = {}
    for c in lf.contacts:
        conn_opened.setdefault(c.args.get("conn") or "", c.call)
    prev: Op | None = None
    for c in lf.contacts:
        cut = [r for r in removals if prev is not None and prev.call <= r.call <= c.ret]
        if cut:
            registered = False
            fresh_after = max(r.call for r in cut)
        if c.kind == "reg" and not registered:
            conn = c.args.get("conn") or ""
            if conn_opened.get(conn, 0) >= fresh_after or not conn:
                registered = True
                prev = c
                continue
        if registered and prev is not None and c.ret - prev.call <= lf.timeout:
            out.append((prev.ret, c.call))
        elif registered:
            registered = c.kind == "reg"
        prev = c
    return out


def staleness_observed(hist: History) -> dict[str, float]:
    """How far behind the reads were: for each route read, the time between its invoke and the return of the
    latest write it did not yet show (0 when it showed everything acknowledged before it). Registrations only
    (their queue counts name them), in ms."""
    regs: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)  # (topic, broker) -> (ret, q)
    for o in hist.ops:
        if o.kind == "reg" and o.status == "ok":
            for t, q in o.args["topics"].items():
                regs[(t, o.args["broker"])].append((o.ret, q))
    for v in regs.values():
        v.sort()
    lags = []
    for o in hist.ops:
        if o.kind != "read" or o.status != "ok":
            continue
        lag = 0
        for broker, shown in o.result.items():
            q = int(shown[:-1])
            later = [ret for ret, q2 in regs.get((o.args["topic"], broker), []) if q2 > q and ret < o.call]
            if later:
                lag = max(lag, o.call - min(later))
        lags.append(lag / MS)
    lags.sort()
    if not lags:
        return {}

    def pct(p: float) -> float:
        return round(lags[min(len(lags) - 1, int(p * len(lags)))], 2)

    return {"reads": len(lags), "p50_ms": pct(0.5), "p99_ms": pct(0.99), "max_ms": round(lags[-1], 2),
            "stale_reads": sum(1 for x in lags if x > 0)}
