"""Settings: one typed, frozen dataclass built from file < env (NAMESRV_*) < flags, validated at start.

Every setting is one field of `Settings` with its default, range and help written once; SETTINGS (the
descriptors the CLI, `-p`, the Helm chart's tests and the config endpoint read) is derived from those fields,
so a name or a default can never exist in one place only.
"""

import difflib
import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ENV_PREFIX = "NAMESRV_"
ANY_CLUSTER = "*"
MASK = "***"
DEFAULT_BROKER_TIMEOUT_MS = 120_000  # RocketMQ's BrokerLiveInfo default (a broker may send its own)


class ConfigError(ValueError):
    """A setting has a bad value or an unknown name."""


def _setting(default: Any, help: str, *, minimum: float | None = None, maximum: float | None = None,
             choices: tuple[str, ...] | None = None, secret: bool = False, runtime: bool = False) -> Any:
    """A Settings field: its default, help text and bounds, declared once."""
    return field(default=default, metadata={"help": help, "minimum": minimum, "maximum": maximum,
                                            "choices": choices, "secret": secret, "runtime": runtime})


# Topics per step of a large registration when registration_chunk_topics is 0 (service/store/chunked.py): with
# Redis the first step's size, then each step sized by what the last ones cost there (service/store/steps.py);
# fakeredis runs Lua some 30x slower, on the event loop itself, and keeps this fixed size.
REDIS_CHUNK_TOPICS = 1000
EMBEDDED_CHUNK_TOPICS = 200


@dataclass(frozen=True, slots=True)
class Settings:
    """The effective configuration. `runtime` settings can change while serving (PUT /v1/config, shared
    through Redis); every other one is fixed at start."""

    # --- process and network
    host: str = _setting("0.0.0.0", "address the HTTP server binds")
    port: int = _setting(8080, "HTTP port", minimum=1, maximum=65535)
    workers: int = _setting(1, "worker processes sharing the ports (SO_REUSEPORT)", minimum=1, maximum=64)
    advertised_addrs: str = _setting("", "host:port;host:port answered by /rocketmq/nsaddr instead of the "
                                         "workers' announced addresses (e.g. a load balancer's, for clients "
                                         "outside the network the workers are in)")
    announce_addr: str = _setting("", "host:port this worker announces for /rocketmq/nsaddr, what brokers and "
                                      "clients connect to (Helm: the pod IP); default: the bind host, or this "
                                      "machine's primary IP when it binds every interface, at remoting_port")
    announce_lease_ms: int = _setting(15_000, "an announced address stays in /rocketmq/nsaddr this long after its "
                                              "worker's last renewal (renewed every third of it): a killed worker "
                                              "drops out within it, a stopped one at once",
                                      minimum=1000, maximum=600_000)
    drain_grace_s: float = _setting(20.0, "seconds SIGTERM waits for in-flight requests (below k8s' 30 s)",
                                    minimum=0, maximum=600)
    http_keepalive_s: float = _setting(15.0, "close an HTTP connection idle this long, also one that never "
                                             "finished sending its request headers", minimum=1, maximum=3600)
    http_read_timeout_s: float = _setting(30.0, "a request body must arrive within this (a broker's 100 000 "
                                                "topics are ~10 MB)", minimum=1, maximum=600)
    max_body_bytes: int = _setting(64 * 1024 * 1024, "HTTP registration body limit; admits a broker with 100 000 "
                                                     "topics (other endpoints have fixed limits of at most "
                                                     "256 KiB)", minimum=1024, maximum=1024 * 1024 * 1024)
    remoting_port: int = _setting(9876, "RocketMQ native remoting (TCP) port on the same host; 0 = off",
                                  minimum=0, maximum=65535)
    remoting_max_frame_bytes: int = _setting(16 * 1024 * 1024, "largest remoting frame accepted (RocketMQ's "
                                             "frameMaxLength); a larger one closes that connection",
                                             minimum=1024, maximum=1024 * 1024 * 1024)
    remoting_idle_s: int = _setting(120, "close a remoting connection silent this long (RocketMQ "
                                         "serverChannelMaxIdleTimeSeconds)", minimum=1, maximum=86_400)
    remoting_frame_timeout_s: int = _setting(60, "a remoting frame must arrive whole within this long of being "
                                                 "taken on (its first byte, or the end of its wait for room), "
                                                 "however its bytes trickle in; else the connection is closed",
                                             minimum=1, maximum=3600)
    remoting_max_partial_bytes: int = _setting(64 * 1024 * 1024, "bytes a worker holds for the remoting frames it "
                                                                 "took on over all its connections, incomplete "
                                                                 "ones at their declared length, then until "
                                                                 "answered; a frame past it waits, its connection "
                                                                 "not read, until there is room",
                                               minimum=1024, maximum=16 * 1024 * 1024 * 1024)
    remoting_max_in_flight: int = _setting(64, "requests one remoting connection may have in progress; more "
                                               "are answered SYSTEM_BUSY", minimum=1, maximum=65_536)
    remoting_max_pending: int = _setting(16_384, "requests a worker may have in progress over all remoting "
                                                 "connections; past it, a connection with requests of its own in "
                                                 "progress that sends more is not read until fewer are",
                                         minimum=1, maximum=1_000_000)
    remoting_standard_json: bool = _setting(False, "answer routes in standard JSON whatever the client version "
                                                   "(RocketMQ's acceptStandardJsonOnly for every request)")
    remoting_tls_mode: str = _setting("DISABLED", "TLS on the remoting port: DISABLED, PERMISSIVE (TLS and "
                                                  "plain on one port, as RocketMQ) or ENFORCING",
                                      choices=("DISABLED", "PERMISSIVE", "ENFORCING"))
    remoting_tls_cert_file: str = _setting("", "PEM certificate chain of the remoting TLS server")
    remoting_tls_key_file: str = _setting("", "PEM private key of the remoting TLS server")
    remoting_tls_ca_file: str = _setting("", "CA bundle for remoting client certificates; a verified "
                                             "certificate's subject CN names the cluster it may register into")
    remoting_trusted_networks: str = _setting("", "unsigned remoting registrations accepted from these networks "
                                                  "for the clusters named: 10.0.0.0/8=ClusterA|ClusterB,"
                                                  "192.168.0.0/16=*")
    access_log: bool = _setting(False, "per-request access log (costs about 3x throughput)")
    log_json: bool = _setting(False, "structured JSON log lines")
    log_level: str = _setting("INFO", "log level", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    # --- Redis
    redis_url: str = _setting("", "redis://, rediss:// or unix:// URL; empty = embedded single-process "
                                  "fakeredis")
    redis_password: str = _setting("", "Redis password (overrides the URL's)", secret=True)
    key_prefix: str = _setting("nsrv", "key prefix and hash tag: keys are {prefix}:...")
    redis_connect_timeout_ms: int = _setting(500, "Redis connect timeout", minimum=10, maximum=60_000)
    redis_socket_timeout_ms: int = _setting(500, "Redis command timeout (with redis_wait_replicas, the clients use "
                                                 "this plus redis_wait_timeout_ms)", minimum=10, maximum=60_000)
    redis_retries: int = _setting(2, "retries of a failed Redis call (exponential backoff)", minimum=0,
                                  maximum=10)
    redis_deadline_ms: int = _setting(1000, "time one Redis call may take in all, retries included, before "
                                            "the request gets 503; bulk calls add time per topic, from their turn",
                                      minimum=50, maximum=60_000)
    redis_bulk_deadline_ms: int = _setting(10_000, "ceiling of a bulk call's deadline (registrations, "
                                                   "unregister, expiry) however many topics it carries",
                                           minimum=100, maximum=600_000)
    redis_bulk_concurrency: int = _setting(8, "bulk Redis calls (registrations, unregisters, expiry) a worker has "
                                              "under way at once; more wait their turn, first come first served, "
                                              "their deadline starting with it", minimum=1, maximum=256)
    registration_chunk_topics: int = _setting(0, "a registration with more topics than this is applied in steps "
                                                 "of this many, so no Redis call lasts long (0 = with Redis, "
                                                 "steps sized by what they cost there, about 5 ms each, from "
                                                 "1 000 topics; 200 embedded)", minimum=0, maximum=1_000_000)
    redis_sentinels: str = _setting("", "Sentinel mode: host:port,host:port of the sentinels (instead of "
                                        "redis_url)")
    redis_master_name: str = _setting("mymaster", "Sentinel mode: the service name the sentinels monitor")
    redis_sentinel_password: str = _setting("", "Sentinel mode: password of the sentinels themselves (the data "
                                                "nodes use redis_password)", secret=True)
    redis_sentinel_tls: bool = _setting(False, "Sentinel mode: TLS to the sentinels and to the data nodes they "
                                               "name (servers checked against redis_tls_ca_file, else the system "
                                               "CAs, and by host name)")
    redis_tls_ca_file: str = _setting("", "Sentinel mode with redis_sentinel_tls: CA bundle of the Redis servers' "
                                          "certificates (with redis_url: its ?ssl_ca_certs= query)")
    redis_tls_cert_file: str = _setting("", "Sentinel mode with redis_sentinel_tls: client certificate, for servers "
                                            "with tls-auth-clients (with redis_url: ?ssl_certfile=)")
    redis_tls_key_file: str = _setting("", "Sentinel mode with redis_sentinel_tls: the client certificate's key "
                                           "(with redis_url: ?ssl_keyfile=)")
    redis_cluster: bool = _setting(False, "Redis Cluster mode: redis_url names any seed node")
    redis_cluster_nodes: str = _setting("", "Redis Cluster mode: more seed nodes, host:port,host:port, besides "
                                            "redis_url's (scheme, password and TLS come from redis_url); any one "
                                            "reachable at start is enough")
    redis_wait_replicas: int = _setting(0, "admin writes, controller transitions (ids, elections, SyncStateSet; "
                                           "not heartbeats) and, with redis_wait_registrations, registrations are "
                                           "acknowledged only once this many replicas have them (WAIT); 0 = off",
                                        minimum=0, maximum=16)
    redis_wait_timeout_ms: int = _setting(1000, "how long a write waits for redis_wait_replicas before it "
                                                "answers 503", minimum=10, maximum=60_000)
    redis_wait_registrations: bool = _setting(False, "broker registrations wait for redis_wait_replicas too "
                                                     "(heartbeats never do: brokers repeat them every 30 s)")
    # --- liveness and expiry
    broker_timeout_ms: int = _setting(DEFAULT_BROKER_TIMEOUT_MS, "default broker heartbeat timeout",
                                      minimum=1000, maximum=86_400_000, runtime=True)
    scan_interval_ms: int = _setting(10_000, "expiry scan period", minimum=100, maximum=3_600_000)
    heartbeat_flush_ms: int = _setting(1000, "BROKER_HEARTBEATs (904) are acknowledged from memory and written to "
                                             "Redis in one batch per this period (0 = each one before its reply); "
                                             "expiry waits this long past a timeout", minimum=0, maximum=10_000)
    scan_first_delay_ms: int = _setting(5_000, "delay before the first expiry scan", minimum=0,
                                        maximum=3_600_000)
    expire_batch: int = _setting(100, "brokers removed per expiry script call", minimum=1, maximum=1000)
    # --- auth
    broker_tokens: str = _setting("", "broker tokens, cluster-bound: clusterA:<token>,clusterB:<token> (or "
                                      "*:<token>); every token at least 8 characters",
                                  secret=True)
    admin_token: str = _setting("", "admin token (delete topic, perms, KV writes, config); at least 8 "
                                    "characters", secret=True)
    read_token: str = _setting("", "optional token required for reads; at least 8 characters", secret=True)
    allow_cross_cluster_topics: bool = _setting(False, "let a cluster-bound broker credential add its broker to "
                                                       "a topic whose queues live only on other clusters")
    # --- route cache
    route_cache: bool = _setting(True, "worker-local cache of encoded routes, invalidated by change events")
    route_cache_staleness_ms: int = _setting(1000, "upper bound on cache staleness if an event is missed",
                                             minimum=10, maximum=60_000)
    route_cache_max_entries: int = _setting(100_000, "routes one worker caches at most (oldest evicted first)",
                                            minimum=1, maximum=10_000_000)
    route_cache_max_bytes: int = _setting(256 * 1024 * 1024, "bytes of encoded routes one worker caches at most",
                                          minimum=1024 * 1024, maximum=16 * 1024 * 1024 * 1024)
    route_cache_max_absent: int = _setting(10_000, "unknown topics one worker remembers as absent at most (a flood "
                                                   "of random names stays within this)", minimum=0, maximum=1_000_000)
    # --- watches (long-polls and Server-Sent Event streams of routes)
    watch_max_per_worker: int = _setting(20_000, "long-polls and route streams one worker serves at once; more "
                                                 "are refused with 429", minimum=0, maximum=1_000_000)
    watch_max_per_client: int = _setting(64, "long-polls and route streams one client address may hold on one "
                                             "worker; more are refused with 429 (behind a proxy every client "
                                             "shares its address: raise it)", minimum=0, maximum=1_000_000)
    watch_keepalive_s: float = _setting(15.0, "a route stream idle this long gets a keep-alive comment (below "
                                              "proxies' idle timeouts)", minimum=0.05, maximum=3600)
    # --- snapshots and skew report
    snapshot_interval_s: int = _setting(60, "snapshot period (one worker per tick cluster-wide); 0 = off",
                                        minimum=0, maximum=86_400)
    snapshot_retention_s: int = _setting(86_400, "how long snapshots are kept", minimum=60,
                                         maximum=90 * 86_400)
    skew_interval_s: int = _setting(3600, "namesrv skew-scheduler: one skew report per interval cluster-wide",
                                    minimum=10, maximum=7 * 86_400)
    skew_history: int = _setting(48, "skew reports kept (Redis history, report directories) for the trend",
                                 minimum=1, maximum=10_000)
    # --- operator console
    console: bool = _setting(True, "serve the read-only web console at /console/ (behind the read token when "
                                   "one is set)")
    # --- RocketMQ 5 controller (docs/controller-protocol.md)
    controller: bool = _setting(False, "answer RocketMQ 5 controller requests (codes 1001-1013, BROKER_HEARTBEAT "
                                       "with a brokerId) on the native door")
    controller_elect_unclean_master: bool = _setting(False, "elect a master outside the SyncStateSet when no "
                                                            "member can be (ControllerConfig.enableElectUncleanMaster)",
                                                     runtime=True)
    controller_notify_broker_role_changed: bool = _setting(True, "tell a broker set's live brokers about a new "
                                                                 "master (ControllerConfig.notifyBrokerRoleChanged)",
                                                           runtime=True)
    controller_scan_interval_ms: int = _setting(2000, "how often each worker expires controller heartbeats and "
                                                      "re-elects sets whose master expired", minimum=100,
                                                maximum=60_000)
    # --- RocketMQ NamesrvConfig switches (runtime: shared through Redis)
    order_message_enable: bool = _setting(False, "fill orderTopicConf from KV ORDER_TOPIC_CONFIG", runtime=True)
    return_order_topic_config_to_broker: bool = _setting(True, "return ORDER_TOPIC_CONFIG on register",
                                                         runtime=True)
    delete_topic_with_broker_registration: bool = _setting(
        False, "a registration that omits a topic removes that broker's queues of it", runtime=True)
    support_acting_master: bool = _setting(False, "route pickup re-keys a slave as acting master", runtime=True)
    enable_all_topic_list: bool = _setting(True, "serve the all-topic list", runtime=True)
    enable_topic_list: bool = _setting(True, "serve the per-cluster and unit topic lists", runtime=True)
    need_wait_for_service: bool = _setting(False, "answer routes 'not ready' for wait_seconds_for_service "
                                                  "after start", runtime=True)
    wait_seconds_for_service: int = _setting(45, "see need_wait_for_service", minimum=0, maximum=600,
                                             runtime=True)

    @property
    def embedded(self) -> bool:
        return not self.redis_url and not self.redis_sentinels

    @property
    def redis_mode(self) -> str:
        """embedded, single, sentinel or cluster."""
        if self.redis_sentinels:
            return "sentinel"
        if not self.redis_url:
            return "embedded"
        return "cluster" if self.redis_cluster else "single"

    @property
    def redis_command_timeout_ms(self) -> int:
        """The socket timeout of the workers' Redis clients: redis_socket_timeout_ms, plus redis_wait_timeout_ms
        when writes WAIT for replicas, so WAIT's own answer (after up to the wait timeout) is read rather than cut
        off by the socket (which answered STORE_UNAVAILABLE, not REPLICATION_UNCONFIRMED). The store's per-call
        deadline, not this, is what answers a hung Redis on time."""
        wait = self.redis_wait_timeout_ms if self.redis_wait_replicas else 0
        return self.redis_socket_timeout_ms + wait

    @property
    def sentinel_addresses(self) -> list[tuple[str, int]]:
        return parse_addresses(self.redis_sentinels)

    @property
    def sentinel_tls_options(self) -> dict[str, Any]:
        """redis-py connection options for Sentinel mode's TLS (sentinels and data nodes alike); {} without it."""
        if not self.redis_sentinel_tls:
            return {}
        options: dict[str, Any] = {"ssl": True}
        for option, path in (("ssl_ca_certs", self.redis_tls_ca_file), ("ssl_certfile", self.redis_tls_cert_file),
                             ("ssl_keyfile", self.redis_tls_key_file)):
            if path:
                options[option] = path
        return options

    @property
    def cluster_seed_addresses(self) -> list[tuple[str, int]]:
        """redis_cluster_nodes parsed (redis_url's node is a seed too)."""
        return parse_addresses(self.redis_cluster_nodes, "redis_cluster_nodes")

    def replace(self, **changes: Any) -> "Settings":
        """A copy with some settings changed, each parsed and checked like any other source."""
        for name in changes:
            if name not in BY_NAME:
                raise ConfigError(f"unknown setting {name!r}")
        parsed = {name: parse_value(BY_NAME[name], raw) for name, raw in changes.items()}
        out = replace(self, **parsed)
        check_cross(out)
        return out

    @property
    def chunk_topics(self) -> int:
        """registration_chunk_topics in force: 0 stands for the store's own step, 1 000 topics with Redis (the
        first step's size: then sized by time) and 200 embedded (where every step holds the one event loop that
        also answers reads)."""
        return self.registration_chunk_topics or (EMBEDDED_CHUNK_TOPICS if self.embedded else REDIS_CHUNK_TOPICS)

    def masked(self) -> dict[str, Any]:
        """The effective config for printing: secrets shown as *** when set, URL passwords masked, and a value that
        depends on the mode (registration_chunk_topics 0) as the one in force."""
        shown = {s.name: s.shown(getattr(self, s.name)) for s in SETTINGS}
        shown["registration_chunk_topics"] = self.chunk_topics
        return shown

    def as_properties(self) -> str:
        """`-p` output: sorted NAMESRV_X=value lines, secrets masked, like NamesrvStartup -p."""
        lines = []
        for name, val in sorted(self.masked().items()):
            text = str(val).lower() if isinstance(val, bool) else str(val)
            lines.append(f"{BY_NAME[name].env}={text}")
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Setting:
    """The descriptor of one Settings field."""

    name: str  # snake_case; env var is NAMESRV_<NAME>; RocketMQ camelCase alias accepted in files
    kind: type
    default: Any
    help: str
    secret: bool = False
    runtime: bool = False
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()

    @property
    def camel(self) -> str:
        head, *rest = self.name.split("_")
        return head + "".join(p.title() for p in rest)

    @property
    def is_url(self) -> bool:
        return self.name.endswith("_url")

    def shown(self, value: Any) -> Any:
        """The value as it may be printed or served: secrets as ***, URLs without their password."""
        if self.secret and value:
            return MASK
        if self.is_url and value:
            return mask_url(value)
        return value

    def range_text(self) -> str:
        if self.choices:
            return " | ".join(self.choices)
        if self.minimum is None and self.maximum is None:
            return ""
        return f"{_num(self.minimum)}..{_num(self.maximum)}"


def _num(v: float | None) -> str:
    if v is None:
        return ""
    return str(int(v)) if float(v).is_integer() else str(v)


SETTINGS: tuple[Setting, ...] = tuple(
    Setting(name=f.name, kind=f.type, default=f.default, **f.metadata)  # type: ignore[arg-type]
    for f in fields(Settings)
)
BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
ENV_NAMES: frozenset[str] = frozenset(s.env for s in SETTINGS)
# NAMESRV_ variables that are not ours to check: RocketMQ's clients and mqadmin read NAMESRV_ADDR, `namesrv admin`
# NAMESRV_SERVER, the robustness tier its own; and Kubernetes gives every pod <SERVICE>_SERVICE_HOST, _PORT=tcp://…
# and the like for every Service of its namespace (one named namesrv-… makes NAMESRV_… variables).
OTHERS_ENV = re.compile(r"NAMESRV_(ADDR|SERVER|ROBUSTNESS_\w+)"
                        r"|\w+_SERVICE_(HOST|PORT\w*)|\w+_PORT_\d+_(TCP|UDP|SCTP)\w*")
SERVICE_LINK = re.compile(r"(tcp|udp|sctp)://")  # the value of Kubernetes' <SERVICE>_PORT
RUNTIME_NAMES: tuple[str, ...] = tuple(s.name for s in SETTINGS if s.runtime)
# Keys the config endpoint must never accept, whatever spelling (cf. CVE-2023-37582).
CONFIG_BLACKLIST = frozenset({"configblacklist", "configstorepath", "kvconfigpath", "rocketmqhome"})


def canonical_name(key: str) -> str | None:
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
    val: Any
    if setting.kind is bool:
        if isinstance(raw, bool):
            val = raw
        elif str(raw).strip().lower() in ("1", "true", "yes", "on"):
            val = True
        elif str(raw).strip().lower() in ("0", "false", "no", "off", ""):
            val = False
        else:
            raise ConfigError(f"{setting.name}: expected true/false, got {raw!r}")
    elif setting.kind is int:
        if isinstance(raw, bool) or not re.fullmatch(r"[+-]?[0-9]{1,18}", str(raw).strip()):
            raise ConfigError(f"{setting.name}: expected an integer, got {raw!r}")
        val = int(str(raw).strip())
    elif setting.kind is float:
        try:
            val = float(str(raw).strip())
        except ValueError:
            raise ConfigError(f"{setting.name}: expected a number, got {raw!r}") from None
        if val != val or val in (float("inf"), float("-inf")):
            raise ConfigError(f"{setting.name}: expected a finite number, got {raw!r}")
    else:
        val = str(raw).strip()
    if setting.minimum is not None and val < setting.minimum:
        raise ConfigError(f"{setting.name}: {val} is below the minimum {_num(setting.minimum)}")
    if setting.maximum is not None and val > setting.maximum:
        raise ConfigError(f"{setting.name}: {val} is above the maximum {_num(setting.maximum)}")
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


def load_settings(
    file: str | None = None,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
) -> Settings:
    """Build Settings with precedence flags > env > file > defaults; unknown file keys are an error."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    if file:
        for key, raw in read_properties_file(file).items():
            name = canonical_name(key)
            if name is None:
                raise ConfigError(f"{file}: unknown setting {key!r}")
            values[name] = parse_value(BY_NAME[name], raw)
    for s in SETTINGS:
        if s.env in env:
            try:
                values[s.name] = parse_value(s, env[s.env])
            except ConfigError as exc:
                if SERVICE_LINK.match(env[s.env]):
                    raise ConfigError(f"{exc}: that is how Kubernetes links a Service named "
                                      f"{s.env.removesuffix('_PORT').lower().replace('_', '-')} into every pod of "
                                      "its namespace; set enableServiceLinks: false in the pod spec (the chart "
                                      "does), or rename that Service") from None
                raise
    for name, raw in (flags or {}).items():
        if raw is None:
            continue
        values[name] = parse_value(BY_NAME[name], raw)
    settings = Settings(**values)
    check_cross(settings)
    return settings


def unknown_env(env: Mapping[str, str]) -> list[str]:
    """The NAMESRV_ variables of `env` that are no setting (a typo keeps the setting's default silently), each with
    the likely one: warnings, not errors, since other tools read NAMESRV_ variables too (OTHERS_ENV)."""
    said = []
    for name in sorted(env):
        if not name.startswith(ENV_PREFIX) or name in ENV_NAMES or OTHERS_ENV.fullmatch(name) or (
                name.endswith("_PORT") and SERVICE_LINK.match(env[name])):
            continue
        close = difflib.get_close_matches(name, ENV_NAMES, n=1, cutoff=0.8)
        said.append(f"{name} is not a setting, ignored" + (f" (did you mean {close[0]}?)" if close else ""))
    return said


def check_cross(s: Settings) -> None:
    """Checks that involve a value's syntax beyond its type."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", s.key_prefix):
        raise ConfigError("key_prefix: letters, digits, '_', '-', '.' only (1..64)")
    if s.redis_url and not re.match(r"^(redis|rediss|unix)://", s.redis_url):
        raise ConfigError("redis_url: must start with redis://, rediss:// or unix://")
    _ = s.sentinel_addresses, s.cluster_seed_addresses  # parsing refuses a malformed host:port list at start
    if s.redis_cluster_nodes and not s.redis_cluster:
        raise ConfigError("redis_cluster_nodes: seed nodes are for Redis Cluster mode (set redis_cluster)")
    if s.redis_sentinels and s.redis_url:
        raise ConfigError("redis_sentinels and redis_url: set one (Sentinel mode asks the sentinels for the "
                          "master)")
    if s.redis_sentinels and s.redis_cluster:
        raise ConfigError("redis_cluster and redis_sentinels: Redis Cluster does not use sentinels")
    if s.redis_sentinels and not s.redis_master_name.strip():
        raise ConfigError("redis_master_name: Sentinel mode needs the monitored service name")
    tls_files = ("redis_tls_ca_file", "redis_tls_cert_file", "redis_tls_key_file")
    if s.redis_sentinel_tls and not s.redis_sentinels:
        raise ConfigError("redis_sentinel_tls: TLS settings are for Sentinel mode (with redis_url use rediss:// and "
                          "its query: ?ssl_ca_certs=/path/ca.pem)")
    for name in tls_files:
        path = getattr(s, name)
        if path and not s.redis_sentinel_tls:
            raise ConfigError(f"{name}: set redis_sentinel_tls too (Sentinel mode); with redis_url use rediss:// "
                              "and its query (?ssl_ca_certs=, ?ssl_certfile=, ?ssl_keyfile=)")
        if path and not os.path.isfile(path):
            raise ConfigError(f"{name}: no such file {path!r}")
    if bool(s.redis_tls_cert_file) != bool(s.redis_tls_key_file):
        raise ConfigError("redis_tls_cert_file and redis_tls_key_file: a client certificate needs both")
    if s.redis_cluster and not s.redis_url:
        raise ConfigError("redis_cluster: needs redis_url naming a seed node of the cluster")
    if s.redis_cluster and s.redis_url.startswith("unix://"):
        raise ConfigError("redis_cluster: a cluster seed is redis:// or rediss://, not unix://")
    parse_broker_tokens(s.broker_tokens)
    for name in ("admin_token", "read_token"):
        if getattr(s, name):
            check_token(name, getattr(s, name))
    parse_trusted_networks(s.remoting_trusted_networks)
    if s.remoting_max_partial_bytes < s.remoting_max_frame_bytes:
        raise ConfigError(f"remoting_max_partial_bytes: {s.remoting_max_partial_bytes} is below "
                          f"remoting_max_frame_bytes {s.remoting_max_frame_bytes}: a largest frame could never "
                          "arrive")
    if s.announce_addr and len(parse_addresses(s.announce_addr, "announce_addr")) != 1:
        raise ConfigError(f"announce_addr: one host:port, got {s.announce_addr!r}")
    if s.remoting_port and s.remoting_port == s.port:
        raise ConfigError(f"remoting_port: {s.remoting_port} is also the HTTP port")
    if s.remoting_tls_mode != "DISABLED":
        for name in ("remoting_tls_cert_file", "remoting_tls_key_file"):
            path = getattr(s, name)
            if not path or not os.path.isfile(path):
                raise ConfigError(f"{name}: remoting_tls_mode {s.remoting_tls_mode} needs a readable file, "
                                  f"got {path!r}")
    if s.remoting_tls_ca_file and not os.path.isfile(s.remoting_tls_ca_file):
        raise ConfigError(f"remoting_tls_ca_file: no such file {s.remoting_tls_ca_file!r}")


def parse_addresses(spec: str, setting: str = "redis_sentinels") -> list[tuple[str, int]]:
    """`host:port,host:port` (IPv6 as `[::1]:26379`) → [(host, port)]; errors name `setting`."""
    out: list[tuple[str, int]] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        m = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\]:([0-9]{1,5})|([A-Za-z0-9_.-]+):([0-9]{1,5})", part)
        port = int(m.group(2) or m.group(4)) if m else 0
        if not m or not 0 < port < 65536:
            raise ConfigError(f"{setting}: {part!r} is not host:port")
        out.append((m.group(1) or m.group(3), port))
    return out


MIN_TOKEN_LENGTH = 8  # one rule for admin, read and broker tokens alike


def check_token(setting: str, token: str, what: str = "the token") -> None:
    """The one rule every token follows; the error names the setting, never the token itself."""
    if len(token) < MIN_TOKEN_LENGTH:
        raise ConfigError(f"{setting}: {what} has {len(token)} characters; every token (admin_token, read_token, "
                          f"broker_tokens) needs at least {MIN_TOKEN_LENGTH}, e.g. `openssl rand -hex 24`")


def parse_broker_tokens(spec: str) -> list[tuple[str, str]]:
    """`clusterA:tok1,clusterB:tok2` (a bare token or `*:tok` may write any cluster) → [(cluster, token)]."""
    out: list[tuple[str, str]] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        cluster, sep, token = part.rpartition(":")
        if not sep:
            cluster, token = ANY_CLUSTER, part
        check_token("broker_tokens", token, f"the token of cluster {cluster or ANY_CLUSTER!r}")
        out.append((cluster or ANY_CLUSTER, token))
    return out


def parse_trusted_networks(spec: str) -> list[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, frozenset[str]]]:
    """`10.0.0.0/8=ClusterA|ClusterB,192.168.0.0/16=*` → [(network, clusters)]."""
    out = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        net, sep, clusters = part.partition("=")
        names = frozenset(c.strip() for c in clusters.split("|") if c.strip())
        if not sep or not names:
            raise ConfigError(f"remoting_trusted_networks: {part!r} is not CIDR=Cluster|Cluster")
        try:
            out.append((ipaddress.ip_network(net.strip(), strict=False), names))
        except ValueError as exc:
            raise ConfigError(f"remoting_trusted_networks: {exc}") from None
    return out


def mask_url(url: str) -> str:
    """redis://user:secret@host:6379/0 -> redis://user:***@host:6379/0 (any scheme; no password: unchanged)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return MASK
    if parts.password is None and "@" not in parts.netloc:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    userinfo = f"{user}:{MASK}" if parts.password is not None else (MASK if not user else user)
    return urlunsplit((parts.scheme, f"{userinfo}@{host}", parts.path, parts.query, parts.fragment))
