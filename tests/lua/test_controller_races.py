"""Controller transitions raced for real: many connections (one per "worker") send at the same moment, on fakeredis
and on a real redis-server. Whatever the interleaving, one master per master epoch, epochs only grow, and a stale
master's SyncStateSet change is refused.
"""

from __future__ import annotations

import asyncio
import uuid

import fakeredis
import pytest
import redis.asyncio as aioredis

from service.store.controller import (
    FENCED_MASTER_EPOCH,
    INVALID_MASTER,
    MASTER_STILL_EXIST,
    STALE_EPOCH,
    SUCCESS,
    ControllerStore,
)

WORKERS = 8


@pytest.fixture(params=["fakeredis", pytest.param("redis", marks=pytest.mark.redis)])
async def workers(request):
    """WORKERS stores on one prefix; on real Redis each has its own connection pool, as separate processes do."""
    prefix = "r" + uuid.uuid4().hex[:10]
    if request.param == "fakeredis":
        shared = fakeredis.FakeAsyncRedis(decode_responses=True)
        clients = [shared] * WORKERS
    else:
        url = request.getfixturevalue("redis_server").url
        clients = [aioredis.Redis.from_url(url, decode_responses=True) for _ in range(WORKERS)]
    stores = [ControllerStore(c, prefix=prefix) for c in clients]
    for s in stores:
        await s.load_scripts()
    yield stores
    for c in set(clients):
        await c.aclose()


async def boot_set(s: ControllerStore, now: int, n: int = 3) -> None:
    """A master (1) and slaves 2..n, all in the SyncStateSet, all heartbeating at `now`."""
    for bid in range(1, n + 1):
        addr = f"10.0.0.{bid}:10911"
        assert (await s.apply_broker_id("C", "b", bid, f"{addr};1", now=now)).code == SUCCESS
        await s.heartbeat("C", "b", bid, addr, epoch=0, max_offset=100 * bid, now=now)
    assert (await s.elect_master("b", 1, now=now)).code == SUCCESS
    g = (await s.alter_sync_state_set("b", 1, 1, list(range(1, n + 1)), 1, now=now)).group
    assert g.sync_state_set == frozenset(range(1, n + 1))


async def test_racing_reelections_after_master_loss_elect_once(workers):
    now = 1_000_000
    await boot_set(workers[0], now)
    later = now + 10_001
    for bid in (2, 3):  # the slaves go on heartbeating; the master (1) was killed
        await workers[bid].heartbeat("C", "b", bid, f"10.0.0.{bid}:10911", epoch=0, max_offset=100 * bid, now=later)
    # every worker runs its expiry scan at once: the master's entry is removed by exactly one of them
    scans = await asyncio.gather(*(w.expire(now=later) for w in workers))
    to_elect = [e for _, _, elect in scans for e in elect]
    assert to_elect == [("b", 1)]
    # ... and to make it hard, every worker elects on that expiry, and the slaves self-elect, all at once
    replies = await asyncio.gather(
        *(w.elect_master("b", based_on_epoch=1, now=later) for w in workers),
        *(workers[i].elect_master("b", bid, now=later) for i, bid in ((2, 2), (3, 3))),
    )
    winners = [r for r in replies if r.code == SUCCESS]
    assert len(winners) == 1
    assert winners[0].group.master == 3  # the SyncStateSet member with the largest offset
    assert winners[0].group.master_epoch == 2 and winners[0].group.sync_state_set == frozenset({3})
    assert {r.code for r in replies} <= {SUCCESS, STALE_EPOCH, MASTER_STILL_EXIST}
    for r in replies:
        assert r.group.master == 3 and r.group.master_epoch == 2
    # the old master comes back with its old epochs: fenced
    await workers[1].heartbeat("C", "b", 1, "10.0.0.1:10911", epoch=0, max_offset=100, now=later)
    stale = await workers[5].alter_sync_state_set("b", 1, 1, [1, 2, 3], 2, now=later)
    assert stale.code == INVALID_MASTER and stale.group.sync_state_set == frozenset({3})
    fenced = await workers[6].alter_sync_state_set("b", 3, 1, [1, 3], 2, now=later)
    assert fenced.code == FENCED_MASTER_EPOCH


async def test_concurrent_alters_from_one_master_apply_one_per_epoch(workers):
    now = 2_000_000
    await workers[0].apply_broker_id("C", "b", 1, "10.0.0.1:10911;1", now=now)
    for bid in range(2, 6):
        await workers[0].apply_broker_id("C", "b", bid, f"10.0.0.{bid}:10911;1", now=now)
    for bid in range(1, 6):
        await workers[0].heartbeat("C", "b", bid, f"10.0.0.{bid}:10911", now=now)
    assert (await workers[0].elect_master("b", 1, now=now)).group.sync_state_set_epoch == 1
    # eight proposals all based on SyncStateSet epoch 1: exactly one wins, the rest are fenced on that epoch
    proposals = [[1, 2], [1, 3], [1, 4], [1, 5], [1, 2, 3], [1, 4, 5], [1, 2, 5], [1, 3, 4]]
    replies = await asyncio.gather(*(w.alter_sync_state_set("b", 1, 1, p, 1, now=now)
                                     for w, p in zip(workers, proposals, strict=True)))
    won = [(r, p) for r, p in zip(replies, proposals, strict=True) if r.code == SUCCESS]
    assert len(won) == 1 and won[0][0].extra == 2
    final = await workers[7].group("b", now=now)
    assert final.sync_state_set == frozenset(won[0][1]) and final.sync_state_set_epoch == 2


async def test_many_rounds_of_racing_elections_never_reuse_an_epoch(workers):
    """Masters die one after another; every round all workers race. Each master epoch names one master."""
    now = 3_000_000
    await boot_set(workers[0], now, n=4)
    seen: dict[int, int] = {}
    alive = {1, 2, 3, 4}
    for _ in range(3):
        g = await workers[0].group("b", now=now)
        alive.discard(g.master)
        now += 10_001
        for bid in sorted(alive):
            await workers[bid % WORKERS].heartbeat("C", "b", bid, f"10.0.0.{bid}:10911", now=now)
        # the new master's SyncStateSet is only itself; let it re-admit the other live slaves first
        replies = await asyncio.gather(*(w.elect_master("b", based_on_epoch=g.master_epoch, now=now)
                                         for w in workers), *(w.inactive_masters(now=now) for w in workers[:2]))
        elections = [r for r in replies[:WORKERS] if r.code == SUCCESS]
        assert len(elections) <= 1
        for r in replies[:WORKERS]:
            assert seen.setdefault(r.group.master_epoch, r.group.master) == r.group.master
            assert r.group.master_epoch >= g.master_epoch
        g2 = await workers[1].group("b", now=now)
        if g2.master is not None:
            await workers[2].alter_sync_state_set("b", g2.master, g2.master_epoch, sorted(alive),
                                                  g2.sync_state_set_epoch, now=now)
