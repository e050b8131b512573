"""Removing a broker with many topics in bounded steps, so that no single script holds Redis for long.

Unregistering, expiring or dropping a broker costs O(its topics) in one script; past the sweep bound (the size of a
sweep step: steps.py sizes it by what the steps cost on this Redis) the removal script does only the O(1) part and
queues a sweep (lua/includes/brokers.lua), which `sweepBroker` then runs a step's worth of topics a call:

- a broker that is gone: its reverse index was renamed at once, so readers already see none of its queue data
  (getRoutes shows a broker's queue data of a topic only while the topic is in its reverse index) and every
  worker evicted its cached routes on the "@brokerName" event; each step deletes the fields of a batch of topics,
  and a topic with them, unless the broker registered again and wrote the topic since (fenced by its new index);
- a broker that lost one of its addresses: each step names a batch of its topics in change events (watchers of
  routes no worker had cached), and clears their write bit while RocketMQ's acting-master rule still applies.

The worker that removed the broker runs the sweep to the end before it answers. One that died mid-way leaves the
sweep in `{P}:sweeps`: the expiry tick of any worker finishes it (`finish_pending`). What readers see meanwhile
(docs/deviations.md): routes never show the removed broker; topic lists may still name a topic only it served
until the step that reaches it.
"""

from __future__ import annotations

from collections.abc import Iterable

from service.store.chunked import ScriptRunner  # what a sweep needs of routes.RouteStore, as a registration does


def sweep_bound(store: ScriptRunner) -> int:
    """The removal scripts' sweep bound: brokers with more topics are removed in steps (0: never)."""
    return store.steps.sweep_bound()


def removal_deadline(store: ScriptRunner, bound: int, entries: int = 1) -> float:
    """The deadline of a removal script: O(the sweep bound) per entry it removes, or unbounded brokers' worth."""
    return store.limits.bulk(bound * entries) if bound else store.limits.bulk_deadline_s


async def step(store: ScriptRunner, sweep_id: str) -> tuple[bool, list[str]]:
    """One step of a sweep: (more steps left, the ids of every sweep under way)."""
    sizer = store.steps.sweep
    per_step = sizer.topics()
    more, under_way, done, elapsed = await store._run("sweepBroker", store._fixed["sweepBroker"], sweep_id, per_step,
                                                      client=store.bulk_redis, deadline=store.limits.bulk(per_step))
    sizer.took(int(done), int(elapsed))
    return bool(int(more)), list(under_way)


async def finish(store: ScriptRunner, sweep_ids: Iterable[str]) -> int:
    """Run these sweeps to the end, a bounded script call at a time; how many steps it took."""
    steps = 0
    for sweep_id in sweep_ids:
        more = True
        while more:
            more, _ = await step(store, sweep_id)
            steps += 1
    return steps


async def finish_pending(store: ScriptRunner) -> int:
    """Finish the sweeps a worker left behind (it died mid-way, or Redis went away); how many steps it took."""
    _, under_way = await step(store, "")
    return await finish(store, under_way)
