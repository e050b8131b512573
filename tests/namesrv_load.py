"""A bounded HTTP load on real `namesrv serve` workers, for failover tests and benchmarks/failover_bench.py.

Readers fetch routes (kind `read`: topics the writers keep changing, so often cache misses; `read_stable`: a
broker registered once, so cache hits while the cache is fresh), writers re-register their broker with a growing
data version, heartbeaters send light heartbeats for the writers' brokers, admin writers put KV entries;
every request is recorded with its start, end and status (or the client error), so a test can ask which writes
were acknowledged and a benchmark how long the 503s lasted. Paced (a short sleep after each request) so a 2-core
CI machine keeps up; stopped by `stop()`.

Also `topology_env(topo)`: the NAMESRV_* settings that point a worker at a SentinelTopology or ClusterTopology.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from tests.redis_topology import ClusterTopology, SentinelTopology

CLUSTER = "LoadCluster"
STABLE = 99  # the index of the broker registered once and never changed


def topology_env(topo: SentinelTopology | ClusterTopology) -> dict[str, str]:
    """Keyword arguments for tests.integration.conftest.Namesrv (lower-case setting names) for this topology."""
    if isinstance(topo, SentinelTopology):
        env = {"redis_sentinels": ",".join(f"{h}:{p}" for h, p in topo.sentinel_addrs()),
               "redis_master_name": topo.service_name}
        if topo.sentinel_password:
            env["redis_sentinel_password"] = topo.sentinel_password
        if topo.tls_ca_file:
            env.update(redis_sentinel_tls="true", redis_tls_ca_file=topo.tls_ca_file)
    else:
        env = {"redis_cluster": "true"}
    if topo.password:
        env["redis_password"] = topo.password
    return env


def topology_url(topo: SentinelTopology | ClusterTopology) -> str:
    """NAMESRV_REDIS_URL for the topology: empty for Sentinel, a seed node (no password in it) for Cluster
    (rediss:// with the CA file for a TLS cluster)."""
    if isinstance(topo, SentinelTopology):
        return ""
    if topo.tls_ca_file:  # TLS only: rediss:// with the topology's CA
        return f"rediss://127.0.0.1:{topo.live()[0].port}?ssl_ca_certs={topo.tls_ca_file}"
    return f"redis://127.0.0.1:{topo.live()[0].port}"


def broker_body(i: int, counter: int, topics: int) -> dict[str, Any]:
    return {"clusterName": CLUSTER, "brokerName": f"lb{i}", "brokerId": 0, "brokerAddr": f"10.9.0.{i}:10911",
            "haServerAddr": "", "dataVersion": {"timestamp": 1_700_000_000_000, "counter": counter,
                                                 "stateVersion": 0},
            "topicConfigTable": {f"LT{i}_{t}": {"readQueueNums": 4, "writeQueueNums": 4, "perm": 6}
                                 for t in range(topics)}}


@dataclass
class Record:
    kind: str  # read | register | kv
    url: str
    start: float
    end: float
    status: int  # HTTP status; 0 = no answer (connection refused, client timeout)
    detail: Any = None  # register: (broker index, data version counter); kv: (key, value)
    code: str = ""  # the error code of a non-200 reply


@dataclass
class Load:
    urls: Sequence[str]
    readers: int = 2
    writers: int = 1
    heartbeaters: int = 0
    admin_writers: int = 0
    topics_per_broker: int = 5
    pace_s: float = 0.005
    timeout_s: float = 10.0
    records: list[Record] = field(default_factory=list)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    writes_paused: bool = False  # writers idle (e.g. so the route cache settles before a test's next step)
    _tasks: list[asyncio.Task] = field(default_factory=list)

    async def __aenter__(self) -> Load:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s))
        n_urls = len(self.urls)
        # every writer's broker and the stable one exist before the load starts, so readers have routes to read
        for w in [*range(max(1, self.writers)), STABLE]:
            async with self._session.post(f"{self.urls[0]}/v1/brokers/register",
                                          json=broker_body(w, 1, self.topics_per_broker)) as r:
                assert r.status == 200, await r.text()
        for i in range(self.readers * n_urls):
            self._tasks.append(asyncio.create_task(self._reader(self.urls[i % n_urls], i)))
        for i in range(self.writers):
            self._tasks.append(asyncio.create_task(self._writer(self.urls[i % n_urls], i)))
        for i in range(self.heartbeaters):
            self._tasks.append(asyncio.create_task(self._heartbeat(self.urls[i % n_urls], i)))
        for i in range(self.admin_writers):
            self._tasks.append(asyncio.create_task(self._admin(self.urls[i % n_urls], i)))
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def stop(self) -> None:
        self._stop.set()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
            self._tasks = []
        if not self._session.closed:
            await self._session.close()

    async def _call(self, kind: str, method: str, url: str, detail: Any = None, **kw: Any) -> Record:
        start = time.monotonic()
        status, code = 0, ""
        try:
            async with self._session.request(method, url, **kw) as r:
                status = r.status
                if status != 200:
                    try:
                        code = (await r.json()).get("code", "")
                    except (aiohttp.ContentTypeError, ValueError):
                        code = "?"
                else:
                    await r.read()
        except (TimeoutError, aiohttp.ClientError) as exc:
            code = type(exc).__name__
        rec = Record(kind, url, start, time.monotonic(), status, detail, code)
        self.records.append(rec)
        return rec

    async def _reader(self, base: str, i: int) -> None:
        for n in itertools.count():
            if self._stop.is_set():
                return
            w = n % max(1, self.writers)
            t = (n + i) % self.topics_per_broker
            if n % 2:
                await self._call("read_stable", "GET", f"{base}/v1/topics/LT{STABLE}_{t}/route")
            else:
                await self._call("read", "GET", f"{base}/v1/topics/LT{w}_{t}/route")
            await asyncio.sleep(self.pace_s)

    async def _heartbeat(self, base: str, i: int) -> None:
        for n in itertools.count():
            if self._stop.is_set():
                return
            w = (n + i) % max(1, self.writers)
            await self._call("heartbeat", "POST", f"{base}/v1/brokers/heartbeat", json={
                "clusterName": CLUSTER, "brokerName": f"lb{w}", "brokerId": 0, "brokerAddr": f"10.9.0.{w}:10911"})
            await asyncio.sleep(self.pace_s)

    async def _writer(self, base: str, i: int) -> None:
        for counter in itertools.count(2):
            if self._stop.is_set():
                return
            if self.writes_paused:
                await asyncio.sleep(0.02)
                continue
            await self._call("register", "POST", f"{base}/v1/brokers/register", detail=(i, counter),
                             json=broker_body(i, counter, self.topics_per_broker))
            await asyncio.sleep(self.pace_s)

    async def _admin(self, base: str, i: int) -> None:
        for n in itertools.count():
            if self._stop.is_set():
                return
            key, value = f"a{i}-{n}", f"v{n}"
            await self._call("kv", "PUT", f"{base}/v1/kv/LoadNS/{key}", detail=(key, value), json={"value": value})
            await asyncio.sleep(self.pace_s)

    # ---------------------------------------------------------------- what happened

    def ok(self, kind: str | None = None) -> list[Record]:
        return [r for r in self.records if r.status == 200 and (kind is None or r.kind == kind)]

    def failed(self, kind: str | None = None, since: float = 0.0) -> list[Record]:
        return [r for r in self.records if r.status != 200 and r.end >= since and (kind is None or r.kind == kind)]

    def window(self, since: float = 0.0) -> dict[str, Any]:
        """The failures after `since`: count by kind and code, first and last failure times (relative)."""
        bad = self.failed(since=since)
        out: dict[str, Any] = {"requests": len([r for r in self.records if r.end >= since]), "failed": len(bad)}
        if bad:
            out["first_failure_s"] = round(min(r.end for r in bad) - since, 3)
            out["last_failure_s"] = round(max(r.end for r in bad) - since, 3)
        by: dict[str, int] = {}
        for r in bad:
            key = f"{r.kind}:{r.status}:{r.code}"
            by[key] = by.get(key, 0) + 1
        out["by_kind"] = dict(sorted(by.items()))
        return out

    def last_failure_after(self, t: float) -> float | None:
        """Seconds from `t` to the end of the last failed request that ended after `t` (None: none failed)."""
        ends = [r.end for r in self.records if r.status != 200 and r.end >= t]
        return max(ends) - t if ends else None

    async def wait_success(self, kind: str, after: float, timeout: float) -> float:
        """Seconds from `after` until a request of `kind` that started after it succeeded."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            hits = [r.end for r in self.records if r.kind == kind and r.status == 200 and r.start >= after]
            if hits:
                return min(hits) - after
            await asyncio.sleep(0.05)
        raise AssertionError(f"no successful {kind} within {timeout}s after the failover; failures: "
                             f"{self.window(after)}")
