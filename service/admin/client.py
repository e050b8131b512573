"""How `namesrv admin` reaches a running NameServer: the HTTP API (`http://`, `https://`), or RocketMQ's native
remoting door (`rmq://host:9876`) for the operations it carries. Both answer in the HTTP API's JSON shapes, so the
commands and the renderers do not care which door they used.

Failures are AdminError with the exit code scripts test: 1 not found, 2 usage, 3 unreachable (or the registry
unavailable), 4 refused (auth, role, conflict, a switch, or the operator said no).
"""

from __future__ import annotations

import itertools
import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import orjson

from service import __version__
from service.config import canonical_name
from service.remoting import codes, fastjson
from service.remoting.bodies import format_properties, parse_properties
from service.remoting.codec import FrameDecoder, RemotingCommand, encode, is_response
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


def exit_code_of_status(status: int) -> int:
    """An HTTP error status as an exit code."""
    if status == 404:
        return EXIT_NOT_FOUND
    if status in (400, 413):
        return EXIT_USAGE
    if status >= 500:
        return EXIT_UNREACHABLE
    return EXIT_REFUSED  # 401, 403, 405, 409 and anything else the server turned down


def connect(server: str, token: str | None, *, timeout: float = 10.0) -> HttpApi | RemotingApi:
    """The client for `--server`: http(s)://host:port, or rmq://host:port for the native door."""
    parts = urlsplit(server if "://" in server else "http://" + server)
    if parts.scheme in ("http", "https"):
        return HttpApi(f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}", token, timeout=timeout)
    if parts.scheme in ("rmq", "rmqs"):
        if not parts.hostname:
            raise AdminError(EXIT_USAGE, f"--server {server!r}: expected rmq://host:port")
        return RemotingApi(parts.hostname, parts.port or 9876, token, tls=parts.scheme == "rmqs", timeout=timeout)
    raise AdminError(EXIT_USAGE, f"--server {server!r}: use http://, https:// or rmq://")


def _seg(value: str) -> str:
    return quote(value, safe="")


class HttpApi:
    """The HTTP API v1 with a bearer token. Every method returns the API's JSON."""

    door = "http"

    def __init__(self, base: str, token: str | None, *, timeout: float = 10.0) -> None:
        self.base = base
        self.token = token
        self.timeout = timeout

    def call(self, method: str, path: str, body: Any = None, query: dict[str, str | None] | None = None) -> Any:
        q = {k: v for k, v in (query or {}).items() if v is not None}
        url = self.base + path + ("?" + urlencode(q) if q else "")
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
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise AdminError(EXIT_UNREACHABLE, f"cannot reach {self.base}: {reason}", "UNREACHABLE") from None
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise AdminError(EXIT_UNREACHABLE, f"{self.base} did not answer JSON: is it a NameServer?") from None

    # --- reads
    def _refused(self, exc: urllib.error.HTTPError) -> AdminError:
        """The server's JSON error (message and code) as an AdminError with the status's exit code."""
        try:
            err = orjson.loads(exc.read())
            message, code = err.get("message", ""), err.get("code", "")
        except (orjson.JSONDecodeError, AttributeError):
            message, code = f"HTTP {exc.code} from {self.base}", ""
        return AdminError(exit_code_of_status(exc.code), message or f"HTTP {exc.code}", code)

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

    def config(self) -> dict[str, Any]:
        return self.call("GET", "/v1/config")

    def skew(self) -> dict[str, Any]:
        return self.call("GET", "/v1/reports/skew")

    def skew_history(self, limit: int) -> dict[str, Any]:
        return self.call("GET", "/v1/reports/skew/history", query={"limit": str(limit)})

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
            except OSError as exc:
                raise AdminError(EXIT_UNREACHABLE, f"cannot reach rmq://{self.host}:{self.port}: {exc}",
                                 "UNREACHABLE") from None
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
                for reply in self._decoder.feed(data):
                    if is_response(reply) and reply.opaque == opaque:
                        return self._check(reply)
        except OSError as exc:
            self.close()
            raise AdminError(EXIT_UNREACHABLE, f"rmq://{self.host}:{self.port}: {exc}", "UNREACHABLE") from None

    @staticmethod
    def _check(reply: Any) -> Any:
        if reply.code == 0:
            return reply
        remark = reply.remark or f"response code {reply.code}"
        exit_code = {17: EXIT_NOT_FOUND, 22: EXIT_NOT_FOUND, 16: EXIT_REFUSED, 3: EXIT_USAGE,
                     2: EXIT_UNREACHABLE}.get(reply.code, EXIT_REFUSED)
        raise AdminError(exit_code, remark, f"RMQ_{reply.code}")

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
        return {"config": {canonical_name(k) or k: v for k, v in props.items()}, "runtime": None}

    def skew(self) -> dict[str, Any]:
        raise self.unsupported("the skew report")

    def skew_history(self, limit: int) -> dict[str, Any]:
        raise self.unsupported("the skew report")

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
        self.request(codes.DELETE_KV_CONFIG, {"namespace": namespace, "key": key})
        return {"deleted": None}  # RocketMQ's reply does not say whether the key existed

    def config_set(self, changes: dict[str, str]) -> dict[str, Any]:
        self.request(codes.UPDATE_NAMESRV_CONFIG, body=format_properties(dict(changes)).encode("utf-8"))
        return {"updated": dict(changes)}


def _str_keys(node: Any) -> Any:
    """fastjson's numeric map keys (brokerAddrs {0: "..."}) as the HTTP API's string keys."""
    if isinstance(node, dict):
        return {str(k): _str_keys(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_str_keys(v) for v in node]
    return node
