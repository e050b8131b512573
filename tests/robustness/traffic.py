"""Traffic as the fleet sends it, every request recorded (history.py).

- Brokers on the native door framed as stock brokers frame REGISTER_BROKER (benchmarks/broker_frames.py): 5.x
  plain JSON and zipped with `compressed=false`, 4.9 zipped with `compressed=true` (no heartbeatTimeoutMillis,
  no BROKER_HEARTBEAT); the same bytes again every period on a kept connection, a changed topic table now and then
  (a new data version, new queue counts: the queue count of a topic is the data version that last changed it, so a
  read names the registration it saw); BROKER_HEARTBEAT between registrations (5.x). A broker either registers
  with every worker (namesrvAddr lists them all) or through one connection at a time (a TCP load balancer),
  moving to the next worker when its connection fails. One broker is large enough for the chunked path; one
  unregisters and drops its connection now and then; one registers over HTTP.
- Admin writes on both doors: delete topic, wipe/add write permission, KV put/delete (a unique value each).
- Readers: one per worker and door, route reads of the tracked topics, cluster info, the topic list, KV reads.

Short timeouts throughout: a broker's timeout is seconds, a request's 2 s. Everything is bounded by the run's stop
event; nothing leaves loopback.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from benchmarks import broker_frames as frames
from service.remoting import codes, fastjson
from service.remoting.codec import FrameDecoder, RemotingCommand, encode, is_response
from tests.robustness.cluster import Registry, Worker
from tests.robustness.history import History, Op

REQUEST_TIMEOUT_S = 2.0
CLUSTER = "RobustCluster"
KV_NS = "RobustNS"
V5 = frames.VERSION  # 5.4.0's request version
V49 = 404  # 4.9.7's


class RequestFailed(Exception):
    pass


class NativeConn:
    """One remoting connection, one request at a time (requests are matched by opaque)."""

    _ids = itertools.count(1)

    def __init__(self, worker: Worker, label: str) -> None:
        self.worker = worker
        self.id = f"{label}#{next(self._ids)}@{worker.name}"
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._decoder = FrameDecoder(64 * 1024 * 1024)
        self._opaque = itertools.count(1)
        self.closed = False

    async def request(self, code: int, ext: dict[str, Any], body: bytes = b"", version: int = V5,
                      timeout: float = REQUEST_TIMEOUT_S) -> RemotingCommand:
        if self.closed:
            raise RequestFailed("connection closed")
        try:
            return await asyncio.wait_for(self._request(code, ext, body, version), timeout)
        except (OSError, asyncio.IncompleteReadError, TimeoutError, RequestFailed) as exc:
            self.close()
            raise RequestFailed(f"{type(exc).__name__}: {exc}") from None

    async def _request(self, code: int, ext: dict[str, Any], body: bytes, version: int) -> RemotingCommand:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection("127.0.0.1", self.worker.remoting_port)
        opaque = next(self._opaque)
        cmd = RemotingCommand(code=code, language="JAVA", version=version, opaque=opaque,
                              ext_fields={k: str(v).lower() if isinstance(v, bool) else str(v)
                                          for k, v in ext.items() if v is not None}, body=body)
        self._writer.write(encode(cmd))
        await self._writer.drain()
        assert self._reader is not None
        while True:
            data = await self._reader.read(1 << 20)
            if not data:
                raise RequestFailed("closed by the server")
            for reply in self._decoder.feed(data):
                if is_response(reply) and reply.opaque == opaque:
                    return reply

    def close(self) -> None:
        self.closed = True
        if self._writer is not None:
            self._writer.close()
            self._writer = None


# ------------------------------------------------------------------------------------------------ reads, parsed

def project_route(route: dict[str, Any]) -> dict[str, str]:
    """A route as the model sees it: broker -> '<queue count><w|r>' (writable or not)."""
    out = {}
    for qd in route.get("queueDatas") or []:
        out[qd["brokerName"]] = f"{qd['readQueueNums']}{'w' if int(qd['perm']) & 2 else 'r'}"
    return out


def route_problems(route: dict[str, Any], addrs: dict[str, str]) -> list[str]:
    """What no route may ever show: queue data of a broker without its broker data or master address, a broker's
    data naming another address, read and write queue counts apart (every registration sends them equal)."""
    bad = []
    datas = {bd["brokerName"]: bd for bd in route.get("brokerDatas") or []}
    for qd in route.get("queueDatas") or []:
        name = qd["brokerName"]
        if qd["readQueueNums"] != qd["writeQueueNums"]:
            bad.append(f"{name}: read {qd['readQueueNums']} != write {qd['writeQueueNums']} queues")
        bd = datas.get(name)
        if bd is None:
            bad.append(f"{name}: queue data without broker data")
            continue
        master = {str(k): v for k, v in (bd.get("brokerAddrs") or {}).items()}.get("0")
        if name in addrs and master != addrs[name]:
            bad.append(f"{name}: master {master!r}, registered {addrs[name]!r}")
    return bad


# ------------------------------------------------------------------------------------------------ brokers

@dataclass
class BrokerSpec:
    name: str
    addr: str
    topics: list[str]
    style: str = "5x"  # 5x | 5x-zipped | 49 | http
    everywhere: bool = False  # registers with every worker (else one connection, moving on failure)
    timeout_ms: int | None = 5000  # sent in the header (5.x); None: the registry's default
    churn: float = 0.0  # chance per period of an unregister or a dropped connection
    change: float = 0.15  # chance per period of a changed topic table
    change_share: float = 0.5  # share of its topics a change touches


class Broker:
    """A simulated broker: its topic table, data version, connections and the streams that send on them."""

    def __init__(self, spec: BrokerSpec, reg: Registry, hist: History, rng: random.Random, period_s: float) -> None:
        self.spec = spec
        self.reg = reg
        self.hist = hist
        self.rng = rng
        self.period = period_s
        self.dv = 1
        self.queues = {t: 1 for t in spec.topics}
        self.seq = 0  # contacts (registrations and heartbeats), in invoke order
        self.conns: dict[int, NativeConn] = {}  # worker index -> connection
        self.last_sent: dict[str, bytes] = {}  # connection id -> the last registration bytes sent on it
        self.lb_worker = rng.randrange(len(reg.workers))
        self.paused = asyncio.Event()
        self.paused.set()  # set = running
        self.hold = False  # the next period sends the same table (a broker resuming after a pause)
        self.force_change = False  # the next period changes every topic (faults.chunked_kill)
        self.force_unregister = False  # the next period unregisters first (faults.removal_kill)
        self.steady = False  # the same bytes every period, no churn (while the end state is read)
        self.http: aiohttp.ClientSession | None = None

    # --- what it sends
    def body(self) -> tuple[bytes, dict[str, Any], int]:
        s = self.spec
        kind = {"5x": "plain", "5x-zipped": "zipped", "49": "compressed"}[s.style]
        body = frames.register_body(self.queues, self.dv, kind)
        header = frames.register_header(CLUSTER, s.name, s.addr, kind, body,
                                        s.timeout_ms if s.style != "49" else None)
        return body, header, V49 if s.style == "49" else V5

    def http_body(self) -> dict[str, Any]:
        s = self.spec
        return {"clusterName": CLUSTER, "brokerName": s.name, "brokerId": 0, "brokerAddr": s.addr,
                "haServerAddr": "", "dataVersion": {"timestamp": 1_700_000_000_000, "counter": self.dv,
                                                     "stateVersion": 0},
                **({"heartbeatTimeoutMillis": s.timeout_ms} if s.timeout_ms else {}),
                "topicConfigTable": {t: {"readQueueNums": q, "writeQueueNums": q, "perm": 6}
                                     for t, q in self.queues.items()}}

    def maybe_change(self) -> None:
        if self.steady:
            return
        if self.force_change or self.rng.random() < self.spec.change:
            self.dv += 1
            n = len(self.queues) if self.force_change else max(1, int(len(self.queues) * self.spec.change_share))
            for t in self.rng.sample(sorted(self.queues), n):
                self.queues[t] = self.dv
            self.force_change = False

    def targets(self) -> list[int]:
        if self.spec.everywhere:
            return list(range(len(self.reg.workers)))
        return [self.lb_worker]

    def conn(self, w: int) -> NativeConn:
        c = self.conns.get(w)
        if c is None or c.closed:
            c = NativeConn(self.reg.workers[w], self.spec.name)
            self.conns[w] = c
        return c

    def lost(self, w: int, conn: NativeConn) -> None:
        """A connection ended (whoever closed it): the worker holding it may unregister the broker, some time
        later, if the broker registered on it last — or never (a dead worker)."""
        op = self.hist.begin(self.stream(w), "close", w, "native", broker=self.spec.name, conn=conn.id)
        op.status = "unknown"  # when (and whether) the worker handles the close is not observed
        conn.close()
        if not self.spec.everywhere:
            self.lb_worker = (self.lb_worker + 1) % len(self.reg.workers)

    def stream(self, w: int) -> str:
        return f"{self.spec.name}@w{w}" if self.spec.everywhere else self.spec.name

    # --- requests
    async def register(self, w: int) -> Op:
        s = self.spec
        self.seq += 1
        big = len(self.queues) > self.reg.settings.chunk_topics
        if s.style == "http":
            body = orjson.dumps(self.http_body())
            conn_id = f"http@w{w}"
            same = self.last_sent.get(conn_id) == body
            self.last_sent[conn_id] = body
            op = self.hist.begin(self.stream(w), "reg", w, "http", broker=s.name, dv=self.dv,
                                 topics=dict(self.queues), conn="", same=same, seq=self.seq, chunked=big,
                                 via=conn_id)
            try:
                assert self.http is not None
                async with self.http.post(f"{self.reg.workers[w].url}/v1/brokers/register", data=body,
                                          headers={"Content-Type": "application/json"}) as r:
                    text = await r.read()
                    if r.status != 200:
                        return self.hist.end(op, "unknown", error=f"{r.status} {text[:200]!r}")
            except (TimeoutError, aiohttp.ClientError) as exc:
                return self.hist.end(op, "unknown", error=type(exc).__name__)
            return self.hist.end(op, "ok")
        conn = self.conn(w)
        body, header, version = self.body()
        same = self.last_sent.get(conn.id) == body
        self.last_sent[conn.id] = body
        op = self.hist.begin(self.stream(w), "reg", w, "native", broker=s.name, dv=self.dv, topics=dict(self.queues),
                             conn=conn.id, same=same, seq=self.seq, chunked=big, style=s.style)
        try:
            reply = await conn.request(codes.REGISTER_BROKER, header, body, version,
                                       timeout=REQUEST_TIMEOUT_S * (3 if big else 1))
        except RequestFailed as exc:
            self.hist.end(op, "unknown", error=str(exc))
            self.lost(w, conn)
            return op
        if reply.code != 0:
            return self.hist.end(op, "unknown", error=f"code {reply.code}: {reply.remark}")
        return self.hist.end(op, "ok")

    async def heartbeat(self, w: int) -> Op | None:
        s = self.spec
        if s.style == "49":
            return None  # 4.9 brokers only register
        self.seq += 1
        if s.style == "http":
            op = self.hist.begin(self.stream(w), "hb", w, "http", broker=s.name, seq=self.seq)
            try:
                assert self.http is not None
                async with self.http.post(f"{self.reg.workers[w].url}/v1/brokers/heartbeat", json={
                        "clusterName": CLUSTER, "brokerName": s.name, "brokerId": 0, "brokerAddr": s.addr}) as r:
                    await r.read()
                    if r.status != 200:
                        return self.hist.end(op, "unknown", error=str(r.status))
            except (TimeoutError, aiohttp.ClientError) as exc:
                return self.hist.end(op, "unknown", error=type(exc).__name__)
            return self.hist.end(op, "ok")
        conn = self.conn(w)
        op = self.hist.begin(self.stream(w), "hb", w, "native", broker=s.name, seq=self.seq, conn=conn.id)
        ext = {"clusterName": CLUSTER, "brokerAddr": s.addr, "brokerName": s.name, "brokerId": 0,
               "heartbeatTimeoutMills": s.timeout_ms or 0}
        try:
            reply = await conn.request(codes.BROKER_HEARTBEAT, ext)
        except RequestFailed as exc:
            self.hist.end(op, "unknown", error=str(exc))
            self.lost(w, conn)
            return op
        return self.hist.end(op, "ok" if reply.code == 0 else "unknown",
                             error="" if reply.code == 0 else f"code {reply.code}")

    async def unregister(self, w: int) -> Op:
        s = self.spec
        if s.style == "http":
            op = self.hist.begin(self.stream(w), "unreg", w, "http", broker=s.name)
            try:
                assert self.http is not None
                async with self.http.post(f"{self.reg.workers[w].url}/v1/brokers/unregister", json={
                        "clusterName": CLUSTER, "brokerName": s.name, "brokerId": 0, "brokerAddr": s.addr}) as r:
                    await r.read()
                    return self.hist.end(op, "ok" if r.status == 200 else "unknown", error=str(r.status))
            except (TimeoutError, aiohttp.ClientError) as exc:
                return self.hist.end(op, "unknown", error=type(exc).__name__)
        conn = self.conn(w)
        op = self.hist.begin(self.stream(w), "unreg", w, "native", broker=s.name, conn=conn.id)
        try:
            reply = await conn.request(codes.UNREGISTER_BROKER, frames.unregister_header(CLUSTER, s.name, s.addr),
                                       timeout=REQUEST_TIMEOUT_S * 3)
        except RequestFailed as exc:
            self.hist.end(op, "unknown", error=str(exc))
            self.lost(w, conn)
            return op
        return self.hist.end(op, "ok" if reply.code == 0 else "unknown", error=f"code {reply.code}")

    async def drop(self, w: int) -> None:
        """Close the connection on purpose (a broker restarting, a network blip)."""
        conn = self.conns.get(w)
        if conn is not None and not conn.closed:
            self.lost(w, conn)

    # --- the loop
    async def run(self, stop: asyncio.Event) -> None:
        self.http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S))
        try:
            while not stop.is_set():
                await self.paused.wait()
                started = asyncio.get_running_loop().time()
                if self.force_unregister:
                    self.force_unregister = False
                    await self.unregister(self.targets()[0])
                if self.hold:
                    self.hold = False
                else:
                    self.maybe_change()
                await asyncio.gather(*(self.register(w) for w in self.targets()))
                if self.spec.churn and not self.steady and self.rng.random() < self.spec.churn:
                    w = self.targets()[0]
                    if self.rng.random() < 0.5:  # a broker shut down (it unregisters) and back a little later
                        await self.unregister(w)
                        await sleep_until(stop, started + 2.5 * self.period)
                    else:  # a dropped connection: the broker registers again at once on a new one
                        await self.drop(w)
                    continue
                await sleep_until(stop, started + self.period / 2)
                if self.paused.is_set() and not stop.is_set():
                    await asyncio.gather(*(self.heartbeat(w) for w in self.targets()))
                await sleep_until(stop, started + self.period)
        finally:
            await self.http.close()

    def shutdown(self) -> None:
        """The broker stops (after the run's end state was read): its connections close, recorded as closes."""
        for w, c in list(self.conns.items()):
            if not c.closed:
                self.lost(w, c)


async def sleep_until(stop: asyncio.Event, when: float) -> None:
    delay = when - asyncio.get_running_loop().time()
    if delay > 0:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), delay)


# ------------------------------------------------------------------------------------------------ readers, admin

@dataclass
class Reader:
    """Reads through one worker and one door, one request at a time: a session (monotonic reads are checked per
    reader)."""

    hist: History
    worker: Worker
    door: str
    topics: list[str]
    small: list[str]  # the topics the topic list is checked for
    brokers: dict[str, str]  # brokerName -> address
    rng: random.Random
    pace_s: float = 0.04
    kv_keys: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def stream(self) -> str:
        return f"read-{self.worker.name}-{self.door}"

    async def run(self, stop: asyncio.Event) -> None:
        session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S))
        conn: NativeConn | None = None
        try:
            while True:
                if stop.is_set():
                    return
                if self.door == "native" and (conn is None or conn.closed):
                    conn = NativeConn(self.worker, "reader")
                # every read names a partition of the check: each is kept to a few reads per staleness bound
                # (the topic list counts in every small topic's, cluster info in the membership's)
                roll = self.rng.random()
                if roll < 0.03:
                    await self.members(session, conn)
                elif roll < 0.05:
                    await self.listing(session, conn)
                elif roll < 0.10 and self.kv_keys:
                    await self.kv(session, conn, self.rng.choice(self.kv_keys))
                else:
                    await self.route(session, conn, self.rng.choice(self.topics))
                await sleep_until(stop, asyncio.get_running_loop().time() + self.pace_s)
        finally:
            if conn is not None:
                conn.close()
            await session.close()

    async def final(self, topics: list[str]) -> None:
        """One more read of each topic (after the registry settled): the end state, through this session."""
        session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S * 3))
        conn = NativeConn(self.worker, "reader") if self.door == "native" else None
        try:
            for t in topics:
                await self.route(session, conn, t)
            await self.listing(session, conn)
            await self.members(session, conn)
            for k in self.kv_keys:
                await self.kv(session, conn, k)
        finally:
            if conn is not None:
                conn.close()
            await session.close()

    def _begin(self, kind: str, **args: Any) -> Op:
        return self.hist.begin(self.stream, kind, self.worker.index, self.door, **args)

    async def _http(self, session: aiohttp.ClientSession, path: str) -> tuple[int, Any]:
        async with session.get(self.worker.url + path) as r:
            raw = await r.read()
            return r.status, orjson.loads(raw) if raw else None

    async def route(self, session: aiohttp.ClientSession, conn: NativeConn | None, topic: str) -> None:
        op = self._begin("read", topic=topic)
        try:
            if conn is None:
                status, body = await self._http(session, f"/v1/topics/{topic}/route")
                if status == 404 and body and body.get("code") == "TOPIC_NOT_EXIST":
                    body = None
                elif status != 200:
                    raise RequestFailed(f"HTTP {status} {body}")
            else:
                reply = await conn.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
                if reply.code == 17:
                    body = None
                elif reply.code != 0:
                    raise RequestFailed(f"code {reply.code} {reply.remark}")
                else:
                    body = fastjson.loads(reply.body)
        except (RequestFailed, TimeoutError, aiohttp.ClientError, ValueError) as exc:
            self.hist.end(op, "failed", error=str(exc) or type(exc).__name__)
            return
        self.hist.end(op, "ok", project_route(body) if body else {})
        if body:
            for p in route_problems(body, self.brokers):
                self.problems.append(f"{topic} via {self.stream}: {p}")

    async def _whole(self, session: aiohttp.ClientSession, conn: NativeConn | None, op: Op, path: str,
                     code: int) -> Any:
        """A read both doors answer with a whole JSON body (HTTP `path`, native `code`); None: it failed (recorded
        as failed)."""
        try:
            if conn is None:
                status, body = await self._http(session, path)
                if status != 200:
                    raise RequestFailed(f"HTTP {status}")
                return body
            reply = await conn.request(code, {})
            if reply.code != 0:
                raise RequestFailed(f"code {reply.code}")
            return fastjson.loads(reply.body)
        except (RequestFailed, TimeoutError, aiohttp.ClientError, ValueError) as exc:
            self.hist.end(op, "failed", error=str(exc) or type(exc).__name__)
            return None

    async def members(self, session: aiohttp.ClientSession, conn: NativeConn | None) -> None:
        op = self._begin("members")
        body = await self._whole(session, conn, op, "/v1/cluster-info", codes.GET_BROKER_CLUSTER_INFO)
        if body is not None:
            self.hist.end(op, "ok", sorted(n for n in (body.get("brokerAddrTable") or {}) if n in self.brokers))

    async def listing(self, session: aiohttp.ClientSession, conn: NativeConn | None) -> None:
        op = self._begin("list")
        body = await self._whole(session, conn, op, "/v1/topics", codes.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        if body is not None:
            listed = set(body.get("topicList") or [])
            self.hist.end(op, "ok", sorted(t for t in self.small if t in listed))

    async def kv(self, session: aiohttp.ClientSession, conn: NativeConn | None, key: str) -> None:
        op = self._begin("kvget", key=key)
        try:
            if conn is None:
                status, body = await self._http(session, f"/v1/kv/{KV_NS}/{key}")
                if status == 404:
                    value = None
                elif status != 200:
                    raise RequestFailed(f"HTTP {status}")
                else:
                    value = body["value"]
            else:
                reply = await conn.request(codes.GET_KV_CONFIG, {"namespace": KV_NS, "key": key})
                if reply.code == 22:  # QUERY_NOT_FOUND
                    value = None
                elif reply.code != 0:
                    raise RequestFailed(f"code {reply.code}")
                else:
                    value = reply.ext_fields.get("value")
        except (RequestFailed, TimeoutError, aiohttp.ClientError, ValueError, KeyError) as exc:
            self.hist.end(op, "failed", error=str(exc) or type(exc).__name__)
            return
        self.hist.end(op, "ok", value)


@dataclass
class Admin:
    """An operator: topic deletions, write permission, KV, through every worker and both doors in turn."""

    hist: History
    reg: Registry
    topics: list[str]
    brokers: list[str]
    kv_keys: list[str]
    rng: random.Random
    pace_s: float = 0.3
    deletes: bool = True
    kv_only: bool = False
    stream: str = "admin"

    async def run(self, stop: asyncio.Event) -> None:
        session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S))
        conns: dict[int, NativeConn] = {}
        values = itertools.count(1)
        wiped: set[str] = set()
        try:
            for n in itertools.count():
                if stop.is_set():
                    return
                w = n % len(self.reg.workers)
                door = "native" if (n // len(self.reg.workers)) % 2 else "http"
                conn = None
                if door == "native":
                    conn = conns.get(w)
                    if conn is None or conn.closed:
                        conn = conns[w] = NativeConn(self.reg.workers[w], "admin")
                roll = max(self.rng.random(), 0.25 if self.kv_only else 0.0)
                if roll < 0.08 and self.deletes:
                    await self.call(session, conn, w, door, "delete", topic=self.rng.choice(self.topics))
                elif roll < 0.25:
                    b = self.rng.choice(self.brokers)
                    kind = "add" if b in wiped else "wipe"
                    (wiped.discard if kind == "add" else wiped.add)(b)
                    await self.call(session, conn, w, door, kind, broker=b)
                elif roll < 0.35:
                    await self.call(session, conn, w, door, "kvdel", key=self.rng.choice(self.kv_keys))
                else:
                    await self.call(session, conn, w, door, "kvput", key=self.rng.choice(self.kv_keys),
                                    value=f"v{next(values)}")
                await sleep_until(stop, asyncio.get_running_loop().time() + self.pace_s)
            for b in wiped:  # leave every broker writable: the end state compares cleanly
                await self.call(session, None, 0, "http", "add", broker=b)
        finally:
            for c in conns.values():
                c.close()
            await session.close()

    async def call(self, session: aiohttp.ClientSession, conn: NativeConn | None, w: int, door: str, kind: str,
                   **args: Any) -> Op:
        op = self.hist.begin(f"{self.stream}-{door}", kind, w, door, **args)
        base = self.reg.workers[w].url
        try:
            if conn is None:
                method, path, body = {
                    "delete": ("DELETE", f"/v1/topics/{args.get('topic')}", None),
                    "wipe": ("POST", f"/v1/brokers/{args.get('broker')}/wipe-write-perm", None),
                    "add": ("POST", f"/v1/brokers/{args.get('broker')}/add-write-perm", None),
                    "kvput": ("PUT", f"/v1/kv/{KV_NS}/{args.get('key')}", {"value": args.get("value")}),
                    "kvdel": ("DELETE", f"/v1/kv/{KV_NS}/{args.get('key')}", None),
                }[kind]
                async with session.request(method, base + path, json=body) as r:
                    await r.read()
                    if r.status != 200 and not (kind == "kvdel" and r.status == 404):
                        return self.hist.end(op, "unknown", error=str(r.status))
            else:
                code, ext = {
                    "delete": (codes.DELETE_TOPIC_IN_NAMESRV, {"topic": args.get("topic")}),
                    "wipe": (codes.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": args.get("broker")}),
                    "add": (codes.ADD_WRITE_PERM_OF_BROKER, {"brokerName": args.get("broker")}),
                    "kvput": (codes.PUT_KV_CONFIG, {"namespace": KV_NS, "key": args.get("key"),
                                                    "value": args.get("value")}),
                    "kvdel": (codes.DELETE_KV_CONFIG, {"namespace": KV_NS, "key": args.get("key")}),
                }[kind]
                reply = await conn.request(code, ext)
                if reply.code != 0:
                    return self.hist.end(op, "unknown", error=f"code {reply.code} {reply.remark}")
        except (RequestFailed, TimeoutError, aiohttp.ClientError) as exc:
            return self.hist.end(op, "unknown", error=str(exc) or type(exc).__name__)
        return self.hist.end(op, "ok")
