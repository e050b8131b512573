"""RocketMQ's data types (TopicRouteData, ClusterInfo, RegisterBrokerResult, KV tables, ...) and the
validators that build them. No I/O, no wire format.

Validation is strict and the same for every front door: names by full match (a trailing newline is not a
name), addresses `host:port` with ASCII digits, numbers of the declared type and range. A door whose wire
carries text (RocketMQ's extFields) converts with `int_text`/`bool_text` first, then calls the same builders.
`to_dict()` gives RocketMQ's field names, with int keys where Java has Long keys (`brokerAddrs`); each door
encodes that its own way (standard JSON, fastjson).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from operator import itemgetter
from typing import Any, NamedTuple

from service.config import DEFAULT_BROKER_TIMEOUT_MS
from service.errors import InvalidArgument

TOPIC_RE = re.compile(r"[%|a-zA-Z0-9_-]+")  # RocketMQ TopicValidator (full match)
NAME_RE = re.compile(r"[a-zA-Z0-9_.-]+")  # cluster and broker names
# KV namespaces and keys: any text Java's KVConfigManager keeps (it checks nothing but null), except what no
# request or file can carry cleanly: C0/C1 control characters and lone surrogates (not UTF-8).
KV_NAME_BAD = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
KV_VALUE_BAD = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff]")  # tab, newline and CR are text
HOST_RE = re.compile(r"\[[0-9a-fA-F:.]+\]|[a-zA-Z0-9_.-]+")
PORT_RE = re.compile(r"[0-9]{1,5}")
INT_TEXT_RE = re.compile(r"-?[0-9]{1,19}")
MAX_NAME = 127
MAX_KV_NAME = 255
MAX_KV_VALUE = 64 * 1024
MAX_ID = 2**53 - 1
MAX_QUEUES = 65_535
MAX_INT32 = 2**31 - 1
MAX_INT64 = 2**63 - 1
PERM_WRITE, PERM_READ = 2, 4
SYNC_MEMBER_TOPIC_PREFIX = "rmq_sys_SYNC_BROKER_MEMBER_"
# TopicValidator.SYSTEM_TOPIC_SET as of RocketMQ 5.5.0: every broker of every cluster registers them, so the
# cross-cluster rule (service/core/access.py) does not apply to them. (5.5.0 brokers register the RocksDB
# transaction topics: without them a second cluster's stock broker was refused; tests/interop/test_auth.py.)
SYSTEM_TOPICS = frozenset({
    "TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRACE_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT",
    "CHECKPOINT_TOPIC", "RMQ_SYS_ROCKSDB_TRANS_HALF_TOPIC", "RMQ_SYS_ROCKSDB_TRANS_OP_HALF_TOPIC",
})
SYSTEM_TOPIC_PREFIX = "rmq_sys_"


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


# ---------------------------------------------------------------- validators

def _bad(field_name: str, why: str) -> InvalidArgument:
    return InvalidArgument(f"{field_name}: {why}", field=field_name)


def topic_name(value: Any, field_name: str = "topic") -> str:
    if not isinstance(value, str) or not value:
        raise _bad(field_name, "required, a non-empty string")
    if len(value) > MAX_NAME:
        raise _bad(field_name, f"longer than {MAX_NAME} characters")
    if not TOPIC_RE.fullmatch(value):
        raise _bad(field_name, "only letters, digits, '%', '|', '_' and '-' are allowed")
    return value


def entity_name(value: Any, field_name: str) -> str:
    if not isinstance(value, str) or not value:
        raise _bad(field_name, "required, a non-empty string")
    if len(value) > MAX_NAME:
        raise _bad(field_name, f"longer than {MAX_NAME} characters")
    if not NAME_RE.fullmatch(value):
        raise _bad(field_name, "only letters, digits, '_', '-' and '.' are allowed")
    return value


def _char(c: str) -> str:
    return f"U+{ord(c):04X}"


def kv_name(value: Any, field_name: str) -> str:
    """A KV namespace or key: 1..255 characters of any script, spaces included (Java's rule is only "not null"),
    without control characters."""
    if not isinstance(value, str) or not value:
        raise _bad(field_name, "required, a non-empty string")
    if len(value) > MAX_KV_NAME:
        raise _bad(field_name, f"longer than {MAX_KV_NAME} characters")
    bad = KV_NAME_BAD.search(value)
    if bad:
        raise _bad(field_name, f"control character {_char(bad.group())} at position {bad.start()} "
                               "(any other text is allowed)")
    return value


def kv_value(value: Any, field_name: str = "value") -> str:
    """A KV value: text of at most 64 Ki characters; tab, newline and CR allowed, other control characters not."""
    if not isinstance(value, str):
        raise _bad(field_name, "required, a string")
    if len(value) > MAX_KV_VALUE:
        raise _bad(field_name, f"longer than {MAX_KV_VALUE} characters")
    bad = KV_VALUE_BAD.search(value)
    if bad:
        raise _bad(field_name, f"control character {_char(bad.group())} at position {bad.start()}")
    return value


def address(value: Any, field_name: str) -> str:
    """`host:port`: a DNS name, IPv4 or [IPv6] host, and an ASCII-decimal port in 1..65535."""
    if not isinstance(value, str) or not value:
        raise _bad(field_name, "required, host:port")
    host, sep, port = value.rpartition(":")
    if not sep or not host or len(value) > 255 or not HOST_RE.fullmatch(host) or not PORT_RE.fullmatch(port):
        raise _bad(field_name, f"{value!r} is not host:port")
    if not 1 <= int(port) <= 65535:
        raise _bad(field_name, f"port {port} is out of range 1..65535")
    return value


def integer(value: Any, field_name: str, lo: int, hi: int, default: int | None = None) -> int:
    """A JSON integer (not a string, not a boolean) in lo..hi; `default` when absent."""
    if value is None and default is not None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(field_name, f"required, an integer in {lo}..{hi}")
    if not lo <= value <= hi:
        raise _bad(field_name, f"{value} is out of range {lo}..{hi}")
    return value


def boolean(value: Any, field_name: str) -> bool | None:
    """A JSON boolean, or None when absent."""
    if value is None or isinstance(value, bool):
        return value
    raise _bad(field_name, "a boolean (true or false)")


def int_text(value: str | None, field_name: str) -> int | None:
    """A text-carried integer (RocketMQ extFields): ASCII decimal only; None stays None."""
    if value is None:
        return None
    if not isinstance(value, str) or not INT_TEXT_RE.fullmatch(value):
        raise _bad(field_name, f"{value!r} is not a decimal integer")
    return int(value)


def bool_text(value: str | None, field_name: str) -> bool | None:
    """A text-carried boolean, as Java's Boolean.parseBoolean reads it (anything but 'true' is false)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise _bad(field_name, "a boolean")
    return value.lower() == "true"


def obj(value: Any, field_name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _bad(field_name, "required, a JSON object")
    return value


# ---------------------------------------------------------------- data shapes

@dataclass(frozen=True, slots=True)
class DataVersion:
    timestamp: int = 0
    counter: int = 0
    state_version: int = 0

    def encode(self) -> str:
        return f"{self.timestamp},{self.counter},{self.state_version}"

    @classmethod
    def decode(cls, text: str) -> DataVersion:
        t, c, s = text.split(",")
        return cls(int(t), int(c), int(s))

    def to_dict(self) -> dict[str, int]:
        return {"counter": self.counter, "stateVersion": self.state_version, "timestamp": self.timestamp}

    @classmethod
    def parse(cls, value: Any, field_name: str = "dataVersion") -> DataVersion:
        d = obj(value, field_name)
        return cls(
            timestamp=integer(d.get("timestamp"), f"{field_name}.timestamp", 0, MAX_INT64, default=0),
            counter=integer(d.get("counter"), f"{field_name}.counter", 0, MAX_INT64, default=0),
            state_version=integer(d.get("stateVersion"), f"{field_name}.stateVersion", -MAX_INT64 - 1,
                                  MAX_INT64, default=0),
        )


@dataclass(frozen=True, slots=True)
class TopicConfig:
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = 6
    topic_sys_flag: int = 0
    order: bool = False

    @classmethod
    def parse(cls, value: Any, field_name: str) -> TopicConfig:
        d = obj(value, field_name)
        return cls(
            read_queue_nums=integer(d.get("readQueueNums"), f"{field_name}.readQueueNums", 0, MAX_QUEUES, 16),
            write_queue_nums=integer(d.get("writeQueueNums"), f"{field_name}.writeQueueNums", 0, MAX_QUEUES, 16),
            perm=integer(d.get("perm"), f"{field_name}.perm", 0, 15, 6),
            topic_sys_flag=integer(d.get("topicSysFlag"), f"{field_name}.topicSysFlag", 0, MAX_INT32, 0),
            order=bool(boolean(d.get("order"), f"{field_name}.order")),
        )


@dataclass(frozen=True, slots=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int

    def encode(self) -> str:
        return f"{self.read_queue_nums},{self.write_queue_nums},{self.perm},{self.topic_sys_flag}"

    @classmethod
    def decode(cls, broker_name: str, text: str) -> QueueData:
        r, w, p, s = (int(x) for x in text.split(","))
        return cls(broker_name, r, w, p, s)

    def to_dict(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "perm": self.perm, "readQueueNums": self.read_queue_nums,
                "topicSysFlag": self.topic_sys_flag, "writeQueueNums": self.write_queue_nums}

    @classmethod
    def parse(cls, value: Any, field_name: str) -> QueueData:
        d = obj(value, field_name)
        return cls(
            broker_name=entity_name(d.get("brokerName"), f"{field_name}.brokerName"),
            read_queue_nums=integer(d.get("readQueueNums"), f"{field_name}.readQueueNums", 0, MAX_QUEUES),
            write_queue_nums=integer(d.get("writeQueueNums"), f"{field_name}.writeQueueNums", 0, MAX_QUEUES),
            perm=integer(d.get("perm"), f"{field_name}.perm", 0, 15),
            topic_sys_flag=integer(d.get("topicSysFlag"), f"{field_name}.topicSysFlag", 0, MAX_INT32, 0),
        )


@dataclass(frozen=True, slots=True)
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str]
    enable_acting_master: bool = False
    zone_name: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "brokerAddrs": dict(sorted(self.broker_addrs.items())),
            "brokerName": self.broker_name,
            "cluster": self.cluster,
            "enableActingMaster": self.enable_acting_master,
        }
        if self.zone_name:
            out["zoneName"] = self.zone_name
        return out


@dataclass(frozen=True, slots=True)
class TopicRouteData:
    queue_datas: list[QueueData]
    broker_datas: list[BrokerData]
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    order_topic_conf: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "brokerDatas": [b.to_dict() for b in self.broker_datas],
            "filterServerTable": self.filter_server_table,
            "queueDatas": [q.to_dict() for q in self.queue_datas],
        }
        if self.order_topic_conf:
            out["orderTopicConf"] = self.order_topic_conf
        return out

    def in_zone(self, zone: str) -> TopicRouteData:
        """ZoneRouteRPCHook: keep brokers of `zone` (case-insensitive) and brokers whose master is down
        ("break nearby"), drop the queue data and filter servers of the others."""
        z = zone.lower()
        kept = [b for b in self.broker_datas
                if b.broker_addrs and ((b.zone_name or "").lower() == z or 0 not in b.broker_addrs)]
        names = {b.broker_name for b in kept}
        addrs = {a for b in kept for a in b.broker_addrs.values()}
        return TopicRouteData(
            queue_datas=[q for q in self.queue_datas if q.broker_name in names],
            broker_datas=kept,
            filter_server_table={a: f for a, f in self.filter_server_table.items() if a in addrs},
            order_topic_conf=self.order_topic_conf,
        )


class ReadAt(NamedTuple):
    """A route read together with the registry version it reflects (getRoutes returns both, atomically): a
    route-cache fill is then spoiled only by an event newer than its read, not by every event during its round
    trip, so topics a registration changes again and again (a roll-out) still get cached between changes."""

    route: TopicRouteData | None
    ver: int


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    broker_addr_table: dict[str, BrokerData]
    cluster_addr_table: dict[str, list[str]]

    def to_dict(self) -> dict[str, Any]:
        return {
            "brokerAddrTable": {k: v.to_dict() for k, v in sorted(self.broker_addr_table.items())},
            "clusterAddrTable": {k: sorted(v) for k, v in sorted(self.cluster_addr_table.items())},
        }


@dataclass(frozen=True, slots=True)
class TopicList:
    topics: list[str]
    broker_addr: str | None = None  # only GET_SYSTEM_TOPIC_LIST_FROM_NS (304) carries one

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"topicList": self.topics}
        if self.broker_addr:
            out["brokerAddr"] = self.broker_addr
        return out


@dataclass(frozen=True, slots=True)
class BrokerMemberGroup:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str]

    def to_dict(self) -> dict[str, Any]:
        return {"brokerMemberGroup": {"brokerAddrs": dict(sorted(self.broker_addrs.items())),
                                      "brokerName": self.broker_name, "cluster": self.cluster}}


@dataclass(frozen=True, slots=True)
class KvTable:
    table: dict[str, str]

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table}


MAX_KV_PROBLEMS = 100  # entries named in one refusal of a whole KV config (the count is always complete)


def kv_config_problems(value: Any) -> list[dict[str, Any]]:
    """Every entry of a whole KV config (Java's KVConfigSerializeWrapper.configTable, {namespace: {key: value}})
    that breaks the rules, each {namespace, key?, problem}: an import is refused as a whole, naming them all."""
    if not isinstance(value, dict):
        return [{"problem": "configTable: an object {namespace: {key: value}} is required"}]
    problems: list[dict[str, Any]] = []
    for ns, table in value.items():
        try:
            kv_name(ns, "namespace")
        except InvalidArgument as err:
            problems.append({"namespace": ns, "problem": err.message})
        if not isinstance(table, dict):
            problems.append({"namespace": ns, "problem": "an object {key: value} is required, not "
                                                         f"{type(table).__name__}"})
            continue
        for key, v in table.items():
            for check, what, field_name in ((kv_name, key, "key"), (kv_value, v, "value")):
                try:
                    check(what, field_name)
                except InvalidArgument as err:
                    problems.append({"namespace": ns, "key": key, "problem": err.message})
    return problems


def kv_config(value: Any) -> dict[str, dict[str, str]]:
    """A whole KV config, checked entry by entry; any entry that breaks a rule refuses it all (InvalidArgument
    naming each, details `problems`, the first MAX_KV_PROBLEMS of them, and `count`)."""
    problems = kv_config_problems(value)
    if problems:
        shown = "; ".join(" ".join(f"{k} {p[k]!r}" for k in ("namespace", "key") if k in p) + ": " + p["problem"]
                          for p in problems[:5])
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise InvalidArgument(f"configTable: {len(problems)} entr{'y' if len(problems) == 1 else 'ies'} cannot be "
                              f"taken, nothing was written: {shown}{more}",
                              field="configTable", problems=problems[:MAX_KV_PROBLEMS], count=len(problems))
    return value


@dataclass(frozen=True, slots=True)
class KvImportResult:
    """What an import changed (or, dry, would change), per namespace: keys added, changed (before, after),
    unchanged, removed (replace: in the namespace, not in the import) and kept (merge: not in the import, left as
    they are); `created` when the namespace did not exist."""

    dry_run: bool
    replace: bool
    namespaces: list[dict[str, Any]]

    @classmethod
    def of(cls, table: dict[str, dict[str, str]], before: dict[str, tuple[bool, dict[str, str]]], *,
           dry_run: bool, replace: bool) -> KvImportResult:
        out = []
        for ns, kv in table.items():
            existed, old = before[ns]
            added = {k: v for k, v in kv.items() if k not in old}
            changed = {k: {"before": old[k], "after": v} for k, v in kv.items() if k in old and old[k] != v}
            unchanged = sorted(k for k, v in kv.items() if old.get(k) == v)
            rest = {k: v for k, v in old.items() if k not in kv}
            out.append({"namespace": ns, "created": not existed, "added": dict(sorted(added.items())),
                        "changed": dict(sorted(changed.items())), "unchanged": unchanged,
                        "removed": dict(sorted(rest.items())) if replace else {},
                        "kept": [] if replace else sorted(rest)})
        return cls(dry_run, replace, out)

    def totals(self) -> dict[str, int]:
        t = {"namespacesCreated": sum(n["created"] for n in self.namespaces)}
        for part in ("added", "changed", "unchanged", "removed", "kept"):
            t[part] = sum(len(n[part]) for n in self.namespaces)
        return t

    @property
    def changes(self) -> int:
        t = self.totals()
        return t["namespacesCreated"] + t["added"] + t["changed"] + t["removed"]

    def to_dict(self) -> dict[str, Any]:
        return {"dryRun": self.dry_run, "replace": self.replace, "totals": self.totals(),
                "namespaces": self.namespaces}


class TopicTable:
    """A registration's topics as the store keeps their queue data: name -> "read,write,perm,sysFlag" (`encs`), and
    the same as compact text (`lines`), one "name\tread,write,perm,sysFlag\n" line each, which the store hands to
    the steps of a chunked registration (names are validated, so neither tab nor newline occurs in them), and
    grouped by queue data (`groups`), which a whole registration hands to Lua. Each is built from another when
    first asked for. What crosses a process boundary after a large body was parsed elsewhere is the lines only."""

    __slots__ = ("_encs", "_lines", "_groups", "count", "single")

    def __init__(self, lines: str | None = None, count: int = 0, encs: dict[str, str] | None = None,
                 groups: str | None = None, single: str | None = None) -> None:
        self._lines = lines
        self._encs = encs
        self._groups = groups
        self.count = len(encs) if encs is not None else count
        self.single = single  # the queue data of every topic, when a decoder found them all alike

    @classmethod
    def of(cls, topics: dict[str, TopicConfig]) -> TopicTable:
        return cls(encs={t: f"{c.read_queue_nums},{c.write_queue_nums},{c.perm},{c.topic_sys_flag}"
                         for t, c in topics.items()})

    @property
    def lines(self) -> str:
        if self._lines is None:
            encs = self.encs
            self._lines = "".join(map("{}\t{}\n".format, encs, encs.values()))
        return self._lines

    @property
    def groups(self) -> str:
        """The topics grouped by queue data, "enc\tname\tname...\n" per distinct queue data (a decoder that knows
        them gives it; most brokers' topics share a few): what a whole registration hands to Lua."""
        if self._groups is None:
            by: dict[str, list[str]] = {}
            for name, enc in self.encs.items():
                group = by.get(enc)
                if group is None:
                    by[enc] = [name]
                else:
                    group.append(name)
            self._groups = _grouped(by)
        return self._groups

    @property
    def encs(self) -> dict[str, str]:
        if self._encs is None:
            if self._lines is None and self._groups is not None:
                encs: dict[str, str] = {}
                for line in self._groups.splitlines():
                    enc, _, names = line.partition("\t")
                    encs.update(dict.fromkeys(names.split("\t"), enc))
                self._encs = encs
            else:
                self._encs = dict(line.split("\t") for line in (self._lines or "").splitlines())
        return self._encs

    def compact(self) -> TopicTable:
        """The same table kept as its groups only (~15 bytes a topic instead of ~110 with the name -> queue data
        map): what a worker keeps of the last registration of each broker (service/core/deltas.py)."""
        return TopicTable(count=self.count, groups=self.groups, single=self.single)

    def names(self) -> list[str]:
        return list(self._encs) if self._encs is not None else [
            line.split("\t", 1)[0] for line in self.lines.splitlines()]

    def __eq__(self, other: object) -> bool:
        """The same topics with the same queue data, in whatever order (groups list them by queue data)."""
        return isinstance(other, TopicTable) and (self.count, self.encs) == (other.count, other.encs)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"TopicTable({self.lines!r}, {self.count})"

    def __getstate__(self) -> tuple[str, int]:
        return self.lines, self.count

    def __setstate__(self, state: tuple[str, int]) -> None:
        self._lines, self.count = state
        self._encs = self._groups = self.single = None


@dataclass(frozen=True, slots=True)
class TopicDelta:
    """What a registration's topic table changes against an earlier registration of the same broker, its base
    (named by digest): the store writes only this, if its fence shows that the broker's queue data are still
    exactly the base's table (registerBroker's delta mode). A changed registration of a stock broker re-sends
    its whole table; usually a few topics differ, and at most their queue counts."""

    base: str  # the digest of the base registration
    changed: str  # the topics whose queue data changed, grouped by their new queue data (TopicTable.groups)
    removed: str  # "name\n" per topic of the base this one does not name
    added: str  # the topics the base does not name, grouped
    size: int  # topics it carries

    @classmethod
    def between(cls, base: str, before: TopicTable, new: TopicTable) -> TopicDelta:
        if before.single is not None and new.single is not None and \
                before.groups.partition("\t")[2] == new.groups.partition("\t")[2]:
            # the same topics with one queue data before and after (the usual table): all changed or none
            return cls(base, new.groups if new.single != before.single else "", "", "",
                       new.count if new.single != before.single else 0)
        if new._groups is not None and (before._groups is not None or before._encs is None):
            return cls._between_groups(base, before, new)
        old, table = before.encs, new.encs
        differ = table.items() - old.items()  # (name, enc) added or changed: one C-level pass
        added_names = table.keys() - old.keys() if len(table) != len(old) or differ else ()
        gone = old.keys() - table.keys() if len(old) + len(added_names) != len(table) else ()
        single = new.single
        if single is not None:  # one queue data for every topic (the usual table): C-level passes only
            names = list(map(itemgetter(0), differ))
            changed = [n for n in names if n not in added_names] if added_names else names
            return cls(base, f"{single}\t{chr(9).join(changed)}\n" if changed else "",
                       "".join(t + "\n" for t in gone),
                       f"{single}\t{chr(9).join(added_names)}\n" if added_names else "", len(differ) + len(gone))
        changed_groups: dict[str, list[str]] = {}
        added: dict[str, list[str]] = {}
        for name, enc in differ:
            into = added if name in added_names else changed_groups
            group = into.get(enc)
            if group is None:
                into[enc] = [name]
            else:
                group.append(name)
        return cls(base, _grouped(changed_groups), "".join(t + "\n" for t in gone), _grouped(added),
                   len(differ) + len(gone))

    @classmethod
    def _between_groups(cls, base: str, before: TopicTable, new: TopicTable) -> TopicDelta:
        """`between` for two tables known by their groups (a stock broker's table: its system topics in a few
        queue data, its own in others), group by group with C-level passes: a group whose text is the same in
        both is skipped whole; of one that differs, its names the base did not have with that queue data are
        compared with the base's names (changed) or not in it (added). tests/lua/test_delta_registration.py
        checks it against the entry by entry comparison."""
        old, now = _group_map(before.groups), _group_map(new.groups)
        if old == now:
            return cls(base, "", "", "", 0)
        old_names = set("\t".join(old.values()).split("\t")) if old else set()
        changed: dict[str, Iterable[str]] = {}
        added: dict[str, Iterable[str]] = {}
        differ = added_count = 0
        for enc, text in now.items():
            was = old.get(enc)
            if was == text:
                continue
            names = set(text.split("\t"))
            if was is not None:
                names.difference_update(was.split("\t"))
            if not names:
                continue
            differ += len(names)
            kept = names & old_names
            if kept:
                changed[enc] = kept
            if len(kept) != len(names):
                added[enc] = names - kept
                added_count += len(names) - len(kept)
        gone: Iterable[str] = ()
        if len(old_names) + added_count != new.count:  # the table no longer names some of the base's topics
            gone = old_names.difference("\t".join(now.values()).split("\t"))
        return cls(base, _grouped(changed), "".join(t + "\n" for t in gone), _grouped(added), differ + len(gone))


def _group_map(groups: str) -> dict[str, str]:
    """TopicTable.groups as queue data -> its names, tab-separated."""
    return dict(line.split("\t", 1) for line in groups.splitlines())


def _grouped(groups: Mapping[str, Iterable[str]]) -> str:
    """Topics by queue data as registerBroker takes them: "enc\tname\tname...\n" per queue data."""
    return "".join(f"{enc}\t{chr(9).join(names)}\n" for enc, names in groups.items())


@dataclass(frozen=True, slots=True)
class RegisterBroker:
    cluster: str
    broker_name: str
    broker_id: int
    broker_addr: str
    ha_server_addr: str
    topics: dict[str, TopicConfig]
    data_version: DataVersion = DataVersion()
    zone_name: str | None = None
    enable_acting_master: bool | None = None  # None: header absent (a broker older than 5.0)
    heartbeat_timeout_ms: int | None = None
    filter_server_list: list[str] | None = None  # None leaves, [] removes, a list replaces
    table: TopicTable | None = None  # the topics in compact form instead of `topics` (see compact())

    @classmethod
    def parse(cls, body: Any, table: TopicTable | None = None) -> RegisterBroker:
        """`table`: the topics already checked and compacted (a door's one-pass decoding), instead of the body's."""
        d = obj(body, "body")
        topics = {}
        if table is None:
            raw = d.get("topicConfigTable", {})
            if raw is None:
                raw = {}
            raw = obj(raw, "topicConfigTable")
            topics = {topic_name(t, "topicConfigTable key"): TopicConfig.parse(v, f"topicConfigTable.{t}")
                      for t, v in raw.items()}
        fsl = d.get("filterServerList")
        if fsl is not None:
            if not isinstance(fsl, list):
                raise _bad("filterServerList", "a list of host:port")
            fsl = [address(a, "filterServerList[]") for a in fsl]
        ha = d.get("haServerAddr")
        zone = d.get("zoneName")
        timeout = d.get("heartbeatTimeoutMillis")
        return cls(
            cluster=entity_name(d.get("clusterName"), "clusterName"),
            broker_name=entity_name(d.get("brokerName"), "brokerName"),
            broker_id=integer(d.get("brokerId"), "brokerId", 0, MAX_ID),
            broker_addr=address(d.get("brokerAddr"), "brokerAddr"),
            ha_server_addr=address(ha, "haServerAddr") if ha else "",
            topics=topics,
            data_version=DataVersion.parse(d.get("dataVersion", {}) or {}),
            zone_name=entity_name(zone, "zoneName") if zone is not None else None,
            enable_acting_master=boolean(d.get("enableActingMaster"), "enableActingMaster"),
            heartbeat_timeout_ms=integer(timeout, "heartbeatTimeoutMillis", 1000, 86_400_000)
            if timeout is not None else None,
            filter_server_list=fsl,
            table=table,
        )

    @property
    def identity(self) -> BrokerIdentity:
        return BrokerIdentity(self.cluster, self.broker_name, self.broker_id, self.broker_addr)

    def compact(self) -> RegisterBroker:
        """The same registration with its topics as a TopicTable: cheap to pickle back from a parser process."""
        if self.table is not None:
            return self
        return replace(self, topics={}, table=TopicTable.of(self.topics))

    @property
    def topic_table(self) -> TopicTable:
        return self.table if self.table is not None else TopicTable.of(self.topics)

    def topic_names(self) -> list[str]:
        return self.table.names() if self.table is not None else list(self.topics)


@dataclass(frozen=True, slots=True)
class BrokerIdentity:
    """The four header fields of UNREGISTER_BROKER / QUERY_DATA_VERSION / BROKER_HEARTBEAT."""

    cluster: str
    broker_name: str
    broker_id: int
    broker_addr: str

    @classmethod
    def parse(cls, body: Any) -> BrokerIdentity:
        d = obj(body, "body")
        return cls(
            cluster=entity_name(d.get("clusterName"), "clusterName"),
            broker_name=entity_name(d.get("brokerName"), "brokerName"),
            broker_id=integer(d.get("brokerId"), "brokerId", 0, MAX_ID, default=0),
            broker_addr=address(d.get("brokerAddr"), "brokerAddr"),
        )


@dataclass(frozen=True, slots=True)
class RegisterBrokerResult:
    ha_server_addr: str | None
    master_addr: str | None
    kv_table: dict[str, str] | None
    fenced: bool = False
    changed_topics: int = 0
    register_first: bool = False
    unchanged: bool = False  # applied without its topics: the same bytes as this broker's last registration
    who: tuple[str, str, str] | None = None  # unchanged: (brokerName, clusterName, brokerAddr) it replayed
    delta: bool = False  # sent with a delta (TopicDelta) and applied as one (not whole)

    def to_dict(self) -> dict[str, Any]:
        return {"haServerAddr": self.ha_server_addr, "masterAddr": self.master_addr,
                "kvTable": {"table": self.kv_table} if self.kv_table is not None else None}


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    changed: bool
    data_version: DataVersion | None

    def to_dict(self) -> dict[str, Any]:
        return {"changed": self.changed,
                "dataVersion": self.data_version.to_dict() if self.data_version else None}


UNREGISTER_RESULTS = {0: "unknown", 1: "removed", 2: "reduced"}


@dataclass(frozen=True, slots=True)
class ExpireResult:
    expired: list[tuple[str, str, str]]  # (cluster, brokerAddr, brokerName)
    more: bool


@dataclass(frozen=True, slots=True)
class LiveBroker:
    """One brokerLiveTable entry as an operator sees it."""

    cluster: str
    broker_name: str
    broker_id: int
    broker_addr: str
    last_heartbeat_ms: int  # Redis clock
    heartbeat_timeout_ms: int = DEFAULT_BROKER_TIMEOUT_MS
    data_version: DataVersion | None = None
    ha_server_addr: str | None = None
    topic_count: int = 0

    def to_dict(self, now_ms: int | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "cluster": self.cluster, "brokerName": self.broker_name, "brokerId": self.broker_id,
            "brokerAddr": self.broker_addr, "haServerAddr": self.ha_server_addr,
            "lastHeartbeat": self.last_heartbeat_ms, "heartbeatTimeoutMillis": self.heartbeat_timeout_ms,
            "dataVersion": self.data_version.to_dict() if self.data_version else None,
            "topicCount": self.topic_count,
        }
        if now_ms is not None:
            out["ageMillis"] = max(0, now_ms - self.last_heartbeat_ms)
        return out

    def to_snapshot_dict(self) -> dict[str, Any]:
        """The manifest's broker row (read by the skew job)."""
        return {"cluster": self.cluster, "brokerName": self.broker_name, "brokerId": self.broker_id,
                "brokerAddr": self.broker_addr, "lastHeartbeat": self.last_heartbeat_ms,
                "heartbeatTimeoutMillis": self.heartbeat_timeout_ms}


def parse_queue_datas(body: Any) -> list[QueueData]:
    d = obj(body, "body")
    qds = d.get("queueDatas")
    if not isinstance(qds, list) or not qds:
        raise _bad("queueDatas", "required, a non-empty list")
    out = [QueueData.parse(q, f"queueDatas[{i}]") for i, q in enumerate(qds)]
    if len({q.broker_name for q in out}) != len(out):
        raise _bad("queueDatas", "one entry per brokerName")
    return out
