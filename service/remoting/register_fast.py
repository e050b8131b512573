"""A plain (JSON) RegisterBrokerBody straight to a RegisterBroker with its topics in compact form, in one pass.

The general decoding checks a body in two layers — the Java shape (service/remoting/bodies.py: every TopicConfig
field's type) and our limits (service/models/validators.py: names, queue counts, perm) — each building objects per
topic; for a changed 100-topic registration that was half of a worker's CPU (benchmarks/README.md). This pass applies
both layers' rules to each topic at once and writes its compact line directly. It takes only bodies it can check
completely: anything else (a bare numeric key, a wrong type, a value out of range, a field it does not know how
to judge) returns None and the general path decodes the body, answering the same registration or the same error.
tests/remoting/test_register_fast.py checks both give the same result on generated bodies, valid or not.
"""

from __future__ import annotations

import re
from itertools import chain
from operator import itemgetter
from typing import Any

import orjson

from service.models import MAX_INT32, MAX_NAME, MAX_QUEUES, TOPIC_RE, RegisterBroker, TopicTable
from service.remoting.bodies import _FILTER_TYPES, V3_0_11, BodyError, _data_version

_COUNTS = itemgetter("readQueueNums", "writeQueueNums", "perm", "topicSysFlag")
_OTHERS = itemgetter("topicName", "topicFilterType", "order", "attributes")
_NONE = type(None)
_FILTERS_OR_NONE = {*_FILTER_TYPES, None}
# every name of a table at once, joined by "\n" (which no name may hold: the caller counts them): TOPIC_RE, at most
# MAX_NAME characters each. A sixth of a changed 100-topic registration's decoding took one match per name.
_NAMES = re.compile(rf"(?:[%|a-zA-Z0-9_-]{{1,{MAX_NAME}}}\n)+")


def topic_table(table: dict) -> TopicTable | None:
    """The queue data of a topicConfigTable every entry of which both layers accept, else None."""
    return _stock_shaped(table) or _each_entry(table)


def _stock_shaped(table: dict) -> TopicTable | None:
    """The table as stock brokers send it (every entry with all eight fields), checked column by column with
    C-level passes (map, set, min/max) and each distinct queue-data combination formatted once: about a quarter
    cheaper than the entry loop on 100 topics. None whenever it cannot vouch for the table (a field missing, a
    value wrong or out of range): the entry loop then decides, so both give the same answer (the property test in
    tests/remoting/test_register_fast.py runs both shapes)."""
    if not table:
        return None
    names = list(table)
    confs = list(table.values())
    joined = "\n".join(names) + "\n"
    if set(map(type, confs)) != {dict} or joined.count("\n") != len(names) or not _NAMES.fullmatch(joined):
        return None
    try:
        counts = list(map(_COUNTS, confs))
        others = list(map(_OTHERS, confs))
    except KeyError:
        return None
    if set(map(type, chain.from_iterable(counts))) != {int}:  # no bool, no None (its default is the loop's)
        return None
    encoded = {}
    for combo in set(counts):  # equal tuples hold equal numbers: the types were checked on every value above
        r, w, p, s = combo
        if not (0 <= r <= MAX_QUEUES and 0 <= w <= MAX_QUEUES and 0 <= p <= 15 and 0 <= s <= MAX_INT32):
            return None
        encoded[combo] = f"{r},{w},{p},{s}"
    topic_names, filter_types, orders, attributes = zip(*others, strict=True)
    if not (set(map(type, topic_names)) <= {str, _NONE} and set(map(type, filter_types)) <= {str, _NONE}
            and set(filter_types) <= _FILTERS_OR_NONE
            and set(map(type, orders)) <= {bool, _NONE} and set(map(type, attributes)) <= {dict, _NONE}):
        return None
    if any(attributes) and not all(type(v) is str for a in attributes if a for v in a.values()):
        return None
    if len(encoded) == 1:  # every topic with the same queue data: one group
        (enc,) = encoded.values()
        return TopicTable(encs=dict.fromkeys(names, enc), groups=f"{enc}\t{joined[:-1].replace(chr(10), chr(9))}\n",
                          single=enc)
    return TopicTable(encs=dict(zip(names, map(encoded.__getitem__, counts), strict=True)))


def _each_entry(table: dict) -> TopicTable | None:
    """Entry by entry: each count absent (its default) or an int, not a bool, in range; a check written out per
    field (the counts first; an empty attributes map costs no generator)."""
    encs: dict[str, str] = {}
    fullmatch = TOPIC_RE.fullmatch
    for name, conf in table.items():
        if type(conf) is not dict or type(name) is not str or len(name) > MAX_NAME or not fullmatch(name):
            return None  # (an empty name fails the full match) other fields are ignored by both layers
        get = conf.get
        r, w, p, s = get("readQueueNums"), get("writeQueueNums"), get("perm"), get("topicSysFlag")
        if r is None:
            r = 16
        if w is None:
            w = 16
        if p is None:
            p = 6
        if s is None:
            s = 0
        if not (type(r) is int and type(w) is int and type(p) is int and type(s) is int
                and 0 <= r <= MAX_QUEUES and 0 <= w <= MAX_QUEUES and 0 <= p <= 15 and 0 <= s <= MAX_INT32):
            return None
        topic_name, filter_type, order, attributes = (get("topicName"), get("topicFilterType"), get("order"),
                                                      get("attributes"))
        if (topic_name is not None and type(topic_name) is not str) \
                or (filter_type is not None and filter_type not in _FILTER_TYPES) \
                or (order is not None and type(order) is not bool) \
                or (attributes is not None and (type(attributes) is not dict or (
                    attributes and not all(type(v) is str for v in attributes.values())))):
            return None
        encs[name] = f"{r},{w},{p},{s}"
    return TopicTable(encs=encs)


# A topicConfigTable entry exactly as a stock broker's fastjson writes it: the eight fields in alphabetical order, no
# whitespace, strings of printable ASCII without escapes, integers in range (the general path's rules, as text).
_STR = rb'[\x20\x21\x23-\x5b\x5d-\x7e]*'
_QUEUES = rb"0|[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]"  # 0..65535
_ENTRY = re.compile(
    rb'"([%|a-zA-Z0-9_-]{1,' + str(MAX_NAME).encode() + rb'})":\{"attributes":\{(?:"' + _STR + rb'":"' + _STR
    + rb'"(?:,"' + _STR + rb'":"' + _STR + rb'")*)?\},"order":(?:true|false),"perm":([0-9]|1[0-5]),'
    + rb'"readQueueNums":(' + _QUEUES + rb'),"topicFilterType":"(?:SINGLE|MULTI)_TAG","topicName":"' + _STR
    + rb'","topicSysFlag":(0|[1-9][0-9]{0,8}),"writeQueueNums":(' + _QUEUES + rb')\}([,}])')
_TABLE_KEY = b'"topicConfigTable":{'
_PLACE = b"0"  # what stands in for the table in the rest of the body, which orjson reads


def _stock_text(raw: bytes) -> tuple[Any, TopicTable] | None:
    """The body's topicConfigTable read as text, entry by entry with one regex split (about half of orjson's
    objects and the column checks: a changed 100-topic registration's decoding 74 -> 40 µs here), and the rest of
    the body with the table replaced by 0, parsed by orjson; or None when that cannot vouch for the body: an entry
    of another shape, a gap between entries, a name twice, a table that is not the wrapper's (its place must read
    0), a body that is not JSON. Then the column checks decide, so both answer alike (tests/remoting/
    test_register_fast.py)."""
    at = raw.find(_TABLE_KEY)
    if at < 0:
        return None
    start = at + len(_TABLE_KEY)
    parts = _ENTRY.split(raw[start:])  # [gap, name, perm, read, sys, write, sep, gap, name, ..., rest]
    n = len(parts) // 7
    if not n or any(parts[0:-1:7]):  # no entry, or text between entries
        return None
    seps = parts[6::7]
    if seps[-1] != b"}" or seps.count(b"}") != 1:
        return None
    try:
        top = orjson.loads(b"".join((raw[:start - 1], _PLACE, parts[-1])))
    except orjson.JSONDecodeError:
        return None
    wrapper = top.get("topicConfigSerializeWrapper") if type(top) is dict else None
    place = wrapper.get("topicConfigTable") if type(wrapper) is dict else None
    if type(place) is not int or place != 0:  # the text read was not the table orjson would read
        return None
    joined = b"\t".join(parts[1::7]).decode()
    names = joined.split("\t")
    if len(set(names)) != n:  # a name twice: JSON keeps the last, the groups would name it twice
        return None
    # the topics grouped by queue data in one pass (a stock 5.5.0 broker's system topics make ~9 groups beside its
    # own topics': a compress() pass per group cost 32 µs for 115 topics, this 6)
    by: dict[tuple[bytes, ...], list[str]] = {}
    combos = zip(parts[3::7], parts[5::7], parts[2::7], parts[4::7], strict=True)  # read, write, perm, sysFlag
    for name, combo in zip(names, combos, strict=True):
        group = by.get(combo)
        if group is None:
            by[combo] = [name]
        else:
            group.append(name)
    if len(by) == 1:
        enc = b",".join(next(iter(by))).decode()
        return top, TopicTable(count=n, groups=f"{enc}\t{joined}\n", single=enc)
    groups = "".join(f"{b','.join(combo).decode()}\t{chr(9).join(group)}\n" for combo, group in by.items())
    return top, TopicTable(count=n, groups=groups)


def plain_registration(header: dict[str, Any], compressed: bool, version: int, raw: bytes) -> RegisterBroker | None:
    """REGISTER_BROKER of a plain body in one pass, or None: decode it the general way (handlers.registration)."""
    if compressed or version < V3_0_11 or raw[:1] != b"{":
        return None
    text = _stock_text(raw)
    if text is not None:
        top, compact = text
    else:
        try:
            top = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return None  # fastjson's bare keys, or not JSON: the general path says which
        if type(top) is not dict:
            return None
    filters = top.get("filterServerList", [])
    wrapper = top.get("topicConfigSerializeWrapper")
    if (filters is not None and (type(filters) is not list or not all(type(f) is str for f in filters))) \
            or type(wrapper) is not dict:
        return None
    mapping = wrapper.get("topicQueueMappingInfoMap")
    if mapping is not None and type(mapping) is not dict:
        return None
    if text is None:
        table = wrapper.get("topicConfigTable")
        if type(table) is not dict:
            return None
        compact = topic_table(table)
        if compact is None:
            return None
    try:
        dv = _data_version(wrapper.get("dataVersion"), "topicConfigSerializeWrapper.dataVersion")
    except BodyError:
        return None
    return RegisterBroker.parse({**header, "dataVersion": dv, "filterServerList": filters}, table=compact)
