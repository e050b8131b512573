"""Request bodies the NameServer reads (RegisterBrokerBody plain and zlib-compressed, Java properties) and the
properties text it writes. Plain Python values only; any bad body raises BodyError, never anything else.
"""

from __future__ import annotations

import re
import struct
import zlib
from typing import Any

from service.remoting import fastjson

__all__ = [
    "BodyError",
    "V3_0_11",
    "V5_0_0",
    "crc32_of",
    "decode_data_version",
    "decode_register_broker_body",
    "format_properties",
    "parse_properties",
]

# MQVersion.Version ordinals that change the body layout.
V3_0_11 = 37  # from here on brokers wrap the topic table in RegisterBrokerBody
V5_0_0 = 413  # from here on the compressed form ends with TopicQueueMappingInfo entries

# Zip-bomb guard: Java inflates without a cap; 64 MiB is ~10x the largest bodies seen in the field (60k topics).
MAX_INFLATED = 64 * 1024 * 1024

_I32 = struct.Struct(">i")
_INT32_RANGE = (-(2**31), 2**31 - 1)
_INT64_RANGE = (-(2**63), 2**63 - 1)
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")


class BodyError(ValueError):
    """A request body cannot be decoded; the handler answers SYSTEM_ERROR as Java does on its decode exception."""


def crc32_of(body: bytes | bytearray | memoryview) -> int:
    """UtilAll.crc32: CRC32 of the raw bytes with the sign bit cleared (0 for an empty body)."""
    return zlib.crc32(body) & 0x7FFFFFFF if body else 0


# --- DataVersion and TopicConfig ----------------------------------------------------------------------------------


def decode_data_version(body: bytes | str) -> dict[str, int]:
    """A DataVersion JSON body (QUERY_DATA_VERSION): {"counter", "stateVersion", "timestamp"}, missing fields 0."""
    return _data_version(_json(body, "DataVersion"), "DataVersion")


def _data_version(value: Any, where: str) -> dict[str, int]:
    if value is None:
        value = {}
    if type(value) is not dict:
        raise BodyError(f"{where} is not a JSON object")
    # Java's default timestamp is "now"; 0 keeps decoding a pure function and still compares unequal to real ones.
    return {
        "counter": _int(value, "counter", 0, where, _INT64_RANGE),
        "stateVersion": _int(value, "stateVersion", 0, where, _INT64_RANGE),
        "timestamp": _int(value, "timestamp", 0, where, _INT64_RANGE),
    }


def _topic_config(value: Any, where: str) -> dict[str, Any]:
    if type(value) is not dict:
        raise BodyError(f"{where} is not a JSON object")
    name = value.get("topicName")
    if name is not None and type(name) is not str:
        raise BodyError(f"{where}.topicName is not a string")
    filter_type = value.get("topicFilterType")
    if filter_type is None:
        filter_type = "SINGLE_TAG"
    elif filter_type not in _FILTER_TYPES:
        raise BodyError(f"{where}.topicFilterType {filter_type!r} is not SINGLE_TAG or MULTI_TAG")
    order = value.get("order")
    if order is None:
        order = False
    elif type(order) is not bool:
        raise BodyError(f"{where}.order is not a boolean")
    # TopicConfig's field defaults: 16/16 queues, perm READ|WRITE.
    conf: dict[str, Any] = {
        "topicName": name,
        "readQueueNums": _int(value, "readQueueNums", 16, where, _INT32_RANGE),
        "writeQueueNums": _int(value, "writeQueueNums", 16, where, _INT32_RANGE),
        "perm": _int(value, "perm", 6, where, _INT32_RANGE),
        "topicFilterType": filter_type,
        "topicSysFlag": _int(value, "topicSysFlag", 0, where, _INT32_RANGE),
        "order": order,
        "attributes": _attributes(value.get("attributes"), where),
    }
    return conf


def _attributes(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if type(value) is not dict or not all(type(v) is str for v in value.values()):
        raise BodyError(f"{where}.attributes is not a string map")
    return {str(k): v for k, v in value.items()}


def _int(obj: dict, name: str, default: int, where: str, bounds: tuple[int, int]) -> int:
    value = obj.get(name)
    if value is None:
        return default
    if type(value) is not int or not bounds[0] <= value <= bounds[1]:
        raise BodyError(f"{where}.{name} is not an integer in range")
    return value


# --- RegisterBrokerBody -------------------------------------------------------------------------------------------


def decode_register_broker_body(
    body: bytes | bytearray | memoryview | None,
    compressed: bool,
    broker_version: int,
    *,
    max_inflated: int = MAX_INFLATED,
) -> dict[str, Any]:
    """REGISTER_BROKER's body as {"dataVersion", "topicConfigTable", "filterServerList", "topicQueueMappingInfoMap"}.

    broker_version is the request's `version`. Below V3_0_11 the body is a bare TopicConfigSerializeWrapper (the
    compressed flag is ignored, as in Java) and filterServerList is None ("leave the table as is"). An empty body
    gives DataVersion {0,0,0} and no topics, as DefaultRequestProcessor does for a null body. From V5_0_0 on, a body
    that opens with a zlib header is decoded as the compressed form even when `compressed` is false (more lenient
    than Java: 5.x brokers send their zipped body so).
    """
    if broker_version < 0:
        raise BodyError(f"request version {broker_version} is not a MQVersion ordinal")
    old = broker_version < V3_0_11
    if not body:
        return {
            "dataVersion": {"counter": 0, "stateVersion": 0, "timestamp": 0},
            "topicConfigTable": {},
            "filterServerList": None if old else [],
            "topicQueueMappingInfoMap": {},
        }
    if old:
        return _plain_wrapper(_json(body, "TopicConfigSerializeWrapper"), None, "TopicConfigSerializeWrapper")
    if compressed:
        return _decode_compressed(bytes(body), broker_version >= V5_0_0, max_inflated)
    if broker_version >= V5_0_0 and _zlib_header(body):
        # Every 5.x broker (5.0.0 through 5.5.0 at least) with compressedRegister=true zips the body yet sends
        # compressed=false; Java's NameServer then fails on it. No JSON text starts with "x" (0x78), so a body that
        # opens with a zlib header is taken for what it is, under the same limits (docs/deviations.md).
        try:
            return _decode_compressed(bytes(body), True, max_inflated)
        except BodyError as exc:
            raise BodyError(f"RegisterBrokerBody is a zlib stream (header compressed=false) but: {exc}") from None
    top = _json(body, "RegisterBrokerBody")
    if type(top) is not dict:
        raise BodyError("RegisterBrokerBody is not a JSON object")
    filters = top.get("filterServerList", [])
    if filters is not None and (type(filters) is not list or not all(type(f) is str for f in filters)):
        raise BodyError("RegisterBrokerBody.filterServerList is not a list of strings")
    wrapper = top.get("topicConfigSerializeWrapper")
    return _plain_wrapper({} if wrapper is None else wrapper, filters, "topicConfigSerializeWrapper")


def _plain_wrapper(wrapper: Any, filters: list[str] | None, where: str) -> dict[str, Any]:
    if type(wrapper) is not dict:
        raise BodyError(f"{where} is not a JSON object")
    table = wrapper.get("topicConfigTable")
    if table is None:
        table = {}
    if type(table) is not dict:
        raise BodyError(f"{where}.topicConfigTable is not a JSON object")
    topics = {str(name): _topic_config(conf, f"topicConfigTable[{name!r}]") for name, conf in table.items()}
    mapping = wrapper.get("topicQueueMappingInfoMap")
    if mapping is None:
        mapping = {}
    if type(mapping) is not dict:
        raise BodyError(f"{where}.topicQueueMappingInfoMap is not a JSON object")
    return {
        "dataVersion": _data_version(wrapper.get("dataVersion"), f"{where}.dataVersion"),
        "topicConfigTable": topics,
        "filterServerList": filters,
        "topicQueueMappingInfoMap": mapping,
    }


class _Reader:
    """Sequential reads over the inflated stream, failing like Java's readBytes on a short stream."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def int32(self, what: str) -> int:
        if len(self.data) - self.pos < 4:
            raise BodyError(f"compressed body ends before {what}")
        (value,) = _I32.unpack_from(self.data, self.pos)
        self.pos += 4
        return value

    def chunk(self, what: str) -> bytes:
        length = self.int32(f"the length of {what}")
        if length < 0:
            raise BodyError(f"negative length {length} for {what}")
        if len(self.data) - self.pos < length:
            raise BodyError(f"compressed body ends inside {what}")
        out = self.data[self.pos : self.pos + length]
        self.pos += length
        return out


ZIPPED_RATIO = 16  # bytes a zipped RegisterBrokerBody inflates to per byte, about (topic lines: 14x measured)


def decode_cost(body: bytes | bytearray | memoryview, compressed: bool) -> int:
    """What decoding this RegisterBrokerBody costs, in bytes of plain body: a zipped one inflates first."""
    return len(body) * ZIPPED_RATIO if compressed or _zlib_header(body) else len(body)


def _zlib_header(body: bytes | bytearray | memoryview) -> bool:
    """Whether the body opens as Java's Deflater writes a zlib stream: CMF 0x78 (deflate, 32 KiB window), then a
    FLG byte that makes the pair a multiple of 31 (FCHECK) and asks for no preset dictionary (FDICT clear)."""
    if len(body) < 2 or body[0] != 0x78:
        return False
    flg = body[1]
    return (0x78 * 256 + flg) % 31 == 0 and not flg & 0x20


def _decode_compressed(body: bytes, with_mapping: bool, max_inflated: int) -> dict[str, Any]:
    inflater = zlib.decompressobj()  # zlib header expected: Java's Deflater/InflaterInputStream default
    try:
        data = inflater.decompress(body, max_inflated)
    except zlib.error as exc:
        raise BodyError(f"compressed body does not inflate: {exc}") from None
    if inflater.unconsumed_tail:
        raise BodyError(f"compressed body inflates beyond {max_inflated} bytes")
    # A truncated stream is only an error if a read needs the missing part, as with Java's InflaterInputStream.
    reader = _Reader(data)
    data_version = _data_version(_json(reader.chunk("the DataVersion"), "DataVersion"), "dataVersion")
    count = reader.int32("the topic count")
    if count < 0:
        raise BodyError(f"negative topic count {count}")
    topics: dict[str, dict[str, Any]] = {}
    for i in range(count):
        conf = _topic_config_line(_text(reader.chunk(f"topic config {i}"), f"topic config {i}"), i)
        topics[conf["topicName"]] = conf
    filters_json = _text(reader.chunk("the filter server list"), "the filter server list")
    try:
        filters = fastjson.loads(filters_json)
    except fastjson.JsonError:
        filters = []  # Java logs the parse error and keeps an empty list
    if filters is not None and (type(filters) is not list or not all(type(f) is str for f in filters)):
        filters = []
    mapping: dict[str, Any] = {}
    if with_mapping:
        entries = reader.int32("the mapping count")
        if entries < 0:
            raise BodyError(f"negative mapping count {entries}")
        for i in range(entries):
            info = _json(reader.chunk(f"mapping {i}"), f"TopicQueueMappingInfo {i}")
            if type(info) is not dict or type(info.get("topic")) is not str:
                raise BodyError(f"TopicQueueMappingInfo {i} has no topic")
            mapping[info["topic"]] = info
    return {
        "dataVersion": data_version,
        "topicConfigTable": topics,
        "filterServerList": filters,
        "topicQueueMappingInfoMap": mapping,
    }


def _topic_config_line(line: str, index: int) -> dict[str, Any]:
    """TopicConfig.decode: "name read write perm filterType [attributesJSON]"; sysFlag and order are not carried."""
    parts = line.split(" ")
    while parts and parts[-1] == "":
        parts.pop()  # Java's String.split drops trailing empty strings
    where = f"topic config {index}"
    if len(parts) < 5:
        raise BodyError(f"{where} has {len(parts)} fields, needs at least 5: {line[:100]!r}")
    if parts[4] not in _FILTER_TYPES:
        raise BodyError(f"{where}: topicFilterType {parts[4][:40]!r} is not SINGLE_TAG or MULTI_TAG")
    attributes: dict[str, str] = {}
    if len(parts) >= 6:
        # Java ignores attributes it cannot parse (a space inside them splits the JSON apart).
        try:
            parsed = fastjson.loads(parts[5])
        except fastjson.JsonError:
            parsed = None
        if type(parsed) is dict and all(type(v) is str for v in parsed.values()):
            attributes = {str(k): v for k, v in parsed.items()}
    return {
        "topicName": parts[0],
        "readQueueNums": _java_int(parts[1], where),
        "writeQueueNums": _java_int(parts[2], where),
        "perm": _java_int(parts[3], where),
        "topicFilterType": parts[4],
        "topicSysFlag": 0,
        "order": False,
        "attributes": attributes,
    }


def _java_int(text: str, where: str) -> int:
    if not _JAVA_INT.fullmatch(text):
        raise BodyError(f"{where}: {text[:40]!r} is not an integer")
    value = int(text)
    if not _INT32_RANGE[0] <= value <= _INT32_RANGE[1]:
        raise BodyError(f"{where}: {text[:40]!r} does not fit an int")
    return value


def _text(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BodyError(f"{what} is not valid UTF-8") from None


def _json(raw: bytes | bytearray | memoryview | str, what: str) -> Any:
    try:
        return fastjson.loads(raw)
    except fastjson.JsonError as exc:
        raise BodyError(f"{what} is not JSON: {exc}") from None


# --- java.util.Properties -----------------------------------------------------------------------------------------

_WHITESPACE = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_HEX = frozenset("0123456789abcdefABCDEF")
_SURROGATE = re.compile("[\ud800-\udfff]")


def parse_properties(text: str) -> dict[str, str]:
    """java.util.Properties.load semantics on text (UPDATE_NAMESRV_CONFIG). Later keys win.

    Note Java's NameServer re-encodes the body to UTF-8 and load()s it as ISO-8859-1, so non-ASCII arrives
    mangled there; this parses the text as given. A malformed \\uXXXX raises BodyError ("string2Properties error").
    """
    out: dict[str, str] = {}
    for line in _logical_lines(text):
        key_end = 0
        value_start = len(line)
        has_sep = False
        backslash = False
        while key_end < len(line):
            c = line[key_end]
            if (c == "=" or c == ":") and not backslash:
                value_start = key_end + 1
                has_sep = True
                break
            if c in _WHITESPACE and not backslash:
                value_start = key_end + 1
                break
            backslash = (not backslash) if c == "\\" else False
            key_end += 1
        while value_start < len(line):
            c = line[value_start]
            if c not in _WHITESPACE:
                if not has_sep and (c == "=" or c == ":"):
                    has_sep = True
                else:
                    break
            value_start += 1
        out[_unescape(line[:key_end])] = _unescape(line[value_start:])
    return out


def _logical_lines(text: str) -> list[str]:
    """Properties.LineReader: natural lines joined on an odd trailing backslash, comments and blank lines dropped."""
    lines: list[str] = []
    current: list[str] = []
    continuing = False
    for raw in _natural_lines(text):
        stripped = raw.lstrip(_WHITESPACE)
        if not continuing:
            if not stripped or stripped[0] in "#!":
                continue  # blank or comment; a comment never continues onto the next line
        trailing = len(stripped) - len(stripped.rstrip("\\"))
        if trailing % 2 == 1:
            current.append(stripped[:-1])
            continuing = True
            continue
        current.append(stripped)
        lines.append("".join(current))
        current = []
        continuing = False
    if continuing:
        lines.append("".join(current))  # a backslash right before end of input is dropped
    return lines


def _natural_lines(text: str) -> list[str]:
    return re.split(r"\r\n|\r|\n", text)


def _unescape(raw: str) -> str:
    if "\\" not in raw:
        return raw
    out: list[str] = []
    i = 0
    n = len(raw)
    while i < n:
        c = raw[i]
        i += 1
        if c != "\\" or i >= n:
            out.append(c)  # Java keeps a lone trailing backslash of a key as is
            continue
        c = raw[i]
        i += 1
        if c == "u":
            digits = raw[i : i + 4]
            if len(digits) < 4 or not all(d in _HEX for d in digits):
                raise BodyError("Malformed \\uxxxx encoding in properties")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(c, c))
    text = "".join(out)
    if not _SURROGATE.search(text):
        return text
    # Java strings are UTF-16: \uD83D\uDE00 is one character. An unpaired surrogate becomes '?', which is what
    # Java's getBytes(UTF-8) writes for it wherever the value goes next.
    paired = text.encode("utf-16-be", "surrogatepass").decode("utf-16-be", "surrogatepass")
    return _SURROGATE.sub("?", paired)


def format_properties(props: dict[str, object]) -> str:
    """MixAll.properties2String(props, isSort=true): "k=v\\n" per entry sorted by key, null values skipped.

    Java writes keys and values raw, without Properties escaping, so this is not always parse_properties' inverse.
    """
    lines = []
    for key in sorted(props, key=_java_order):
        value = props[key]
        if value is None:
            continue
        if value is True or value is False:
            value = "true" if value else "false"
        lines.append(f"{key}={value}\n")
    return "".join(lines)


def _java_order(key: str) -> bytes:
    # TreeMap orders String keys by UTF-16 code units, which differs from code points above U+FFFF.
    return key.encode("utf-16-be", "surrogatepass")
