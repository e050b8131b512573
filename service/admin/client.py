"""How `namesrv admin` reaches a running NameServer: the HTTP API (`http://`, `https://`), or RocketMQ's native
remoting door (`rmq://host:9876`) for the operations it carries. Both answer in the HTTP API's JSON shapes, so the
commands and the renderers do not care which door they used.

Failures are AdminError with the exit code scripts test: 1 not found, 2 usage, 3 unreachable (or the registry
unavailable), 4 refused (auth, role, conflict, a switch, or the operator said no).
"""

from __future__ import annotations

import http.client
import itertools
import re
import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import orjson

from service import __version__, errors
from service.config import RUNTIME_NAMES, canonical_name
from service.remoting import codes, fastjson
from service.remoting.bodies import format_properties, parse_properties
from service.remoting.codec import FrameDecoder, FrameError, RemotingCommand, encode, is_response
from service.remoting.signature import SIGNED_AT, sign

EXIT_OK, EXIT_NOT_FOUND, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_REFUSED = 0, 1, 2, 3, 4
DEFAULT_SERVER = "http://127.0.0.1:8080"


class AdminError(Exception):
    """A command that did not succeed, with the exit code it ends with."""

    def __init__(self, exit_code: int, message: str, code: str = "") -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.message = message
        self.code = code


# What each kind of the server's errors means to a script, whichever door carried it (docs/operating.md).
EXIT_OF_ERROR: dict[type[errors.NamesrvError], int] = {
    errors.NamesrvError: EXIT_UNREACHABLE,  # the server failed: as HTTP 500
    errors.Unavailable: EXIT_UNREACHABLE, errors.InvalidArgument: EXIT_USAGE, errors.Unsupported: EXIT_USAGE,
    errors.TopicNotExist: EXIT_NOT_FOUND, errors.QueryNotFound: EXIT_NOT_FOUND, errors.BrokerNotFound: EXIT_NOT_FOUND,
    errors.Unauthorized: EXIT_REFUSED, errors.Forbidden: EXIT_REFUSED, errors.Disabled: EXIT_REFUSED,
    errors.Conflict: EXIT_REFUSED,
}
REMARK_CODE = re.compile(r" \(([A-Z][A-Z_]*)\)$")  # the code our SYSTEM_ERROR remarks end with
FAQ_LINE = re.compile(r"\s*See \S+ for further details\.$")  # Java's FAQUrl.suggestTodo, after some remarks
# RocketMQ's response codes by their names in ResponseCode, as the HTTP door's JSON names its errors
RESPONSE_CODES = {errors.RMQ_SYSTEM_ERROR: "SYSTEM_ERROR", errors.RMQ_SYSTEM_BUSY: "SYSTEM_BUSY",
                  errors.RMQ_REQUEST_CODE_NOT_SUPPORTED: "REQUEST_CODE_NOT_SUPPORTED",
                  errors.RMQ_NO_PERMISSION: "NO_PERMISSION", errors.RMQ_TOPIC_NOT_EXIST: "TOPIC_NOT_EXIST",
                  errors.RMQ_QUERY_NOT_FOUND: "QUERY_NOT_FOUND"}


def exit_code_of_status(status: int) -> int:
    """An HTTP error status as an exit code (for an answer without one of our error codes)."""
    if status == 404:
        return EXIT_NOT_FOUND
    if status in (400, 413):
        return EXIT_USAGE
    if status >= 500:
        return EXIT_UNREACHABLE
    return EXIT_REFUSED  # 401, 403, 405, 409 and anything else the server turned down


def exit_code_of_error(code: str, otherwise: int) -> int:
    """The exit code of one of the server's error codes (`STORE_UNAVAILABLE`, …): the same on both doors."""
    cls = errors.error_class(code)
    if cls is None:
        return otherwise
    return next(EXIT_OF_ERROR[c] for c in cls.__mro__ if c in EXIT_OF_ERROR)


def connect(server: str, token: str | None, *, timeout: float = 10.0) -> HttpApi | RemotingApi:
    """The client for `--server`: http(s)://host:port, or rmq(s)://host:port for the native door. An address no
    server can be meant by (a path, a port out of range, no host) is a usage error, not a request to try."""
    parts = urlsplit(server if "://" in server else "http://" + server)
    if parts.scheme not in ("http", "https", "rmq", "rmqs"):
        raise AdminError(EXIT_USAGE, f"--server {server!r}: use http://, https://, rmq:// or rmqs:// (TLS)")
    native = parts.scheme in ("rmq", "rmqs")
    if (native and parts.path not in ("", "/")) or parts.query or parts.fragment:  # HTTP: a proxy's prefix
        rest = parts.path + (f"?{parts.query}" if parts.query else "") + (f"#{parts.fragment}" if parts.fragment
                                                                            else "")
        raise AdminError(EXIT_USAGE, f"--server {server!r}: a server is scheme://host:port"
                                     f"{'' if native else '[/prefix]'}, nothing more (got {rest!r})")
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0 or (port is None and parts.netloc.endswith(":")):
        raise AdminError(EXIT_USAGE, f"--server {server!r}: the port is 1..65535")
    if not parts.hostname:
        raise AdminError(EXIT_USAGE, f"--server {server!r}: no host")
    if not native:
        return HttpApi(f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}", token, timeout=timeout)
    return RemotingApi(parts.hostname, port or 9876, token, tls=parts.scheme == "rmqs", timeout=timeout)


def _seg(value: str) -> str:
    return quote(value, safe="")


class HttpApi:
    """The HTTP API v1 with a bearer token. Every method returns the API's JSON."""

    door = "http"

    def __init__(self, base: str, token: str | None, *, timeout: float = 10.0) -> None:
        self.base = base
        self.token = token
        self.timeout = timeout

    def call(self, method: str, path: str, body: Any = None, query: dict[str, Any] | None = None) -> Any:
        """`query`: a value None is left out, a list repeats the parameter."""
        q = {k: v for k, v in (query or {}).items() if v is not None}
        url = self.base + path + ("?" + urlencode(q, doseq=True) if q else "")
        headers = {"Accept": "application/json", "User-Agent": f"namesrv-admin/{__version__}"}
        data = None
        if body is not None:
            data = orjson.dumps(body)
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raise self._refused(exc) from None
        except (http.client.HTTPException, ConnectionResetError) as exc:  # an answer that is not HTTP, or none
            raise self._not_http(exc) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, ssl.SSLError):
                raise tls_failed(self.base, reason, "if it serves plain HTTP, use --server "
                                 f"http://{urlsplit(self.base).netloc}") from None
            raise AdminError(EXIT_UNREACHABLE, f"cannot reach {self.base}: {reason}", "UNREACHABLE") from None
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise AdminError(EXIT_UNREACHABLE, f"{self.base} did not answer JSON: is it a NameServer?") from None

    def _not_http(self, exc: Exception) -> AdminError:
        """The address took the request and answered no HTTP: a native door (it answers a remoting frame) is told
        so with the scheme to use; anything else is named as not an HTTP API."""
        parts = urlsplit(self.base)
        host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
        what = str(exc) or type(exc).__name__
        if answers_remoting(host, port, self.timeout):
            return self._remoting_door("it closed the HTTP request and answers remoting frames")
        return AdminError(EXIT_UNREACHABLE, f"{self.base} did not answer HTTP ({what}): is it the NameServer's HTTP "
                          "port (8080 by default)?", "UNREACHABLE")

    def _remoting_door(self, how: str) -> AdminError:
        return AdminError(EXIT_UNREACHABLE, f"{self.base} is a RocketMQ remoting door, not HTTP ({how}): use "
                          f"--server rmq://{urlsplit(self.base).netloc}", "UNREACHABLE")

    # --- reads
    def _refused(self, exc: urllib.error.HTTPError) -> AdminError:
        """The server's JSON error (message and code) as an AdminError with the status's exit code."""
        try:
            err = orjson.loads(exc.read())
            message, code = err.get("message", ""), err.get("code", "")
        except (orjson.JSONDecodeError, AttributeError):
            message, code = f"HTTP {exc.code} from {self.base}", ""
        if code == "REMOTING_PORT":  # our native door's answer to an HTTP request (service/remoting/server.py)
            return self._remoting_door("its answer to HTTP says so")
        prefix = urlsplit(self.base).path
        if prefix and code == "NOT_FOUND" and message.startswith("no route for "):  # our router's 404: not the API
            return AdminError(EXIT_USAGE, f"{self.base} is not the HTTP API: the server has no route for "
                              f"{prefix}/v1/…; --server is the API's root, scheme://host:port (or the prefix a proxy "
                              "serves it under)", code)
        return AdminError(exit_code_of_error(code, exit_code_of_status(exc.code)), message or f"HTTP {exc.code}",
                          code)

    def brokers(self, cluster: str | None = None) -> dict[str, Any]:
        return self.call("GET", "/v1/brokers", query={"cluster": cluster})

    def cluster_info(self) -> dict[str, Any]:
        return self.call("GET", "/v1/cluster-info")

    def controller_sets(self, names: list[str] | None = None) -> dict[str, Any]:
        return self.call("GET", "/v1/controller/broker-sets", query={"names": ",".join(names) if names else None})

    def topics(self, kind: str = "all", cluster: str | None = None) -> dict[str, Any]:
        if kind == "cluster":
            return self.call("GET", f"/v1/clusters/{_seg(cluster or '')}/topics")
        path = {"all": "/v1/topics", "system": "/v1/system-topics", "unit": "/v1/unit-topics",
                "unitsub": "/v1/unit-sub-topics", "unitsub-ununit": "/v1/unit-sub-ununit-topics"}[kind]
        return self.call("GET", path)

    def route(self, topic: str) -> dict[str, Any]:
        return self.call("GET", f"/v1/topics/{_seg(topic)}/route")

    def route_events(self, topics: list[str], reconnects: int = 5) -> Iterator[dict[str, Any]]:
        """GET /v1/watch: each route event's data ({topic, etag, route}) as it arrives. A stream that ends (its
        worker stopped) is opened again with Last-Event-ID, after the server's `retry:` delay, so nothing is
        missed and nothing is repeated; `reconnects` times in a row without an event in between at most."""
        last_id, retry_s, tries = "", 1.0, 0
        while True:
            headers = {"Accept": "text/event-stream", "User-Agent": f"namesrv-admin/{__version__}"}
            if self.token:
                headers["Authorization"] = f"Bearer {self.token}"
            if last_id:
                headers["Last-Event-ID"] = last_id
            url = self.base + "/v1/watch?" + urlencode({"topics": ",".join(topics)})
            try:
                # keep-alive comments arrive every NAMESRV_WATCH_KEEPALIVE_S (15 s): a longer silence is a loss
                with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                            timeout=max(self.timeout, 60.0)) as resp:
                    event: dict[str, str] = {}
                    for raw in resp:
                        line = raw.decode().rstrip("\r\n")
                        if line:
                            name, _, value = line.partition(":")
                            event[name] = value.removeprefix(" ")
                            continue
                        if "retry" in event and event["retry"].isdigit():
                            retry_s = int(event["retry"]) / 1000
                        if event.get("event") == "route" and "data" in event:
                            last_id, tries = event.get("id", last_id), 0
                            yield orjson.loads(event["data"])
                        elif event.get("event") == "error":
                            err = orjson.loads(event.get("data", "{}"))
                            raise AdminError(EXIT_UNREACHABLE, err.get("message", "stream error"), err.get("code"))
                        event = {}
            except urllib.error.HTTPError as exc:
                raise self._refused(exc) from None
            except http.client.HTTPException as exc:
                raise self._not_http(exc) from None
            except (urllib.error.URLError, OSError) as exc:
                if tries >= reconnects:
                    reason = getattr(exc, "reason", exc)
                    raise AdminError(EXIT_UNREACHABLE, f"cannot reach {self.base}: {reason}", "UNREACHABLE") from None
            tries += 1
            if tries > reconnects:
                raise AdminError(EXIT_UNREACHABLE, f"the stream from {self.base} keeps ending", "UNREACHABLE")
            time.sleep(retry_s)

    def kv_get(self, namespace: str, key: str) -> dict[str, Any]:
        return self.call("GET", f"/v1/kv/{_seg(namespace)}/{_seg(key)}")

    def kv_list(self, namespace: str) -> dict[str, Any]:
        return self.call("GET", f"/v1/kv/{_seg(namespace)}")

    def kv_namespaces(self) -> dict[str, Any]:
        return self.call("GET", "/v1/kv")

    def kv_config(self, namespaces: list[str] | None = None) -> dict[str, Any]:
        """The whole KV config at one instant ({configTable}), or only `namespaces` (those that exist)."""
        return self.call("GET", "/v1/kv-config", query={"namespace": namespaces or None})

    def kv_import(self, table: dict[str, dict[str, str]], *, replace: bool, dry_run: bool) -> dict[str, Any]:
        """Every namespace of `table` in one step, or (dry_run) only what that would change."""
        return self.call("POST", "/v1/kv-config/import", {"configTable": table, "replace": replace,
                                                          "dryRun": dry_run})

    def config(self) -> dict[str, Any]:
        return self.call("GET", "/v1/config")

    def skew(self) -> dict[str, Any]:
        return self.call("GET", "/v1/reports/skew")

    def skew_history(self, limit: int) -> dict[str, Any]:
        return self.call("GET", "/v1/reports/skew/history", query={"limit": str(limit)})

    def capacity(self) -> dict[str, Any]:
        return self.call("GET", "/v1/capacity")

    # --- writes
    def delete_topic(self, topic: str, cluster: str | None = None) -> dict[str, Any]:
        return self.call("DELETE", f"/v1/topics/{_seg(topic)}", query={"cluster": cluster})

    def wipe_write_perm(self, broker: str) -> dict[str, Any]:
        return self.call("POST", f"/v1/brokers/{_seg(broker)}/wipe-write-perm")

    def add_write_perm(self, broker: str) -> dict[str, Any]:
        return self.call("POST", f"/v1/brokers/{_seg(broker)}/add-write-perm")

    def kv_put(self, namespace: str, key: str, value: str) -> dict[str, Any]:
        return self.call("PUT", f"/v1/kv/{_seg(namespace)}/{_seg(key)}", {"value": value})

    def kv_delete(self, namespace: str, key: str) -> dict[str, Any]:
        return self.call("DELETE", f"/v1/kv/{_seg(namespace)}/{_seg(key)}")

    def config_set(self, changes: dict[str, str]) -> dict[str, Any]:
        return self.call("PUT", "/v1/config", changes)


class RemotingApi:
    """RocketMQ's native protocol, one connection, requests signed as AclClientRPCHook signs them (AccessKey
    `admin` or `read`, the token as secret) when a token is given. Answers are turned into the HTTP shapes."""

    door = "native"

    def __init__(self, host: str, port: int, token: str | None, *, access_key: str = "admin", tls: bool = False,
                 timeout: float = 10.0) -> None:
        self.host, self.port, self.token, self.access_key = host, port, token, access_key
        self.tls, self.timeout = tls, timeout
        self._sock: socket.socket | None = None
        self._opaques = itertools.count(1)
        self._decoder = FrameDecoder()

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _connect(self) -> socket.socket:
        if self._sock is None:
            try:
                sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
                if self.tls:
                    ctx = ssl.create_default_context()
                    sock = ctx.wrap_socket(sock, server_hostname=self.host)
            except ssl.SSLError as exc:
                raise tls_failed(self.url, exc, "if its native door runs without TLS, use --server "
                                 f"rmq://{self._netloc()}") from None
            except OSError as exc:
                raise AdminError(EXIT_UNREACHABLE, f"cannot reach {self.url}: {exc}", "UNREACHABLE") from None
            self._sock, self._decoder = sock, FrameDecoder()
        return self._sock

    def request(self, code: int, ext: dict[str, str] | None = None, body: bytes = b"") -> Any:
        """Send one request and wait for its response (matched by opaque); an error code becomes AdminError."""
        fields = {k: v for k, v in (ext or {}).items() if v is not None}
        if self.token:  # SignedAt: the server refuses this request if replayed outside its time window
            fields = sign({**fields, SIGNED_AT: str(int(time.time() * 1000))}, body, self.access_key, self.token)
        opaque = next(self._opaques)
        cmd = RemotingCommand(code=code, language="PYTHON", version=479, opaque=opaque, ext_fields=fields, body=body)
        sock = self._connect()
        try:
            sock.sendall(encode(cmd))
            while True:
                data = sock.recv(65536)
                if not data:
                    raise OSError("connection closed by the server")
                if data.startswith(b"HTTP/"):  # an HTTP server answering what it took for a bad request
                    raise self._not_remoting("it answered HTTP: use --server "
                                             f"http://{self._netloc()} (https:// if it serves TLS)")
                for reply in self._decoder.feed(data):
                    if is_response(reply) and reply.opaque == opaque:
                        return self._check(reply)
        except FrameError as exc:
            raise self._not_remoting(f"it answered something else ({exc}): is it the NameServer's remoting port "
                                     "(9876 by default)?") from None
        except OSError as exc:
            self.close()
            raise AdminError(EXIT_UNREACHABLE, f"{self.url}: {exc}", "UNREACHABLE") from None

    def _netloc(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"{'rmqs' if self.tls else 'rmq'}://{self._netloc()}"

    def _not_remoting(self, why: str) -> AdminError:
        self.close()
        return AdminError(EXIT_UNREACHABLE, f"{self.url} is not a RocketMQ remoting door: {why}",
                          "UNREACHABLE")

    @staticmethod
    def _check(reply: Any) -> Any:
        if reply.code == 0:
            return reply
        remark = FAQ_LINE.sub("", reply.remark or "") or f"response code {reply.code}"
        ours = REMARK_CODE.search(remark) if reply.code == errors.RMQ_SYSTEM_ERROR else None
        if ours:  # SYSTEM_ERROR stands for many errors; ours name theirs, as the HTTP door's JSON does
            raise AdminError(exit_code_of_error(ours[1], EXIT_UNREACHABLE), remark[:ours.start()], ours[1])
        exit_code = {errors.RMQ_TOPIC_NOT_EXIST: EXIT_NOT_FOUND, errors.RMQ_QUERY_NOT_FOUND: EXIT_NOT_FOUND,
                     errors.RMQ_NO_PERMISSION: EXIT_REFUSED, errors.RMQ_REQUEST_CODE_NOT_SUPPORTED: EXIT_USAGE,
                     errors.RMQ_SYSTEM_BUSY: EXIT_UNREACHABLE}.get(reply.code)
        if exit_code is None:  # another server's SYSTEM_ERROR is a failure (HTTP 500), but Java's "disable" a refusal
            failed = reply.code == errors.RMQ_SYSTEM_ERROR and remark != "disable"
            exit_code = EXIT_UNREACHABLE if failed else EXIT_REFUSED
        raise AdminError(exit_code, remark, RESPONSE_CODES.get(reply.code, f"RMQ_{reply.code}"))

    @staticmethod
    def _json(reply: Any) -> Any:
        return _str_keys(fastjson.loads(reply.body)) if reply.body else {}

    def unsupported(self, what: str) -> AdminError:
        return AdminError(EXIT_USAGE, f"{what} has no RocketMQ request code; use the HTTP door (--server http://…)")

    # --- reads
    def brokers(self, cluster: str | None = None) -> dict[str, Any]:
        raise self.unsupported("the live-broker table (last heartbeats)")

    def cluster_info(self) -> dict[str, Any]:
        return self._json(self.request(codes.GET_BROKER_CLUSTER_INFO))

    def topics(self, kind: str = "all", cluster: str | None = None) -> dict[str, Any]:
        code = {"all": codes.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, "cluster": codes.GET_TOPICS_BY_CLUSTER,
                "system": codes.GET_SYSTEM_TOPIC_LIST_FROM_NS, "unit": codes.GET_UNIT_TOPIC_LIST,
                "unitsub": codes.GET_HAS_UNIT_SUB_TOPIC_LIST,
                "unitsub-ununit": codes.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST}[kind]
        return self._json(self.request(code, {"cluster": cluster} if kind == "cluster" else None))

    def route(self, topic: str) -> dict[str, Any]:
        return self._json(self.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))

    def kv_get(self, namespace: str, key: str) -> dict[str, Any]:
        reply = self.request(codes.GET_KV_CONFIG, {"namespace": namespace, "key": key})
        return {"value": reply.ext_fields.get("value")}

    def kv_list(self, namespace: str) -> dict[str, Any]:
        return self._json(self.request(codes.GET_KVLIST_BY_NAMESPACE, {"namespace": namespace}))

    def kv_namespaces(self) -> dict[str, Any]:
        raise self.unsupported("listing KV namespaces")

    def config(self) -> dict[str, Any]:
        props = parse_properties(self.request(codes.GET_NAMESRV_CONFIG).body.decode("utf-8"))
        config = {canonical_name(k) or k: v for k, v in props.items()}
        # RocketMQ's reply has no "runtime" list: which settings change at run time is the same table the server
        # answers /v1/config's from (a name we do not know stays unmarked)
        return {"config": config, "runtime": [name for name in RUNTIME_NAMES if name in config]}

    def skew(self) -> dict[str, Any]:
        raise self.unsupported("the skew report")

    def skew_history(self, limit: int) -> dict[str, Any]:
        raise self.unsupported("the skew report")

    def capacity(self) -> dict[str, Any]:
        raise self.unsupported("the capacity report")

    # --- writes
    def delete_topic(self, topic: str, cluster: str | None = None) -> dict[str, Any]:
        self.request(codes.DELETE_TOPIC_IN_NAMESRV, {"topic": topic, "clusterName": cluster})
        return {"topic": topic, "cluster": cluster, "removedQueueDatas": None}

    def wipe_write_perm(self, broker: str) -> dict[str, Any]:
        reply = self.request(codes.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": broker})
        return {"wipeTopicCount": int(reply.ext_fields.get("wipeTopicCount", 0))}

    def add_write_perm(self, broker: str) -> dict[str, Any]:
        reply = self.request(codes.ADD_WRITE_PERM_OF_BROKER, {"brokerName": broker})
        return {"addTopicCount": int(reply.ext_fields.get("addTopicCount", 0))}

    def kv_put(self, namespace: str, key: str, value: str) -> dict[str, Any]:
        self.request(codes.PUT_KV_CONFIG, {"namespace": namespace, "key": key, "value": value})
        return {"namespace": namespace, "key": key, "value": value}

    def kv_delete(self, namespace: str, key: str) -> dict[str, Any]:
        """RocketMQ's reply does not say whether the key existed: asked first, so both doors say the same."""
        try:
            self.kv_get(namespace, key)
            existed = True
        except AdminError as exc:
            if exc.exit_code != EXIT_NOT_FOUND:
                raise
            existed = False
        self.request(codes.DELETE_KV_CONFIG, {"namespace": namespace, "key": key})
        return {"deleted": existed}

    def config_set(self, changes: dict[str, str]) -> dict[str, Any]:
        self.request(codes.UPDATE_NAMESRV_CONFIG, body=format_properties(dict(changes)).encode("utf-8"))
        return {"updated": {canonical_name(k) or k: v for k, v in changes.items()}}  # named as HTTP names them


# OpenSSL's words for "what answered is not TLS": plain HTTP or a remoting frame (WRONG_VERSION_NUMBER), or a peer
# that closed at the first TLS bytes, as our plain native door does (UNEXPECTED_EOF_WHILE_READING, EOF)
NOT_TLS = ("WRONG_VERSION_NUMBER", "UNEXPECTED_EOF_WHILE_READING", "RECORD_LAYER_FAILURE", "HTTP_REQUEST",
           "PACKET_LENGTH_TOO_LONG")


def tls_failed(url: str, exc: ssl.SSLError, plain: str) -> AdminError:
    """A TLS handshake that failed, in words that say what to change: `plain`, when the far end does not speak TLS
    at all; for a certificate the system does not trust, how to name the CA that signed it."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return AdminError(EXIT_UNREACHABLE, f"cannot reach {url}: its certificate is not trusted "
                          f"({exc.verify_message}); for a private CA, SSL_CERT_FILE=/path/ca.pem", "UNREACHABLE")
    if getattr(exc, "reason", None) in NOT_TLS or isinstance(exc, ssl.SSLEOFError):
        return AdminError(EXIT_UNREACHABLE, f"{url} does not answer TLS: {plain}", "UNREACHABLE")
    return AdminError(EXIT_UNREACHABLE, f"cannot reach {url}: TLS failed ({exc})", "UNREACHABLE")


def answers_remoting(host: str, port: int, timeout: float) -> bool:
    """Whether host:port answers a RocketMQ remoting request with a remoting frame (any response code will do)."""
    try:
        with socket.create_connection((host, port), timeout=min(timeout, 3.0)) as sock:
            sock.sendall(encode(RemotingCommand(code=codes.GET_BROKER_CLUSTER_INFO, language="PYTHON", version=479,
                                                opaque=1)))
            decoder = FrameDecoder()
            while data := sock.recv(65536):
                if any(is_response(reply) for reply in decoder.feed(data)):
                    return True
    except (OSError, FrameError):
        pass
    return False


def _str_keys(node: Any) -> Any:
    """fastjson's numeric map keys (brokerAddrs {0: "..."}) as the HTTP API's string keys."""
    if isinstance(node, dict):
        return {str(k): _str_keys(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_str_keys(v) for v in node]
    return node
