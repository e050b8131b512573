"""RocketMQ remoting frames: RemotingCommand, encode() for JSON and ROCKETMQ headers, a streaming FrameDecoder.

Wire layout (remoting RemotingCommand / RocketMQSerializable): int32 totalLen, int32 (serializeType << 24 | headerLen),
header, body. Decoding never raises anything but FrameError subclasses, whatever the bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field

import orjson

__all__ = [
    "BadFrame",
    "FrameDecoder",
    "FrameError",
    "FrameTooLarge",
    "LANGUAGES",
    "MAX_FRAME",
    "RemotingCommand",
    "SERVER_VERSION",
    "decode_frame",
    "encode",
    "is_oneway",
    "is_response",
    "json_header_error",
    "make_response",
]

# MQVersion.Version.V5_3_3.ordinal(): the `version` the Java 5.3.3 NameServer stamps on what it sends.
SERVER_VERSION = 479
# com.rocketmq.remoting.frameMaxLength default; like Netty's LengthFieldBasedFrameDecoder it counts the 4-byte prefix.
MAX_FRAME = 16 * 1024 * 1024

FLAG_RESPONSE = 1  # bit 0
FLAG_ONEWAY = 2  # bit 1

# LanguageCode: the enum code is also its ordinal, so this tuple is indexed by the wire byte.
LANGUAGES = (
    "JAVA",
    "CPP",
    "DOTNET",
    "PYTHON",
    "DELPHI",
    "ERLANG",
    "RUBY",
    "OTHER",
    "HTTP",
    "GO",
    "PHP",
    "OMS",
    "RUST",
    "NODE_JS",
)
_LANGUAGE_CODE = {name: code for code, name in enumerate(LANGUAGES)}
_OTHER = _LANGUAGE_CODE["OTHER"]

_SERIALIZE_CODE = {"JSON": 0, "ROCKETMQ": 1}

_INT32 = struct.Struct(">i")
_FRAME_HEAD = struct.Struct(">iI")  # totalLen, serializeType<<24 | headerLen
_BIN_FIXED = struct.Struct(">hbhiii")  # code, language, version, opaque, flag, remarkLen
_SHORT = struct.Struct(">h")
_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1


class FrameError(Exception):
    """The byte stream cannot be decoded; the connection must be closed. `decoded` holds commands completed before
    the bad frame in the same feed() call, so they can still be served (Netty fires them before the exception)."""

    def __init__(self, message: str, decoded: list[RemotingCommand] | None = None) -> None:
        super().__init__(message)
        self.decoded: list[RemotingCommand] = decoded or []


class FrameTooLarge(FrameError):
    """A frame's declared length exceeds the decoder's max_frame."""


class BadFrame(FrameError):
    """A frame is malformed: bad lengths, unknown serialize type, undecodable header."""


@dataclass(slots=True)
class RemotingCommand:
    """One request or response. ext_fields carries the custom header, all values strings (Java HashMap<String,String>).

    language is a LanguageCode name; an unknown wire byte or JSON name decodes to "OTHER" (Java would hold null).
    """

    code: int
    language: str = "JAVA"
    version: int = 0
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    serialize_type: str = "JSON"


def is_response(cmd: RemotingCommand) -> bool:
    return bool(cmd.flag & FLAG_RESPONSE)


def is_oneway(cmd: RemotingCommand) -> bool:
    return bool(cmd.flag & FLAG_ONEWAY)


def make_response(
    request: RemotingCommand,
    code: int,
    remark: str | None = None,
    ext: dict[str, object] | None = None,
    body: bytes = b"",
) -> RemotingCommand:
    """A reply to `request`: same opaque, response flag, JAVA, SERVER_VERSION, in the request's serialize type.

    Replying in the request's type is what 4.9.x does (NettyRemotingAbstract copies it); 5.x would use the server's
    own configured type, which is JSON by default. ali-ons can only read JSON and always sends JSON, so both agree.
    """
    return RemotingCommand(
        code=code,
        language="JAVA",
        version=SERVER_VERSION,
        opaque=request.opaque,
        flag=FLAG_RESPONSE,
        remark=remark,
        ext_fields=_ext_strings(ext) if ext else {},
        body=body,
        serialize_type=request.serialize_type,
    )


# --- encode -------------------------------------------------------------------------------------------------------


def encode(cmd: RemotingCommand) -> bytes:
    """The whole frame, length prefix included. Raises ValueError for values the wire format cannot carry."""
    if cmd.serialize_type == "ROCKETMQ":
        header = _encode_binary_header(cmd)
        kind = 1
    elif cmd.serialize_type == "JSON":
        header = _encode_json_header(cmd)
        kind = 0
    else:
        raise ValueError(f"unknown serialize type {cmd.serialize_type!r}")
    if len(header) > 0xFFFFFF:
        raise ValueError(f"header of {len(header)} bytes exceeds the 24-bit header length field")
    body = cmd.body or b""
    return b"".join((_FRAME_HEAD.pack(4 + len(header) + len(body), (kind << 24) | len(header)), header, body))


def _encode_json_header(cmd: RemotingCommand) -> bytes:
    _check_range("code", cmd.code, _I32_MIN, _I32_MAX)
    _check_range("version", cmd.version, _I32_MIN, _I32_MAX)
    _check_range("opaque", cmd.opaque, _I32_MIN, _I32_MAX)
    _check_range("flag", cmd.flag, _I32_MIN, _I32_MAX)
    # fastjson bean order: fields sorted by name, nulls left out; body is transient and never in the header.
    header: dict[str, object] = {"code": cmd.code}
    if cmd.ext_fields:
        header["extFields"] = _ext_strings(cmd.ext_fields)
    header["flag"] = cmd.flag
    header["language"] = cmd.language
    header["opaque"] = cmd.opaque
    if cmd.remark is not None:
        header["remark"] = cmd.remark
    header["serializeTypeCurrentRPC"] = cmd.serialize_type
    header["version"] = cmd.version
    return orjson.dumps(header)


def _encode_binary_header(cmd: RemotingCommand) -> bytes:
    _check_range("code", cmd.code, -32768, 32767)
    _check_range("version", cmd.version, -32768, 32767)
    _check_range("opaque", cmd.opaque, _I32_MIN, _I32_MAX)
    _check_range("flag", cmd.flag, _I32_MIN, _I32_MAX)
    remark = cmd.remark.encode("utf-8") if cmd.remark else b""
    parts = [
        _BIN_FIXED.pack(
            cmd.code, _LANGUAGE_CODE.get(cmd.language, _OTHER), cmd.version, cmd.opaque, cmd.flag, len(remark)
        ),
        remark,
        b"",
    ]
    ext_len = 0
    for key, value in _ext_strings(cmd.ext_fields).items():
        k = key.encode("utf-8")
        v = value.encode("utf-8")
        if len(k) > 32767:
            raise ValueError(f"ext field name of {len(k)} bytes does not fit the int16 length")
        parts.append(_SHORT.pack(len(k)))
        parts.append(k)
        parts.append(_INT32.pack(len(v)))
        parts.append(v)
        ext_len += 6 + len(k) + len(v)
    parts[2] = _INT32.pack(ext_len)
    return b"".join(parts)


def _ext_strings(ext: dict[str, object]) -> dict[str, str]:
    """Header values as Java's makeCustomHeaderToNet leaves them: toString() of each, nulls dropped."""
    out: dict[str, str] = {}
    for key, value in ext.items():
        if value is None:
            continue
        if type(value) is str:
            out[key] = value
        elif value is True or value is False:
            out[key] = "true" if value else "false"
        else:
            out[key] = str(value)
    return out


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if type(value) is not int or not low <= value <= high:
        raise ValueError(f"{name}={value!r} does not fit the wire field ({low}..{high})")


# --- decode -------------------------------------------------------------------------------------------------------


def decode_frame(frame: bytes | bytearray | memoryview) -> RemotingCommand:
    """Decode exactly one complete frame (length prefix included)."""
    view = memoryview(frame)
    if len(view) < 4:
        raise BadFrame("frame shorter than its length field")
    (total,) = _INT32.unpack_from(view, 0)
    if total != len(view) - 4:
        raise BadFrame(f"length field says {total} bytes, frame has {len(view) - 4}")
    return _decode_payload(view, 4, len(view))


class FrameDecoder:
    """Streaming decoder for one connection: feed() bytes as they arrive, get whole commands back.

    max_frame bounds a frame including its 4-byte length prefix (Netty LengthFieldBasedFrameDecoder semantics).
    After a FrameError the decoder stays failed; the caller closes the connection.
    """

    __slots__ = ("_buf", "_failed", "max_frame")

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self.max_frame = max_frame
        self._buf = bytearray()
        self._failed: FrameError | None = None

    @property
    def buffered(self) -> int:
        """Bytes held back waiting for the rest of a frame."""
        return len(self._buf)

    @property
    def pending(self) -> int:
        """What the incomplete frame held back takes once whole: its declared length with the prefix (at most
        max_frame, or feed() raised), or the bytes held while its length has not arrived; 0 when none is held."""
        buf = self._buf
        if len(buf) < 4:
            return len(buf)
        return _INT32.unpack_from(buf, 0)[0] + 4

    def feed(self, data: bytes | bytearray | memoryview,
             fast: Callable[[memoryview, int, int], bytes | None] | None = None) -> list[RemotingCommand | bytes]:
        """Whole commands, in order. `fast(view, start, stop)`, when given, sees each frame's payload first
        (view[start:stop] = header-length word, header, body) and may answer it outright: its bytes then take
        the command's place in the list (a server's hot path, without building a RemotingCommand)."""
        if self._failed is not None:
            raise type(self._failed)(f"decoder already failed: {self._failed}")
        if self._buf:
            self._buf += data
            source: bytes | bytearray = self._buf
        else:
            source = data if isinstance(data, bytes) else bytes(data)
        out: list[RemotingCommand | bytes] = []
        pos = 0
        end = len(source)
        try:
            with memoryview(source) as view:
                while end - pos >= 4:
                    (total,) = _INT32.unpack_from(view, pos)
                    if total < 4:
                        raise BadFrame(f"frame length {total} is smaller than the header length field")
                    if total + 4 > self.max_frame:
                        raise FrameTooLarge(f"frame of {total + 4} bytes exceeds the {self.max_frame} byte limit")
                    stop = pos + 4 + total
                    if stop > end:
                        break
                    answered = fast(view, pos + 4, stop) if fast is not None else None
                    out.append(answered if answered is not None else _decode_payload(view, pos + 4, stop))
                    pos = stop
        except FrameError as exc:
            exc.decoded = out  # type: ignore[assignment]
            self._failed = exc
            self._buf = bytearray()
            raise
        if source is self._buf:
            del self._buf[:pos]  # CPython trims a bytearray's head in O(1)
        elif pos < end:
            self._buf = bytearray(source[pos:])
        return out


def _decode_payload(view: memoryview, start: int, stop: int) -> RemotingCommand:
    """Decode the bytes after the length prefix: view[start:stop] = header-length word, header, body."""
    (word,) = _INT32.unpack_from(view, start)
    kind = (word >> 24) & 0xFF
    header_len = word & 0xFFFFFF
    header_start = start + 4
    body_start = header_start + header_len
    if body_start > stop:
        raise BadFrame(f"header length {header_len} runs past the end of the frame")
    if kind == 0:
        cmd = _decode_json_header(view[header_start:body_start])
    elif kind == 1:
        cmd = _decode_binary_header(view, header_start, body_start)
    else:
        raise BadFrame(f"unknown serialize type {kind}")
    if body_start < stop:
        cmd.body = bytes(view[body_start:stop])
    return cmd


def json_header_error(obj: object) -> str | None:
    """Why a parsed JSON header is no valid command header, or None when it is one. The one rule: the decoder
    applies it to every JSON frame and the server's hot path to the frames it answers without a decoder."""
    if type(obj) is not dict:
        return "JSON header is not an object"
    for name in ("code", "version", "opaque", "flag"):
        value = obj.get(name)
        if value is not None and (type(value) is not int or not _I32_MIN <= value <= _I32_MAX):
            return f"JSON header field {name} is not a 32-bit integer"
    language = obj.get("language")
    if language is not None and type(language) is not str and type(language) is not int:
        return "JSON header field language has the wrong type"  # fastjson reads an enum by name or ordinal
    remark = obj.get("remark")
    if remark is not None and type(remark) is not str:
        return "JSON header field remark is not a string"
    ext = obj.get("extFields")
    if ext is not None:
        if type(ext) is not dict:
            return "JSON header field extFields is not an object"
        for key, value in ext.items():
            if type(value) not in _EXT_SCALARS:
                return f"JSON header extFields[{key!r}] is not a scalar"
    return None


_EXT_SCALARS = (str, bool, int, float, type(None))


def _decode_json_header(header: memoryview) -> RemotingCommand:
    try:
        obj = orjson.loads(header)
    except orjson.JSONDecodeError as exc:
        raise BadFrame(f"JSON header does not parse: {exc}") from None
    error = json_header_error(obj)
    if error is not None:
        raise BadFrame(error)
    language = obj.get("language")
    if language is None:
        language = "JAVA"
    elif type(language) is str:
        if language not in _LANGUAGE_CODE:
            language = "OTHER"
    else:
        language = LANGUAGES[language] if 0 <= language < len(LANGUAGES) else "OTHER"
    ext = obj.get("extFields")
    return RemotingCommand(
        code=obj.get("code") or 0,
        language=language,
        version=obj.get("version") or 0,
        opaque=obj.get("opaque") or 0,
        flag=obj.get("flag") or 0,
        remark=obj.get("remark"),
        ext_fields=_json_ext(ext) if ext else {},
        serialize_type="JSON",
    )


def _json_ext(ext: dict) -> dict[str, str]:
    """extFields as strings (checked by json_header_error: scalars only)."""
    for value in ext.values():
        if type(value) is not str:
            break
    else:
        return ext
    # Non-Java clients (ali-ons) send numbers and booleans; fastjson turns them into strings for HashMap<String,String>.
    out: dict[str, str] = {}
    for key, value in ext.items():
        kind = type(value)
        if kind is str:
            out[key] = value
        elif kind is bool:
            out[key] = "true" if value else "false"
        elif value is not None:  # int or float: the same text as JavaScript's toString for ordinary decimals
            out[key] = str(value)
        # a null value reads as an absent field in every header decoder
    return out


def _decode_binary_header(view: memoryview, pos: int, end: int) -> RemotingCommand:
    if end - pos < _BIN_FIXED.size + 4:
        raise BadFrame("ROCKETMQ header shorter than its fixed part")
    code, lang, version, opaque, flag, remark_len = _BIN_FIXED.unpack_from(view, pos)
    pos += _BIN_FIXED.size
    remark = None
    if remark_len:
        if remark_len < 0 or remark_len > end - pos - 4:
            raise BadFrame(f"remark length {remark_len} runs past the header")
        remark = _utf8(view[pos : pos + remark_len], "remark")
        pos += remark_len
    (ext_len,) = _INT32.unpack_from(view, pos)
    pos += 4
    ext: dict[str, str] = {}
    if ext_len:
        if ext_len < 0 or ext_len > end - pos:
            raise BadFrame(f"extFields length {ext_len} runs past the header")
        ext_end = pos + ext_len
        while pos < ext_end:
            if ext_end - pos < 6:
                raise BadFrame("truncated extFields entry")
            (klen,) = _SHORT.unpack_from(view, pos)
            pos += 2
            if klen < 0 or klen > ext_end - pos - 4:
                raise BadFrame(f"extFields key length {klen} runs past the block")
            key = _utf8(view[pos : pos + klen], "extFields key")
            pos += klen
            (vlen,) = _INT32.unpack_from(view, pos)
            pos += 4
            if vlen < 0 or vlen > ext_end - pos:
                raise BadFrame(f"extFields value length {vlen} runs past the block")
            # Java decodes a zero-length value to null; "" keeps the dict[str, str] contract and reads as unset.
            ext[key] = _utf8(view[pos : pos + vlen], "extFields value")
            pos += vlen
    # Bytes after the ext block are ignored, as RocketMQSerializable.rocketMQProtocolDecode does.
    return RemotingCommand(
        code=code,
        language=LANGUAGES[lang] if 0 <= lang < len(LANGUAGES) else "OTHER",
        version=version,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=ext,
        serialize_type="ROCKETMQ",
    )


def _utf8(raw: memoryview, what: str) -> str:
    try:
        return str(raw, "utf-8")
    except UnicodeDecodeError:
        raise BadFrame(f"{what} is not valid UTF-8") from None
