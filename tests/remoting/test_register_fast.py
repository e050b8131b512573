"""The one-pass decoding of a plain RegisterBrokerBody (service/remoting/register_fast.py) against the general
path (bodies.py, then RegisterBroker.parse), on generated bodies with valid and invalid topic configs: whenever the
one pass answers, the general path answers the same registration; whenever the general path refuses, the one pass
declines (and the general path then gives its error)."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from service.errors import InvalidArgument
from service.models import RegisterBroker
from service.remoting.bodies import BodyError, decode_register_broker_body
from service.remoting.register_fast import _stock_text, plain_registration

HEADER = {"clusterName": "C1", "brokerName": "b1", "brokerId": 0, "brokerAddr": "10.0.0.1:10911",
          "haServerAddr": "10.0.0.1:10912", "zoneName": None, "enableActingMaster": False,
          "heartbeatTimeoutMillis": None}

FIELDS = {
    "readQueueNums": st.integers(0, 65_535), "writeQueueNums": st.integers(0, 65_535), "perm": st.integers(0, 15),
    "topicSysFlag": st.integers(0, 2**31 - 1), "topicName": st.text(max_size=3),
    "topicFilterType": st.sampled_from(["SINGLE_TAG", "MULTI_TAG"]), "order": st.booleans(),
    "attributes": st.sampled_from([{}, {"+a": "b"}])}
# as stock brokers send them: all eight fields (register_fast checks such tables column by column)
stock_configs = st.fixed_dictionaries(FIELDS, optional={"unknownField": st.integers(-(2**40), 2**40)})
valid_configs = st.fixed_dictionaries({}, optional={**FIELDS, "unknownField": st.integers(-(2**40), 2**40)})
valid_names = st.from_regex(r"[A-Za-z0-9_%|-]{1,12}", fullmatch=True)
# one field (or the name, or the whole config) of one entry made wrong, or at a bound
EDGES = {
    "readQueueNums": [-1, 65_535, 65_536, True, "8", 8.0, None], "writeQueueNums": [-1, 65_536, False, None],
    "perm": [-1, 15, 16, True, "6", None], "topicSysFlag": [-1, 2**31 - 1, 2**31, None],
    "topicName": [5, None, ""], "topicFilterType": ["OTHER", 1, None, []], "order": [1, "true", None],
    "attributes": [{"a": 1}, [], None],
}
edges = st.one_of(*(st.tuples(st.just(k), st.sampled_from(v)) for k, v in EDGES.items()),
                  st.tuples(st.just("@name"), st.sampled_from(["", "bad name", "x" * 128, "é", "a.b", "x" * 127])),
                  st.tuples(st.just("@config"), st.sampled_from([None, [], 3, "x"])))


@st.composite
def tables(draw):
    table = draw(st.dictionaries(valid_names, draw(st.sampled_from([valid_configs, stock_configs])), max_size=6))
    if table and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(table)))
        field, value = draw(edges)
        if field == "@name":
            table[value] = table.pop(key)
        elif field == "@config":
            table[key] = value
        else:
            table[key] = {**table[key], field: value}
    return table


def general(raw: bytes, version: int) -> RegisterBroker:
    try:
        payload = decode_register_broker_body(raw, False, version)
    except BodyError as exc:
        raise InvalidArgument(str(exc)) from None
    return RegisterBroker.parse({**HEADER, "dataVersion": payload["dataVersion"],
                                 "topicConfigTable": payload["topicConfigTable"],
                                 "filterServerList": payload["filterServerList"]})


@settings(max_examples=400, deadline=None)
@given(table=tables(), filters=st.sampled_from([[], ["10.0.0.9:1"], None, [1], "x"]),
       dv=st.sampled_from([{"counter": 2, "timestamp": 5}, None, {"counter": "2"}, 7]),
       mapping=st.sampled_from([None, {}, {"t": {}}, []]),
       version=st.sampled_from([493, 413, 37]), fastjson_order=st.booleans())
def test_the_one_pass_answers_what_the_general_path_answers(table, filters, dv, mapping, version, fastjson_order):
    wrapper = {"topicConfigTable": table, "dataVersion": dv}
    if mapping is not None:
        wrapper["topicQueueMappingInfoMap"] = mapping
    # keys in alphabetical order, as stock brokers' fastjson writes them: the table may be read as text
    raw = orjson.dumps({"filterServerList": filters, "topicConfigSerializeWrapper": wrapper},
                       option=orjson.OPT_SORT_KEYS if fastjson_order else 0)
    if _stock_text(raw) is not None:
        event("the table read as text")
    fast = plain_registration(HEADER, False, version, raw)
    try:
        slow = general(raw, version)
    except InvalidArgument:
        assert fast is None
        return
    event("one pass" if fast is not None else "general path")
    if fast is not None:
        assert fast == slow.compact()


def test_a_stock_body_takes_the_one_pass():
    table = {f"T{i}": {"attributes": {}, "order": False, "perm": 6, "readQueueNums": 8, "topicFilterType":
                       "SINGLE_TAG", "topicName": f"T{i}", "topicSysFlag": 0, "writeQueueNums": 8} for i in range(3)}
    raw = orjson.dumps({"filterServerList": [], "topicConfigSerializeWrapper": {
        "dataVersion": {"counter": 1, "stateVersion": 0, "timestamp": 5}, "topicConfigTable": table,
        "topicQueueMappingInfoMap": {}}})
    fast = plain_registration(HEADER, False, 493, raw)
    assert fast is not None and fast.topic_table.count == 3
    assert fast == general(raw, 493).compact()


@pytest.mark.parametrize("raw", [b'{"topicConfigSerializeWrapper":{"topicConfigTable":{0:{}}}}', b"x\x9c", b"[]"])
def test_what_it_cannot_check_goes_the_general_way(raw):
    assert plain_registration(HEADER, False, 493, raw) is None


def test_stock_shaped_tables_take_the_column_checks_and_others_the_entry_loop():
    """The column-by-column pass vouches for a table whose entries all carry the eight fields stock brokers send,
    and declines (the entry loop deciding) one with a field missing or a bool among the counts."""
    from service.remoting.register_fast import _each_entry, _stock_shaped

    stock = {"attributes": {}, "order": False, "perm": 6, "readQueueNums": 8, "topicFilterType": "SINGLE_TAG",
             "topicName": "T", "topicSysFlag": 0, "writeQueueNums": 4}
    table = {"T": stock, "U": {**stock, "perm": 7, "topicName": "U"}}
    assert _stock_shaped(table) == _each_entry(table) and _stock_shaped(table).lines == "T\t8,4,6,0\nU\t8,4,7,0\n"
    missing = {"T": stock, "U": {k: v for k, v in stock.items() if k != "perm"}}
    assert _stock_shaped(missing) is None and _each_entry(missing).lines == "T\t8,4,6,0\nU\t8,4,6,0\n"
    assert _stock_shaped({"T": {**stock, "perm": True}}) is None is _each_entry({"T": {**stock, "perm": True}})


STOCK_ENTRY = ('"T":{"attributes":{},"order":false,"perm":6,"readQueueNums":8,"topicFilterType":"SINGLE_TAG",'
               '"topicName":"T","topicSysFlag":0,"writeQueueNums":8}')


def _body(table: str, before: str = "", after: str = "") -> bytes:
    return ('{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":1' + before
            + '},"topicConfigTable":{' + table + "}" + after + "}}").encode()


@pytest.mark.parametrize("raw", [
    _body(STOCK_ENTRY + "," + STOCK_ENTRY),  # a name twice (JSON keeps the last)
    _body(STOCK_ENTRY + ", " + STOCK_ENTRY.replace('"T"', '"U"')),  # text between entries
    _body(STOCK_ENTRY, before=',"topicConfigTable":{' + STOCK_ENTRY.replace('"T"', '"U"') + "}"),  # a decoy first
    _body(STOCK_ENTRY.replace("8,", "8.0,", 1)),  # not an integer as text
    _body(STOCK_ENTRY.replace('"topicName":"T"', '"topicName":"\\u0054"')),  # an escape
    _body(STOCK_ENTRY[:-1] + ',"x":1}'),  # a field of its own
    _body(STOCK_ENTRY.replace('"perm":6', '"perm":16')),  # out of range
])
def test_what_the_text_reading_cannot_vouch_for_goes_to_orjson(raw):
    """Bodies the regex split does not read as the table orjson would: it declines, the column checks decide."""
    assert _stock_text(raw) is None
    try:
        slow = general(raw, 493)
    except InvalidArgument:
        assert plain_registration(HEADER, False, 493, raw) is None
        return
    fast = plain_registration(HEADER, False, 493, raw)
    assert fast is None or fast == slow.compact()


def test_a_stock_5x_body_is_read_as_text():
    """Byte for byte what a stock 5.5.0 broker sent (its system topics, eight fields each, fastjson's order)."""
    entries = [STOCK_ENTRY.replace('"T"', f'"{t}"').replace(":8,", f":{q},") for t, q in
               (("RMQ_SYS_TRANS_HALF_TOPIC", 1), ("BenchmarkTest", 1024), ("rmq_sys_SYNC_BROKER_MEMBER_b", 1))]
    raw = _body(",".join(entries), after=',"topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{}')
    assert _stock_text(raw) is not None
    assert plain_registration(HEADER, False, 493, raw) == general(raw, 493).compact()


@pytest.mark.parametrize("kinds", [1, 2, 9, 300])
def test_a_table_of_many_queue_data_is_grouped_alike_either_way(kinds):
    """The text reading groups the topics by queue data in one pass, however many distinct queue data there are
    (one, a stock broker's ~9, one per topic): every topic under its own queue data, as the general path has it."""
    entries = [STOCK_ENTRY.replace('"T"', f'"T{i}"').replace('"readQueueNums":8', f'"readQueueNums":{i % kinds}')
               for i in range(600)]
    raw = _body(",".join(entries))
    text = _stock_text(raw)
    assert text is not None and text[1].count == 600 and text[1].groups.count("\n") == kinds
    assert text[1].encs == {f"T{i}": f"{i % kinds},8,6,0" for i in range(600)}
    assert plain_registration(HEADER, False, 493, raw) == general(raw, 493).compact()


ascii_text = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=4)
stock_fields = st.fixed_dictionaries({
    "readQueueNums": st.sampled_from([0, 1, 8, 65_535, 65_536]), "writeQueueNums": st.sampled_from([0, 16, 9999]),
    "perm": st.sampled_from([0, 6, 15, 16]), "topicSysFlag": st.sampled_from([0, 3, 999_999_999, 2**31 - 1]),
    "topicName": ascii_text, "topicFilterType": st.sampled_from(["SINGLE_TAG", "MULTI_TAG"]),
    "order": st.booleans(), "attributes": st.dictionaries(ascii_text, ascii_text, max_size=2)})


@settings(max_examples=300, deadline=None)
@given(table=st.dictionaries(st.from_regex(r"[A-Za-z0-9_%|-]{1,5}", fullmatch=True), stock_fields, min_size=1,
                             max_size=5),
       after=st.sampled_from(["", ',"topicQueueMappingInfoMap":{}', ',"topicQueueMappingInfoMap":[]']))
def test_stock_shaped_bodies_read_as_text_answer_what_the_general_path_answers(table, after):
    """Bodies as stock brokers write them, near every bound the text reading encodes (queue counts, perm, the
    system flag, strings it takes as they are and those with escapes it leaves to orjson)."""
    raw = orjson.dumps({"filterServerList": [], "topicConfigSerializeWrapper": {
        "dataVersion": {"counter": 1}, "topicConfigTable": table}}, option=orjson.OPT_SORT_KEYS)
    raw = raw[:-2] + after.encode() + b"}}"
    text = _stock_text(raw)
    event("read as text" if text is not None else "left to orjson")
    fast = plain_registration(HEADER, False, 493, raw)
    try:
        slow = general(raw, 493)
    except InvalidArgument:
        assert fast is None
        return
    if text is not None:
        assert fast is not None
    if fast is not None:
        assert fast == slow.compact()
