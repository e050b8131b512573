"""When each NameServer stops serving a lost broker's routes, Apache's 5.5.0 beside ours (two workers, one Redis):

- a broker that stops heart-beating (registered with heartbeatTimeoutMillis=10000, its connection left open):
  Java's BrokerHousekeeping scan runs every 5 s, so it is gone 10-15 s after its last heartbeat; ours scans every
  NAMESRV_SCAN_INTERVAL_MS (10 s) on every worker and waits NAMESRV_HEARTBEAT_FLUSH_MS (1 s) past a timeout (a
  heartbeat acknowledged from memory may still be on its way to Redis), so 11-21 s;
- a broker whose connection drops: both unregister it at once (Java's onChannelDestroy; ours in Redis, for every
  worker).

Each side is timed from its own registration reply to the first route read answering TOPIC_NOT_EXIST, polled every
100 ms with deadlines. The timings are printed (docs/deviations.md has the table and the command).
"""

from __future__ import annotations

import time

import pytest

from service.remoting import codes, fastjson
from tests.differential.conftest import Peers
from tests.remoting.client import Client

pytestmark = [pytest.mark.interop, pytest.mark.differential, pytest.mark.timeout(180)]

TIMEOUT_MS = 10_000
JAVA_SCAN_S, OUR_SCAN_S = 5.0, 10.0 + 1.0  # ours: the scan period plus the heartbeat flush period
SLACK_S = 3.0  # a busy 2-core machine: one route read, a GC, a late scheduler tick


def _register(peers: Peers, client: Client, name: str, addr: str, topic: str, timeout_ms: int | None) -> float:
    table = {topic: {"attributes": {}, "order": False, "perm": 6, "readQueueNums": 4, "topicFilterType": "SINGLE_TAG",
                     "topicName": topic, "topicSysFlag": 0, "writeQueueNums": 4},
             topic + "_2": {"attributes": {}, "order": False, "perm": 6, "readQueueNums": 4,
                            "topicFilterType": "SINGLE_TAG", "topicName": topic + "_2", "topicSysFlag": 0,
                            "writeQueueNums": 4}}
    body = fastjson.dumps({"filterServerList": [], "topicConfigSerializeWrapper": {
        "dataVersion": {"counter": 1, "stateVersion": 0, "timestamp": 1700000000000}, "topicConfigTable": table}})
    ext = {"brokerName": name, "brokerAddr": addr, "clusterName": "ExpiryCluster", "brokerId": 0,
           "haServerAddr": addr, "compressed": "false", "bodyCrc32": 0, "enableActingMaster": "false"}
    if timeout_ms is not None:
        ext["heartbeatTimeoutMillis"] = timeout_ms
    r = peers.run(client.request(codes.REGISTER_BROKER, ext, body))
    assert r.code == 0, r
    return time.monotonic()


def _gone_after(peers: Peers, topic: str, since: dict[str, float], deadline_s: float) -> dict[str, float]:
    """Poll both NameServers' route of `topic` until each answers TOPIC_NOT_EXIST; seconds since `since[side]`."""
    gone: dict[str, float] = {}
    end = time.monotonic() + deadline_s
    i = 0
    while len(gone) < 2:
        if "java" not in gone and peers.java_request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}).code == 17:
            gone["java"] = time.monotonic() - since["java"]
        if "ours" not in gone and peers.our_request(i % 2, codes.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}).code == 17:
            gone["ours"] = time.monotonic() - since["ours"]
        i += 1
        if time.monotonic() > end:
            raise AssertionError(f"{topic} still served after {deadline_s} s: gone so far {gone}")
        time.sleep(0.1)  # the polling period
    return gone


def test_silent_broker_expires_within_each_scan_bound(peers):
    java = peers.run(Client.connect(peers.apache.port))
    ours = peers.run(Client.connect(peers.ours.procs[0].remoting_port))
    try:
        since = {"java": _register(peers, java, "broker-silent", "127.0.0.1:19911", "SilentTopic", TIMEOUT_MS),
                 "ours": _register(peers, ours, "broker-silent", "127.0.0.1:19911", "SilentTopic", TIMEOUT_MS)}
        for side, r in (("java", peers.java_request(105, {"topic": "SilentTopic"})),
                        ("ours", peers.our_request(1, 105, {"topic": "SilentTopic"}))):
            assert r.code == 0, (side, r)
        gone = _gone_after(peers, "SilentTopic", since, TIMEOUT_MS / 1000 + OUR_SCAN_S + SLACK_S + 5)
        print(f"\nsilent broker (heartbeatTimeoutMillis={TIMEOUT_MS}): routes gone after "
              f"Apache {gone['java']:.1f} s, ours {gone['ours']:.1f} s")
        timeout_s = TIMEOUT_MS / 1000
        assert timeout_s - 0.5 <= gone["java"] <= timeout_s + JAVA_SCAN_S + SLACK_S, gone
        assert timeout_s - 0.5 <= gone["ours"] <= timeout_s + OUR_SCAN_S + SLACK_S, gone
    finally:
        peers.run(java.close())
        peers.run(ours.close())


def test_dropped_connection_unregisters_at_once(peers):
    java = peers.run(Client.connect(peers.apache.port))
    ours = peers.run(Client.connect(peers.ours.procs[1].remoting_port))
    _register(peers, java, "broker-dropped", "127.0.0.1:19921", "DroppedTopic", None)  # default 120 s timeout
    _register(peers, ours, "broker-dropped", "127.0.0.1:19921", "DroppedTopic", None)
    assert peers.java_request(105, {"topic": "DroppedTopic"}).code == 0
    assert peers.our_request(0, 105, {"topic": "DroppedTopic"}).code == 0  # the other worker serves it too
    peers.run(java.close())
    t_java = time.monotonic()
    peers.run(ours.close())
    t_ours = time.monotonic()
    gone = _gone_after(peers, "DroppedTopic", {"java": t_java, "ours": t_ours}, 10)
    print(f"\ndropped connection: routes gone after Apache {gone['java']:.2f} s, ours {gone['ours']:.2f} s")
    assert gone["java"] <= SLACK_S and gone["ours"] <= SLACK_S, gone


def time_one(port: int) -> dict[str, float]:
    """Both scenarios on one more NameServer at `port` (rocketmq-rust's): seconds until its routes are gone."""
    import asyncio

    async def go() -> dict[str, float]:
        async def registered(name: str, addr: str, topic: str, timeout_ms: int | None) -> tuple[Client, float]:
            c = await Client.connect(port)
            ext = {"brokerName": name, "brokerAddr": addr, "clusterName": "ExpiryCluster", "brokerId": 0,
                   "haServerAddr": addr, "compressed": "false", "bodyCrc32": 0, "enableActingMaster": "false"}
            if timeout_ms is not None:
                ext["heartbeatTimeoutMillis"] = timeout_ms
            from benchmarks.peers import register_body

            r = await c.request(codes.REGISTER_BROKER, ext, register_body([topic, topic + "_2"], 4, 1))
            assert r.code == 0, r
            return c, time.monotonic()

        reader = await Client.connect(port)

        async def gone_after(topic: str, since: float, deadline_s: float) -> float:
            end = time.monotonic() + deadline_s
            while (await reader.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})).code != 17:
                if time.monotonic() > end:
                    raise AssertionError(f"{topic} still served after {deadline_s} s")
                await asyncio.sleep(0.1)  # the polling period
            return time.monotonic() - since

        silent, t0 = await registered("broker-silent", "127.0.0.1:19911", "SilentTopic", TIMEOUT_MS)
        dropped, _ = await registered("broker-dropped", "127.0.0.1:19921", "DroppedTopic", None)
        await dropped.close()
        drop = await gone_after("DroppedTopic", time.monotonic(), 10)
        quiet = await gone_after("SilentTopic", t0, 60)
        await silent.close()
        await reader.close()
        return {"silent": quiet, "dropped": drop}

    return asyncio.run(go())


if __name__ == "__main__":  # python -m tests.differential.test_expiry /tmp/rocketmq-rust-bin/bin/rocketmq-namesrv-rust
    import sys
    import tempfile
    from pathlib import Path

    from benchmarks.peers import Rust

    server = Rust(sys.argv[1], Path(tempfile.mkdtemp(prefix="expiry-rust-")))
    try:
        t = time_one(server.port)
        print(f"rocketmq-rust: silent broker (heartbeatTimeoutMillis={TIMEOUT_MS}) gone after {t['silent']:.1f} s, "
              f"dropped connection after {t['dropped']:.2f} s")
    finally:
        server.stop()
