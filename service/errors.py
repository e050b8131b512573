"""The NameServer's errors: a small explicit hierarchy, each class carrying a stable code and the RocketMQ
response code (reference §1). Transport statuses are not here: each front door maps these classes to its own
(HTTP statuses in service/http/errors.py, remoting response codes straight from `rocketmq_code`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, TypeVar

T = TypeVar("T")

# RocketMQ ResponseCode values (reference §1).
RMQ_SUCCESS = 0
RMQ_SYSTEM_ERROR = 1
RMQ_SYSTEM_BUSY = 2
RMQ_REQUEST_CODE_NOT_SUPPORTED = 3
RMQ_NO_PERMISSION = 16
RMQ_TOPIC_NOT_EXIST = 17
RMQ_QUERY_NOT_FOUND = 22


class NamesrvError(Exception):
    """Base: an unexpected failure inside the NameServer (SYSTEM_ERROR)."""

    code: ClassVar[str] = "SYSTEM_ERROR"
    rocketmq_code: ClassVar[int] = RMQ_SYSTEM_ERROR

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def __reduce__(self) -> tuple[Any, ...]:
        """Picklable with its details (an error raised in a parser process reaches the door intact)."""
        return (_rebuild, (type(self), self.message, self.details))

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "rocketmqCode": self.rocketmq_code, "message": self.message}
        if self.details:
            body["details"] = self.details
        return body


def _rebuild(cls: type[NamesrvError], message: str, details: dict[str, Any]) -> NamesrvError:
    return cls(message, **details)


def error_class(code: str) -> type[NamesrvError] | None:
    """The error class a stable code names (a reply carries the code, not the class), among those imported."""
    pending: list[type[NamesrvError]] = [NamesrvError]
    while pending:
        cls = pending.pop()
        if cls.code == code:
            return cls
        pending.extend(cls.__subclasses__())
    return None


# --- the request is wrong


class InvalidArgument(NamesrvError):
    """A name, address, number or body that breaks the rules; nothing was written."""

    code = "INVALID_ARGUMENT"


class PayloadTooLarge(InvalidArgument):
    code = "PAYLOAD_TOO_LARGE"


class Unsupported(NamesrvError):
    """A request this door does not know (unknown request code, path or method)."""

    code = "NOT_SUPPORTED"
    rocketmq_code = RMQ_REQUEST_CODE_NOT_SUPPORTED


# --- who may do it


class Unauthorized(NamesrvError):
    """No credential, or one nobody issued."""

    code = "UNAUTHORIZED"
    rocketmq_code = RMQ_NO_PERMISSION


class Forbidden(NamesrvError):
    """A valid credential of the wrong role or cluster."""

    code = "FORBIDDEN"
    rocketmq_code = RMQ_NO_PERMISSION


class CrossClusterRefused(Forbidden):
    """A cluster-bound broker credential reached into another cluster's topics or addresses."""

    code = "CROSS_CLUSTER_REFUSED"


class ConfigBlacklisted(Forbidden):
    """A config key that must never be changed remotely (paths, secrets; cf. CVE-2023-37582)."""

    code = "CONFIG_BLACKLISTED"


class Disabled(NamesrvError):
    """A feature switched off by a RocketMQ switch (enableAllTopicList, enableTopicList)."""

    code = "DISABLED"


# --- what the registry holds


class TopicNotExist(NamesrvError):
    code = "TOPIC_NOT_EXIST"
    rocketmq_code = RMQ_TOPIC_NOT_EXIST


class QueryNotFound(NamesrvError):
    code = "QUERY_NOT_FOUND"
    rocketmq_code = RMQ_QUERY_NOT_FOUND


class ReportNotFound(QueryNotFound):
    code = "REPORT_NOT_FOUND"


class BrokerNotFound(NamesrvError):
    code = "BROKER_NOT_FOUND"


class Conflict(NamesrvError):
    """The request contradicts what the registry holds; nothing was written."""

    code = "CONFLICT"


class BrokerNameConflict(Conflict):
    code = "BROKER_NAME_CONFLICT"


class RegisterFailed(Conflict):
    code = "REGISTER_FAILED"


# --- the service cannot answer now


class Unavailable(NamesrvError):
    """Retry later: the answer exists, the service cannot give it now."""

    code = "UNAVAILABLE"


class NotReady(Unavailable):
    code = "NOT_READY"


class StoreUnavailable(Unavailable):
    """Redis is unreachable, loading or too slow (bounded timeouts: this comes fast)."""

    code = "STORE_UNAVAILABLE"


async def retry_while_store_unavailable(call: Callable[[], Awaitable[T]], *, within_s: float,
                                       pause_s: float = 0.25) -> T:
    """`call()` again while Redis is unavailable (a Sentinel or Cluster failover lasts a few seconds), for at most
    `within_s`, then the last StoreUnavailable: for work a worker owes once, now, that a slower path (an expiry
    scan) would otherwise do later. `call` must be safe to repeat."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while True:
        try:
            return await call()
        except StoreUnavailable:
            if loop.time() + pause_s > deadline:
                raise
            await asyncio.sleep(pause_s)
            pause_s = min(pause_s * 2, 2.0)


class Busy(Unavailable):
    """Overloaded: shed rather than queue without bound."""

    code = "SYSTEM_BUSY"
    rocketmq_code = RMQ_SYSTEM_BUSY


class TooManyWatchers(Busy):
    """A long-poll or stream past this worker's or this client's watcher cap (HTTP 429)."""

    code = "TOO_MANY_WATCHERS"


def from_script_code(code: int, detail: str = "") -> NamesrvError:
    """Map a Lua script's negative return code to its typed error."""
    if code == -1:
        return BrokerNameConflict(f"brokerName is already registered in cluster {detail!r}", ownerCluster=detail)
    if code == -2:
        return RegisterFailed("register broker failed: single-topic registration before the first full one")
    if code == -3:
        return BrokerNotFound(f"no broker named {detail!r} is registered", brokerName=detail)
    if code == -4:
        return CrossClusterRefused(f"topic {detail!r} has queues only on brokers of other clusters; this "
                                   "credential may not add its broker to it", topic=detail)
    if code == -5:
        return CrossClusterRefused(f"address {detail!r} is held by a live broker of another cluster",
                                   brokerAddr=detail)
    return NamesrvError(f"unexpected script code {code}")
