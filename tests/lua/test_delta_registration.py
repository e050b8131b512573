"""Registrations sent as deltas (registerBroker's delta mode, service/core/deltas.py): against twin registries on
one Redis, one sent every registration whole and the other, like a worker, each against the last one it sent of
the same broker, the two must hold the same keys with the same values after every operation — the fence lets a
delta through only when writing it does what writing the whole table does. Random sequences (with the admin
changes, removals and expiry that must make a base stale) and the cases one by one; and the same cases against
the script with its fence taken out, which must then differ (so these tests can fail).
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, rule

from service.errors import NamesrvError
from service.models import (
    BrokerIdentity,
    DataVersion,
    QueueData,
    RegisterBroker,
    TopicConfig,
    TopicDelta,
    TopicTable,
)
from service.store import RouteStore
from service.store.scripts import LuaScript
from tests.invariants import check_invariants
from tests.lua.machines import RedisMachine, on_fakeredis, run_on_redis
from tests.lua.test_scenarios import CLUSTER, T0, dump

# registerBroker's delta fence, and what replaces it in the fenceless variant
FENCE = {'if owner == cluster and rcall("HGET", kba, id) == addr then': "if true then",
         'delta = rec[1] == ARGV[24] .. "|" .. token': "delta = true"}


def header(req: RegisterBroker) -> tuple[Any, ...]:
    """What a door's header carries: the registrations a delta may be sent between."""
    return (req.cluster, req.broker_name, req.broker_id, req.broker_addr, req.ha_server_addr, req.zone_name,
            req.enable_acting_master, req.heartbeat_timeout_ms)


def digest(req: RegisterBroker) -> str:
    return hashlib.sha256(repr((req, sorted(req.topic_table.encs.items()))).encode()).hexdigest()


class Twins:
    """Two registries on one client: `whole` gets every registration whole, `delta` each against the last one of
    the same header it was sent (a worker's RegistrationBases)."""

    def __init__(self, client: Any, fenceless: bool = False) -> None:
        tag = uuid.uuid4().hex[:8]
        self.whole = RouteStore(client, prefix="w" + tag)
        self.delta = RouteStore(client, prefix="d" + tag)
        if fenceless:  # the delta is written whatever the store holds
            script = self.delta._scripts["registerBroker"]
            source = script.source
            for fence, none in FENCE.items():
                assert source.count(fence) == 1, fence
                source = source.replace(fence, none)
            self.delta._scripts = {**self.delta._scripts,  # load_all's dict is shared: a copy
                                   "registerBroker": LuaScript(script.name, script.key_roles, source)}
        self.bases: dict[tuple[Any, ...], tuple[str, TopicTable]] = {}
        self.applied = 0

    async def register(self, req: RegisterBroker, now: int = T0, **kw: Any) -> tuple[Any, Any]:
        d = digest(req)
        key, table = header(req), req.topic_table
        base = self.bases.get(key)
        delta = (TopicDelta.between(base[0], base[1], req.topic_table) if base is not None and base[0] != d
                 else None)
        self.bases[key] = (d, table.compact())  # as a worker keeps it
        got = []
        for store, extra in ((self.whole, {}), (self.delta, {"delta": delta})):
            try:
                got.append(await store.register_broker(req, digest=d, now=now, **kw, **extra))
            except NamesrvError as exc:
                got.append(type(exc))
        whole, by_delta = got
        if not isinstance(by_delta, type):
            self.applied += by_delta.delta
            if by_delta.unchanged:  # replayed: the bytes were what the broker registered last
                by_delta = type(by_delta)(by_delta.ha_server_addr, by_delta.master_addr, by_delta.kv_table)
            by_delta = replace(by_delta, delta=False)
        return whole, by_delta

    async def both(self, op: str, *args: Any, **kw: Any) -> None:
        results = []
        for store in (self.whole, self.delta):
            try:
                results.append(await getattr(store, op)(*args, **kw))
            except NamesrvError as exc:
                results.append(type(exc))
        assert results[0] == results[1], (op, results)

    async def same(self) -> None:
        """Every key of one registry equals the other's (the prefix aside), but for the live info's `td`: a delta
        knows more than the whole path (which does not compare served topics under the same data version) and
        may keep it where the whole path drops it. A `td` claimed wrongly shows as a difference later. `civer` and
        `tlver` are renewed from Redis TIME (and `cilog` logs civer values, `bl` the one its lines are current at):
        both have each or neither."""
        w, d = (await dump(self.whole), await dump(self.delta))

        def norm(dumped: dict[str, Any], prefix: str) -> dict[str, Any]:
            out = {k.removeprefix(prefix): v for k, v in dumped.items()}
            for k, (kind, value) in out.items():
                if k.startswith("l:"):
                    out[k] = (kind, {f: v for f, v in value.items() if f != "td"})
                elif k in ("civer", "tlver", "cilog"):  # cilog: civer values with the brokers they changed
                    out[k] = (kind, "renewed")
                elif k == "bl":  # brokers' lines, and the civer they are current at
                    out[k] = (kind, {f: v for f, v in value.items() if f != "#"})
            return out

        assert norm(w, self.whole.keys.base) == norm(d, self.delta.keys.base)
        await check_invariants(self.delta.redis, self.delta.keys.prefix)


def reg(topics: dict[str, tuple[int, int, int, int]], counter: int = 1, *, name: str = "b0", bid: int = 0,
        addr: str = "10.0.0.1:10911", eam: bool | None = True, cluster: str = CLUSTER,
        filters: list[str] | None = None) -> RegisterBroker:
    return RegisterBroker(
        cluster=cluster, broker_name=name, broker_id=bid, broker_addr=addr, ha_server_addr="10.0.1.1:1",
        topics={t: TopicConfig(*v) for t, v in topics.items()}, data_version=DataVersion(1, counter, 0),
        enable_acting_master=eam, filter_server_list=filters)


A4, A8 = (4, 4, 6, 0), (8, 8, 6, 0)


# Each case: the operations, then whether the fenceless script goes wrong on it (the fence is what keeps it right).
async def _stale_by_admin_delete(t: Twins) -> None:
    await t.register(reg({"A": A4, "B": A4}, 1))
    await t.both("delete_topic", "A")
    await t.register(reg({"A": A8, "B": A8}, 2))


async def _stale_by_admin_register_topic(t: Twins) -> None:
    await t.register(reg({"A": A4, "B": A4}, 1))
    await t.both("register_topic", "A", [QueueData("b0", 8, 8, 6, 0)])
    await t.register(reg({"A": A8, "B": A4}, 2))  # the base says A is 4: the delta skips it; the store has 8


async def _stale_by_write_perm(t: Twins) -> None:
    await t.register(reg({"A": A4, "B": A4}, 1))
    await t.both("wipe_write_perm", "b0")
    await t.register(reg({"A": A4, "B": A8}, 2))


async def _stale_by_another_registration(t: Twins) -> None:
    """Another connection or worker registered other bytes of the broker since this one's base."""
    first = reg({"A": A4, "B": A4}, 1)
    await t.register(first)
    other = reg({"A": A8, "B": A8, "C": A8}, 2)
    for store in (t.whole, t.delta):  # not through the twins: their bases stay at `first`
        await store.register_broker(other, digest=digest(other), now=T0)
    await t.register(reg({"A": A4, "B": A4}, 3))  # against `first`: nothing changed in A, B; C stays (kept)


async def _same_data_version_leaves_changes(t: Twins) -> None:
    """A changed table under the same data version: the whole path writes only missing topics, so the store's
    table is not the registration's (no `td`), and the next delta against it must not be written."""
    await t.register(reg({"A": A4, "B": A4}, 1))
    await t.register(reg({"A": A8, "B": A4}, 1))  # same counter: A stays 4 in the store (Java's rule)
    await t.register(reg({"A": A8, "B": A8}, 2))  # against the last: A unchanged... but the store has 4


async def _removed_and_back(t: Twins) -> None:
    await t.register(reg({"A": A4, "B": A4}, 1), delete_topic_with_broker_registration=True)
    await t.register(reg({"A": A4}, 2), delete_topic_with_broker_registration=True)
    await t.register(reg({"A": A8, "B": A8}, 3), delete_topic_with_broker_registration=True)


async def _switch_turned_on(t: Twins) -> None:
    """deleteTopicWithBrokerRegistration turned on between two registrations: the store drops what the base kept."""
    await t.register(reg({"A": A4, "B": A4}, 1))
    await t.register(reg({"A": A8}, 2))  # B kept (switch off)
    await t.register(reg({"A": A4}, 3), delete_topic_with_broker_registration=True)


async def _unregistered_meanwhile(t: Twins) -> None:
    await t.register(reg({"A": A4, "B": A4}, 1))
    await t.both("unregister_broker", BrokerIdentity(CLUSTER, "b0", 0, "10.0.0.1:10911"))
    await t.register(reg({"A": A8, "B": A8}, 2))


async def _prime_slave_wiped(t: Twins) -> None:
    """A prime slave under the acting-master rule registers with its write bit wiped: 6 and 4 wipe alike."""
    await t.register(reg({"A": (4, 4, 6, 0), "B": A4}, 1, bid=1, addr="10.0.0.2:10911"))
    await t.register(reg({"A": (4, 4, 4, 0), "B": A8}, 2, bid=1, addr="10.0.0.2:10911"))


async def _same_bytes_elsewhere(t: Twins) -> None:
    """The bytes another connection already registered: replayed, as the unchanged path would."""
    await t.register(reg({"A": A4}, 1))
    newer = reg({"A": A8}, 2)
    for store in (t.whole, t.delta):
        await store.register_broker(newer, digest=digest(newer), now=T0)
    await t.register(newer, now=T0 + 5)


async def _plain_changes(t: Twins) -> None:
    await t.register(reg({"A": A4, "B": A4, "C": A4}, 1))
    for counter in range(2, 6):
        await t.register(reg({"A": A8 if counter % 2 else A4, "B": A4, f"N{counter}": A8}, counter))


CASES = {
    "stale by an admin delete": (_stale_by_admin_delete, True),
    "stale by an admin topic registration": (_stale_by_admin_register_topic, True),
    "stale by a write-perm wipe": (_stale_by_write_perm, True),
    "stale by another registration": (_stale_by_another_registration, True),
    "same data version leaves changes": (_same_data_version_leaves_changes, True),
    "unregistered meanwhile": (_unregistered_meanwhile, True),
    "removed, then back": (_removed_and_back, False),
    "the switch turned on": (_switch_turned_on, False),
    "prime slave, write bit wiped": (_prime_slave_wiped, False),
    "the same bytes registered elsewhere": (_same_bytes_elsewhere, False),
    "plain changes": (_plain_changes, False),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_a_delta_does_what_the_whole_table_does(case, store):
    run, _ = CASES[case]
    t = Twins(store.redis)
    await run(t)
    await t.same()


@pytest.mark.parametrize("case", [c for c, (_, needs_fence) in CASES.items() if needs_fence])
async def test_without_the_fence_a_stale_delta_goes_wrong(case, store):
    run, _ = CASES[case]
    t = Twins(store.redis, fenceless=True)
    await run(t)
    with pytest.raises(AssertionError):
        await t.same()


async def test_deltas_are_written_when_the_base_is_what_the_store_holds(store):
    t = Twins(store.redis)
    await _plain_changes(t)
    assert t.applied == 4  # every registration after the first
    await t.same()


# ---------------------------------------------------------------- random sequences

NAMES = ["b0", "b1"]
ADDRS = ["10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911"]
TOPICS = ["T0", "T1", "T2", "T3", "T4"]
qd = st.sampled_from([(4, 4, 6, 0), (8, 8, 6, 0), (8, 8, 4, 0), (4, 4, 7, 1)])


def make_machine(connect):
    class DeltaMachine(RedisMachine):
        @initialize()
        def setup(self):
            self.open(connect)
            self.twins = Twins(self.client)
            self.now = T0

        @rule(n=st.sampled_from(NAMES), bid=st.sampled_from([0, 0, 1]), a=st.sampled_from(ADDRS),
              topics=st.dictionaries(st.sampled_from(TOPICS), qd, max_size=5), counter=st.integers(0, 2),
              eam=st.sampled_from([None, True]), delete_missing=st.booleans(),
              filters=st.sampled_from([None, [], ["10.9.0.1:1"]]))
        def register(self, n, bid, a, topics, counter, eam, delete_missing, filters):
            self.now += 10
            req = reg(topics, counter, name=n, bid=bid, addr=a, eam=eam, filters=filters)
            whole, by_delta = self.run(self.twins.register(req, self.now,
                                                           delete_topic_with_broker_registration=delete_missing))
            assert whole == by_delta
            event(f"deltas written: {min(self.twins.applied, 3)}+")

        @rule(t=st.sampled_from(TOPICS))
        def delete_topic(self, t):
            self.run(self.twins.both("delete_topic", t))

        @rule(t=st.sampled_from(TOPICS), n=st.sampled_from(NAMES), q=qd)
        def register_topic(self, t, n, q):
            self.run(self.twins.both("register_topic", t, [QueueData(n, *q)]))

        @rule(n=st.sampled_from(NAMES), wipe=st.booleans())
        def write_perm(self, n, wipe):
            self.run(self.twins.both("wipe_write_perm" if wipe else "add_write_perm", n))

        @rule(n=st.sampled_from(NAMES), a=st.sampled_from(ADDRS))
        def unregister(self, n, a):
            self.run(self.twins.both("unregister_broker", BrokerIdentity(CLUSTER, n, 0, a)))

        @rule(dt=st.integers(0, 200_000))
        def expire(self, dt):
            self.now += dt
            self.run(self.twins.both("expire_all", now=self.now))

        @invariant()
        def same(self):
            if hasattr(self, "twins"):
                self.run(self.twins.same())

    return DeltaMachine


test_delta_machine_fakeredis = on_fakeredis(make_machine, examples=25, steps=25)


@pytest.mark.redis
def test_delta_machine_real_redis(redis_server):
    run_on_redis(make_machine, redis_server.url, examples=8, steps=25)


@given(old=st.dictionaries(st.sampled_from(TOPICS), st.sampled_from(["4,4,6,0", "8,8,6,0"]), max_size=5),
       names=st.lists(st.sampled_from(TOPICS), unique=True, max_size=5), enc=st.sampled_from(["4,4,6,0", "8,8,6,0"]))
def test_tables_of_one_queue_data_give_the_same_delta_by_the_short_ways(old, names, enc):
    """A decoder that found every topic's queue data alike says so (TopicTable.single): the delta is then built
    with C-level passes only, and must hold what the general grouping holds."""
    table = dict.fromkeys(names, enc)

    def parts(d: TopicDelta) -> tuple[Any, ...]:
        def groups(text: str) -> list[tuple[str, ...]]:
            return sorted((line.split("\t")[0], *sorted(line.split("\t")[1:])) for line in text.split("\n") if line)

        return groups(d.changed), groups(d.added), sorted(d.removed.split("\n")), d.size

    old_single = next(iter(set(old.values()))) if len(set(old.values())) == 1 else None
    general = TopicDelta.between("D", TopicTable(encs=old), TopicTable(encs=table))
    assert parts(TopicDelta.between("D", TopicTable(encs=old), TopicTable(encs=table, single=enc))) == parts(general)
    assert parts(TopicDelta.between("D", TopicTable(encs=old, single=old_single),
                                    TopicTable(encs=table, single=enc))) == parts(general)
    assert parts(TopicDelta.between("D", TopicTable(encs=old, single=old_single).compact(),
                                    TopicTable(encs=table, single=enc))) == parts(general)


ENCS = ["4,4,6,0", "8,8,6,0", "1,1,6,0", "8,8,7,0"]
many_topics = st.sampled_from([f"T{i}" for i in range(12)])


@given(old=st.dictionaries(many_topics, st.sampled_from(ENCS), max_size=12),
       new=st.dictionaries(many_topics, st.sampled_from(ENCS), max_size=12), reorder=st.booleans())
def test_tables_known_by_their_groups_give_the_delta_of_the_entry_by_entry_comparison(old, new, reorder):
    """A table a decoder gave as its groups only (a stock broker's: several queue data) is compared group by group
    (TopicDelta._between_groups): the same delta as name by name, whether the base is kept as groups (compact), as
    lines (what crosses a process boundary) or as entries, and whatever order the groups name their topics in."""
    def parts(d: TopicDelta) -> tuple[Any, ...]:
        def groups(text: str) -> list[tuple[str, ...]]:
            return sorted((line.split("\t")[0], *sorted(line.split("\t")[1:])) for line in text.split("\n") if line)

        return groups(d.changed), groups(d.added), sorted(d.removed.split("\n")), d.size

    def by_groups(table: dict[str, str]) -> TopicTable:
        return TopicTable(count=len(table), groups=TopicTable(
            encs=dict(reversed(table.items())) if reorder else table).groups)

    entry_by_entry = parts(TopicDelta.between("D", TopicTable(encs=old), TopicTable(encs=new)))
    lines_only = TopicTable()
    lines_only.__setstate__(TopicTable(encs=old).__getstate__())
    for before in (by_groups(old), TopicTable(encs=old).compact(), lines_only):
        assert parts(TopicDelta.between("D", before, by_groups(new))) == entry_by_entry
    assert by_groups(new) == TopicTable(encs=new) and by_groups(new).lines.count("\n") == len(new)
