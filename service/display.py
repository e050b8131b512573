"""How operators read values, shared by the admin CLI and the web console: ages as "12 s", permissions as
"RW", data versions, shares as percentages, Redis-clock milliseconds as UTC times. Pure functions, no I/O."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from service.models import is_system_topic

PERM_PRIORITY, PERM_READ, PERM_WRITE, PERM_INHERIT = 8, 4, 2, 1  # RocketMQ PermName


def age(ms: int | float | None) -> str:
    """A duration as people say it: "850 ms", "12 s", "4 min 5 s", "2 h 10 min", "3 d 4 h"."""
    if ms is None:
        return "-"
    ms = max(0, int(ms))
    if ms < 1000:
        return f"{ms} ms"
    s = ms // 1000
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s" if s % 60 else f"{s // 60} min"
    if s < 86_400:
        return f"{s // 3600} h {s % 3600 // 60} min" if s % 3600 // 60 else f"{s // 3600} h"
    return f"{s // 86_400} d {s % 86_400 // 3600} h" if s % 86_400 // 3600 else f"{s // 86_400} d"


def perm(value: int | None) -> str:
    """RocketMQ's perm bits as letters: 6 -> "RW", 4 -> "R-", 2 -> "-W", 0 -> "--"; inherit adds "X"."""
    if value is None:
        return "-"
    text = ("R" if value & PERM_READ else "-") + ("W" if value & PERM_WRITE else "-")
    return text + "X" if value & PERM_INHERIT else text


def role(broker_id: int) -> str:
    """RocketMQ's convention: broker id 0 is the master, any other id a slave."""
    return "master" if broker_id == 0 else "slave"


def when(ms: int | None) -> str:
    """Redis-clock milliseconds as a UTC time: "2026-11-21 11:14:04 UTC"."""
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def when_iso(stamp: str | None) -> str:
    """An ISO 8601 UTC time from a report ("2026-11-28T06:41:18Z") in the same form as `when`, so one table never
    mixes the two; text that is no such time is shown as it is."""
    if not stamp:
        return "-"
    try:
        moment = datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    except ValueError:
        return str(stamp)
    if moment.tzinfo is None:
        return str(stamp)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def data_version(dv: dict[str, Any] | None) -> str:
    """A DataVersion as "counter 3 · 2026-11-21 11:14:04 UTC" (the counter changes with every topic change)."""
    if not dv:
        return "-"
    text = f"counter {dv.get('counter', 0)} · {when(dv.get('timestamp'))}"
    return text + f" · state {dv['stateVersion']}" if dv.get("stateVersion") else text


def share(value: float | None, digits: int = 1) -> str:
    """A share in 0..1 as a percentage: 0.8 -> "80.0 %"."""
    if value is None:
        return "-"
    return f"{value * 100:.{digits}f} %"


def number(value: float | None, digits: int = 3) -> str:
    """A ratio or coefficient, trailing zeros trimmed: 1.6 -> "1.6", 0.333333 -> "0.333"."""
    if value is None:
        return "-"
    text = f"{value:.{digits}f}".rstrip("0").rstrip(".")
    return text or "0"


def topic_kind(topic: str) -> str:
    """What a topic name says it is: retry and dead-letter topics of a consumer group, system, or plain."""
    if topic.startswith("%RETRY%"):
        return "retry"
    if topic.startswith("%DLQ%"):
        return "dlq"
    if is_system_topic(topic):
        return "system"
    return "normal"
