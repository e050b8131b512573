"""GET /rocketmq/nsaddr over three real worker processes on one real redis-server: every worker answers every live
worker's announced address; a gracefully stopped worker drops out at once (long before its lease could run out),
a SIGKILLed one when its lease runs out; an explicit advertised_addrs still wins."""

from __future__ import annotations

import signal
import time
import urllib.error
import urllib.request
import uuid

import pytest

from tests.conftest import need
from tests.integration.conftest import Namesrv
from tests.redis_server import RedisServer

pytestmark = [pytest.mark.integration, pytest.mark.redis]


def nsaddr(ns, timeout: float = 2) -> str:
    with urllib.request.urlopen(ns.url + "/rocketmq/nsaddr", timeout=timeout) as r:
        assert r.status == 200 and r.headers.get_content_type() == "text/plain"
        return r.read().decode()


def addr(ns) -> str:
    return f"127.0.0.1:{ns.remoting_port}"


def listed(workers) -> str:
    return ";".join(sorted(addr(w) for w in workers))


def wait_for_answer(ns, want: str, timeout: float) -> float:
    """Poll until `ns` answers `want`; the seconds it took. Fails with the last answer at the deadline."""
    t0 = time.monotonic()
    last = None
    while time.monotonic() - t0 < timeout:
        last = nsaddr(ns)
        if last == want:
            return time.monotonic() - t0
        time.sleep(0.05)
    raise AssertionError(f"{ns.url} answered {last!r}, not {want!r}, for {timeout} s")


def test_nsaddr_follows_workers_as_they_start_stop_and_die(namesrv_factory):
    # a long lease for the worker that stops gracefully: dropping it within seconds can only be its withdrawal;
    # a short one for the worker that is killed: nothing withdraws it, only its lease running out
    stopped = namesrv_factory(announce_lease_ms=60_000)
    killed = namesrv_factory(announce_lease_ms=3_000)
    stays = namesrv_factory(announce_lease_ms=60_000)
    everyone = [stopped, killed, stays]
    for w in everyone:
        assert nsaddr(w) == listed(everyone), "every worker lists all three, sorted, ';'-joined"

    t_term = time.monotonic()
    stopped.proc.send_signal(signal.SIGTERM)
    took = wait_for_answer(stays, listed([killed, stays]), timeout=10)
    assert took < 5, f"a stopped worker left the list after {took:.1f} s, not at once (its lease is 60 s)"
    assert stopped.wait_exit() == 0 and time.monotonic() - t_term < 30
    assert nsaddr(killed) == listed([killed, stays])

    killed.proc.send_signal(signal.SIGKILL)
    t_kill = time.monotonic()
    killed.proc.wait(10)
    # renewed every third of its 3 s lease: at least 2 s of it are left when it dies, so it is still listed now
    assert nsaddr(stays) == listed([killed, stays])
    took = wait_for_answer(stays, listed([stays]), timeout=10)
    gone_after = time.monotonic() - t_kill
    assert 1.0 < gone_after < 3.0 + 1.0, f"a killed worker left the list {gone_after:.1f} s after the kill"


def test_a_new_worker_appears_and_an_explicit_list_still_wins(namesrv_factory):
    a = namesrv_factory()
    b = namesrv_factory()
    assert nsaddr(a) == nsaddr(b) == listed([a, b])
    c = namesrv_factory()  # scaling out: listed as soon as it is ready
    assert nsaddr(a) == listed([a, b, c])
    explicit = namesrv_factory(advertised_addrs="lb.example:9876")
    assert nsaddr(explicit) == "lb.example:9876"
    assert nsaddr(a) == listed([a, b, c, explicit])  # it is announced all the same: the others list it


@pytest.fixture
def lone_redis():
    """A redis-server of this test's own: it is stopped (SIGSTOP) for a while."""
    need("redis-server")
    server = RedisServer().start()
    yield server
    if server.proc is not None:
        server.proc.send_signal(signal.SIGCONT)
    server.cleanup()


def test_nsaddr_answers_503_while_redis_is_down_and_recovers(lone_redis):
    """Decision: no stale list. A client or broker that gets anything but 200 keeps the list it has
    (DefaultTopAddressing returns null, fetchNameServerAddr ignores it), so a fast 503 loses nothing."""
    a = Namesrv(lone_redis.url, "hung" + uuid.uuid4().hex[:6]).wait_ready()
    try:
        assert nsaddr(a) == listed([a])
        lone_redis.proc.send_signal(signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            with pytest.raises(urllib.error.HTTPError) as err:
                nsaddr(a, timeout=10)
            assert err.value.code == 503
            assert time.monotonic() - t0 < 2.5  # the store's 1 s deadline, not a hang
        finally:
            lone_redis.proc.send_signal(signal.SIGCONT)
        wait_for_answer(a, listed([a]), timeout=10)
    finally:
        a.stop()
