"""Reading a whole registry from any NameServer, fast and in bounded memory, for `namesrv admin compare`: over
the native door only requests Apache's NameServer answers (106 cluster info, 206 topic list or 224 per cluster,
105 routes, 219 KV lists), so any faithful NameServer (Apache's 4.9.x and 5.x, rocketmq-rust, ours) can be read;
over HTTP our API's equivalents. Routes are read in batches, many requests in flight on one connection (the
remoting protocol matches replies by opaque), so 100 000 topics take seconds, not minutes.

Every answer comes back in the HTTP API's JSON shape (string map keys), whichever door carried it.
"""

from __future__ import annotations

import asyncio
import itertools
import ssl
import time
from typing import Any
from urllib.parse import quote, urlsplit

import aiohttp
import orjson

from service import __version__
from service.admin.client import (
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    AdminError,
    RemotingApi,
    _str_keys,
    exit_code_of_error,
    exit_code_of_status,
)
from service.remoting import codes, fastjson
from service.remoting.codec import FrameDecoder, FrameError, RemotingCommand, encode, is_response
from service.remoting.signature import SIGNED_AT, sign

TOPIC_NOT_EXIST, QUERY_NOT_FOUND = 17, 22
IN_FLIGHT = 32  # requests in flight per connection (our worker answers SYSTEM_BUSY past 64)
MAX_FRAME = 256 * 1024 * 1024  # a topic list of a million topics fits


def open_reader(url: str, token: str | None, *, access_key: str = "admin", timeout: float = 10.0
                ) -> NativeReader | HttpReader:
    """A reader for `url`: rmq://host:port (any NameServer) or http(s)://host:port (ours)."""
    parts = urlsplit(url if "://" in url else "http://" + url)
    if parts.scheme in ("rmq", "rmqs"):
        if not parts.hostname:
            raise AdminError(EXIT_USAGE, f"{url!r}: expected rmq://host:port")
        return NativeReader(parts.hostname, parts.port or 9876, token, access_key=access_key,
                            tls=parts.scheme == "rmqs", timeout=timeout)
    if parts.scheme in ("http", "https"):
        return HttpReader(f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}", token, timeout=timeout)
    raise AdminError(EXIT_USAGE, f"{url!r}: use rmq://, http:// or https://")


class NativeReader:
    """RocketMQ's remoting protocol on one connection, up to IN_FLIGHT requests at once."""

    def __init__(self, host: str, port: int, token: str | None, *, access_key: str = "admin", tls: bool = False,
                 timeout: float = 10.0) -> None:
        self.host, self.port, self.token, self.access_key, self.tls = host, port, token, access_key, tls
        self.timeout = timeout
        self.label = f"rmq{'s' if tls else ''}://{host}:{port}"
        self._writer: asyncio.StreamWriter | None = None
        self._task: asyncio.Task[None] | None = None
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._opaques = itertools.count(1)
        self._window = asyncio.Semaphore(IN_FLIGHT)

    async def _connect(self) -> asyncio.StreamWriter:
        if self._writer is None:
            try:
                async with asyncio.timeout(self.timeout):
                    reader, writer = await asyncio.open_connection(
                        self.host, self.port, ssl=ssl.create_default_context() if self.tls else None)
            except (OSError, TimeoutError) as exc:
                raise AdminError(EXIT_UNREACHABLE, f"cannot reach {self.label}: {exc or 'timeout'}",
                                 "UNREACHABLE") from None
            self._writer = writer
            self._task = asyncio.create_task(self._read(reader))
        return self._writer

    async def _read(self, reader: asyncio.StreamReader) -> None:
        decoder = FrameDecoder(MAX_FRAME)
        error: Exception = ConnectionResetError("connection closed by the server")
        try:
            while data := await reader.read(1 << 20):
                if data.startswith(b"HTTP/"):
                    error = AdminError(EXIT_UNREACHABLE, f"{self.label} answered HTTP: use http://{self.host}:"
                                       f"{self.port}", "UNREACHABLE")
                    break
                for reply in decoder.feed(data):
                    if isinstance(reply, RemotingCommand) and is_response(reply):
                        fut = self._pending.pop(reply.opaque, None)
                        if fut is not None and not fut.done():
                            fut.set_result(reply)
        except (OSError, FrameError) as exc:
            error = exc
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(error)
        self._pending.clear()

    async def request(self, code: int, ext: dict[str, str] | None = None) -> RemotingCommand:
        async with self._window:
            writer = await self._connect()
            fields = dict(ext or {})
            if self.token:
                fields = sign({**fields, SIGNED_AT: str(int(time.time() * 1000))}, b"", self.access_key, self.token)
            opaque = next(self._opaques)
            fut = asyncio.get_running_loop().create_future()
            self._pending[opaque] = fut
            writer.write(encode(RemotingCommand(code=code, language="PYTHON", version=479, opaque=opaque,
                                                ext_fields=fields)))
            try:
                async with asyncio.timeout(self.timeout):
                    return await fut
            except TimeoutError:
                self._pending.pop(opaque, None)
                raise AdminError(EXIT_UNREACHABLE, f"{self.label}: no answer to request {code} within "
                                                   f"{self.timeout:g} s", "UNREACHABLE") from None
            except AdminError:
                raise
            except (OSError, FrameError) as exc:
                raise AdminError(EXIT_UNREACHABLE, f"{self.label}: {exc}", "UNREACHABLE") from None

    def _ok(self, reply: RemotingCommand, what: str) -> RemotingCommand:
        if reply.code != 0:
            try:
                RemotingApi._check(reply)
            except AdminError as err:
                raise AdminError(err.exit_code, f"{self.label}: {what}: {err.message}", err.code) from None
        return reply

    @staticmethod
    def _json(reply: RemotingCommand) -> Any:
        return _str_keys(fastjson.loads(reply.body)) if reply.body else {}

    async def cluster_info(self) -> dict[str, Any]:
        return self._json(self._ok(await self.request(codes.GET_BROKER_CLUSTER_INFO), "cluster info (106)"))

    async def topics(self, clusters: list[str]) -> list[str]:
        """Every topic, sorted: the whole list (206), or, where a NameServer turned that off
        (enableAllTopicList=false), each cluster's (224)."""
        reply = await self.request(codes.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        if reply.code == 0:
            return sorted(set(self._json(reply).get("topicList", [])))
        names: set[str] = set()
        for c in clusters:
            reply = self._ok(await self.request(codes.GET_TOPICS_BY_CLUSTER, {"cluster": c}),
                             f"topic list (206 said {reply.remark!r}; 224 for cluster {c})")
            names.update(self._json(reply).get("topicList", []))
        return sorted(names)

    async def routes(self, topics: list[str]) -> list[dict[str, Any] | None]:
        """Each topic's route (None: TOPIC_NOT_EXIST), in order, all requests in flight at once (the window
        bounds them)."""
        replies = await asyncio.gather(*(self.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": t}) for t in topics))
        out: list[dict[str, Any] | None] = []
        for t, reply in zip(topics, replies, strict=True):
            if reply.code == TOPIC_NOT_EXIST:
                out.append(None)
            else:
                out.append(self._json(self._ok(reply, f"route of {t} (105)")))
        return out

    async def kv_table(self, namespace: str) -> dict[str, str] | None:
        reply = await self.request(codes.GET_KVLIST_BY_NAMESPACE, {"namespace": namespace})
        if reply.code == QUERY_NOT_FOUND:
            return None
        return self._json(self._ok(reply, f"KV namespace {namespace} (219)")).get("table", {})

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except (OSError, ConnectionError):
                pass
        if self._task is not None:
            self._task.cancel()


class HttpReader:
    """Our HTTP API on a keep-alive connection pool, up to IN_FLIGHT requests at once."""

    def __init__(self, base: str, token: str | None, *, timeout: float = 10.0) -> None:
        self.base, self.token, self.timeout = base, token, timeout
        self.label = base
        self._session: aiohttp.ClientSession | None = None
        self._window = asyncio.Semaphore(IN_FLIGHT)

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            headers = {"Accept": "application/json", "User-Agent": f"namesrv-admin/{__version__}"}
            if self.token:
                headers["Authorization"] = f"Bearer {self.token}"
            self._session = aiohttp.ClientSession(
                headers=headers, timeout=aiohttp.ClientTimeout(total=self.timeout),
                connector=aiohttp.TCPConnector(limit=IN_FLIGHT))
        return self._session

    async def get(self, path: str, missing_ok: bool = False) -> Any:
        async with self._window:
            try:
                async with self._http().get(self.base + path) as resp:
                    raw = await resp.read()
                    status = resp.status
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                raise AdminError(EXIT_UNREACHABLE, f"cannot reach {self.base}: {exc or 'timeout'}",
                                 "UNREACHABLE") from None
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise AdminError(EXIT_UNREACHABLE, f"{self.base}{path}: HTTP {status}, not JSON: is it our HTTP "
                                               "API?") from None
        if status != 200:
            code = data.get("code", "") if isinstance(data, dict) else ""
            if missing_ok and code in ("TOPIC_NOT_EXIST", "QUERY_NOT_FOUND"):
                return None
            message = data.get("message", "") if isinstance(data, dict) else ""
            raise AdminError(exit_code_of_error(code, exit_code_of_status(status)),
                             f"{self.base}{path}: {message or f'HTTP {status}'}", code)
        return data

    async def cluster_info(self) -> dict[str, Any]:
        return await self.get("/v1/cluster-info")

    async def topics(self, clusters: list[str]) -> list[str]:
        try:
            return sorted(set((await self.get("/v1/topics"))["topicList"]))
        except AdminError as err:
            if err.code != "DISABLED":
                raise
        names: set[str] = set()
        for c in clusters:
            names.update((await self.get(f"/v1/clusters/{quote(c, safe='')}/topics"))["topicList"])
        return sorted(names)

    async def routes(self, topics: list[str]) -> list[dict[str, Any] | None]:
        return list(await asyncio.gather(*(self.get(f"/v1/topics/{quote(t, safe='')}/route", missing_ok=True)
                                           for t in topics)))

    async def kv_table(self, namespace: str) -> dict[str, str] | None:
        res = await self.get(f"/v1/kv/{quote(namespace, safe='')}", missing_ok=True)
        return None if res is None else res.get("table", {})

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

