"""A reference model of the Java controller's rules (ReplicasInfoManager, DefaultElectPolicy,
DefaultBrokerHeartbeatManager), in plain Python dicts, written from docs/controller-protocol.md and the Java
sources, independently of the Lua scripts: the model-based tests run it in lockstep with service/store/controller.py.

It answers in the store's types (`Reply`, `GroupView`) so results compare directly. Where ours deliberately
differs from Java (one, noted at `clean_broker_data`) the model follows ours and says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from service.store.controller import CONTROLLER_TRIGGER, DEFAULT_HEARTBEAT_TIMEOUT_MS, GroupView, Reply

INT_MAX = 2**31 - 1


@dataclass
class ReplicaInfo:  # BrokerReplicaInfo
    cluster: str
    name: str
    next_assign: int = 1
    ids: dict[int, tuple[str, str]] = field(default_factory=dict)  # id -> (address, registerCheckCode)

    def add(self, bid: int, addr: str, code: str) -> None:
        self.ids[bid] = (addr, code)
        self.next_assign += 1


@dataclass
class SyncState:  # SyncStateInfo
    cluster: str
    name: str
    master: int | None = None
    master_epoch: int = 0
    sss: set[int] = field(default_factory=set)
    sss_epoch: int = 0


@dataclass
class Live:  # BrokerLiveInfo
    addr: str
    last: int
    timeout: int
    epoch: int
    max_offset: int
    confirm_offset: int
    priority: int
    conn: str = ""


class ControllerModel:
    def __init__(self) -> None:
        self.replicas: dict[str, ReplicaInfo] = {}
        self.sync: dict[str, SyncState] = {}
        self.live: dict[tuple[str, str, int], Live] = {}

    # -------------------------------------------------------------- helpers

    def alive(self, cluster: str, name: str, bid: int | None, now: int) -> bool:
        info = self.live.get((cluster, name, bid)) if bid is not None else None
        return info is not None and info.last + info.timeout >= now

    def contains(self, name: str) -> bool:
        return name in self.replicas and name in self.sync

    def view(self, name: str, now: int) -> GroupView | None:
        if not self.contains(name):
            return None
        r, s = self.replicas[name], self.sync[name]
        return GroupView(name, r.cluster, r.next_assign, s.master, s.master_epoch, frozenset(s.sss), s.sss_epoch,
                         {bid: addr for bid, (addr, _) in r.ids.items()},
                         frozenset(bid for bid in r.ids if self.alive(r.cluster, name, bid, now)))

    def reply(self, code: int, name: str, now: int, extra: int = 0) -> Reply:
        return Reply(code, extra, self.view(name, now))

    # -------------------------------------------------------------- heartbeat manager

    def heartbeat(self, cluster, name, bid, addr, timeout=None, epoch=None, max_offset=None, confirm_offset=None,
                  priority=None, conn: str = "", *, now: int) -> bool:
        key = (cluster, name, bid)
        e = -1 if epoch is None else epoch
        off = -1 if max_offset is None else max_offset
        conf = -1 if confirm_offset is None else confirm_offset
        t = DEFAULT_HEARTBEAT_TIMEOUT_MS if timeout is None else timeout
        p = INT_MAX if priority is None else priority
        prev = self.live.get(key)
        if prev is None:
            self.live[key] = Live(addr, now, t, e, off, conf, p, conn)
            return True
        prev.last, prev.timeout, prev.priority = now, t, p
        prev.conn = conn  # ours: the latest connection (Java keeps the first channel; see ctlHeartbeat-1.lua)
        prev.addr = addr  # ours keeps the latest address (Java keeps the first; nothing reads it for rules)
        if e > prev.epoch or (e == prev.epoch and off > prev.max_offset):
            prev.epoch, prev.max_offset, prev.confirm_offset = e, off, conf
        return False

    def expire(self, now: int, batch: int = 200):
        """scanNotActiveBroker, one batch in deadline order, + onBrokerInactive's "was it the master" check."""
        due = sorted((info.last + info.timeout, f"{c}|{n}|{b}", (c, n, b)) for (c, n, b), info in self.live.items()
                     if info.last + info.timeout < now)[:batch]
        expired, elect, seen = [], [], set()
        for _, _, key in due:
            self._end_liveness(key, elect, seen)
            expired.append(key)
        return len(due) == batch, expired, elect

    def _end_liveness(self, key, elect: list, seen: set) -> None:
        """onBrokerInactive: the entry ends; a set whose master it was is named once, with its master epoch."""
        del self.live[key]
        _, name, bid = key
        if name not in seen and name in self.sync and self.sync[name].master == bid:
            seen.add(name)
            elect.append((name, self.sync[name].master_epoch))

    def drop_connection(self, conn: str, members):
        """BrokerHousekeepingService.onChannelClose: the entries whose (latest) connection it was end, and
        onBrokerInactive names the sets whose master that was."""
        dropped, elect, seen = [], [], set()
        for key in members:
            info = self.live.get(key)
            if info is None or info.conn != conn:
                continue
            self._end_liveness(key, elect, seen)
            dropped.append(key)
        return dropped, elect

    def inactive_masters(self, now: int) -> list[tuple[str, int]]:
        """scanNeedReelectBrokerSets."""
        out = []
        for name, s in sorted(self.sync.items()):
            if s.master is not None and not self.alive(s.cluster, name, s.master, now):
                if any(self.alive(s.cluster, name, bid, now) for bid in self.replicas[name].ids):
                    out.append((name, s.master_epoch))
        return out

    # -------------------------------------------------------------- ReplicasInfoManager

    def next_broker_id(self, name: str) -> int:
        r = self.replicas.get(name)
        return 1 if r is None else r.next_assign

    def apply_broker_id(self, cluster, name, bid, code, *, now: int) -> Reply:
        addr = code.split(";")[0]
        r = self.replicas.get(name)
        if r is None:
            if bid != 1:
                return self.reply(2014, name, now)
            r = self.replicas[name] = ReplicaInfo(cluster, name)
            r.add(bid, addr, code)
            self.sync[name] = SyncState(cluster, name)
            return self.reply(0, name, now)
        if bid not in r.ids or r.ids[bid][1] == code:
            if bid not in r.ids:
                r.add(bid, addr, code)
            return self.reply(0, name, now)
        return self.reply(2014, name, now)

    def register_broker(self, cluster, name, bid, addr, *, now: int) -> Reply:
        if not self.contains(name) or bid not in self.replicas[name].ids:
            return self.reply(2010, name, now)
        r, s = self.replicas[name], self.sync[name]
        master_alive = int(s.master is not None and self.alive(cluster, name, s.master, now))
        answer = self.reply(0, name, now, master_alive)  # Java answers from the state before the address event
        if r.ids[bid][0] != addr:
            r.ids[bid] = (addr, r.ids[bid][1])
        return answer

    def alter_sync_state_set(self, name, master_id, master_epoch, new_set, sss_epoch, *, now: int) -> Reply:
        new = set(new_set)
        if not self.contains(name):
            return self.reply(2013, name, now)
        r, s = self.replicas[name], self.sync[name]
        if new == s.sss:
            return self.reply(2013, name, now)
        if s.master is None or s.master != master_id:
            return self.reply(2002, name, now)
        if master_epoch != s.master_epoch:
            return self.reply(2000, name, now)
        if sss_epoch != s.sss_epoch:
            return self.reply(2001, name, now)
        for bid in sorted(new):  # a HashSet<Long> of small ids iterates in ascending order
            if bid not in r.ids:
                return self.reply(2003, name, now, bid)
            if not self.alive(r.cluster, name, bid, now):
                return self.reply(2006, name, now, bid)
        if s.master not in new:
            return self.reply(2013, name, now)
        s.sss, s.sss_epoch = new, s.sss_epoch + 1
        return self.reply(0, name, now, s.sss_epoch)

    def _try_elect(self, cluster, name, brokers, old, prefer, now):
        alive = {b for b in brokers if self.alive(cluster, name, b, now)}
        if not alive:
            return None
        if old in alive and (prefer is None or prefer == old):
            return old
        if prefer is not None:
            return prefer if prefer in alive else None

        def rank(b):
            info = self.live[(cluster, name, b)]
            return (-info.epoch, -info.max_offset, info.priority, b)

        return min(alive, key=rank)

    def elect_master(self, name, bid=CONTROLLER_TRIGGER, designate=False, unclean=False, based_on_epoch=None, *,
                     now: int) -> Reply:
        if not self.contains(name):
            return self.reply(2010, name, now)
        r, s = self.replicas[name], self.sync[name]
        if based_on_epoch is not None and based_on_epoch != s.master_epoch:
            return self.reply(-1, name, now)
        old = s.master
        new = bid if s.master_epoch == 0 else None
        if new is None or new == -1:
            prefer = bid if designate else None
            new = self._try_elect(r.cluster, name, s.sss, old, prefer, now)
            if new is None and unclean:
                new = self._try_elect(r.cluster, name, set(r.ids), old, prefer, now)
        if new is not None and new == old:
            return self.reply(2011, name, now)
        if new is not None:
            s.master, s.master_epoch = new, s.master_epoch + 1
            s.sss, s.sss_epoch = {new}, s.sss_epoch + 1
            return self.reply(0, name, now)
        if bid is None or bid == -1:
            s.master, s.master_epoch = None, s.master_epoch + 1
            return self.reply(2004, name, now)
        return self.reply(2012, name, now)

    def clean_broker_data(self, cluster, name, ids: str | None, clean_living: bool, *, now: int) -> Reply:
        id_set = None
        if not clean_living:
            s = self.sync.get(name)
            if (ids is None or not ids.strip()) and s is not None and s.master is not None:
                return self.reply(2009, name, now, 1)
            if ids is not None and ids.strip():
                pieces = ids.split(";")
                while pieces and pieces[-1] == "":  # Java's split drops trailing empty strings, keeps inner ones
                    pieces.pop()
                if not all(re.fullmatch(r"[+-]?[0-9]+", p) for p in pieces):  # Long.valueOf would throw
                    return self.reply(2009, name, now, 2)
                id_set = {int(p) for p in pieces}
                if any(self.alive(cluster or "", name, b, now) for b in id_set):
                    return self.reply(2009, name, now, 3)
        if not self.contains(name):
            return self.reply(2009, name, now, 0)
        if not id_set:
            del self.replicas[name], self.sync[name]
            return self.reply(0, name, now)
        r, s = self.replicas[name], self.sync[name]
        for b in id_set:
            r.ids.pop(b, None)
            s.sss.discard(b)
        # Java drops each record when it empties and keeps the other, which no request can use then; ours drops
        # the whole set as soon as either empties (docs/controller-protocol.md §8)
        if not r.ids or not s.sss:
            del self.replicas[name], self.sync[name]
        return self.reply(0, name, now)

