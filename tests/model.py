"""A plain-Python reference model of RocketMQ 5.x RouteInfoManager with this project's deviations.

Written from shared/reference/rocketmq-namesrv.md §2, not from the Lua: the model-based tests drive it and
the Redis store with the same random operations and demand the same routes and cluster info.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from service.javaorder import hash_order

WRITE = 2


@dataclass
class Broker:
    cluster: str
    eam: bool = False
    zone: str | None = None
    addrs: dict[int, str] = field(default_factory=dict)
    rg: str | None = None  # the chunked registration whose chunks may still write its topics


@dataclass
class Live:
    last: int
    timeout: int
    dv: tuple[int, int, int]
    ha: str
    name: str
    conn: str = ""  # the native connection it registered on ("" = none)
    rg: str | None = None  # a chunked registration of its topics began and has not ended (its id)


class Conflict(Exception):
    pass


class NotFound(Exception):
    pass


class CrossCluster(Exception):
    pass


class RouteModel:
    def __init__(self) -> None:
        self.topics: dict[str, dict[str, tuple[int, int, int, int]]] = {}
        self.brokers: dict[str, Broker] = {}
        self.clusters: dict[str, set[str]] = {}
        self.live: dict[tuple[str, str], Live] = {}
        self.filters: dict[tuple[str, str], list[str]] = {}
        self.kv: dict[str, dict[str, str]] = {}

    # ---------------------------------------------------------------- removal core
    def _drop_live(self, cluster: str, addr: str) -> None:
        self.live.pop((cluster, addr), None)
        self.filters.pop((cluster, addr), None)

    def _remove_addr(self, cluster: str, name: str, addr: str) -> int:
        b = self.brokers.get(name)
        if b is None or b.cluster != cluster:
            return 0
        ids = [i for i, a in b.addrs.items() if a == addr]
        if not ids:
            return 0
        for i in ids:
            del b.addrs[i]
        if not b.addrs:
            del self.brokers[name]
            self.clusters[cluster].discard(name)
            if not self.clusters[cluster]:
                del self.clusters[cluster]
            for t in list(self.topics):
                self.topics[t].pop(name, None)
                if not self.topics[t]:
                    del self.topics[t]
            return 1
        if b.eam and 0 not in b.addrs:
            for qds in self.topics.values():
                if name in qds:
                    r, w, p, s = qds[name]
                    qds[name] = (r, w, p & ~WRITE, s)
        return 2

    # ---------------------------------------------------------------- operations
    def register(self, cluster, name, bid, addr, ha, topics, dv, eam, timeout, now,
                 delete_missing=False, filters=None, conn="", guard_topics=None):
        """topics: {t: (r, w, perm, sys)}; eam None = old broker. Returns 'ok', 'fenced' or raises.
        guard_topics: the cross-cluster guard is on and these topics are checked (None = off).
        A whole registration is a chunked one with a single chunk and nothing in between."""
        step = self.register_begin("whole", cluster, name, bid, addr, ha, dv, eam, timeout, now, filters, conn,
                                   guard_topics)
        if step is None:
            return "fenced"
        self.register_chunk(step, topics)
        self.register_finish(step, topics, delete_missing)
        return "ok"

    def register_begin(self, regid, cluster, name, bid, addr, ha, dv, eam, timeout, now, filters=None, conn="",
                       guard_topics=None):
        """Everything of a registration but its topics (service/store/chunked.py). Returns None when fenced by
        stateVersion, else the state its chunks need (raises as register does)."""
        b = self.brokers.get(name)
        if b is not None and b.cluster != cluster:
            raise Conflict(b.cluster)
        if guard_topics is not None:
            if any(c != cluster and a == addr for c, a in self.live):
                raise CrossCluster(addr)
            for t in guard_topics:
                holders = self.topics.get(t, {})
                if name in holders or not holders:
                    continue
                if not any(self.brokers[h].cluster == cluster for h in holders if h in self.brokers):
                    raise CrossCluster(t)
        prev = self.live.get((cluster, addr))
        if prev is not None and prev.name != name:
            self._remove_addr(cluster, prev.name, addr)
        self.clusters.setdefault(cluster, set()).add(name)
        register_first = b is None
        if b is None:
            b = self.brokers[name] = Broker(cluster)
        b.eam = bool(eam)
        b.zone = None
        for i in [i for i, a in b.addrs.items() if a == addr and i != bid]:
            del b.addrs[i]
        old = b.addrs.get(bid)
        if old is not None and old != addr:
            old_live = self.live.get((cluster, old))
            if old_live is not None and old_live.dv[2] > dv[2]:
                self._drop_live(cluster, addr)
                return None
        if old != addr:
            b.addrs[bid] = addr
            if old is not None:
                self._drop_live(cluster, old)
        register_first = register_first or old is None
        is_master = bid == 0
        is_prime_slave = eam is not None and not is_master and bid == min(b.addrs)
        applies = is_master or is_prime_slave
        prev_live = self.live.get((cluster, addr))
        # an earlier chunked registration that never ended: every topic is written again
        check_each = register_first or prev_live is None or prev_live.dv != dv or prev_live.rg is not None
        if applies:
            b.rg = regid
        pending = regid if applies else (prev_live.rg if prev_live is not None else None)
        self.live[(cluster, addr)] = Live(now, timeout, dv, ha, name, conn, pending)
        if filters is not None:
            if filters:
                self.filters[(cluster, addr)] = list(filters)
            else:
                self.filters.pop((cluster, addr), None)
        return {"regid": regid, "cluster": cluster, "name": name, "addr": addr, "applies": applies,
                "check_each": check_each, "wipe": is_prime_slave and b.eam}

    def _chunk_may_write(self, step) -> bool:
        b = self.brokers.get(step["name"])
        live = self.live.get((step["cluster"], step["addr"]))
        return (step["applies"] and b is not None and b.rg == step["regid"] and live is not None
                and live.rg == step["regid"])

    def register_chunk(self, step, topics) -> bool:
        """One chunk of topics; False when fenced (nothing written)."""
        if not self._chunk_may_write(step):
            return False
        name = step["name"]
        for t, (r, w, p, s) in topics.items():
            if step["check_each"] or name not in self.topics.get(t, {}):
                if step["wipe"]:
                    p &= ~WRITE
                self.topics.setdefault(t, {})[name] = (r, w, p, s)
        return True

    def register_finish(self, step, topics, delete_missing) -> bool:
        """The end: the broker's topics not in `topics` go (deleteTopicWithBrokerRegistration); False if fenced."""
        if not self._chunk_may_write(step):
            return False
        name = step["name"]
        if delete_missing:
            for t in list(self.topics):
                if name in self.topics[t] and t not in topics:
                    del self.topics[t][name]
                    if not self.topics[t]:
                        del self.topics[t]
        self.brokers[name].rg = None
        self.live[(step["cluster"], step["addr"])].rg = None
        return True

    def answer(self, cluster, bid, addr, return_kv=True):
        """RegisterBrokerResult after a registration that was not fenced: (haServerAddr, masterAddr, kvTable)."""
        ha = master = None
        if bid != 0:
            name = self.live[(cluster, addr)].name
            maddr = self.brokers[name].addrs.get(0)
            if maddr is not None and (cluster, maddr) in self.live:
                ha, master = self.live[(cluster, maddr)].ha or None, maddr
        kv = dict(self.kv["ORDER_TOPIC_CONFIG"]) if return_kv and "ORDER_TOPIC_CONFIG" in self.kv else None
        return ha, master, kv

    def heartbeat(self, cluster, addr, now):
        live = self.live.get((cluster, addr))
        if live is None:
            return None
        live.last = now
        return live.dv

    def touch(self, cluster, addr, at):
        """A batched BROKER_HEARTBEAT written (lua/touchLive-1.lua): a live entry moves forward to `at`, never back;
        a gone one stays gone. Whether it moved."""
        live = self.live.get((cluster, addr))
        if live is None or live.last >= at:
            return False
        live.last = at
        return True

    def unregister(self, cluster, name, addr):
        res = self._remove_addr(cluster, name, addr)
        if res:
            self._drop_live(cluster, addr)
        return res

    def drop_connection(self, conn, members):
        """The connection closed: remove what registered on it and has not registered again since."""
        out = []
        for cluster, addr in members:
            live = self.live.get((cluster, addr))
            if conn and live is not None and live.conn == conn:
                res = self._remove_addr(cluster, live.name, addr)
                self._drop_live(cluster, addr)
                out.append((cluster, addr, live.name, res))
        return out

    def expire(self, now):
        gone = []
        for key, live in sorted(self.live.items(), key=lambda kv: kv[1].last + kv[1].timeout):
            if live.last + live.timeout < now:
                gone.append(key)
        for cluster, addr in gone:
            name = self.live[(cluster, addr)].name
            self._drop_live(cluster, addr)
            self._remove_addr(cluster, name, addr)
        return gone

    def delete_topic(self, topic, cluster=None):
        qds = self.topics.get(topic)
        if qds is None:
            return
        names = list(qds) if cluster is None else list(self.clusters.get(cluster, ()))
        for n in names:
            qds.pop(n, None)
        if not qds:
            del self.topics[topic]

    def register_topic(self, topic, qds):
        for n in qds:
            if n not in self.brokers:
                raise NotFound(n)
        if qds:
            self.topics.setdefault(topic, {}).update(qds)

    def write_perm(self, name, wipe):
        count = 0
        for qds in self.topics.values():
            if name in qds:
                r, w, p, s = qds[name]
                qds[name] = (r, w, p & ~WRITE if wipe else 6, s)
                count += 1
        return count

    def kv_put(self, ns, key, value):
        self.kv.setdefault(ns, {})[key] = value

    def kv_delete(self, ns, key):
        if ns in self.kv:
            self.kv[ns].pop(key, None)

    def kv_import(self, table, replace, dry_run):
        """Every namespace of `table` at once (merge, or replace its keys); each one's state before."""
        before = {ns: (ns in self.kv, dict(self.kv.get(ns, {}))) for ns in table}
        if not dry_run:
            for ns, kv in table.items():
                if replace:
                    self.kv[ns] = dict(kv)
                else:
                    self.kv.setdefault(ns, {}).update(kv)
        return before

    # ---------------------------------------------------------------- reads
    def route(self, topic, support_acting_master=False, order=False):
        qds = self.topics.get(topic)
        if not qds:
            return None
        brokers = []
        for n in hash_order(qds, str, copied=True):  # Java's HashSet order, as the route lists them
            b = self.brokers.get(n)
            if b is not None:
                brokers.append([n, b.cluster, b.eam, dict(b.addrs)])
        if not brokers:
            return None
        if (support_acting_master and not topic.startswith("rmq_sys_SYNC_BROKER_MEMBER_")
                and any(a and 0 not in a for _, _, _, a in brokers)):
            for n, _, eam, addrs in brokers:
                if addrs and 0 not in addrs and eam and not qds[n][2] & WRITE:
                    addrs[0] = addrs.pop(min(addrs))
        filters = {}
        if self.filters:
            for _, cluster, _, addrs in brokers:
                for a in addrs.values():
                    if (cluster, a) in self.filters:
                        filters[a] = self.filters[(cluster, a)]
        return {
            "queueDatas": [{"brokerName": n, "perm": p, "readQueueNums": r, "topicSysFlag": s,
                            "writeQueueNums": w} for n, (r, w, p, s) in hash_order(qds.items(), lambda kv: kv[0])],
            "brokerDatas": [{"brokerAddrs": {str(k): v for k, v in sorted(a.items())}, "brokerName": n,
                             "cluster": c, "enableActingMaster": e} for n, c, e, a in brokers],
            "filterServerTable": filters,
            **({"orderTopicConf": self.kv["ORDER_TOPIC_CONFIG"][topic]}
               if order and topic in self.kv.get("ORDER_TOPIC_CONFIG", {}) else {}),
        }

    def cluster_info(self):
        return {
            "brokerAddrTable": {n: {"brokerAddrs": {str(k): v for k, v in sorted(b.addrs.items())},
                                    "brokerName": n, "cluster": b.cluster, "enableActingMaster": b.eam}
                                for n, b in sorted(self.brokers.items())},
            "clusterAddrTable": {c: sorted(ns) for c, ns in sorted(self.clusters.items())},
        }

    def live_members(self):
        return {f"{c}|{a}" for c, a in self.live}
