"""A registration with many topics, applied in bounded steps so that no single script holds Redis for long.

One Lua script per registration is atomic but costs Redis time in proportion to the topics it writes: a broker with
100 000 topics held Redis (and so every worker's reads, heartbeats and other registrations) for 0.4–1.8 s. Past
`StoreLimits.chunk_topics` topics a registration goes in steps instead, each one script call:

Each step's size is set as it runs, by what the last steps of its kind cost on this Redis (steps.py).

1. guardTopics (cross-cluster guard only), part by part, reads only: refused before anything is written;
2. registerBroker in mode "2" (begin): every step of a registration but the topics — identity, fencing, liveness,
   the answer to the broker. A broker whose topics it applies (master, prime slave) gets a registration id in its
   BrokerData and live info and a new topic generation (no unchanged replay of older bytes from now on);
3. registerChunk, a step's worth of topics a call: their queue data, as step 10 of a whole registration would write
   them; refused (and the registration over) once the id is no longer the broker's — another registration of it
   began or ended, or the address left (unregister, expiry, connection drop) — so two registrations never mix;
4. registerFinish: a bounded SSCAN walk of the broker's topics that deletes those not registered
   (deleteTopicWithBrokerRegistration: only now, with the whole new table in place) and names them all in change
   events when the broker itself changed; its last call clears the id and records the digest for unchanged
   replays, unless another change reached the broker's queue data mid-way.

What readers see meanwhile (docs/deviations.md): each topic's route is either as before the registration or as
registered, never anything else; some of the broker's topics may show the new queue data while others still show
the old (or are not routed to it yet); the broker's membership, liveness and answer are those of the new
registration from step 2. A registration abandoned half-way (worker died) leaves the id in the live info: the
next one rewrites every topic, as for a changed dataVersion.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Protocol

from service.errors import from_script_code
from service.models import RegisterBrokerResult
from service.store.steps import Steps


class ScriptRunner(Protocol):
    """What a chunked registration needs of routes.RouteStore (which imports this module)."""

    bulk_redis: Any
    limits: Any
    steps: Steps
    _fixed: dict[str, list[str]]

    async def _run(self, name: str, keys: Any, *args: Any, client: Any = None, deadline: float | None = None,
                   wait: bool = False) -> Any: ...


def split_lines(lines: str, per_chunk: int | Callable[[], int]) -> Iterator[str]:
    """`lines` ("...\\n" repeated) in parts of at most `per_chunk` lines (or as many as it answers as each part
    begins), lazily (the caller awaits in between)."""
    size = per_chunk if callable(per_chunk) else (lambda: per_chunk)
    start, n = 0, len(lines)
    while start < n:
        end = start
        for _ in range(size()):
            end = lines.find("\n", end) + 1
            if end == 0:
                end = n
                break
            if end >= n:
                break
        yield lines[start:end]
        start = end


@dataclass
class ChunkedRegistration:
    """One registration in steps: `begin()`, then `step()` until it answers True; `run()` does all of it. The
    model-based tests drive the steps one at a time with other operations in between."""

    store: ScriptRunner
    args: list[Any]  # registerBroker's ARGV for a full registration (routes.RouteStore.register_broker)
    cluster: str
    broker_name: str
    broker_addr: str
    lines: str
    topic_count: int
    steps: Steps  # the store's sizers (or fixed ones: RouteStore.chunked_registration)
    delete_missing: bool
    guard_topics: list[str] | None
    digest: str

    def __post_init__(self) -> None:
        self.regid = secrets.token_hex(8)
        self.result: RegisterBrokerResult | None = None
        self.fenced_midway = False
        self._steps: Iterator[bool] | None = None
        self._changed = 0

    @property
    def member(self) -> str:
        return f"{self.cluster}|{self.broker_addr}"

    async def run(self) -> RegisterBrokerResult:
        await self.begin()
        while not await self.step():
            pass
        assert self.result is not None
        return self.result

    async def begin(self) -> None:
        """Guard and begin: raises what a whole registration raises, with nothing written."""
        if self.guard_topics is not None:
            parts = split_lines("".join(t + "\n" for t in self.guard_topics), self.steps.write.topics)
            for part in parts if self.guard_topics else [""]:
                res = await self._call("guardTopics", self.cluster, self.broker_name, self.broker_addr, part)
                if int(res[0]) < 0:
                    raise from_script_code(int(res[0]), res[1])
        args = list(self.args[:20])  # ARGV 1-20 of a whole registration
        args[14] = ""  # ARGV 15, the topics: in chunks
        args[18] = ""  # ARGV 19, the guard's topics: checked above
        res = await self._call("registerBroker", *args, "2", "", self.regid, topics=0)
        status = int(res[0])
        if status < 0:
            raise from_script_code(status, res[1] if len(res) > 1 else "")
        if status == 2:
            self.result = RegisterBrokerResult(None, None, None, fenced=True)
            self._steps = self._finish(publish=bool(int(res[1])), regid="")
            return
        kv = res[4]
        self.result = RegisterBrokerResult(
            ha_server_addr=res[1] or None, master_addr=res[2] or None,
            kv_table=dict(zip(kv[0::2], kv[1::2], strict=True)) if int(res[3]) else None,
            register_first=bool(int(res[6])))
        applies, check_each, wipe, broker_changed = (bool(int(x)) for x in res[8:12])
        self._steps = self._apply(check_each, wipe, broker_changed) if applies else self._finish(
            publish=broker_changed, regid="")

    async def step(self) -> bool:
        """One more script call; True when the registration is complete (or was fenced off)."""
        assert self._steps is not None, "begin() first"
        done = await anext(self._steps, True)
        if done:
            assert self.result is not None
            self.result = replace(self.result, changed_topics=self._changed)
        return done

    async def _apply(self, check_each: bool, wipe: bool, broker_changed: bool):  # noqa: ANN202 (async generator)
        sizer = self.steps.write
        for part in split_lines(self.lines, sizer.topics):
            count = part.count("\n")
            res = await self._call("registerChunk", self.broker_name, self.member, self.regid, _flag(check_each),
                                   _flag(wipe), _flag(self.delete_missing), part, topics=count)
            if not int(res[0]):
                self.fenced_midway = True
                yield True
                return
            self._changed += int(res[1])
            sizer.took(count, int(res[2]))
            yield False
        async for done in self._finish(publish=broker_changed, regid=self.regid):
            yield done

    async def _finish(self, publish: bool, regid: str):  # noqa: ANN202 (async generator)
        walk = publish or (self.delete_missing and regid != "")
        cursor = "0"
        if not walk and regid == "":
            yield True
            return
        sizer = self.steps.finish
        while True:
            count = sizer.topics()
            res = await self._call("registerFinish", self.broker_name, self.member, regid, cursor, count,
                                   _flag(self.delete_missing), _flag(publish), self.digest, _flag(walk),
                                   topics=count)
            status = int(res[0])
            if status == 0:
                self.fenced_midway = True
                yield True
                return
            changed, walked, elapsed = (int(x) for x in res[-3:])
            self._changed += changed
            sizer.took(walked, elapsed)
            if status == 2:
                yield True
                return
            cursor = res[1]
            yield False

    async def _call(self, name: str, *args: Any, topics: int | None = None) -> Any:
        store = self.store
        return await store._run(name, store._fixed[name], *args, client=store.bulk_redis,
                                deadline=store.limits.bulk(self.steps.write.topics() if topics is None else topics),
                                wait=store.limits.wait_registrations)


def _flag(value: bool) -> str:
    return "1" if value else "0"
