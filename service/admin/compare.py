"""`namesrv admin compare --with URL`: do two NameServers agree? Clusters, live brokers (brokerAddrTable), every
topic's route (queue data, broker addresses, orderTopicConf, filter servers) and KV namespaces (ORDER_TOPIC_CONFIG
and those named), read from both through requests Apache's NameServer answers (service/admin/registry_reader.py),
so either side may be Apache's 4.9.x or 5.x, rocketmq-rust or ours, over either door.

Topics are walked in sorted order, a batch of routes from each side at a time, and compared route by route, so
memory holds the two topic-name lists and one batch, never two registries (a few tens of MB at 100 000 topics).
A difference seen is read again once at the end (the two reads are not one instant: a broker registering in
between is no difference); the ones that remain are printed in words, one per line, or as JSON. Exit 0 when they
agree, 5 when they differ (docs/operating.md).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from service import display
from service.admin.client import EXIT_OK, EXIT_USAGE, AdminError, HttpApi, RemotingApi
from service.admin.registry_reader import HttpReader, NativeReader, open_reader
from service.admin.terminal import read_token

EXIT_DIFFER = 5
BATCH = 512  # routes read from each side at a time
BROKER_FIELDS = ("cluster", "zoneName", "enableActingMaster")  # besides brokerAddrs, compared field by field
QUEUE_FIELDS = ("readQueueNums", "writeQueueNums", "perm", "topicSysFlag")
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"
Reader = NativeReader | HttpReader


def add_command(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    p = command("compare", "do two NameServers agree? clusters, brokers, every route, KV (ours, Apache's, any)")
    p.add_argument("--with", dest="other", required=True, metavar="URL",
                   help="the NameServer to compare --server with: rmq://host:9876 (any NameServer) or http://… (ours)")
    p.add_argument("--namespace", action="append", default=[], metavar="NS",
                   help=f"a KV namespace to compare too (repeatable; {ORDER_TOPIC_CONFIG} always is)")
    p.add_argument("--with-token-file", metavar="PATH", help="token for --with, if it is ours with tokens on")
    p.add_argument("--max-differences", type=int, default=1000, metavar="N",
                   help="differences described (default 1000; all are counted)")
    p.add_argument("--progress", type=float, default=None, metavar="S",
                   help="a progress line on stderr every S seconds (default: once it takes 2 s, every 2 s on a "
                        "terminal, every 10 s otherwise; 0: none)")


# ------------------------------------------------------------------ differences

@dataclass(frozen=True, slots=True)
class Difference:
    kind: str  # cluster | broker | topic | kv
    name: str
    text: str  # in words, without the kind and name
    field: str | None = None
    a: Any = None
    b: Any = None

    def line(self) -> str:
        return f"{'KV' if self.kind == 'kv' else self.kind} {self.name}: {self.text}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "field": self.field, "a": self.a, "b": self.b,
                "text": self.line()}


def _v(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return value if value and value == value.strip() and value.isprintable() else orjson.dumps(value).decode()
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _field(kind: str, name: str, what: str, a: Any, b: Any, fld: str) -> Difference:
    return Difference(kind, name, f"{what}: A {_v(a)}, B {_v(b)}", fld, a, b)


def known_fields(info: dict[str, Any]) -> set[str]:
    """The BrokerData fields a NameServer reports at all (a 4.9.x one has no enableActingMaster or zoneName)."""
    return {f for bd in info.get("brokerAddrTable", {}).values() for f in bd}


def compare_clusters(a: dict[str, Any], b: dict[str, Any], fields: tuple[str, ...]) -> list[Difference]:
    """clusterAddrTable (cluster -> broker names) and brokerAddrTable (the live brokers: cluster, addresses per
    broker id, and the BrokerData fields both report)."""
    out: list[Difference] = []
    ca, cb = a.get("clusterAddrTable") or {}, b.get("clusterAddrTable") or {}
    for c in sorted(set(ca) | set(cb)):
        na, nb = set(ca.get(c) or ()), set(cb.get(c) or ())
        if c not in cb:
            out.append(Difference("cluster", c, f"only on A (brokers {', '.join(sorted(na)) or 'none'})", None, c))
        elif c not in ca:
            out.append(Difference("cluster", c, f"only on B (brokers {', '.join(sorted(nb)) or 'none'})", None, None,
                                  c))
        else:
            for n in sorted(na - nb):
                out.append(Difference("cluster", c, f"broker {n} only on A", "brokerNames", n, None))
            for n in sorted(nb - na):
                out.append(Difference("cluster", c, f"broker {n} only on B", "brokerNames", None, n))
    ba, bb = a.get("brokerAddrTable") or {}, b.get("brokerAddrTable") or {}
    for n in sorted(set(ba) | set(bb)):
        if n not in bb:
            out.append(Difference("broker", n, f"only on A ({_addrs(ba[n])})", None, ba[n], None))
        elif n not in ba:
            out.append(Difference("broker", n, f"only on B ({_addrs(bb[n])})", None, None, bb[n]))
        else:
            out += _broker_data("broker", n, ba[n], bb[n], fields)
    return out


def _addrs(bd: dict[str, Any]) -> str:
    addrs = bd.get("brokerAddrs") or {}
    return ", ".join(f"id {i} {addrs[i]}" for i in sorted(addrs, key=_id_order)) or "no address"


def _id_order(i: str) -> tuple[int, str]:
    return (int(i), "") if i.lstrip("-").isdigit() else (1 << 62, i)


def _broker_data(kind: str, name: str, a: dict[str, Any], b: dict[str, Any], fields: tuple[str, ...],
                 prefix: str = "") -> list[Difference]:
    out = []
    aa, ab = a.get("brokerAddrs") or {}, b.get("brokerAddrs") or {}
    for i in sorted(set(aa) | set(ab), key=_id_order):
        if aa.get(i) != ab.get(i):
            out.append(_field(kind, name, f"{prefix}address of broker id {i}", aa.get(i), ab.get(i),
                              f"brokerAddrs.{i}"))
    for f in fields:
        if a.get(f) != b.get(f):
            out.append(_field(kind, name, f"{prefix}{f}", a.get(f), b.get(f), f))
    return out


def describe_route(route: dict[str, Any]) -> str:
    """A route in a few words: each broker's queues (write/read) and permission."""
    parts = [f"{q.get('brokerName')} {q.get('writeQueueNums')}/{q.get('readQueueNums')} queues "
             f"{display.perm(q.get('perm', 0))}"
             for q in sorted(route.get("queueDatas") or [], key=lambda q: str(q.get("brokerName")))]
    return "; ".join(parts) or "no queue data"


def compare_route(topic: str, a: dict[str, Any] | None, b: dict[str, Any] | None,
                  fields: tuple[str, ...]) -> list[Difference]:
    """One topic's route on both sides (None: the topic has no route there)."""
    if a is None and b is None:
        return []
    if b is None:
        assert a is not None
        return [Difference("topic", topic, f"only on A ({describe_route(a)})", None, a, None)]
    if a is None:
        return [Difference("topic", topic, f"only on B ({describe_route(b)})", None, None, b)]
    out: list[Difference] = []
    qa = {q.get("brokerName"): q for q in a.get("queueDatas") or []}
    qb = {q.get("brokerName"): q for q in b.get("queueDatas") or []}
    for n in sorted(set(qa) | set(qb), key=str):
        if n not in qb or n not in qa:
            side, q = ("A", qa[n]) if n in qa else ("B", qb[n])
            queues = describe_route({"queueDatas": [q]}).split(" ", 1)[1]
            out.append(Difference("topic", topic, f"queues on {n} only on {side} ({queues})", f"queueDatas.{n}",
                                  qa.get(n), qb.get(n)))
        else:
            for f in QUEUE_FIELDS:
                if qa[n].get(f) != qb[n].get(f):
                    out.append(_field("topic", topic, f"{f} of {n}", qa[n].get(f), qb[n].get(f),
                                      f"queueDatas.{n}.{f}"))
    ba = {d.get("brokerName"): d for d in a.get("brokerDatas") or []}
    bb = {d.get("brokerName"): d for d in b.get("brokerDatas") or []}
    for n in sorted(set(ba) | set(bb), key=str):
        if n not in bb:
            out.append(Difference("topic", topic, f"broker {n} in A's route only ({_addrs(ba[n])})",
                                  f"brokerDatas.{n}", ba[n], None))
        elif n not in ba:
            out.append(Difference("topic", topic, f"broker {n} in B's route only ({_addrs(bb[n])})",
                                  f"brokerDatas.{n}", None, bb[n]))
        else:
            out += _broker_data("topic", topic, ba[n], bb[n], fields, prefix=f"broker {n}'s ")
    for f in ("orderTopicConf", "filterServerTable", "topicQueueMappingByBroker"):
        va, vb = a.get(f) or None, b.get(f) or None  # fastjson leaves out what is null; an empty map is none
        if va != vb:
            out.append(_field("topic", topic, f, va, vb, f))
    return out


def _keys(table: dict[str, str]) -> str:
    names = ", ".join(_v(k) for k in sorted(table)[:5]) + (", …" if len(table) > 5 else "")
    return f"{len(table)} key(s){': ' + names if table else ''}"


def compare_kv(namespace: str, a: dict[str, str] | None, b: dict[str, str] | None) -> list[Difference]:
    """One KV namespace (None: the NameServer has no such namespace; {}: it has, empty)."""
    if a is None and b is None:
        return []
    if b is None:
        return [Difference("kv", namespace, f"only on A ({_keys(a or {})})", None, a, None)]
    if a is None:
        return [Difference("kv", namespace, f"only on B ({_keys(b)})", None, None, b)]
    return [_field("kv", namespace, f"key {_v(k)}", a.get(k), b.get(k), k)
            for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


# ------------------------------------------------------------------ the walk

def merged(a: list[str], b: list[str]) -> Iterator[tuple[str, bool, bool]]:
    """Two sorted name lists as one sorted walk: (name, on A, on B)."""
    i = j = 0
    while i < len(a) or j < len(b):
        if j >= len(b) or (i < len(a) and a[i] < b[j]):
            yield a[i], True, False
            i += 1
        elif i >= len(a) or b[j] < a[i]:
            yield b[j], False, True
            j += 1
        else:
            yield a[i], True, True
            i += 1
            j += 1


class Progress:
    """A line on stderr now and then, once a comparison takes longer than 2 s (with --progress S: every S s)."""

    def __init__(self, every: float | None) -> None:
        tty = sys.stderr.isatty()
        self.every = (2.0 if tty else 10.0) if every is None else every
        self.after = 2.0 if every is None else 0.0  # asked for: from the start
        self.tty = tty
        self.start = self.last = time.monotonic()
        self.shown = False

    def tick(self, done: int, total: int, found: int) -> None:
        now = time.monotonic()
        if not self.every or now - self.start < self.after or now - self.last < self.every:
            return
        self.last = now
        line = (f"compare: {done:,} of {total:,} topics ({100 * done // max(total, 1)} %), {now - self.start:.0f} s, "
                f"{found:,} difference(s) so far").replace(",", " ")
        sys.stderr.write(("\r" + line + "\x1b[K") if self.tty else line + "\n")
        sys.stderr.flush()
        self.shown = True

    def end(self) -> None:
        if self.shown and self.tty:
            sys.stderr.write("\n")


@dataclass
class Report:
    a: str
    b: str
    max_details: int
    clusters: list[Difference] = field(default_factory=list)
    topics: dict[str, list[Difference]] = field(default_factory=dict)  # held topic differences, by topic
    kv: list[Difference] = field(default_factory=list)
    topics_not_held: int = 0  # topics that differed beyond what is kept for the recheck and the details
    counts: dict[str, int] = field(default_factory=dict)
    not_compared: list[str] = field(default_factory=list)
    settled: int = 0
    seconds: float = 0.0

    def differences(self) -> list[Difference]:
        return [*self.clusters, *(d for ds in self.topics.values() for d in ds), *self.kv]

    @property
    def total(self) -> int:
        return len(self.differences()) + self.topics_not_held

    def to_dict(self) -> dict[str, Any]:
        diffs = self.differences()
        return {"a": self.a, "b": self.b, "agree": self.total == 0, "differenceCount": self.total,
                "differences": [d.to_dict() for d in diffs[:self.max_details]],
                "notDescribed": self.total - min(len(diffs), self.max_details),
                "settledOnSecondRead": self.settled, "notCompared": self.not_compared,
                "compared": {**self.counts, "seconds": round(self.seconds, 3)}}

    def text(self) -> str:
        diffs = self.differences()
        lines = [f"A: {self.a}", f"B: {self.b}"]
        lines += [d.line() for d in diffs[:self.max_details]]
        if self.total > min(len(diffs), self.max_details):
            lines.append(f"… and {self.total - min(len(diffs), self.max_details)} more (--max-differences, --json)")
        c = self.counts
        what = (f"{c['clusters']} cluster(s), {c['brokers']} broker(s), {c['topics']} topic(s), "
                f"{c['kvNamespaces']} KV namespace(s) in {display.age(self.seconds * 1000)}")
        lines += [f"not compared: {n}" for n in self.not_compared]
        settled = f" ({self.settled} more settled on a second read)" if self.settled else ""
        lines.append(f"compared {what}: " + (f"{self.total} difference(s){settled}" if self.total
                                             else f"they agree{settled}"))
        return "\n".join(lines)


async def run_compare(a: Reader, b: Reader, namespaces: list[str], *, max_details: int = 1000,
                      progress: Progress | None = None) -> Report:
    started = time.monotonic()
    report = Report(a.label, b.label, max_details)
    info_a, info_b = await asyncio.gather(a.cluster_info(), b.cluster_info())
    fa, fb = known_fields(info_a), known_fields(info_b)
    fa, fb = fa or fb, fb or fa  # a side with no broker at all says nothing about the fields it knows
    fields = tuple(f for f in BROKER_FIELDS if f in fa and f in fb)
    for f in BROKER_FIELDS:
        if (f in fa) != (f in fb):
            report.not_compared.append(f"{f} ({'B' if f in fa else 'A'} does not report it)")
    report.clusters = compare_clusters(info_a, info_b, fields)

    names_a, names_b = await asyncio.gather(a.topics(sorted(info_a.get("clusterAddrTable") or {})),
                                            b.topics(sorted(info_b.get("clusterAddrTable") or {})))
    total = len(set(names_a) | set(names_b))
    done = 0
    found = len(report.clusters)
    batch: list[tuple[str, bool, bool]] = []

    async def walk(batch: list[tuple[str, bool, bool]]) -> None:
        nonlocal found
        ra, rb = await asyncio.gather(a.routes([t for t, on_a, _ in batch if on_a]),
                                      b.routes([t for t, _, on_b in batch if on_b]))
        ia, ib = iter(ra), iter(rb)
        for t, on_a, on_b in batch:
            diffs = compare_route(t, next(ia) if on_a else None, next(ib) if on_b else None, fields)
            if diffs:
                found += len(diffs)
                if len(report.topics) < max_details:
                    report.topics[t] = diffs
                else:
                    report.topics_not_held += len(diffs)

    for entry in merged(names_a, names_b):
        batch.append(entry)
        if len(batch) == BATCH:
            await walk(batch)
            done += len(batch)
            batch = []
            if progress:
                progress.tick(done, total, found)
    if batch:
        await walk(batch)
    del names_a, names_b

    spaces = list(dict.fromkeys([ORDER_TOPIC_CONFIG, *namespaces]))
    tables = await asyncio.gather(*(r.kv_table(ns) for ns in spaces for r in (a, b)))
    for i, ns in enumerate(spaces):
        report.kv += compare_kv(ns, tables[2 * i], tables[2 * i + 1])

    before = report.total
    if before:
        await _read_again(a, b, report, info_a, info_b, fields, spaces)
        report.settled = before - report.total
    if progress:
        progress.end()
    report.counts = {"clusters": len(set(info_a.get("clusterAddrTable") or {}) |
                                     set(info_b.get("clusterAddrTable") or {})),
                     "brokers": len(set(info_a.get("brokerAddrTable") or {}) |
                                    set(info_b.get("brokerAddrTable") or {})),
                     "topics": total, "kvNamespaces": len(spaces)}
    report.seconds = time.monotonic() - started
    return report


async def _read_again(a: Reader, b: Reader, report: Report, info_a: dict[str, Any], info_b: dict[str, Any],
                      fields: tuple[str, ...], spaces: list[str]) -> None:
    """What differed, read once more from both: the two reads were not one instant (a broker may have registered
    between them), so only what still differs is reported."""
    if report.clusters:
        info_a, info_b = await asyncio.gather(a.cluster_info(), b.cluster_info())
        report.clusters = compare_clusters(info_a, info_b, fields)
    topics = list(report.topics)
    for i in range(0, len(topics), BATCH):
        part = topics[i:i + BATCH]
        ra, rb = await asyncio.gather(a.routes(part), b.routes(part))
        for t, x, y in zip(part, ra, rb, strict=True):
            diffs = compare_route(t, x, y, fields)
            if diffs:
                report.topics[t] = diffs
            else:
                del report.topics[t]
    if report.kv:
        names = list(dict.fromkeys(d.name for d in report.kv))
        tables = await asyncio.gather(*(r.kv_table(ns) for ns in names for r in (a, b)))
        report.kv = [d for i, ns in enumerate(names) for d in compare_kv(ns, tables[2 * i], tables[2 * i + 1])]


# ------------------------------------------------------------------ the command

def cmd_compare(api: HttpApi | RemotingApi, args: argparse.Namespace, out: Any) -> int:
    if args.max_differences < 0:
        raise AdminError(EXIT_USAGE, "--max-differences: at least 0")
    if isinstance(api, HttpApi):
        here: Reader = open_reader(api.base, api.token, timeout=args.timeout)
    else:
        here = NativeReader(api.host, api.port, api.token, access_key=api.access_key, tls=api.tls,
                            timeout=args.timeout)
    token, access_key = (read_token(argparse.Namespace(token_file=args.with_token_file, access_key=None), {})
                         if args.with_token_file else (None, "admin"))
    there = open_reader(args.other, token, access_key=access_key, timeout=args.timeout)

    async def go() -> Report:
        try:
            return await run_compare(here, there, args.namespace, max_details=args.max_differences,
                                     progress=Progress(args.progress))
        finally:
            await asyncio.gather(here.close(), there.close())

    report = asyncio.run(go())
    out.data(report.to_dict(), report.text)
    return EXIT_OK if report.total == 0 else EXIT_DIFFER
