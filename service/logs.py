"""Log formatting for every process: plain or JSON lines, one level, quiet third-party loggers."""

from __future__ import annotations

import json
import logging
import re
import sys
from typing import Any

from service.config import MASK, SETTINGS, Settings, parse_broker_tokens


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {"ts": round(record.created, 3), "level": record.levelname, "logger": record.name,
                               "msg": record.getMessage(), "pid": record.process}
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


class StderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is when a record is emitted (a test or a daemonizer may swap it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self):  # noqa: ANN201
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:  # noqa: ANN001
        pass


_URL_USERINFO = re.compile(r"(\b[a-z][a-z0-9+.-]*://)([^/@\s:]*):([^/@\s]*)@", re.I)


class MaskSecrets(logging.Filter):
    """No log line carries a secret: URL passwords become ***, and so do the configured tokens and passwords
    wherever they appear (a library's error message may quote a URL or a header)."""

    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        self.secrets = sorted((s for s in secrets if len(s) >= 4), key=len, reverse=True)

    def mask(self, text: str) -> str:
        text = _URL_USERINFO.sub(lambda m: f"{m.group(1)}{m.group(2)}:{MASK}@", text)
        for secret in self.secrets:
            text = text.replace(secret, MASK)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = self.mask(message)
        if masked != message:
            record.msg, record.args = masked, ()
        if record.exc_info and not record.exc_text:
            record.exc_text = self.mask(logging.Formatter().formatException(record.exc_info))
        return True


def secrets_of(settings: Settings) -> list[str]:
    out = [getattr(settings, s.name) for s in SETTINGS if s.secret and getattr(settings, s.name)]
    out += [token for _, token in parse_broker_tokens(settings.broker_tokens)]
    return out


def setup_logging(settings: Settings) -> None:
    handler: logging.Handler = StderrHandler()
    handler.addFilter(MaskSecrets(secrets_of(settings)))
    if settings.log_json:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s [%(process)d] %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level)
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    logging.getLogger("aiohttp.access").setLevel(logging.INFO if settings.access_log else logging.WARNING)
