"""One error type carrying a stable code, RocketMQ's response code and an HTTP status.

Lua scripts return negative codes; `from_script_code` turns them into these errors, so every front door
(HTTP now, RocketMQ remoting later) reports the same failure the same way.
"""

from __future__ import annotations

from typing import Any

# RocketMQ ResponseCode values (reference §1).
RMQ_SUCCESS = 0
RMQ_SYSTEM_ERROR = 1
RMQ_SYSTEM_BUSY = 2
RMQ_REQUEST_CODE_NOT_SUPPORTED = 3
RMQ_NO_PERMISSION = 16
RMQ_TOPIC_NOT_EXIST = 17
RMQ_QUERY_NOT_FOUND = 22


class NamesrvError(Exception):
    code = "SYSTEM_ERROR"
    rocketmq_code = RMQ_SYSTEM_ERROR
    http_status = 500

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "rocketmqCode": self.rocketmq_code, "message": self.message}
        if self.details:
            body["details"] = self.details
        return body


def _error(name: str, rocketmq_code: int, http_status: int) -> type[NamesrvError]:
    return type(name, (NamesrvError,), {"code": _screaming(name), "rocketmq_code": rocketmq_code,
                                        "http_status": http_status})


def _screaming(class_name: str) -> str:
    out = "".join("_" + c if c.isupper() and i else c for i, c in enumerate(class_name)).upper()
    return out.removesuffix("_ERROR")


InvalidArgument = _error("InvalidArgument", RMQ_SYSTEM_ERROR, 400)
PayloadTooLarge = _error("PayloadTooLarge", RMQ_SYSTEM_ERROR, 413)
Unauthorized = _error("Unauthorized", RMQ_NO_PERMISSION, 401)
Forbidden = _error("Forbidden", RMQ_NO_PERMISSION, 403)
NotFound = _error("NotFound", RMQ_REQUEST_CODE_NOT_SUPPORTED, 404)
MethodNotAllowed = _error("MethodNotAllowed", RMQ_REQUEST_CODE_NOT_SUPPORTED, 405)
TopicNotExist = _error("TopicNotExist", RMQ_TOPIC_NOT_EXIST, 404)
QueryNotFound = _error("QueryNotFound", RMQ_QUERY_NOT_FOUND, 404)
BrokerNotFound = _error("BrokerNotFound", RMQ_SYSTEM_ERROR, 404)
BrokerNameConflict = _error("BrokerNameConflict", RMQ_SYSTEM_ERROR, 409)
RegisterFailed = _error("RegisterFailed", RMQ_SYSTEM_ERROR, 409)
Disabled = _error("Disabled", RMQ_SYSTEM_ERROR, 403)
ConfigBlacklisted = _error("ConfigBlacklisted", RMQ_NO_PERMISSION, 403)
NotReady = _error("NotReady", RMQ_SYSTEM_ERROR, 503)
StoreUnavailable = _error("StoreUnavailable", RMQ_SYSTEM_BUSY, 503)
ReportNotFound = _error("ReportNotFound", RMQ_QUERY_NOT_FOUND, 404)


def from_script_code(code: int, detail: str = "") -> NamesrvError:
    """Map a Lua script's negative return code to its typed error."""
    if code == -1:
        return BrokerNameConflict(f"brokerName is already registered in cluster {detail!r}", ownerCluster=detail)
    if code == -2:
        return RegisterFailed("register broker failed: single-topic registration before the first full one")
    if code == -3:
        return BrokerNotFound(f"no broker named {detail!r} is registered", brokerName=detail)
    return NamesrvError(f"unexpected script code {code}")
