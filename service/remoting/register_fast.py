"""A plain (JSON) RegisterBrokerBody straight to a RegisterBroker with its topics in compact form, in one pass.

The general decoding checks a body in two layers — the Java shape (service/remoting/bodies.py: every TopicConfig
field's type) and our limits (service/models.py: names, queue counts, perm) — each building objects per topic;
for a changed 100-topic registration that was half of a worker's CPU (benchmarks/README.md). This pass applies
both layers' rules to each topic at once and writes its compact line directly. It takes only bodies it can check
completely: anything else (a bare numeric key, a wrong type, a value out of range, a field it does not know how
to judge) returns None and the general path decodes the body, answering the same registration or the same error.
tests/remoting/test_register_fast.py checks both give the same result on generated bodies, valid or not.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import orjson

from service.models import MAX_INT32, MAX_NAME, MAX_QUEUES, TOPIC_RE, RegisterBroker, TopicTable
from service.remoting.bodies import _FILTER_TYPES, V3_0_11, BodyError, _data_version


def topic_table(table: dict) -> TopicTable | None:
    """The compact lines of a topicConfigTable every entry of which both layers accept, else None. Each count is
    absent (its default) or an int, not a bool, in range: a check written out per field, this loop being the
    registration's hot spot (the counts first; an empty attributes map costs no generator)."""
    lines: list[str] = []
    append = lines.append
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
        append(f"{name}\t{r},{w},{p},{s}\n")
    return TopicTable("".join(lines), len(lines))


def plain_registration(header: dict[str, Any], compressed: bool, version: int, raw: bytes) -> RegisterBroker | None:
    """REGISTER_BROKER of a plain body in one pass, or None: decode it the general way (handlers.registration)."""
    if compressed or version < V3_0_11 or raw[:1] != b"{":
        return None
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
    table = wrapper.get("topicConfigTable")
    mapping = wrapper.get("topicQueueMappingInfoMap")
    if type(table) is not dict or (mapping is not None and type(mapping) is not dict):
        return None
    compact = topic_table(table)
    if compact is None:
        return None
    try:
        dv = _data_version(wrapper.get("dataVersion"), "topicConfigSerializeWrapper.dataVersion")
    except BodyError:
        return None
    req = RegisterBroker.parse({**header, "dataVersion": dv, "topicConfigTable": {}, "filterServerList": filters})
    return replace(req, table=compact)
