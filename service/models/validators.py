"""The validators every front door shares, and the limits and name rules they apply: names by full match (a
trailing newline is not a name), addresses `host:port` with ASCII digits, numbers of the declared type and range.
A door whose wire carries text (RocketMQ's extFields) converts with `int_text`/`bool_text` first."""

from __future__ import annotations

import re
from typing import Any

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
