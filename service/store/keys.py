"""Every Redis key of one registry, built from one prefix that is also the Redis Cluster hash tag.

Only the store package uses these. Scripts receive the keys they touch in KEYS (by role, see
service/store/scripts.py) and derive per-entity keys from the base of KEYS[1] the same way
(`lua/includes/common.lua`); tests/lua/test_headers.py checks they agree.
Schema and rationale: lua/README.md.
"""

from __future__ import annotations

from dataclasses import dataclass

ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"  # RocketMQ's KV namespace for order topics


@dataclass(frozen=True)
class Keys:
    prefix: str = "nsrv"

    @property
    def base(self) -> str:
        """`{prefix}:` — the braces make every key hash to one Redis Cluster slot."""
        return "{" + self.prefix + "}:"

    # --- global keys (passed in KEYS)
    @property
    def topics(self) -> str:  # SET of topic names (topicQueueTable's key set)
        return self.base + "topics"

    @property
    def brokers(self) -> str:  # SET of brokerNames (brokerAddrTable's key set)
        return self.base + "brokers"

    @property
    def clusters(self) -> str:  # SET of cluster names (clusterAddrTable's key set)
        return self.base + "clusters"

    @property
    def live(self) -> str:  # ZSET "cluster|addr" scored by last heartbeat, ms, Redis clock
        return self.base + "live"

    @property
    def deadlines(self) -> str:  # ZSET "cluster|addr" scored by last heartbeat + its timeout
        return self.base + "deadlines"

    @property
    def filter_servers(self) -> str:  # HASH "cluster|addr" -> JSON list of filter-server addresses
        return self.base + "filtersrv"

    @property
    def version(self) -> str:  # STRING counter, bumped by every route change (cache safety net)
        return self.base + "ver"

    @property
    def cluster_info_version(self) -> str:  # STRING, renewed by every change to what cluster info shows
        return self.base + "civer"

    @property
    def cluster_info_log(self) -> str:  # ZSET "civer before\tciver after\tbrokerName" by civer after: the last
        return self.base + "cilog"      # 10 minutes' cluster-info changes (stepped reads catch up with them)

    @property
    def broker_lines(self) -> str:  # HASH brokerName -> its line as getRoutes sends it; "#" -> the civer the lines
        return self.base + "bl"     # are current at (lua/includes/common.lua, broker_lines_flush)

    @property
    def topic_list_version(self) -> str:  # STRING, renewed by every change to the set of all topics
        return self.base + "tlver"

    @property
    def kv_namespaces(self) -> str:  # SET of KV namespaces (an emptied namespace is kept, as in Java)
        return self.base + "kvns"

    @property
    def runtime_config(self) -> str:  # HASH of runtime switches shared by all workers
        return self.base + "config"

    @property
    def topic_gens(self) -> str:  # HASH brokerName -> generation of its queue data; "#" -> the counter
        return self.base + "tg"

    @property
    def sweeps(self) -> str:  # HASH sweep id -> "kind\tbrokerName\twipe\tcursor"; "#" -> the id counter
        return self.base + "sweeps"

    @property
    def changes(self) -> str:  # pub/sub channel: "<ver>\t2\n*" or "<ver>\t2\n<topic>..." (store/events.py)
        return self.base + "changes"

    @property
    def snapshots(self) -> str:  # ZSET snapshot id -> takenAt ms
        return self.base + "snaps"

    @property
    def skew_report(self) -> str:  # STRING: latest skew summary JSON
        return self.base + "report:skew"

    @property
    def skew_history(self) -> str:  # LIST: the last N skew runs, newest first, each zlib(JSON)
        return self.base + "report:skew:history"

    @property
    def members(self) -> str:  # ZSET "addr|workerId" -> lease expiry ms: workers announced for /rocketmq/nsaddr
        return self.base + "members"

    def lease(self, name: str) -> str:  # STRING with PX: one worker per tick cluster-wide
        return self.base + "lease:" + name

    # --- per-entity keys (derived the same way inside the scripts)
    def topic(self, topic: str) -> str:  # HASH brokerName -> "read,write,perm,sysFlag"
        return self.base + "t:" + topic

    def broker_data(self, broker_name: str) -> str:  # HASH cluster, enableActingMaster, zoneName
        return self.base + "b:" + broker_name

    def broker_addrs(self, broker_name: str) -> str:  # HASH brokerId -> address
        return self.base + "ba:" + broker_name

    def broker_topics(self, broker_name: str) -> str:  # SET: reverse index brokerName -> topics
        return self.base + "bt:" + broker_name

    def cluster(self, cluster: str) -> str:  # SET of brokerNames
        return self.base + "c:" + cluster

    def live_info(self, cluster: str, addr: str) -> str:  # HASH dv, ha, timeout, name, id
        return self.base + "l:" + live_member(cluster, addr)

    def registration(self, digest: str) -> str:  # STRING (PX) "cluster|addr" that last registered this digest
        return self.base + "rd:" + digest

    def registration_topics(self, registration_id: str) -> str:  # SET (PX): a chunked registration's topics so far
        return self.base + "rs:" + registration_id

    def sweep_topics(self, sweep_id: str) -> str:  # SET: a removed broker's topics its sweep has yet to clear
        return self.base + "sw:" + sweep_id

    def kv(self, namespace: str) -> str:  # HASH key -> value
        return self.base + "kv:" + namespace

    def snapshot(self, snap_id: str) -> str:  # HASH manifest
        return self.base + "snap:" + snap_id

    def snapshot_part(self, snap_id: str, part: int) -> str:  # STRING zlib(orjson(rows))
        return self.base + "snap:" + snap_id + ":" + str(part)


def live_member(cluster: str, addr: str) -> str:
    """(cluster, brokerAddr) as one member; '|' appears in neither a cluster name nor an address."""
    return cluster + "|" + addr
