"""One account of a Redis outage in a worker's log, instead of a line per failed call from every component.

The first failure says where Redis is and what the OS or Redis answered (`Error 111 connecting to 10.0.0.5:6379.
Connection refused.`), and whether it is an outage to wait out or a configuration Redis refuses (a wrong password
or ACL user, a database number it does not have); while it lasts, a reminder with the count of failed calls at
growing intervals; a line when Redis answers again. Calls that only ran out of their deadline count as an outage
once they keep failing for OUTAGE_AFTER_S (a single slow call is the NamesrvRedisSlow alert's business). The
components that retry (scheduler jobs, the change-event listener, the heartbeat writer) log their own failures at
debug level while this one speaks.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable

from redis.exceptions import (
    AuthenticationError,
    AuthorizationError,
    InvalidResponse,
    NoPermissionError,
    ResponseError,
)

from service import display

log = logging.getLogger(__name__)

REMINDERS_S = (10.0, 30.0, 60.0, 120.0, 300.0, 600.0)  # into an outage, the reminders; then every 600 s
OUTAGE_AFTER_S = 5.0  # deadline-only failures for this long (no call answered in between) are an outage too


def reminder_due(n: int) -> float:
    """Seconds into an outage when reminder `n` (0-based) is due."""
    if n < len(REMINDERS_S):
        return REMINDERS_S[n]
    return REMINDERS_S[-1] * (n - len(REMINDERS_S) + 2)


def refused(exc: BaseException) -> str | None:
    """What Redis said when it answered but refused this configuration (it is reachable: waiting will not help),
    or that what answers is not Redis at all; else None."""
    text = str(exc)
    if isinstance(exc, AuthenticationError) and ("NOAUTH" in text or "HELLO must be called" in text):
        return ("it requires a password and none was given (NOAUTH): set NAMESRV_REDIS_PASSWORD, or the URL's "
                "redis://:PASSWORD@host:port/db")
    if isinstance(exc, AuthenticationError | AuthorizationError | NoPermissionError):
        return f"{text} (the password, NAMESRV_REDIS_PASSWORD or the URL's user:password, or the ACL user's rights)"
    if isinstance(exc, InvalidResponse):  # something answers at that address, not in RESP
        return f"it does not answer in Redis's protocol ({text}): is this address Redis's, not another service's?"
    if isinstance(exc, ResponseError) and "DB index" in text:
        return f"{text} (the database number at the end of the URL, /0 by default: Redis has 16, 0-15, unless " \
               "its `databases` setting says otherwise)"
    return None


def cause(exc: BaseException) -> str:
    """The failure in words: redis-py's connection errors already name host:port and the OS error."""
    if type(exc) is TimeoutError:  # the store's own deadline (asyncio.timeout)
        return "no answer within the call's deadline (NAMESRV_REDIS_DEADLINE_MS)"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def cause_unplaced(exc: BaseException) -> str:
    """The failure in words without where Redis is, for answers anyone may read (/readyz): the refusal, or the
    error with redis-py's `connecting to host:port.` taken out (the worker's log names the address)."""
    refusal = refused(exc)
    if refusal is not None:
        return f"Redis refuses this configuration: {refusal}"
    return _PLACE.sub("", cause(exc))


_PLACE = re.compile(r"connecting to \S+?\.(?=\s|$)\s*|\s*\('[^']*', \d+\)")  # "… to h:p. " and "('h', p)"


class Outage:
    """The state of this process's Redis as its calls see it, and the log lines that tell its changes."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.target = "Redis"  # connect_store names it: the URL (password masked), the Sentinel set, the seeds
        self.first_failure: float | None = None  # of the current run of failures
        self.refusal: str | None = None  # what Redis said if the last failure was a refused configuration
        self.announced = False  # its first line was logged
        self.failures = 0
        self.last = ""
        self._reminders = 0
        self.quiet = False  # a one-shot command says it in its own one line (status()) instead

    def status(self) -> str:
        """The outage in one line, for a command that prints rather than logs."""
        refusal = self.refusal
        if refusal is not None:
            return f"{self.target} refuses this configuration: {refusal}"
        return f"{self.target} is unavailable ({self.last})"

    @property
    def failing(self) -> bool:
        return self.first_failure is not None

    def failed(self, exc: BaseException, at_once: bool) -> None:
        """A call failed. `at_once`: Redis cannot be reached, is not ready or refuses us (an outage now); else a
        deadline hit or a cluster moving slots (an outage only once it lasts OUTAGE_AFTER_S)."""
        now = self.clock()
        if self.first_failure is None:
            self.first_failure, self.failures, self._reminders = now, 0, 0
        self.failures += 1
        self.last, self.refusal = cause(exc), refused(exc)
        elapsed = now - self.first_failure
        if self.quiet:
            return
        if self.announced:
            if elapsed >= reminder_due(self._reminders):
                self._reminders += 1
                log.warning("%s still unavailable after %s: %d failed calls (last: %s)", self.target,
                            display.age(int(elapsed * 1000)), self.failures, self.last)
            return
        if self.refusal is not None:
            log.error("%s refuses this configuration, an error to fix, not an outage to wait out (requests answer "
                      "503 meanwhile): %s", self.target, self.refusal)
        elif at_once or elapsed >= OUTAGE_AFTER_S:
            log.warning("%s is unavailable (%s); requests answer 503 until it answers again", self.target, self.last)
        else:
            return
        self.announced = True

    def answered(self) -> None:
        """A call succeeded: the end of the outage, if there was one."""
        if self.first_failure is None:
            return
        if self.announced:
            log.warning("%s answers again after %s (%d failed calls)", self.target,
                        display.age(int((self.clock() - self.first_failure) * 1000)), self.failures)
        self.first_failure, self.announced = None, False


OUTAGE = Outage()  # one Redis per worker process, one event loop
