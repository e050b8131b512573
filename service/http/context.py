"""Typed application keys and the per-worker runtime state that handlers share."""

from __future__ import annotations

import logging
import time
from typing import Any

from aiohttp import web

from service.auth import Authenticator
from service.coalesce import Coalescer
from service.config import BY_NAME, RUNTIME_NAMES, ConfigError, Settings, parse_value
from service.metrics import Metrics
from service.route_cache import RouteCache
from service.store import RouteStore

log = logging.getLogger(__name__)


class Runtime:
    """The RocketMQ switches in force: start-up settings overlaid by the shared `{P}:config` hash."""

    def __init__(self, settings: Settings) -> None:
        self._defaults = {n: settings.values[n] for n in RUNTIME_NAMES}
        self.values: dict[str, Any] = {}
        self.started = time.monotonic()
        self.apply({})

    def apply(self, shared: dict[str, str]) -> None:
        merged = dict(self._defaults)
        for name, raw in shared.items():
            if name in BY_NAME and name in self._defaults:
                try:
                    merged[name] = parse_value(BY_NAME[name], raw)
                except ConfigError as exc:
                    log.warning("ignoring shared config %s=%r: %s", name, raw, exc)
        self.values = merged
        self.__dict__.update(merged)  # plain attributes: the route handler reads them on every request


SETTINGS = web.AppKey("settings", Settings)
STORE = web.AppKey("store", RouteStore)
CACHE = web.AppKey("cache", RouteCache)
METRICS = web.AppKey("metrics", Metrics)
AUTH = web.AppKey("auth", Authenticator)
RUNTIME = web.AppKey("runtime", Runtime)
HEARTBEATS = web.AppKey("heartbeats", Coalescer)
