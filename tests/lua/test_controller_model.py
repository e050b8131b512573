"""Model-based test of the controller's Lua transitions: random interleavings of heartbeats, broker id
applications, registrations, SyncStateSet alterations (stale ones included), elections (by brokers, by admins, and
by several workers racing on the same expiry), expiry scans and cleans, sent through three ControllerStore
"workers" sharing one Redis, run in lockstep with tests/controller_model.py (the Java controller's rules).

Every answer must equal the model's, and after every step the whole controller state read from Redis must equal
the model's. Independently of the model, the safety properties hold: one master per (set, master epoch), epochs
never go back, and a new master (after the first election) comes from the SyncStateSet unless unclean election
is on.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, rule

from service.store.controller import ControllerStore
from tests.controller_model import ControllerModel
from tests.lua.machines import RedisMachine, on_fakeredis, run_on_redis

CLUSTERS = ["C0", "C0", "C0", "C1"]  # mostly one cluster; C1 makes heartbeats that do not count for C0's sets
NAMES = ["b0", "b1"]
IDS = [1, 2, 3, 4]
ADDRS = [f"10.0.0.{i}:10911" for i in range(1, 6)]
WORKERS = 3
CONNS = ["", "conn-a", "conn-b", "conn-c"]  # the connection a heartbeat came on ("" = unknown)

ids = st.sampled_from(IDS)
opt_int = st.none() | st.integers(0, 3)


def make_machine(connect):
    class ControllerMachine(RedisMachine):
        @initialize(unclean=st.booleans())
        def setup(self, unclean):
            self.open(connect)
            prefix = "c" + uuid.uuid4().hex[:10]
            self.workers = [ControllerStore(self.client, prefix=prefix) for _ in range(WORKERS)]
            self.model = ControllerModel()
            self.unclean = unclean
            self.now = 1_000_000
            self.on_conn: dict[str, set[tuple[str, str, int]]] = {}  # what each connection heartbeated, as the door
            self.masters: dict[tuple[str, int, int], int] = {}  # (set, incarnation, masterEpoch) -> master
            self.incarnation = {n: 0 for n in NAMES}
            self.last_epochs: dict[str, tuple[int, int]] = {}
            # (master, masterEpoch, sssEpoch) seen lately, for stale masters' alters
            self.history: list[tuple[int | None, int, int]] = []

        def store(self, w: int) -> ControllerStore:
            return self.workers[w % WORKERS]

        def check_election(self, name, reply, before):
            """Safety of one election answer, independent of the model."""
            event(f"elect -> {reply.code}")
            if reply.code != 0:
                return
            g = reply.group
            key = (name, self.incarnation[name], g.master_epoch)
            assert self.masters.setdefault(key, g.master) == g.master, f"two masters at {key}"
            if before is not None and before.master_epoch > 0 and not self.unclean:
                assert g.master in before.sync_state_set, "elected outside the SyncStateSet"

        # ---------------------------------------------------------------- rules

        @rule(ms=st.sampled_from([0, 200, 3_000, 9_000, 10_000, 12_000]))
        def tick(self, ms):
            self.now += ms

        @rule(w=st.integers(0, 2), c=st.sampled_from(CLUSTERS), n=st.sampled_from(NAMES), bid=ids,
              a=st.sampled_from(ADDRS), timeout=st.sampled_from([None, 3_000, 10_000]), epoch=opt_int,
              off=st.none() | st.sampled_from([0, 100, 200]), prio=st.none() | st.integers(1, 3),
              conn=st.sampled_from(CONNS))
        def heartbeat(self, w, c, n, bid, a, timeout, epoch, off, prio, conn=""):
            got = self.run(self.store(w).heartbeat(c, n, bid, a, timeout_ms=timeout, epoch=epoch, max_offset=off,
                                                   confirm_offset=off, election_priority=prio, connection=conn,
                                                   now=self.now))
            assert got == self.model.heartbeat(c, n, bid, a, timeout, epoch, off, off, prio, conn, now=self.now)
            if conn:
                self.on_conn.setdefault(conn, set()).add((c, n, bid))

        @rule(w=st.integers(0, 2), conn=st.sampled_from(CONNS[1:]), racers=st.integers(1, WORKERS))
        def connection_closes(self, w, conn, racers):
            """A broker's connection closes (kill -9): what heartbeated on it, and still does, is no longer alive;
            a master among them is re-elected at once by the closing worker (and maybe racing others)."""
            members = sorted(self.on_conn.pop(conn, set()))
            dropped, elect = self.run(self.store(w).drop_connection(conn, members))
            assert (dropped, elect) == self.model.drop_connection(conn, members)
            event(f"connection close ends {len(dropped)} and names {len(elect)} master(s)")
            self.reelect(w, elect, racers)

        @rule(w=st.integers(0, 2), c=st.sampled_from(CLUSTERS), n=st.sampled_from(NAMES),
              bid=st.none() | ids, a=st.sampled_from(ADDRS), stamp=st.integers(0, 1))
        def apply_broker_id(self, w, c, n, bid, a, stamp):
            """A broker's first registration: CONTROLLER_GET_NEXT_BROKER_ID (when bid is None), then APPLY."""
            store = self.store(w)
            if bid is None:
                bid = self.run(store.next_broker_id(n))
                assert bid == self.model.next_broker_id(n)
            code = f"{a};{stamp}"
            got = self.run(store.apply_broker_id(c, n, bid, code, now=self.now))
            assert got == self.model.apply_broker_id(c, n, bid, code, now=self.now)
            event(f"apply -> {got.code}")

        @rule(w=st.integers(0, 2), c=st.sampled_from(CLUSTERS), n=st.sampled_from(NAMES), bid=ids,
              a=st.sampled_from(ADDRS))
        def register_broker(self, w, c, n, bid, a):
            got = self.run(self.store(w).register_broker(c, n, bid, a, now=self.now))
            assert got == self.model.register_broker(c, n, bid, a, now=self.now)
            event(f"register -> {got.code}/{got.extra}")

        @rule(w=st.integers(0, 2), n=st.sampled_from(NAMES), who=st.sampled_from(["current", "stale", "other"]),
              pick=st.integers(0, 100), other=ids, new=st.sets(ids, max_size=4), add_master=st.booleans())
        def alter_sync_state_set(self, w, n, who, pick, other, new, add_master):
            """The master's view of itself: current, one seen earlier (a stale master), or made up."""
            g = self.model.view(n, self.now)
            if who == "current" and g is not None:
                master, mepoch, sepoch = g.master, g.master_epoch, g.sync_state_set_epoch
            elif who == "stale" and self.history:
                master, mepoch, sepoch = self.history[pick % len(self.history)]
            else:
                master, mepoch, sepoch = other, pick % 4, pick % 5
            members = set(new) | ({master} if add_master and master is not None else set())
            before = g
            got = self.run(self.store(w).alter_sync_state_set(n, master, mepoch, sorted(members), sepoch,
                                                              now=self.now))
            want = self.model.alter_sync_state_set(n, master, mepoch, members, sepoch, now=self.now)
            assert got == want
            event(f"alter -> {got.code}")
            if got.code == 0:  # only the current master at its current epochs can alter
                assert before is not None and (master, mepoch, sepoch) == (
                    before.master, before.master_epoch, before.sync_state_set_epoch)

        @rule(w=st.integers(0, 2), n=st.sampled_from(NAMES), bid=st.sampled_from([-1, -1, *IDS]),
              designate=st.booleans())
        def elect(self, w, n, bid, designate):
            """A broker electing itself (designate False) or mqadmin electMaster (designate True)."""
            before = self.model.view(n, self.now)
            got = self.run(self.store(w).elect_master(n, bid, designate=designate, unclean=self.unclean,
                                                      now=self.now))
            want = self.model.elect_master(n, bid, designate, self.unclean, now=self.now)
            assert got == want
            self.check_election(n, got, before)

        @rule(w=st.integers(0, 2), batch=st.integers(1, 4), racers=st.integers(1, WORKERS))
        def expire_and_reelect(self, w, batch, racers):
            """One worker's expiry batch; each set whose master expired is elected by `racers` workers that all
            saw the same master epoch (the Java leader does it once; here whoever comes first, once)."""
            more, expired, elect = self.run(self.store(w).expire(batch=batch, now=self.now))
            want_more, want_expired, want_elect = self.model.expire(self.now, batch)
            assert (more, expired, elect) == (want_more, want_expired, want_elect)
            event(f"expiry names {len(elect)} master(s) to re-elect")
            self.reelect(w, elect, racers)

        @rule(w=st.integers(0, 2), racers=st.integers(1, WORKERS))
        def scan_inactive_masters(self, w, racers):
            found = self.run(self.store(w).inactive_masters(now=self.now))
            assert sorted(found) == self.model.inactive_masters(self.now)
            self.reelect(w, sorted(found), racers)

        def reelect(self, w, elect, racers):
            for name, epoch in elect:
                for r in range(racers):
                    before = self.model.view(name, self.now)
                    got = self.run(self.store(w + r).elect_master(name, unclean=self.unclean, based_on_epoch=epoch,
                                                                  now=self.now))
                    want = self.model.elect_master(name, -1, False, self.unclean, epoch, now=self.now)
                    assert got == want
                    self.check_election(name, got, before)
                    if r > 0 and before is not None and before.master_epoch != epoch:
                        assert got.code == -1  # a later racer changes nothing

        @rule(w=st.integers(0, 2), n=st.sampled_from(NAMES), a=st.sampled_from(ADDRS), epoch=opt_int,
              off=st.sampled_from([0, 100, 200]))
        def broker_boots(self, w, n, a, epoch, off):
            """A 5.x broker's controller-mode start (docs/controller-protocol.md §4): next id, apply, register,
            a heartbeat, and a self-election when no master was answered."""
            store = self.store(w)
            bid = self.run(store.next_broker_id(n))
            assert bid == self.model.next_broker_id(n)
            code = f"{a};{self.now}"
            got = self.run(store.apply_broker_id("C0", n, bid, code, now=self.now))
            assert got == self.model.apply_broker_id("C0", n, bid, code, now=self.now)
            if got.code != 0:
                return
            got = self.run(store.register_broker("C0", n, bid, a, now=self.now))
            assert got == self.model.register_broker("C0", n, bid, a, now=self.now)
            self.heartbeat(w, "C0", n, bid, a, None, epoch, off, None)
            if got.extra == 0:
                self.elect(w + 1, n, bid, False)

        @rule(w=st.integers(0, 2), n=st.sampled_from(NAMES), silent=st.none() | ids, epoch=opt_int,
              offs=st.lists(st.sampled_from([100, 200]), min_size=4, max_size=4),
              prios=st.lists(st.none() | st.integers(1, 3), min_size=4, max_size=4))
        def replicas_heartbeat(self, w, n, silent, epoch, offs, prios):
            """Every replica of a set heartbeats (as each broker does every second), but one that is down."""
            g = self.model.view(n, self.now)
            for bid, addr in sorted((g.replicas if g else {}).items()):
                if bid != silent:
                    i = (bid - 1) % 4
                    self.heartbeat(w + bid, g.cluster, n, bid, addr, None, epoch, offs[i], prios[i],
                                   CONNS[1 + i % 3])

        @rule(w=st.integers(0, 2), n=st.sampled_from(NAMES), racers=st.integers(1, WORKERS),
              how=st.sampled_from(["expiry", "scan", "close"]), epoch=opt_int,
              offs=st.lists(st.sampled_from([100, 200]), min_size=4, max_size=4),
              prios=st.lists(st.none() | st.integers(1, 3), min_size=4, max_size=4))
        def master_dies(self, w, n, racers, how, epoch, offs, prios):
            """kill -9 of a set's master: its connection closes (when it heartbeated on one), or its heartbeats
            stop while the others go on past every timeout and an expiry batch or the inactive-master scan finds
            it; then the racing re-elections."""
            g = self.model.view(n, self.now)
            if g is None or g.master is None:
                return
            live = self.model.live.get((g.cluster, n, g.master))
            if how == "close" and live is not None and live.conn:
                self.connection_closes(w, live.conn, racers)
                return
            self.now += 10_001  # past every heartbeat timeout the rules use
            self.replicas_heartbeat(w, n, g.master, epoch, offs, prios)
            if how == "scan":
                self.scan_inactive_masters(w, racers)
            else:
                self.expire_and_reelect(w, 4, racers)

        @rule(w=st.integers(0, 2), n=st.sampled_from(NAMES), keep=st.none() | st.sets(ids, max_size=4))
        def master_reports_sync_state_set(self, w, n, keep):
            """The current master reports the replicas it sees in sync (None: every alive one) at its current
            epochs: usually accepted."""
            g = self.model.view(n, self.now)
            if g is None or g.master is None:
                return
            members = set(g.alive) if keep is None else set(keep) & set(g.replicas)
            self.alter_sync_state_set(w, n, "current", 0, g.master, members, True)

        @rule(w=st.integers(0, 2), c=st.sampled_from([None, "C0", "C1"]), n=st.sampled_from(NAMES),
              ids_arg=st.sampled_from([None, "", "1", "2;3", "4", "x", ";", "1;;2", "2;"]), living=st.booleans(),
              rare=st.integers(0, 3))
        def clean(self, w, c, n, ids_arg, living, rare):
            """mqadmin cleanBrokerMetadata (rarer than the rest: it ends a set's history)."""
            if rare:
                return
            got = self.run(self.store(w).clean_broker_data(c, n, ids_arg, living, now=self.now))
            assert got == self.model.clean_broker_data(c, n, ids_arg, living, now=self.now)
            event(f"clean -> {got.code}/{got.extra}")

        # ---------------------------------------------------------------- invariants

        @invariant()
        def same_state_as_the_model(self):
            if not hasattr(self, "loop"):
                return
            got = self.run(self.workers[0].groups(now=self.now))
            want = {n: self.model.view(n, self.now) for n in sorted(self.model.sync)}
            assert got == want
            for n in NAMES:
                assert self.run(self.workers[1].group(n, now=self.now)) == self.model.view(n, self.now)

        @invariant()
        def epochs_never_go_back(self):
            if not hasattr(self, "loop"):
                return
            for n in NAMES:
                g = self.model.view(n, self.now)
                if g is None:
                    if n in self.last_epochs:  # removed by an admin clean: a new incarnation starts at 0
                        del self.last_epochs[n]
                        self.incarnation[n] += 1
                    continue
                epochs = (g.master_epoch, g.sync_state_set_epoch)
                old = self.last_epochs.get(n, (0, 0))
                assert epochs[0] >= old[0] and epochs[1] >= old[1], (n, old, epochs)
                self.last_epochs[n] = epochs
                self.history.append((g.master, g.master_epoch, g.sync_state_set_epoch))
                self.history = self.history[-20:]

    return ControllerMachine


test_controller_model_fakeredis = on_fakeredis(make_machine, examples=120, steps=50)


@pytest.mark.redis
def test_controller_model_real_redis(redis_server):
    run_on_redis(make_machine, redis_server.url, examples=40, steps=50)
