"""RouteReads: a worker's concurrent route reads go to Redis together (service/store/route_reads.py).

The fetch here stands in for the getRoutes script, answering "no such topic" (or one shared route) at a version it
counts; the script's answers themselves are checked against the model and one-at-a-time reads in tests/lua.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from service.store.route_reads import RouteReads, acting_master
from service.store.shared_parts import SharedParts


class Fetch:
    """getRoutes' reply shape: every topic absent, or (`route`) each on broker b0; `per_call` topics read a call."""

    def __init__(self, per_call: int | None = None, route: bool = False) -> None:
        self.calls: list[list[str]] = []
        self.per_call = per_call
        self.route = route
        self.fail: Exception | None = None
        self.gate: asyncio.Event | None = None

    async def __call__(self, topics: list[str], sam: bool, order: bool, budget: int) -> list[Any]:
        self.calls.append(list(topics))
        if self.gate is not None:
            await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        n = min(len(topics), self.per_call or len(topics))
        brokers = ["b0\tC\t0\t\t0,10.0.0.1:10911"] if self.route else []
        routes: list[Any] = [[] for _ in range(n)]
        if self.route:  # as the script sends a reply again: the position of the first topic that got it
            routes = [["b0\t8,8,6,0", [], ""]] + [1] * (n - 1)
        return [len(self.calls), n, brokers, routes, []]


async def turns(n: int = 5) -> None:
    """Let the event loop run a few turns (the reads' tasks start and reach the fetch)."""
    for _ in range(n):
        await asyncio.sleep(0)


def reads(fetch: Fetch, **kw: Any) -> RouteReads:
    return RouteReads(fetch, SharedParts(), **kw)


async def test_reads_of_one_turn_go_in_one_call_and_duplicates_share_it():
    fetch = Fetch()
    r = reads(fetch)
    got = await asyncio.gather(*(r.read(t, False, False) for t in ["A", "B", "A", "C"]))
    assert fetch.calls == [["A", "B", "C"]]
    assert [g.route for g in got] == [None] * 4 and {g.ver for g in got} == {1}
    assert (r.calls, r.topics) == (1, 3)


async def test_reads_with_other_flags_go_in_their_own_call():
    fetch = Fetch()
    r = reads(fetch)
    await asyncio.gather(r.read("A", False, False), r.read("A", True, False), r.read("B", False, False))
    assert sorted(fetch.calls) == [["A"], ["A", "B"]]


async def test_a_read_never_joins_a_call_under_way():
    """A read asked for after a call went out is read by a later call: it must see what changed before it was asked
    (the route cache's fencing relies on a read beginning after its fill did)."""
    fetch = Fetch()
    fetch.gate = asyncio.Event()
    r = reads(fetch, max_calls=1)
    first = asyncio.ensure_future(r.read("A", False, False))
    await turns()
    assert fetch.calls == [["A"]]
    second = [asyncio.ensure_future(r.read(t, False, False)) for t in ("A", "B")]
    await turns()
    assert fetch.calls == [["A"]]  # at most max_calls under way: the others wait for it
    fetch.gate.set()
    await asyncio.gather(first, *second)
    assert fetch.calls == [["A"], ["A", "B"]]
    assert first.result().ver == 1 and {s.result().ver for s in second} == {2}


async def test_a_call_reads_at_most_max_topics_and_the_rest_follow():
    fetch = Fetch()
    r = reads(fetch, max_topics=3, max_calls=1)
    await asyncio.gather(*(r.read(f"T{i}", False, False) for i in range(7)))
    assert [len(c) for c in fetch.calls] == [3, 3, 1]


async def test_topics_past_the_budget_are_asked_again():
    fetch = Fetch(per_call=2)
    r = reads(fetch)
    got = await asyncio.gather(*(r.read(f"T{i}", False, False) for i in range(5)))
    assert fetch.calls == [["T0", "T1", "T2", "T3", "T4"], ["T2", "T3", "T4"], ["T4"]]
    assert [g.ver for g in got] == [1, 1, 2, 2, 3]


async def test_a_failed_call_fails_its_readers_and_the_next_reads_go_on():
    fetch = Fetch()
    fetch.fail = ConnectionError("down")
    r = reads(fetch)
    got = await asyncio.gather(r.read("A", False, False), r.read("B", False, False), return_exceptions=True)
    assert all(isinstance(g, ConnectionError) for g in got)
    fetch.fail = None
    assert (await r.read("A", False, False)).route is None
    assert r._calls == 0


async def test_a_reader_that_gives_up_leaves_the_others_their_answer():
    fetch = Fetch()
    fetch.gate = asyncio.Event()
    r = reads(fetch)
    a = asyncio.ensure_future(r.read("A", False, False))
    b = asyncio.ensure_future(r.read("A", False, False))
    await turns()
    a.cancel()
    fetch.gate.set()
    assert (await b).ver == 1
    with pytest.raises(asyncio.CancelledError):
        await a


async def test_topics_answered_alike_share_one_route_object():
    fetch = Fetch(route=True)
    r = reads(fetch)
    got = await asyncio.gather(*(r.read(t, False, False) for t in ("A", "B")))
    assert got[0].route is got[1].route
    assert [b.broker_addrs for b in got[0].route.broker_datas] == [{0: "10.0.0.1:10911"}]


def test_the_acting_master_is_the_lowest_id():
    assert acting_master(["2", "a2", "1", "a1", "3", "a3"]) == ["2", "a2", "0", "a1", "3", "a3"]
    assert acting_master(["10", "a10", "9", "a9"]) == ["10", "a10", "0", "a9"]


async def test_calls_that_read_the_same_route_give_one_object_and_a_changed_broker_a_new_one():
    """Routes are remembered across calls by what the script sent (a cold cache's readers read a few topics of
    several clusters per call): equal replies give one object, encoded once per door; a broker whose line differs
    (an address moved) gives a new one."""
    fetch = Fetch(route=True)
    r = reads(fetch)
    first = await r.read("A", False, False)
    second = await r.read("B", False, False)
    assert len(fetch.calls) == 2 and first.route is second.route and first.ver != second.ver
    moved = ["b0\tC\t0\t\t0,10.0.0.2:10911"]
    res = [9, 1, moved, [["b0\t8,8,6,0", [], ""]], []]
    (third,) = r.decode(["C"], res).values()
    assert third.route is not first.route and third.route.broker_datas[0].broker_addrs == {0: "10.0.0.2:10911"}
