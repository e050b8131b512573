"""Settings: one frozen dataclass built from file < env (NAMESRV_*) < flags, validated at start.

Every setting is declared once in SETTINGS; the CLI, the `-p` printout, the Helm chart's ConfigMap test and
the runtime `/v1/config` endpoint all read that table, so a name can never exist in one place only.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ENV_PREFIX = "NAMESRV_"


@dataclass(frozen=True)
class Setting:
    name: str  # snake_case; env var is NAMESRV_<NAME>; RocketMQ camelCase alias accepted in files
    kind: type
    default: Any
    help: str
    secret: bool = False
    runtime: bool = False  # may be changed at run time through PUT /v1/config (kept in Redis, shared)
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] | None = None

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()

    @property
    def camel(self) -> str:
        head, *rest = self.name.split("_")
        return head + "".join(p.title() for p in rest)


SETTINGS: tuple[Setting, ...] = (
    # --- process and network
    Setting("host", str, "0.0.0.0", "address the HTTP server binds"),
    Setting("port", int, 8080, "HTTP port", minimum=1, maximum=65535),
    Setting("workers", int, 1, "worker processes sharing the port (SO_REUSEPORT)", minimum=1, maximum=64),
    Setting("advertised_addrs", str, "", "host:port;host:port answered by /rocketmq/nsaddr (default: this worker)"),
    Setting("drain_grace_s", float, 20.0, "seconds SIGTERM waits for in-flight requests (below k8s' 30 s)"),
    Setting("max_body_bytes", int, 64 * 1024 * 1024, "request body limit; admits a broker with 100 000 topics",
            minimum=1024),
    Setting("access_log", bool, False, "per-request access log (costs about 3x throughput)"),
    Setting("log_json", bool, False, "structured JSON log lines"),
    Setting("log_level", str, "INFO", "log level", choices=("DEBUG", "INFO", "WARNING", "ERROR")),
    # --- Redis
    Setting("redis_url", str, "", "redis:// or rediss:// URL; empty = embedded single-process fakeredis"),
    Setting("redis_password", str, "", "Redis password (overrides the URL's)", secret=True),
    Setting("key_prefix", str, "nsrv", "key prefix and hash tag: keys are {prefix}:..."),
    Setting("redis_connect_timeout_ms", int, 500, "Redis connect timeout", minimum=10),
    Setting("redis_socket_timeout_ms", int, 500, "Redis command timeout", minimum=10),
    Setting("redis_retries", int, 2, "retries of a failed Redis call (exponential backoff)", minimum=0, maximum=10),
    # --- liveness and expiry
    Setting("broker_timeout_ms", int, 120_000, "default broker heartbeat timeout", minimum=1000, runtime=True),
    Setting("scan_interval_ms", int, 10_000, "expiry scan period", minimum=100),
    Setting("scan_first_delay_ms", int, 5_000, "delay before the first expiry scan", minimum=0),
    Setting("expire_batch", int, 100, "brokers removed per expiry script call", minimum=1, maximum=1000),
    # --- auth
    Setting("broker_tokens", str, "", "broker tokens, cluster-bound: clusterA:tok1,clusterB:tok2 (or *:tok)",
            secret=True),
    Setting("admin_token", str, "", "admin token (delete topic, perms, KV writes, config)", secret=True),
    Setting("read_token", str, "", "optional token required for reads", secret=True),
    # --- route cache
    Setting("route_cache", bool, True, "worker-local cache of encoded routes, invalidated by change events"),
    Setting("route_cache_staleness_ms", int, 1000, "upper bound on cache staleness if an event is missed",
            minimum=10),
    # --- snapshots and skew report
    Setting("snapshot_interval_s", int, 60, "snapshot period (one worker per tick cluster-wide); 0 = off",
            minimum=0),
    Setting("snapshot_retention_s", int, 86_400, "how long snapshots are kept", minimum=60),
    # --- RocketMQ NamesrvConfig switches (runtime: shared through Redis)
    Setting("order_message_enable", bool, False, "fill orderTopicConf from KV ORDER_TOPIC_CONFIG", runtime=True),
    Setting("return_order_topic_config_to_broker", bool, True, "return ORDER_TOPIC_CONFIG on register",
            runtime=True),
    Setting("delete_topic_with_broker_registration", bool, False,
            "a registration that omits a topic removes that broker's queues of it", runtime=True),
    Setting("support_acting_master", bool, False, "route pickup re-keys a slave as acting master", runtime=True),
    Setting("enable_all_topic_list", bool, True, "serve the all-topic list", runtime=True),
    Setting("enable_topic_list", bool, True, "serve the per-cluster and unit topic lists", runtime=True),
    Setting("need_wait_for_service", bool, False, "answer routes 503 for wait_seconds_for_service after start",
            runtime=True),
    Setting("wait_seconds_for_service", int, 45, "see need_wait_for_service", minimum=0, runtime=True),
)

BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
RUNTIME_NAMES = tuple(s.name for s in SETTINGS if s.runtime)
# Keys the config endpoint must never accept, whatever spelling (cf. CVE-2023-37582).
CONFIG_BLACKLIST = frozenset({"configblacklist", "configstorepath", "kvconfigpath", "rocketmqhome"})


class ConfigError(ValueError):
    """A setting has a bad value or an unknown name."""


def _canonical(key: str) -> str | None:
    """Map NAMESRV_FOO_BAR, foo_bar, foo-bar or fooBar to the setting name, or None."""
    k = key.strip()
    if k.upper().startswith(ENV_PREFIX):
        k = k[len(ENV_PREFIX):]
    k = k.replace("-", "_")
    if not k.islower() and not k.isupper():
        k = re.sub(r"(?<!^)(?=[A-Z])", "_", k)
    k = k.lower()
    return k if k in BY_NAME else None


def parse_value(setting: Setting, raw: Any) -> Any:
    """Turn a raw value (string from env/file/flag, or JSON value) into the setting's type, checked."""
    if setting.kind is bool:
        if isinstance(raw, bool):
            val: Any = raw
        elif str(raw).strip().lower() in ("1", "true", "yes", "on"):
            val = True
        elif str(raw).strip().lower() in ("0", "false", "no", "off", ""):
            val = False
        else:
            raise ConfigError(f"{setting.name}: expected true/false, got {raw!r}")
    elif setting.kind is int:
        if isinstance(raw, bool):
            raise ConfigError(f"{setting.name}: expected an integer, got {raw!r}")
        try:
            val = int(str(raw).strip())
        except ValueError:
            raise ConfigError(f"{setting.name}: expected an integer, got {raw!r}") from None
    elif setting.kind is float:
        try:
            val = float(str(raw).strip())
        except ValueError:
            raise ConfigError(f"{setting.name}: expected a number, got {raw!r}") from None
    else:
        val = str(raw).strip()
    if setting.minimum is not None and val < setting.minimum:
        raise ConfigError(f"{setting.name}: {val} is below the minimum {setting.minimum}")
    if setting.maximum is not None and val > setting.maximum:
        raise ConfigError(f"{setting.name}: {val} is above the maximum {setting.maximum}")
    if setting.choices is not None:
        val = val.upper()
        if val not in setting.choices:
            raise ConfigError(f"{setting.name}: {val!r} is not one of {', '.join(setting.choices)}")
    return val


def read_properties_file(path: str) -> dict[str, str]:
    """Read a Java-properties-style file (key=value or key: value, # comments), as NamesrvStartup -c does."""
    out: dict[str, str] = {}
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            s = line.strip()
            if not s or s[0] in "#!":
                continue
            m = re.match(r"([^=:\s]+)\s*[=:]\s*(.*)$", s)
            if not m:
                raise ConfigError(f"{path}:{lineno}: expected key=value")
            out[m.group(1)] = m.group(2)
    return out


@dataclass(frozen=True)
class Settings:
    values: Mapping[str, Any] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["values"][name]
        except KeyError:
            raise AttributeError(name) from None

    @property
    def embedded(self) -> bool:
        return not self.values["redis_url"]

    def replace(self, **changes: Any) -> Settings:
        merged = dict(self.values)
        for k, v in changes.items():
            if k not in BY_NAME:
                raise ConfigError(f"unknown setting {k!r}")
            merged[k] = parse_value(BY_NAME[k], v)
        return Settings(merged)

    def masked(self) -> dict[str, Any]:
        """The effective config for printing: secrets shown as *** when set."""
        return {s.name: ("***" if s.secret and self.values[s.name] else self.values[s.name]) for s in SETTINGS}

    def as_properties(self) -> str:
        """`-p` output: sorted key=value lines, secrets masked, like NamesrvStartup -p."""
        lines = []
        for name, val in sorted(self.masked().items()):
            text = str(val).lower() if isinstance(val, bool) else str(val)
            lines.append(f"{BY_NAME[name].env}={text}")
        return "\n".join(lines) + "\n"


def load_settings(
    file: str | None = None,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
) -> Settings:
    """Build Settings with precedence flags > env > file > defaults; unknown file keys are an error."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {s.name: s.default for s in SETTINGS}
    if file:
        for key, raw in read_properties_file(file).items():
            name = _canonical(key)
            if name is None:
                raise ConfigError(f"{file}: unknown setting {key!r}")
            values[name] = parse_value(BY_NAME[name], raw)
    for s in SETTINGS:
        if s.env in env:
            values[s.name] = parse_value(s, env[s.env])
    for name, raw in (flags or {}).items():
        if raw is None:
            continue
        values[name] = parse_value(BY_NAME[name], raw)
    _check_cross(values)
    return Settings(values)


def _check_cross(values: dict[str, Any]) -> None:
    prefix = values["key_prefix"]
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", prefix):
        raise ConfigError("key_prefix: letters, digits, '_', '-', '.' only (1..64)")
    url = values["redis_url"]
    if url and not re.match(r"^(redis|rediss|unix)://", url):
        raise ConfigError("redis_url: must start with redis://, rediss:// or unix://")
    from service.auth import parse_broker_tokens  # local: auth imports config

    parse_broker_tokens(values["broker_tokens"])
