"""service.remoting.fastjson: bare integer keys both ways, BrowserCompatible output, strings never rewritten."""

from __future__ import annotations

import json
import time
from collections import OrderedDict

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.models import BrokerData, ClusterInfo, QueueData, TopicRouteData
from service.remoting import fastjson
from service.remoting.fastjson import JsonError, dumps, dumps_standard, loads


def test_bare_integer_keys_as_fastjson_writes_them():
    # Reference §0.1: "brokerAddrs":{0:"10.0.0.1:10911"} (HashMap<Long,String> without WriteNonStringKeyAsString).
    route = {"brokerAddrs": {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}, "brokerName": "b"}
    assert dumps(route) == b'{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"b"}'
    assert loads(dumps(route)) == route


def test_keys_keep_the_given_order():
    assert dumps({"b": 1, "a": {2: 0, 1: 0}}) == b'{"b":1,"a":{2:0,1:0}}'
    assert dumps({"b": 1, "a": 2}) == b'{"b":1,"a":2}'


def test_standard_form_is_browser_compatible():
    value = {"brokerAddrs": {0: "é/😀", -3: "\x7f"}, "big": 2**53, "edge": 2**53 - 1, "neg": -(2**53), "f": 1.5}
    assert dumps(value, standard=True) == (
        b'{"brokerAddrs":{"0":"\\u00E9\\/\\uD83D\\uDE00","-3":"\\u007F"},'
        b'"big":"9007199254740992","edge":9007199254740991,"neg":"-9007199254740992","f":1.5}'
    )
    # What a standard JSON parser reads back
    assert json.loads(dumps(value, standard=True))["brokerAddrs"] == {"0": "é/😀", "-3": "\x7f"}


def test_loads_reads_bare_keys_anywhere():
    text = b'[{ 0 :"a",\n-12:{"x":[{7:true}]}}, {"5": 5}]'
    assert loads(text) == [{0: "a", -12: {"x": [{7: True}]}}, {"5": 5}]
    assert loads(text.decode()) == loads(text)


def test_loads_never_rewrites_string_contents():
    text = '{0:"{1:\\"x\\",2:3}", "k,4:": ",5:", "q\\\\": {6:"\\\\"}}'
    assert loads(text) == {0: '{1:"x",2:3}', "k,4:": ",5:", "q\\": {6: "\\"}}


def test_standard_json_takes_the_fast_path_and_keeps_string_keys():
    assert loads(b'{"0":"a"}') == {"0": "a"}


@pytest.mark.parametrize(
    "text",
    [
        b"",
        b"{",
        b"{0}",
        b"{0:}",
        b"{'a':1}",
        b'{"a":1,}',
        b"NaN",
        b'{"a" 1}',
        b'"unterminated',
        b'{0:"a}',
        b'{"s":"a,1:"b"}',
        b"\xff",
        b'{"a":"\xc3"}',
        b"[" * 2000 + b"]" * 2000,
        b"{1.5:2}",
        b"{a:1}",
    ],
)
def test_garbage_raises_json_error(text):
    with pytest.raises(JsonError):
        loads(text)


def test_hostile_input_stays_linear():
    # An unterminated string full of escaped quotes once took ~12 s for 40 KB (a retry at every quote).
    started = time.perf_counter()
    for payload in (b'{0:"' + b'\\"' * 200_000, b'"' + b'\\"' * 200_000 + b"\\", b"{" + b"1" * 400_000):
        with pytest.raises(JsonError):
            loads(payload)
    assert time.perf_counter() - started < 1.0


def test_lone_surrogate_text_raises_json_error():
    with pytest.raises(JsonError):
        loads('{0:"\ud800"}')


def test_json_error_is_a_value_error():
    assert issubclass(JsonError, ValueError)


@pytest.mark.parametrize("value", [{1.5: "x"}, {True: "x"}, {"a": {None: 1}}, {"a": {1}}, {"a": object()}])
def test_unserializable_values_raise_json_error(value):
    with pytest.raises(JsonError):
        dumps(value)
    with pytest.raises(JsonError):
        dumps(value, standard=True)


# --- properties ---------------------------------------------------------------------------------------------------

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.text(max_size=20)
    | st.floats(allow_nan=False, allow_infinity=False)
)
_keys = st.text(max_size=10) | st.integers(-(2**40), 2**40)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=20,
)


def _no_duplicate_spellings(value) -> bool:
    """{0: .., "0": ..} is legal in Python but one key in the standard (quoted) form."""
    if isinstance(value, dict):
        spelled = [str(k) for k in value]
        return len(spelled) == len(set(spelled)) and all(_no_duplicate_spellings(v) for v in value.values())
    if isinstance(value, list):
        return all(_no_duplicate_spellings(v) for v in value)
    return True


def _as_standard(value):
    if isinstance(value, dict):
        return {str(k): _as_standard(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_standard(v) for v in value]
    if type(value) is int and abs(value) > 2**53 - 1:
        return str(value)
    return value


@given(_values)
@settings(max_examples=120, deadline=None)
def test_dumps_loads_round_trip(value):
    assert loads(dumps(value)) == value


@given(_values.filter(_no_duplicate_spellings))
@settings(max_examples=80, deadline=None)
def test_standard_form_round_trips_through_any_json_parser(value):
    text = dumps(value, standard=True)
    assert max(text, default=0) < 0x80
    assert json.loads(text) == _as_standard(value)
    assert loads(text) == _as_standard(value)


@given(_values)
@settings(max_examples=150, deadline=None)
def test_the_one_pass_standard_form_is_the_careful_one(value):
    """dumps_standard (orjson in one pass, for str and int keys) writes byte for byte what dumps(standard=True)
    writes: escapes, '/' and numbers past 2^53 - 1 included (they take the careful walk)."""
    try:
        careful = dumps(value, standard=True)
    except JsonError:
        with pytest.raises(JsonError):
            dumps_standard(value)
        return
    assert dumps_standard(value) == careful


def test_the_one_pass_standard_form_of_a_route_takes_the_careful_walk_only_when_needed():
    route = {"brokerDatas": [{"brokerAddrs": {0: "10.0.0.1:10911", 2**60: "x"}, "brokerName": "b/1"}]}
    assert dumps_standard(route) == dumps(route, standard=True)
    assert b'"1152921504606846976"' in dumps_standard({"id": 2**60})  # quoted, as BrowserCompatible writes it
    assert dumps_standard({"a": "\u00e9"}) == b'{"a":"\\u00E9"}'


@given(st.text(max_size=60) | st.binary(max_size=60))
@settings(max_examples=200, deadline=None)
def test_arbitrary_input_raises_only_json_error(data):
    try:
        loads(data)
    except JsonError:
        pass


# --- the one pass for int keys (orjson, then int keys unquoted) against the node-by-node walk ----------------------


def _walked(value):
    """What dumps wrote before the one pass: orjson when no dict key is an int, else the walk; JsonError if refused."""
    try:
        return orjson.dumps(value) if not fastjson._has_int_key(value) else fastjson._walk(value)
    except (TypeError, ValueError, RecursionError):
        return JsonError


def _dumped(value):
    try:
        return dumps(value)
    except JsonError:
        return JsonError


# Names and addresses with every character JSON escapes or uses ('{}[]":,\\'), unicode and control characters; and,
# as the other half, lone surrogates, names spelt like ints and ids past 64 bits, which leave it to the walk.
_json_chars = st.text(st.sampled_from('{}[]":,\\/ 0123456789-\x00\n\u2028é😀'), max_size=12)
_clean_text = _json_chars | st.text(max_size=12)
_dirty_text = (_json_chars | st.text(st.characters(codec=None, categories=None), max_size=12)
               | st.from_regex(r"-?[0-9]{1,20}", fullmatch=True))


def _brokers(text, ids):
    return st.builds(BrokerData, cluster=text, broker_name=text, broker_addrs=st.dictionaries(ids, text, max_size=4),
                     enable_acting_master=st.booleans(), zone_name=st.none() | text)


def _cluster_infos(text, ids):
    return st.builds(ClusterInfo, broker_addr_table=st.dictionaries(text, _brokers(text, ids), max_size=6),
                     cluster_addr_table=st.dictionaries(text, st.lists(text, max_size=4), max_size=4))


def _routes(text, ids):
    queues = st.builds(QueueData, text, st.integers(0, 1024), st.integers(0, 1024), st.integers(0, 15),
                       st.integers(0, 2**31 - 1))
    return st.builds(TopicRouteData, queue_datas=st.lists(queues, max_size=4),
                     broker_datas=st.lists(_brokers(text, ids), max_size=4),
                     filter_server_table=st.dictionaries(text, st.lists(text, max_size=3), max_size=3),
                     order_topic_conf=st.none() | text)


_clean_ids = st.integers(0, 16) | st.integers(-(2**63), 2**64 - 1)
_dirty_ids = _clean_ids | st.integers(-(2**70), 2**70)

# Beyond routes: any key kind (bools, floats and int-spelt strs the one pass must leave to the walk), tuples, dict
# subclasses and ints past 64 bits as leaves, nesting past orjson's limit.
_any_keys = _dirty_text | _dirty_ids | st.booleans() | st.floats(allow_nan=False) | st.none()
_odd_values = st.recursive(
    _scalars | st.integers(-(2**70), 2**70) | _dirty_text,
    lambda inner: (st.lists(inner, max_size=4) | st.lists(inner, max_size=3).map(tuple)
                   | st.dictionaries(_any_keys, inner, max_size=4)
                   | st.dictionaries(_clean_ids, inner, max_size=2).map(OrderedDict)),
    max_leaves=24,
)


@given(_cluster_infos(_clean_text, _clean_ids) | _cluster_infos(_dirty_text, _dirty_ids))
@settings(max_examples=200, deadline=None)
def test_a_cluster_info_in_one_pass_is_the_walk_byte_for_byte(info):
    assert _dumped(info.to_dict()) == _walked(info.to_dict())


@given(_routes(_clean_text, _clean_ids) | _routes(_dirty_text, _dirty_ids))
@settings(max_examples=200, deadline=None)
def test_a_route_for_older_clients_in_one_pass_is_the_walk_byte_for_byte(route):
    assert _dumped(route.to_dict()) == _walked(route.to_dict())


@given(_values | _odd_values)
@settings(max_examples=300, deadline=None)
def test_any_value_in_one_pass_is_the_walk_byte_for_byte(value):
    assert _dumped(value) == _walked(value)


def test_int_keys_beside_string_contents_that_look_like_keys():
    value = {"brokerAddrs": {0: '{1:"x"}', 1: '"2":', -3: '\\"4":'}, '"5":': {6: "}"}, "s": ',"7":8'}
    written = dumps(value)
    assert written == b'{"brokerAddrs":{0:"{1:\\"x\\"}",1:"\\"2\\":",-3:"\\\\\\"4\\":"},"\\"5\\":":{6:"}"},' \
                      b'"s":",\\"7\\":8"}'
    assert written == fastjson._walk(value) and fastjson._int_keys_unquotable(value)  # the one pass wrote it
    assert loads(written) == value
    assert dumps({'"0': {1: ""}, 'a\\",-1': 2}) == b'{"\\"0":{1:""},"a\\\\\\",-1":2}'  # escaped quotes stay


def test_a_str_key_spelt_like_an_int_stays_quoted():
    value = {"7": {0: "a"}, "-1": 1, "a": {1: "b"}}
    assert not fastjson._int_keys_unquotable(value)  # the walk writes it
    assert dumps(value) == b'{"7":{0:"a"},"-1":1,"a":{1:"b"}}'


def test_a_10000_broker_cluster_info_in_one_pass_is_the_walk():
    """Issue 40: the walk stalled a worker ~230 ms here; the one pass must write the same bytes."""
    info = ClusterInfo(
        {f"broker-{i}": BrokerData(f"c{i % 10}", f"broker-{i}",
                                   {0: f"10.0.{i // 256}.{i % 256}:10911", 1: f"10.1.{i // 256}.{i % 256}:10911"},
                                   zone_name="z" if i % 2 else None)
         for i in range(10_000)},
        {f"c{j}": [f"broker-{i}" for i in range(j, 10_000, 10)] for j in range(10)},
    ).to_dict()
    assert fastjson._int_keys_unquotable(info)
    assert dumps(info) == fastjson._walk(info)
