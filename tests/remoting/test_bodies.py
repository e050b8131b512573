"""service.remoting.bodies: RegisterBrokerBody (plain, old, zlib-compressed built byte by byte), CRC, properties."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.remoting.bodies import (
    BodyError,
    crc32_of,
    decode_data_version,
    decode_register_broker_body,
    format_properties,
    parse_properties,
)

V4 = 121  # an old 4.x-era client version (ali-ons sends V3_4_9 = 121)
V5 = 479  # V5_3_3


def test_crc32_of_matches_utilall_crc32():
    # CRC-32 check value of "123456789" is 0xCBF43926; UtilAll.crc32 clears the sign bit.
    assert crc32_of(b"123456789") == 0x4BF43926
    assert crc32_of(b"") == 0
    assert crc32_of(memoryview(b"123456789")) == 0x4BF43926


# --- compressed form (RegisterBrokerBody.encode(true), reference §4.5), assembled by hand ---------------------------


def _chunk(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack(">i", len(raw)) + raw


def _compressed(
    topic_lines: list[str],
    filters: str = '["10.0.0.9:5000"]',
    mappings: list[str] | None = None,
    data_version: str = '{"counter":7,"stateVersion":2,"timestamp":1700000000000}',
) -> bytes:
    raw = _chunk(data_version) + struct.pack(">i", len(topic_lines))
    raw += b"".join(_chunk(line) for line in topic_lines)
    raw += _chunk(filters)
    if mappings is not None:
        raw += struct.pack(">i", len(mappings)) + b"".join(_chunk(m) for m in mappings)
    return zlib.compress(raw, 9)  # Deflater(BEST_COMPRESSION) with the zlib header


def test_compressed_body_of_a_4x_broker():
    body = _compressed(
        [
            'TopicA 8 4 6 SINGLE_TAG {"+message.type":"NORMAL"}',
            "TopicB 16 16 2 MULTI_TAG ",  # attributes null in Java: trailing separator, nothing after it
            "TopicC 1 1 7 SINGLE_TAG {}",
        ]
    )
    assert decode_register_broker_body(body, True, V4) == {
        "dataVersion": {"counter": 7, "stateVersion": 2, "timestamp": 1700000000000},
        "topicConfigTable": {
            "TopicA": {
                "topicName": "TopicA",
                "readQueueNums": 8,
                "writeQueueNums": 4,
                "perm": 6,
                "topicFilterType": "SINGLE_TAG",
                "topicSysFlag": 0,
                "order": False,
                "attributes": {"+message.type": "NORMAL"},
            },
            "TopicB": {
                "topicName": "TopicB",
                "readQueueNums": 16,
                "writeQueueNums": 16,
                "perm": 2,
                "topicFilterType": "MULTI_TAG",
                "topicSysFlag": 0,
                "order": False,
                "attributes": {},
            },
            "TopicC": {
                "topicName": "TopicC",
                "readQueueNums": 1,
                "writeQueueNums": 1,
                "perm": 7,
                "topicFilterType": "SINGLE_TAG",
                "topicSysFlag": 0,
                "order": False,
                "attributes": {},
            },
        },
        "filterServerList": ["10.0.0.9:5000"],
        "topicQueueMappingInfoMap": {},
    }


def test_compressed_body_of_a_5x_broker_carries_queue_mappings():
    mapping = (
        '{"bname":"broker-a","currIdMap":{0:0,1:1},"dirty":false,"epoch":3,"scope":"__global__",'
        '"topic":"TopicA","totalQueues":2}'
    )
    body = _compressed(["TopicA 2 2 6 SINGLE_TAG {}"], "[]", [mapping])
    decoded = decode_register_broker_body(body, True, 413)
    assert decoded["filterServerList"] == []
    assert decoded["topicQueueMappingInfoMap"]["TopicA"]["currIdMap"] == {0: 0, 1: 1}
    # The same bytes from a pre-5.0 broker: the trailing section is not read (Java ignores the rest too).
    assert decode_register_broker_body(body, True, 412)["topicQueueMappingInfoMap"] == {}
    # A 5.x version demands the section.
    with pytest.raises(BodyError, match="mapping count"):
        decode_register_broker_body(_compressed(["TopicA 2 2 6 SINGLE_TAG {}"], "[]"), True, 413)


def test_compressed_body_tolerates_what_java_tolerates():
    # Unparsable attributes and filter list are ignored by Java (logged), not fatal.
    body = _compressed(["T 1 1 6 SINGLE_TAG {not json", 'U 1 1 6 SINGLE_TAG {"a b":"c"}'], "nonsense")
    decoded = decode_register_broker_body(body, True, V4)
    assert decoded["topicConfigTable"]["T"]["attributes"] == {}
    assert decoded["topicConfigTable"]["U"]["attributes"] == {}
    assert decoded["filterServerList"] == []
    # Bytes after the zlib stream are ignored, like InflaterInputStream.
    assert decode_register_broker_body(body + b"junk", True, V4) == decoded


@pytest.mark.parametrize(
    "line",
    [
        "T 1 1 6",
        "T 1 1 6 SOME_TAG",
        "T x 1 6 SINGLE_TAG",
        "T 1 1 2147483648 SINGLE_TAG",
        "T \u0663 1 6 SINGLE_TAG",
        "T 1_0 1 6 SINGLE_TAG",
        "",
        "T  1 1 6 SINGLE_TAG",
    ],
)
def test_compressed_body_bad_topic_lines(line):
    with pytest.raises(BodyError):
        decode_register_broker_body(_compressed([line]), True, V4)


def test_compressed_body_every_truncation_is_a_body_error():
    raw = zlib.decompress(_compressed(["TopicA 8 8 6 SINGLE_TAG {}"]))
    for cut in range(len(raw)):
        with pytest.raises(BodyError):
            decode_register_broker_body(zlib.compress(raw[:cut]), True, V4)
    # A cut zlib stream inflates only partly: an error, unless every byte the reader needs came out (a lost
    # checksum), which InflaterInputStream accepts too. Never a different result.
    body = _compressed(["TopicA 8 8 6 SINGLE_TAG {}"])
    whole = decode_register_broker_body(body, True, V4)
    outcomes = []
    for cut in range(1, len(body)):
        try:
            outcomes.append(decode_register_broker_body(body[:cut], True, V4) == whole)
        except BodyError:
            outcomes.append("error")
    assert set(outcomes) == {"error", True} and outcomes[-1] is True and outcomes[0] == "error"


@pytest.mark.parametrize(
    "raw",
    [
        struct.pack(">i", -1),
        _chunk("{}") + struct.pack(">i", -5),
        _chunk("{}") + struct.pack(">i", 1) + struct.pack(">i", 2**31 - 1),
        _chunk("[1]") + struct.pack(">i", 0) + _chunk("[]"),
        _chunk('{"counter":"7"}') + struct.pack(">i", 0) + _chunk("[]"),
        _chunk("{}") + struct.pack(">i", 1) + _chunk(b"\xff\xfe 1 1 6 SINGLE_TAG"),
    ],
)
def test_compressed_body_bad_structure(raw):
    with pytest.raises(BodyError):
        decode_register_broker_body(zlib.compress(raw), True, V4)


def test_compressed_body_not_zlib_and_zip_bomb():
    with pytest.raises(BodyError, match="inflate"):
        decode_register_broker_body(b"\x00\x01\x02\x03", True, V4)
    bomb = zlib.compress(_chunk("{}") + bytes(100_000), 9)
    with pytest.raises(BodyError, match="beyond"):
        decode_register_broker_body(bomb, True, V4, max_inflated=10_000)


# --- zipped body under compressed=false (every 5.x broker with compressedRegister=true sends this) ---------------

# Made by Apache's own RegisterBrokerBody.encode(true) from the 5.5.0 jars: tests/fixtures/MakeZippedRegisterBody.java
ZIPPED_5X = (Path(__file__).parents[1] / "fixtures" / "register_body_5x_zipped.bin").read_bytes()
V5_0_0, V5_4_0, V5_5_0, V4_9_7 = 413, 493, 513, 405


def test_the_fixture_is_what_java_deflater_writes():
    assert ZIPPED_5X[:2] == b"\x78\xda"  # Deflater(BEST_COMPRESSION): zlib header, no dictionary


@pytest.mark.parametrize("version", [V5_0_0, V5_4_0, V5_5_0])
def test_zipped_body_of_a_5x_broker_sent_as_not_compressed(version):
    decoded = decode_register_broker_body(ZIPPED_5X, False, version)
    assert decoded == decode_register_broker_body(ZIPPED_5X, True, version)  # as if the header had said so
    assert decoded["dataVersion"] == {"counter": 42, "stateVersion": 3, "timestamp": 1764000000000}
    table = decoded["topicConfigTable"]
    assert sorted(table) == ["%RETRY%group_a", "TopicA", "TopicB", "TopicOrder"]
    assert table["TopicA"] == {
        "topicName": "TopicA",
        "readQueueNums": 8,
        "writeQueueNums": 8,
        "perm": 6,
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0,
        "order": False,
        "attributes": {"+message.type": "NORMAL"},
    }
    assert (table["TopicB"]["readQueueNums"], table["TopicB"]["writeQueueNums"], table["TopicB"]["perm"]) == (16, 4, 4)
    assert table["TopicB"]["topicFilterType"] == "MULTI_TAG"
    assert table["TopicOrder"]["order"] is False  # the compressed form does not carry it (nor does Java read it)
    assert decoded["filterServerList"] == ["127.0.0.1:10999"]
    mapping = decoded["topicQueueMappingInfoMap"]["TopicStatic"]
    assert (mapping["bname"], mapping["totalQueues"], mapping["epoch"], mapping["currIdMap"]) == (
        "broker-z", 4, 7, {0: 0, 1: 1})


def test_zipped_body_under_compressed_false_from_before_5x_stays_refused():
    # 4.x brokers set the header right: below V5_0_0 a body that is not JSON is refused as before.
    with pytest.raises(BodyError, match="not JSON"):
        decode_register_broker_body(ZIPPED_5X, False, V4_9_7)


@pytest.mark.parametrize(
    "body",
    [
        b"\x78\x9c",  # a zlib header and nothing after it
        b"\x78\xda garbage after a good header",
        ZIPPED_5X[:-40],  # truncated inside the deflate data
        ZIPPED_5X[:2] + bytes(len(ZIPPED_5X) - 2),
        zlib.compress(b'{"filterServerList":[],"topicConfigSerializeWrapper":{}}'),  # JSON is only taken unzipped
        zlib.compress(b"hello, world"),
        zlib.compress(_chunk("{}") + struct.pack(">i", 1) + _chunk("T 1 1 6 NOT_A_TYPE {}")),
    ],
)
def test_zlib_header_that_is_not_a_register_body_is_refused(body):
    with pytest.raises(BodyError, match="is a zlib stream"):
        decode_register_broker_body(body, False, V5_5_0)


@pytest.mark.parametrize(
    "body",
    [
        b"x",  # too short for a zlib header
        b"\x78\x9d\x00\x00",  # FCHECK wrong
        b"\x78\xbb\x00\x00",  # FCHECK right, FDICT set: Java never writes a preset dictionary
        b"\x08\x1d\x00\x00",  # a valid zlib header with an 8-byte window: not what Java writes
        ZIPPED_5X[1:],
        b"\x00\xff garbage",
    ],
)
def test_other_garbage_stays_not_json(body):
    with pytest.raises(BodyError, match="not JSON"):
        decode_register_broker_body(body, False, V5_5_0)


def test_zip_bomb_under_compressed_false_is_refused_at_the_same_limit():
    bomb = zlib.compress(_chunk("{}") + bytes(100_000), 9)
    with pytest.raises(BodyError, match="beyond 10000 bytes"):
        decode_register_broker_body(bomb, False, V5_5_0, max_inflated=10_000)
    # within the limit the same stream is read, and fails only on what it holds (no topic count)
    with pytest.raises(BodyError, match="is a zlib stream"):
        decode_register_broker_body(zlib.compress(_chunk("{}") + bytes(2), 9), False, V5_5_0, max_inflated=10_000)
    assert decode_register_broker_body(ZIPPED_5X, False, V5_5_0, max_inflated=len(zlib.decompress(ZIPPED_5X)))


# --- plain form ---------------------------------------------------------------------------------------------------

# What a 5.x broker's fastjson writes: bean fields alphabetical, bare integer keys inside the mapping tables.
PLAIN_5X = (
    b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,"stateVersion":0,'
    b'"timestamp":1700000000123},"mappingDataVersion":{"counter":0,"stateVersion":0,"timestamp":1700000000000},'
    b'"topicConfigTable":{"TopicA":{"attributes":{},"order":true,"perm":6,"readQueueNums":8,'
    b'"topicFilterType":"SINGLE_TAG","topicMessageType":"NORMAL","topicName":"TopicA","topicSysFlag":1,'
    b'"writeQueueNums":8},"%RETRY%g":{"perm":6,"readQueueNums":1,"topicName":"%RETRY%g","writeQueueNums":1}},'
    b'"topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{"TopicA":{"bname":"broker-a",'
    b'"currIdMap":{0:0},"epoch":1,"topic":"TopicA","totalQueues":1}}}}'
)


def test_plain_body_of_a_5x_broker():
    decoded = decode_register_broker_body(PLAIN_5X, False, V5)
    assert decoded["dataVersion"] == {"counter": 3, "stateVersion": 0, "timestamp": 1700000000123}
    assert decoded["topicConfigTable"]["TopicA"] == {
        "topicName": "TopicA",
        "readQueueNums": 8,
        "writeQueueNums": 8,
        "perm": 6,
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 1,
        "order": True,
        "attributes": {},
    }
    # Missing fields take TopicConfig's defaults.
    assert decoded["topicConfigTable"]["%RETRY%g"]["topicFilterType"] == "SINGLE_TAG"
    assert decoded["topicConfigTable"]["%RETRY%g"]["topicSysFlag"] == 0
    assert decoded["filterServerList"] == []
    assert decoded["topicQueueMappingInfoMap"]["TopicA"]["currIdMap"] == {0: 0}


def test_plain_body_defaults_and_null_filter_list():
    decoded = decode_register_broker_body(b"{}", False, V5)
    assert decoded["topicConfigTable"] == {} and decoded["filterServerList"] == []
    assert decoded["dataVersion"] == {"counter": 0, "stateVersion": 0, "timestamp": 0}
    assert decode_register_broker_body(b'{"filterServerList":null}', False, V5)["filterServerList"] is None
    table = b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{}}}}'
    assert decode_register_broker_body(table, False, V5)["topicConfigTable"]["T"]["readQueueNums"] == 16


def test_old_broker_sends_a_bare_wrapper():
    # Below V3_0_11 (37) the body is TopicConfigSerializeWrapper itself; compressed is ignored as in Java.
    body = b'{"dataVersion":{"counter":1,"timestamp":5},"topicConfigTable":{"T":{"perm":4}}}'
    for compressed in (False, True):
        decoded = decode_register_broker_body(body, compressed, 36)
        assert decoded["topicConfigTable"]["T"]["perm"] == 4
        assert decoded["dataVersion"] == {"counter": 1, "stateVersion": 0, "timestamp": 5}
        assert decoded["filterServerList"] is None


@pytest.mark.parametrize("version,filters", [(0, None), (V4, []), (V5, [])])
def test_empty_body_is_an_empty_registration(version, filters):
    for body in (b"", None):
        decoded = decode_register_broker_body(body, True, version)
        assert decoded["dataVersion"] == {"counter": 0, "stateVersion": 0, "timestamp": 0}
        assert decoded["topicConfigTable"] == {} and decoded["filterServerList"] == filters


@pytest.mark.parametrize(
    "body",
    [
        b"null",
        b"[]",
        b'{"filterServerList":"x"}',
        b'{"filterServerList":[1]}',
        b'{"topicConfigSerializeWrapper":[]}',
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":[]}}',
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":null}}}',
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"perm":"6"}}}}',
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"perm":4294967296}}}}',
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"order":1}}}}',
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicFilterType":"X"}}}}',
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"attributes":{"a":1}}}}}',
        b'{"topicConfigSerializeWrapper":{"dataVersion":{"counter":true}}}',
        b'{"topicConfigSerializeWrapper":{"dataVersion":{"timestamp":9223372036854775808}}}',
        b'{"topicConfigSerializeWrapper":{"topicQueueMappingInfoMap":[]}}',
        b"{",
        b"\xff",
    ],
)
def test_plain_body_garbage(body):
    with pytest.raises(BodyError):
        decode_register_broker_body(body, False, V5)


def test_negative_version_is_rejected():
    with pytest.raises(BodyError):
        decode_register_broker_body(b"{}", False, -1)


def test_decode_data_version():
    assert decode_data_version(b'{"counter":3,"stateVersion":1,"timestamp":9}') == {
        "counter": 3,
        "stateVersion": 1,
        "timestamp": 9,
    }
    with pytest.raises(BodyError):
        decode_data_version(b"[]")


@given(st.binary(max_size=200), st.booleans(), st.integers(-2, 600))
@settings(max_examples=300, deadline=None)
def test_arbitrary_bodies_raise_only_body_error(body, compressed, version):
    for candidate in (body, zlib.compress(body)):
        try:
            decode_register_broker_body(candidate, compressed, version)
        except BodyError:
            pass


# --- java.util.Properties -----------------------------------------------------------------------------------------

PROPERTY_CASES = [
    ("a=b", {"a": "b"}),
    ("a = b", {"a": "b"}),
    ("a:b", {"a": "b"}),
    ("a b", {"a": "b"}),
    ("a \t  b", {"a": "b"}),
    ("a", {"a": ""}),
    ("a=", {"a": ""}),
    ("=b", {"": "b"}),
    ("a:=b", {"a": "=b"}),
    ("a = = b", {"a": "= b"}),
    ("a =b  ", {"a": "b  "}),
    ("   indented=1", {"indented": "1"}),
    ("# comment\n! also comment\n  #indented comment\nk=v", {"k": "v"}),
    ("#comment ending in backslash \\\nk=v", {"k": "v"}),
    ("a=b\\\n    c", {"a": "bc"}),
    ("a=b\\\\\nc=d", {"a": "b\\", "c": "d"}),
    ("a=b\\\n#not a comment", {"a": "b#not a comment"}),
    ("a=b\\\n\nc=d", {"a": "b", "c": "d"}),
    ("a=b\\", {"a": "b"}),
    ("a=1\r\nb=2\rc=3\n\n\n", {"a": "1", "b": "2", "c": "3"}),
    ("k\\:x=1", {"k:x": "1"}),
    ("k\\ x=1", {"k x": "1"}),
    ("k\\=x\\==1", {"k=x=": "1"}),
    ("t=\\t\\n\\r\\f\\q\\\\", {"t": "\t\n\r\fq\\"}),
    ("u=\\u0041\\u00e9\\uD83D\\uDE00", {"u": "Aé😀"}),
    ("lone=\\uD83Dx\\uDE00", {"lone": "?x?"}),
    ("dup=1\ndup=2", {"dup": "2"}),
    ("\f\tffkey=v", {"ffkey": "v"}),
    ("", {}),
]


@pytest.mark.parametrize("text,expected", PROPERTY_CASES, ids=[repr(t)[:40] for t, _ in PROPERTY_CASES])
def test_parse_properties_like_java(text, expected):
    assert parse_properties(text) == expected


@pytest.mark.parametrize("text", ["a=\\u00G1", "a=\\u12", "\\uZZZZ=1"])
def test_malformed_unicode_escape_is_a_body_error(text):
    with pytest.raises(BodyError, match="uxxxx"):
        parse_properties(text)


def test_format_properties_sorted_like_treemap():
    props = {"b": 2, "a": "x", "flag": True, "gone": None, "\uff61": "halfwidth", "\U0001f600": "emoji"}
    # UTF-16 order puts the surrogate pair (D83D..) before U+FF61, unlike code-point order.
    assert format_properties(props) == "a=x\nb=2\nflag=true\n\U0001f600=emoji\n\uff61=halfwidth\n"


@given(
    st.dictionaries(
        st.from_regex(r"[A-Za-z][A-Za-z0-9.]{0,15}", fullmatch=True),
        st.from_regex(r"[A-Za-z0-9./_-]{0,20}", fullmatch=True),
        max_size=8,
    )
)
@settings(max_examples=40, deadline=None)
def test_format_then_parse_round_trips_plain_values(props):
    assert parse_properties(format_properties(props)) == props


@given(st.text(alphabet=st.sampled_from("ab=: \t\f\\u0#!\r\n\U0001f600"), max_size=40))
@settings(max_examples=150, deadline=None)
def test_arbitrary_properties_text_raises_only_body_error(text):
    try:
        parsed = parse_properties(text)
    except BodyError:
        return
    assert all(type(k) is str and type(v) is str for k, v in parsed.items())
