"""What brokers send: a registration (identity, data version, topic configs), its topics in the compact forms
the store and Lua take (TopicTable) and its delta against the broker's previous one (TopicDelta), and the
identity of an unregistration or heartbeat."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from operator import itemgetter
from typing import Any

from service.models.validators import (
    MAX_ID,
    MAX_INT32,
    MAX_INT64,
    MAX_QUEUES,
    _bad,
    address,
    boolean,
    entity_name,
    integer,
    obj,
    topic_name,
)


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
