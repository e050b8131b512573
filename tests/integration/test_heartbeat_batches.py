"""What an acknowledged BROKER_HEARTBEAT means with batched writes (service/core/liveness.py), on real workers and a
real Redis, scaled down in time: a broker heartbeating through any worker at a quarter of its timeout (as 30 s
against 120 s) is never expired, also when the worker that acknowledged its last heartbeat is SIGKILLed before
writing it; a broker that stops heartbeating is expired (the control: the check can fail)."""

from __future__ import annotations

import asyncio
import json
import signal
import time
import urllib.request

from benchmarks import broker_frames as frames
from service.remoting import codes
from tests.remoting.client import Client

TIMEOUT_MS = 2000
PERIOD_S = TIMEOUT_MS / 4 / 1000
FLUSH_MS = 1000  # the longest a worker holds an acknowledged heartbeat: the setting's default


def brokers(url: str) -> set[str]:
    with urllib.request.urlopen(url + "/v1/cluster-info", timeout=5) as r:
        return set(json.loads(r.read())["brokerAddrTable"])


async def register(port: int, name: str, addr: str) -> Client:
    c = await Client.connect(port)
    body = frames.register_body({f"{name}-T{i}": 8 for i in range(2)}, 1)  # one topic: the single-topic guard
    ext = frames.register_header("C", name, addr, "plain", body, TIMEOUT_MS)
    reply = await c.request(codes.REGISTER_BROKER, {**ext, "enableActingMaster": "true"}, body, version=frames.VERSION)
    assert reply.code == 0, reply.remark
    return c


async def beat(port: int, name: str, addr: str) -> None:
    c = await Client.connect(port)
    try:
        reply = await c.request(codes.BROKER_HEARTBEAT, {"clusterName": "C", "brokerAddr": addr, "brokerName": name,
                                                         "brokerId": "0"}, version=frames.VERSION)
        assert reply.code == 0, reply.remark
    finally:
        await c.close()


async def test_a_heartbeating_broker_survives_the_worker_that_acknowledged_its_last_heartbeat(namesrv_factory):
    env = dict(heartbeat_flush_ms=FLUSH_MS, scan_interval_ms=100, scan_first_delay_ms=0)
    a, b = namesrv_factory(**env), namesrv_factory(**env)
    kept = await register(a.remoting_port, "kept", "10.0.0.1:10911")
    silent = await register(b.remoting_port, "silent", "10.0.0.2:10911")
    assert brokers(b.url) == {"kept", "silent"}
    killed_at = None
    seen_missing = []
    started = time.monotonic()
    turn = 0
    while time.monotonic() - started < 4 * TIMEOUT_MS / 1000:  # four timeouts
        worker = a if killed_at is None and turn % 2 == 0 else b
        await beat(worker.remoting_port, "kept", "10.0.0.1:10911")
        if worker is a and time.monotonic() - started > TIMEOUT_MS / 1000:
            a.proc.send_signal(signal.SIGKILL)  # right after it acknowledged, before its next write
            a.proc.wait(10)
            killed_at = time.monotonic()
        turn += 1
        deadline = time.monotonic() + PERIOD_S
        while time.monotonic() < deadline:
            if "kept" not in brokers(b.url):
                seen_missing.append(round(time.monotonic() - started, 2))
            await asyncio.sleep(0.05)
    assert killed_at is not None, "worker A never acknowledged a heartbeat past the first timeout"
    assert not seen_missing, f"the heartbeating broker was expired at {seen_missing} s"
    assert "silent" not in brokers(b.url), "the broker that never heartbeated was not expired"
    for c in (kept, silent):
        await c.close()
