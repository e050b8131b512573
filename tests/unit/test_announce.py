"""Workers announced for GET /rocketmq/nsaddr (service/core/announce.py, service/store/members.py): leases on the
Redis clock, renewal, withdrawal, several workers of one address, what the endpoint answers and when it answers
503. Run on fakeredis and a real redis-server (the `store` fixture)."""

from __future__ import annotations

import asyncio
import time

import fakeredis
import pytest

from service.config import ConfigError, load_settings
from service.core.announce import Announcer, announced_address, live_addresses, primary_ip
from service.errors import StoreUnavailable
from service.scheduler import build_scheduler
from service.store import RouteStore
from service.store.members import MemberStore, member

LEASE = 15_000


async def test_a_lease_lists_its_address_until_it_runs_out(store):
    m = MemberStore(store)
    expiry = await m.announce(member("10.0.0.1:9876", "w1"), LEASE, now=1_000)
    assert expiry == 1_000 + LEASE
    assert await m.live_addrs(now=1_000) == ["10.0.0.1:9876"]
    assert await m.live_addrs(now=expiry - 1) == ["10.0.0.1:9876"]
    assert await m.live_addrs(now=expiry) == []  # the lease ends at its expiry, not after it


async def test_renewal_moves_the_expiry_forward(store):
    m = MemberStore(store)
    e = member("10.0.0.1:9876", "w1")
    await m.announce(e, LEASE, now=1_000)
    await m.announce(e, LEASE, now=10_000)
    assert await m.live_addrs(now=20_000) == ["10.0.0.1:9876"]
    assert await m.live_addrs(now=25_000) == []


async def test_the_redis_clock_decides_by_default(store):
    m = MemberStore(store)
    now = await store.redis_time_ms()
    expiry = await m.announce(member("10.0.0.1:9876", "w1"), LEASE)
    assert now + LEASE <= expiry < now + LEASE + 5_000
    assert await m.live_addrs() == ["10.0.0.1:9876"]


async def test_withdraw_removes_at_once_and_only_that_worker(store):
    m = MemberStore(store)
    a, b, c = member("10.0.0.1:9876", "w1"), member("10.0.0.1:9876", "w2"), member("10.0.0.2:9876", "w3")
    for e in (a, b, c):
        await m.announce(e, LEASE, now=1_000)
    assert set(await m.live(now=1_000)) == {a, b, c}
    assert await m.withdraw(a) is True
    # another worker of the same host still serves that address
    assert await m.live_addrs(now=1_000) == ["10.0.0.1:9876", "10.0.0.2:9876"]
    assert await m.withdraw(b) is True
    assert await m.live_addrs(now=1_000) == ["10.0.0.2:9876"]
    assert await m.withdraw(b) is False


async def test_addresses_are_sorted_and_distinct(store):
    m = MemberStore(store)
    for addr, worker in (("10.0.0.3:9876", "a"), ("10.0.0.1:9876", "b"), ("10.0.0.2:9876", "c"),
                         ("10.0.0.1:9876", "d")):
        await m.announce(member(addr, worker), LEASE, now=1_000)
    assert await m.live_addrs(now=1_000) == ["10.0.0.1:9876", "10.0.0.2:9876", "10.0.0.3:9876"]


async def test_an_announcement_drops_lapsed_entries(store):
    m = MemberStore(store)
    await m.announce(member("10.0.0.1:9876", "killed"), LEASE, now=1_000)
    await m.announce(member("10.0.0.2:9876", "alive"), LEASE, now=1_000 + LEASE + 1)
    assert await store.redis.zrange(store.keys.members, 0, -1) == [member("10.0.0.2:9876", "alive")]


async def test_the_key_lives_as_long_as_its_longest_lease(store):
    m = MemberStore(store)
    await m.announce(member("10.0.0.1:9876", "long"), 60_000, now=1_000)
    await m.announce(member("10.0.0.2:9876", "short"), 5_000, now=2_000)
    assert 58_000 <= await store.redis.pttl(store.keys.members) <= 59_000  # until the long lease ends


async def test_announcer_renews_then_withdraws_for_good(store):
    m = MemberStore(store)
    ann = Announcer(m, "10.0.0.1:9876", LEASE, worker_id="w1")
    assert ann.entry == "10.0.0.1:9876|w1" and ann.renew_interval_s == 5.0
    assert ann.not_announced() is not None  # not ready before the first announcement
    assert await ann.renew() is not None
    assert ann.not_announced() is None
    assert await live_addresses(store) == ["10.0.0.1:9876"]
    await ann.withdraw()
    assert await live_addresses(store) == []
    assert await ann.renew() is None  # a renewal after the stop began does not bring the entry back
    assert await live_addresses(store) == []


class SlowMembers(MemberStore):
    """announce() that waits for `release` first, to put a withdraw in the middle of a renewal."""

    def __init__(self, store: RouteStore) -> None:
        super().__init__(store)
        self.release = asyncio.Event()
        self.entered = asyncio.Event()

    async def announce(self, entry: str, lease_ms: int, now: int | None = None) -> int:
        self.entered.set()
        await self.release.wait()
        return await super().announce(entry, lease_ms, now)


async def test_a_renewal_in_flight_when_the_worker_stops_is_taken_back(store):
    m = SlowMembers(store)
    ann = Announcer(m, "10.0.0.1:9876", LEASE, worker_id="w1")
    renewal = asyncio.create_task(ann.renew())
    await m.entered.wait()
    await ann.withdraw()  # the stop: nothing listed yet
    m.release.set()
    assert await renewal is None
    assert await live_addresses(store) == []


async def test_a_renewal_redis_refuses_is_logged_and_absorbed(caplog):
    caplog.set_level("INFO", logger="service.core.announce")
    server = fakeredis.FakeServer()
    s = RouteStore(fakeredis.FakeAsyncRedis(server=server, decode_responses=True), prefix="p")
    ann = Announcer(MemberStore(s), "10.0.0.1:9876", LEASE, worker_id="w1")
    server.connected = False
    assert await ann.renew() is None
    assert ann.not_announced() is None  # tried: readiness is Redis' business (/readyz checks it), not this
    assert await ann.renew() is None
    assert sum("announcing 10.0.0.1:9876" in r.getMessage() for r in caplog.records) == 1  # once per outage
    server.connected = True
    assert await ann.renew() is not None
    assert any("again" in r.getMessage() for r in caplog.records)
    assert await live_addresses(s) == ["10.0.0.1:9876"]
    server.connected = False
    await ann.withdraw()  # logged, not raised: the lease expires by itself
    with pytest.raises(StoreUnavailable):
        await live_addresses(s)


# ---------------------------------------------------------------- the announced address and its settings

def settings(**env: str):
    return load_settings(env={f"NAMESRV_{k.upper()}": v for k, v in env.items()})


def test_announced_address():
    assert announced_address(settings(announce_addr="10.9.9.9:19876")) == "10.9.9.9:19876"
    assert announced_address(settings(host="127.0.0.1", remoting_port="19876")) == "127.0.0.1:19876"
    assert announced_address(settings(host="127.0.0.1", remoting_port="0", port="18080")) == "127.0.0.1:18080"
    assert announced_address(settings(host="::1")) == "[::1]:9876"
    assert announced_address(settings(host="0.0.0.0")) == f"{primary_ip()}:9876"
    assert primary_ip() not in ("", "0.0.0.0")


@pytest.mark.parametrize("bad", ["nohost", "a:1,b:2", "10.0.0.1:0", "10.0.0.1:99999"])
def test_announce_addr_is_one_host_port(bad):
    with pytest.raises(ConfigError, match="announce_addr"):
        settings(announce_addr=bad)


@pytest.mark.parametrize("lease", ["999", "600001"])
def test_announce_lease_bounds(lease):
    with pytest.raises(ConfigError, match="announce_lease_ms"):
        settings(announce_lease_ms=lease)


async def test_the_scheduler_renews_every_third_of_the_lease():
    s = settings(announce_lease_ms="6000")
    store = RouteStore(fakeredis.FakeAsyncRedis(decode_responses=True))
    from service.core import NameServer

    ann = Announcer.for_settings(MemberStore(store), s)
    sched = build_scheduler(NameServer(store, s), ann)
    jobs = {j.id: j for j in sched.get_jobs()}
    assert jobs["announce"].trigger.interval.total_seconds() == 2.0
    assert "announce" not in {j.id for j in build_scheduler(NameServer(store, s)).get_jobs()}


# ---------------------------------------------------------------- GET /rocketmq/nsaddr

async def test_nsaddr_lists_every_live_worker_sorted(make_client):
    c = await make_client()
    m = MemberStore(_store_of(c))
    for addr, worker in (("10.0.0.2:9876", "b"), ("10.0.0.1:9876", "a"), ("10.0.0.3:9876", "c")):
        await m.announce(member(addr, worker), LEASE)
    r = await c.get("/rocketmq/nsaddr")
    assert r.status == 200 and r.content_type == "text/plain"
    assert await r.text() == "10.0.0.1:9876;10.0.0.2:9876;10.0.0.3:9876"
    await m.withdraw(member("10.0.0.2:9876", "b"))
    assert await (await c.get("/rocketmq/nsaddr")).text() == "10.0.0.1:9876;10.0.0.3:9876"


def _store_of(c) -> RouteStore:
    from service.http.handlers import NS

    return c.server.app[NS].store


async def test_nsaddr_leaves_out_a_lapsed_lease(make_client):
    c = await make_client()
    m = MemberStore(_store_of(c))
    now = await _store_of(c).redis_time_ms()
    await m.announce(member("10.0.0.1:9876", "gone"), 1000, now=now - 5_000)  # lapsed 4 s ago
    await m.announce(member("10.0.0.2:9876", "alive"), LEASE)
    assert await (await c.get("/rocketmq/nsaddr")).text() == "10.0.0.2:9876"


async def test_nsaddr_explicit_list_wins(make_client):
    c = await make_client(advertised_addrs="lb.example:9876")
    await MemberStore(_store_of(c)).announce(member("10.0.0.1:9876", "a"), LEASE)
    assert await (await c.get("/rocketmq/nsaddr")).text() == "lb.example:9876"


async def test_nsaddr_answers_itself_when_nobody_is_announced(make_client):
    """Embedded mode (no announcement) and a registry that lost its entries until the next renewal."""
    c = await make_client(remoting_port="19876")
    assert await (await c.get("/rocketmq/nsaddr")).text() == "127.0.0.1:19876"
    c2 = await make_client(announce_addr="10.7.7.7:9876")
    assert await (await c2.get("/rocketmq/nsaddr")).text() == "10.7.7.7:9876"


async def test_nsaddr_answers_503_at_once_when_redis_is_down(make_client):
    c = await make_client()
    await MemberStore(_store_of(c)).announce(member("10.0.0.1:9876", "a"), LEASE)
    c.fake_server.connected = False
    t0 = time.monotonic()
    r = await c.get("/rocketmq/nsaddr")
    assert r.status == 503 and (await r.json())["code"] == "STORE_UNAVAILABLE"
    assert time.monotonic() - t0 < 1.5  # within the store's 1 s deadline
    c.fake_server.connected = True
    assert await (await c.get("/rocketmq/nsaddr")).text() == "10.0.0.1:9876"
