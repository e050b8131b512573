"""One scenario: a fresh registry, traffic, one fault with traffic before and after, a settled end state read through
every worker and door, then the checks. A failed scenario leaves a report folder: the history (re-checkable
offline), Porcupine's HTML visualisation of the failing partitions, the workers' logs and a summary.

    outcome = asyncio.run(run_scenario(Scenario("worker-kill", seed=7), Path("robustness-reports")))
    outcome.ok, outcome.summary(), outcome.report
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from tests.invariants import check_invariants
from tests.robustness import checks, porcupine
from tests.robustness.cluster import Observer, Registry, SentinelWatch, Settings
from tests.robustness.faults import FAULTS, FaultMissed
from tests.robustness.history import Fault, History
from tests.robustness.traffic import CLUSTER, KV_NS, Admin, Broker, BrokerSpec, NativeConn, Reader, sleep_until

SMALL_TOPICS = [f"T{i:02d}" for i in range(24)]
BIG_TOPICS = 2500
EXPLORATORY_ONLY = ("flush-lag",)  # no fault: CI runs one scenario per fault (flush-lag: planted bugs)
HOT_TOPICS = 4  # served by bk-a (whose write permission the redis-stalls fault toggles) and bk-e
MIN_OPS_BEFORE_FAULT = 150  # a run with less traffic before its fault proves nothing: rejected, not passed


def brokers(big: bool) -> list[BrokerSpec]:
    """Five small brokers, each serving 10 of the 24 small topics (every topic served by one to three of them),
    in every style; with `big`, the 2 500-topic one."""
    def topics(*idx: int) -> list[str]:
        return [SMALL_TOPICS[i] for i in idx]

    specs = [
        BrokerSpec("bk-a", "10.7.0.1:10911", topics(*range(0, 10)), "5x", everywhere=True),
        BrokerSpec("bk-b", "10.7.0.2:10911", topics(*range(5, 15)), "5x-zipped"),
        BrokerSpec("bk-c", "10.7.0.3:10911", topics(*range(10, 20)), "49", timeout_ms=None),
        BrokerSpec("bk-d", "10.7.0.4:10911", topics(*range(14, 24)), "5x", churn=0.3),
        BrokerSpec("bk-e", "10.7.0.5:10911", topics(*range(0, 24, 3), 23, 13), "http"),
    ]
    if big:
        specs.append(BrokerSpec("bk-big", "10.7.0.9:10911", [f"BIG{i:04d}" for i in range(BIG_TOPICS)], "5x",
                                change=0.0))
    return specs


def big_sample() -> list[str]:
    """The big broker's topics the readers follow: each end of its first, a middle and its last step."""
    return [f"BIG{i:04d}" for i in (0, 99, 100, BIG_TOPICS // 2, BIG_TOPICS - 101, BIG_TOPICS - 1)]


@dataclass
class Scenario:
    fault: str
    seed: int = 1
    label: str = ""  # its name in the catalogue (default: the fault's)
    before_s: float = 3.0
    after_s: float = 4.0
    settings: Settings = field(default_factory=Settings)
    big: bool = False  # the 2 500-topic broker (chunked registrations, swept removals)
    period_s: float = 1.0  # brokers register every period (30 s in production)
    deletes: bool = True  # admin topic deletions
    broker_timeout_ms: int | None = None  # the timeout 5.x brokers send (default: BrokerSpec's)
    hot: bool = False  # readers follow only the first HOT_TOPICS topics, which only the fault changes
    read_pace_s: float = 0.04  # each reader's pause between reads (a read partition: a few reads per Δ)
    quiet: bool = False  # brokers re-send the same bytes, no churn, admin writes KV only (most of a fleet's day)

    @property
    def name(self) -> str:
        return f"{self.label or self.fault}-seed{self.seed}"


class Run:
    """What a fault needs of the running scenario."""

    def __init__(self, sc: Scenario, reg: Registry, hist: History, rng: random.Random) -> None:
        self.sc = sc
        self.reg = reg
        self.hist = hist
        self.rng = rng
        self.cluster = CLUSTER
        self.brokers: dict[str, Broker] = {}
        self.live_samples: list[tuple[int, int, list[str]]] = []
        self.big_broker = "bk-big"
        self.pause_broker = "bk-b"
        self.hot_broker = "bk-a"


@dataclass
class Outcome:
    scenario: Scenario
    hist: History
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # everything but Porcupine's verdicts
    staleness: dict[str, float] = field(default_factory=dict)
    report: Path | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems and all(v["result"] == "Ok" for v in self.verdicts)

    def checked_ops(self) -> int:
        return max((v["ops"] for v in self.verdicts), default=0)

    def summary(self) -> str:
        lines = [f"scenario {self.scenario.name}: {'ok' if self.ok else 'FAILED'} in {self.seconds:.1f} s, "
                 f"{len(self.hist.ops)} requests"]
        for v in self.verdicts:
            line = f"  {v['name']}: {v['result']} ({v['ops']} operations, {v['partitions']} partitions, " \
                   f"{v['seconds']:.2f} s)"
            if v.get("failed_partitions"):
                line += f" failing: {', '.join(v['failed_partitions'][:10])}"
            lines.append(line)
        if self.staleness:
            lines.append(f"  staleness observed: {self.staleness}")
        lines += [f"  PROBLEM: {p}" for p in self.problems[:30]]
        if self.report is not None:
            lines.append(f"  report: {self.report}")
        return "\n".join(lines)


async def _sample_live(run: Run, stop: asyncio.Event) -> None:
    """The live table every 100 ms, straight from Redis (the liveness check's evidence)."""
    key = "{" + run.reg.prefix + "}:live"
    client = run.reg.redis_client()
    try:
        while not stop.is_set():
            call = History.now()
            try:
                async with client.pipeline(transaction=True) as p:  # the role and the table at one instant
                    role, members = await asyncio.wait_for(p.role().zrange(key, 0, -1).execute(), 1.0)
                if role[0] != "master":  # asked during a failover, a sentinel named the old primary, since
                    raise ConnectionError(f"a {role[0]}")  # restarted as a replica still loading: ask again
                run.live_samples.append((call, History.now(), list(members)))
            except Exception:
                await client.aclose()
                with contextlib.suppress(Exception):
                    client = await asyncio.to_thread(run.reg.redis_client)
            await sleep_until(stop, asyncio.get_running_loop().time() + 0.1)
    finally:
        await client.aclose()


async def _settle(run: Run) -> None:
    """Quiet: no sweep or chunked registration left half-way, every worker's cache past its staleness bound."""
    s = run.reg.settings
    client = run.reg.redis_client()
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            left = [k for k in await client.hkeys("{" + run.reg.prefix + "}:sweeps") if k != "#"]
            for name in run.brokers:  # and no chunked registration under way
                if await client.hget("{" + run.reg.prefix + "}:b:" + name, "rg"):
                    left.append(name)
            if not left:
                break
            await asyncio.sleep(0.1)
    finally:
        await client.aclose()
    await asyncio.sleep(2 * s.staleness_ms / 1000 + 0.2)


async def _converged(run: Run, topics: list[str]) -> list[str]:
    """Every worker answers the same for every topic on both doors (the big broker's too); the topic list names
    exactly the topics that have a route."""
    problems: list[str] = []
    answers: dict[str, dict[str, Any]] = {}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        for w in run.reg.workers:
            async with session.get(w.url + "/v1/topics") as r:
                listed = set((await r.json())["topicList"])
            names = sorted(set(topics) | listed)
            conns = [NativeConn(w, "converge") for _ in range(8)]

            async def both(i: int, t: str, w=w, conns=conns) -> tuple[str, Any, Any]:
                async with session.get(f"{w.url}/v1/topics/{t}/route") as r:
                    http = (await r.json()) if r.status == 200 else None
                reply = await conns[i % len(conns)].request(105, {"topic": t}, timeout=10)
                return t, http, orjson.loads(reply.body) if reply.code == 0 else None

            try:
                got = []
                for i in range(0, len(names), len(conns)):  # one request at a time per connection
                    got += await asyncio.gather(*(both(j, t) for j, t in enumerate(names[i:i + len(conns)])))
            finally:
                for c in conns:
                    c.close()
            for t, http, native in got:
                for door, route in (("http", http), ("native", native)):
                    view = _comparable(route)
                    seen = answers.setdefault(t, {"view": view, "by": f"{w.name}/{door}"})
                    if seen["view"] != view:
                        problems.append(f"{t}: {w.name}/{door} answers {view}, {seen['by']} {seen['view']}")
                if (http is not None) != (t in listed):
                    problems.append(f"{t}: {w.name} lists it {t in listed}, routes it {http is not None}")
    return problems[:20]


def _comparable(route: dict[str, Any] | None) -> Any:
    if route is None:
        return None
    qds = sorted((q["brokerName"], q["readQueueNums"], q["writeQueueNums"], q["perm"]) for q in route["queueDatas"])
    bds = sorted((b["brokerName"], tuple(sorted((str(k), v) for k, v in b["brokerAddrs"].items())))
                 for b in route["brokerDatas"])
    return [qds, bds]


MS_NS = 1_000_000
SWITCH_REACTION_NS = 500 * MS_NS  # a worker drops its connections to the old primary once it reads +switch-master


def _unplanned_failovers(hist: History, watch: SentinelWatch, down_after_ns: int) -> None:
    """Each sentinel switch the scenario's own kill does not explain becomes a `failover` fault: from when the
    sentinels saw that primary down (or down-after before the switch) to just after the switch; the old primary
    kept taking writes throughout, so a write anywhere in there may be undone (checks.failover_windows)."""
    planned = [f for f in hist.faults if f.kind == "primary-kill"]  # detail: "... (old-ip:port -> new-ip:port)"
    for at, down, data in watch.switches():
        old = ":".join(data.split()[1:3])
        mine = next((f for f in planned if f.start <= at and f"({old} ->" in f.detail), None)
        if mine is not None:  # the switch away from the primary the scenario killed
            planned.remove(mine)
            continue
        start = down if down is not None else at - down_after_ns
        hist.faults.append(Fault("failover", start, at + SWITCH_REACTION_NS,
                                 f"unplanned: the sentinels switched the primary by themselves ({data})"))


async def run_scenario(sc: Scenario, reports: Path, source: Path | None = None, keep: bool = False) -> Outcome:
    """Run `sc` once; a failure (or `keep`) leaves reports/<name>-<time>/."""
    started = time.monotonic()
    rng = random.Random(sc.seed)
    report = reports / f"{sc.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    workdir = report / "work"
    settings = sc.settings
    reg = Registry(settings, workdir, source)
    hist = History(meta={"scenario": sc.fault, "seed": sc.seed, "settings": asdict(settings), "cluster": CLUSTER,
                         "source": str(source or "")})
    run = Run(sc, reg, hist, rng)
    outcome = Outcome(sc, hist)
    specs = brokers(sc.big)
    for spec in specs:
        if sc.broker_timeout_ms and spec.timeout_ms:
            spec.timeout_ms = sc.broker_timeout_ms
        if sc.quiet:
            spec.change = spec.churn = 0.0
    small = list(SMALL_TOPICS)
    hot = small[:HOT_TOPICS] if sc.hot else []
    for spec in specs:  # the hot topics change only when the fault changes them (bursts, then quiet gaps)
        if set(spec.topics) & set(hot):
            spec.change = spec.churn = 0.0
    tracked = (hot or small) + (big_sample() if sc.big else [])
    kv_keys = ["k1", "k2", "k3"]
    hist.meta.update(small_topics=small, brokers={s.name: asdict(s) for s in specs}, t0=History.now(),
                     kv_namespace=KV_NS)
    stop = asyncio.Event()
    observer: Observer | None = None
    sentinels: SentinelWatch | None = None
    tasks: list[asyncio.Task] = []
    try:
        await reg.start()
        observer = Observer(reg.redis_client, reg.prefix, History.now)
        await observer.start()
        if reg.topology is not None:
            sentinels = SentinelWatch(reg.topology, History.now)
            await sentinels.start()
        sampler = asyncio.create_task(_sample_live(run, stop))
        for spec in specs:
            run.brokers[spec.name] = Broker(spec, reg, hist, random.Random(rng.random()), sc.period_s)
        addrs = {s.name: s.addr for s in specs}
        readers = [Reader(hist, w, door, tracked, small, addrs, random.Random(rng.random()), kv_keys=kv_keys,
                          pace_s=sc.read_pace_s) for w in reg.workers for door in ("http", "native")]
        admin = Admin(hist, reg, [t for t in small if t not in hot],
                      [s.name for s in specs if s.name != "bk-big" and not set(s.topics) & set(hot)], kv_keys,
                      random.Random(rng.random()), deletes=sc.deletes, kv_only=sc.quiet)
        tasks = [asyncio.create_task(b.run(stop)) for b in run.brokers.values()]
        await asyncio.sleep(sc.period_s)  # every broker registered once before anyone reads
        admin_stop, readers_stop = asyncio.Event(), asyncio.Event()
        others = [asyncio.create_task(r.run(readers_stop)) for r in readers]
        others.append(asyncio.create_task(admin.run(admin_stop)))
        tasks += others
        await asyncio.sleep(sc.before_s)
        before = sum(1 for o in hist.ops if o.status == "ok")
        if before < MIN_OPS_BEFORE_FAULT:
            raise FaultMissed(f"only {before} requests succeeded before the fault")
        await FAULTS[sc.fault](run)
        await asyncio.sleep(sc.after_s)
        # the end: brokers keep registering the same bytes (they stay live, nothing changes), the rest stops
        for b in run.brokers.values():
            b.steady = True
        admin_stop.set()
        await asyncio.sleep(0.5)
        readers_stop.set()
        await asyncio.gather(*others, return_exceptions=True)
        await _settle(run)
        for r in readers:  # the end state, through every worker and door
            await r.final(tracked)
        stop_sampler = sampler
        stop_sampler.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await stop_sampler
        outcome.problems += [p for r in readers for p in r.problems][:20]
        outcome.problems += await _converged(run, tracked + ([f"BIG{i:04d}" for i in range(BIG_TOPICS)]
                                                            if sc.big else []))
        client = reg.redis_client()
        try:
            await check_invariants(client, reg.prefix)
        except AssertionError as exc:
            outcome.problems.append(f"Redis keys: {exc}")
        finally:
            await client.aclose()
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        for b in run.brokers.values():
            b.shutdown()
    finally:
        stop.set()
        for t in tasks:
            t.cancel()
        if observer is not None:
            await observer.stop()
            hist.events, hist.event_gaps = observer.events, observer.gaps
        if sentinels is not None:
            await sentinels.stop()
            _unplanned_failovers(hist, sentinels, reg.topology.down_after_ms * MS_NS)
        hist.meta["live_samples"] = run.live_samples
        await asyncio.to_thread(reg.stop)
    prepared = checks.prepare(hist)
    outcome.problems += checks.liveness(hist)
    outcome.verdicts = await asyncio.to_thread(porcupine.check, prepared, report)
    outcome.staleness = checks.staleness_observed(hist)
    outcome.seconds = time.monotonic() - started
    if outcome.ok and not keep:
        shutil.rmtree(report, ignore_errors=True)
    else:
        outcome.report = report
        hist.save(report / "history.json.gz")
        (report / "summary.txt").write_text(outcome.summary() + "\n")
    return outcome


def catalogue(seed: int = 1) -> dict[str, Scenario]:
    """Every scenario, one fault each, by name (the CI run takes one of each; the exploratory mode all, with random
    seeds)."""
    found = {
        "worker-kill": Scenario("worker-kill", seed),
        "worker-stop": Scenario("worker-stop", seed),
        "redis-stop": Scenario("redis-stop", seed),
        "pubsub-kill": Scenario("pubsub-kill", seed),
        "broker-pause": Scenario("broker-pause", seed, after_s=3.0),
        "chunked-kill": Scenario("chunked-kill", seed, big=True),
        "removal-kill": Scenario("removal-kill", seed, big=True),
        "primary-kill": Scenario("primary-kill", seed, settings=Settings(sentinel=True)),
        # no fault, settings at an edge and a quiet fleet: heartbeats written up to 3 s after their acknowledgement,
        # brokers timing out after 2 s (the expiry must wait for heartbeats on their way)
        "flush-lag": Scenario("none", seed, settings=Settings(heartbeat_flush_ms=3000), broker_timeout_ms=2000,
                              quiet=True),
        # reads of four topics, which change only in the fault's bursts (Redis stalls between the changes), each
        # burst followed by a quiet gap longer than Δ
        "hot-topics": Scenario("redis-stalls", seed, hot=True, before_s=5.5, after_s=2.0, read_pace_s=0.25),
        "primary-kill-wait": Scenario("primary-kill", seed,
                                      settings=Settings(sentinel=True, wait_replicas=1, wait_registrations=True)),
    }
    for label, sc in found.items():
        sc.label = label
    return found
