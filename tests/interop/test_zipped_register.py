"""A stock RocketMQ 5.5.0 broker with `compressedRegister=true` and 3 000 topics, registering with our two
workers on a real Redis. Every 5.x broker so configured zips its RegisterBrokerBody yet sends `compressed=false`
(BrokerOuterAPI.registerBrokerAll); Apache's own NameServer refuses that, ours takes the body for what it is
(docs/deviations.md "compressed RegisterBrokerBody with compressed=false").

One broker JVM: the topics are written into the broker's topics.json before it starts, and a
relay in front of worker 0 records the registrations the broker sends, so the test shows the premise (zipped body,
header compressed=false) as well as the outcome (every topic routed on both workers, the periodic re-registration
taken too). Apache's NameServer is asked separately, with the unit tests' fixture: it refuses the zipped bytes
under compressed=false and reads them under compressed=true.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import threading
import urllib.request
import uuid
from pathlib import Path

from service.remoting import codes, fastjson
from service.remoting.bodies import crc32_of
from service.remoting.codec import FrameDecoder, RemotingCommand
from tests.interop import rocketmq as rmq
from tests.interop.conftest import OurNameServer, native, registered
from tests.redis_server import free_port
from tests.remoting.client import Client

TOPICS = 3000


class RegistrationTap:
    """A loopback TCP relay in front of one worker: passes every byte through and keeps the REGISTER_BROKER
    requests it sees (decoded by our codec)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.registrations: list[RemotingCommand] = []
        self.socks: list[socket.socket] = [self.listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                down, _ = self.listener.accept()
                up = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                return
            self.socks += [down, up]
            threading.Thread(target=self._pump, args=(up, down, None), daemon=True).start()
            threading.Thread(target=self._pump, args=(down, up, FrameDecoder()), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, requests: FrameDecoder | None) -> None:
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
                if requests is not None:
                    self.registrations += [c for c in requests.feed(chunk)
                                           if isinstance(c, RemotingCommand) and c.code == codes.REGISTER_BROKER]
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        for s in self.socks:
            s.close()


def registrations_by_result(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("namesrv_broker_registrations_total{"):
            labels, value = line.rsplit(" ", 1)
            out[labels.split('result="', 1)[1].split('"', 1)[0]] = float(value)
    return out


def queue_nums(i: int) -> int:
    return 1 + i % 8


def write_topics_json(broker: rmq.Broker) -> None:
    """The broker's own topic table (TopicConfigManager's store/config/topics.json), read when it starts."""
    table = {f"ZIP{i:04d}": {"topicName": f"ZIP{i:04d}", "readQueueNums": queue_nums(i),
                             "writeQueueNums": queue_nums(i), "perm": 6, "topicFilterType": "SINGLE_TAG",
                             "topicSysFlag": 0, "order": False, "attributes": {}} for i in range(TOPICS)}
    path = broker.home / "store" / "config" / "topics.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"dataVersion": {"counter": 1, "stateVersion": 0, "timestamp": 1764000000000},
                                "topicConfigTable": table}))


def routes(port: int, topics: list[str]) -> dict[str, dict]:
    """GET_ROUTEINFO_BY_TOPIC (105) for every topic over one native connection, 50 in flight (the door allows 64): the
    route, or the refusal's code and remark."""
    async def go() -> dict[str, dict]:
        c = await Client.connect(port)
        out: dict[str, dict] = {}
        try:
            for start in range(0, len(topics), 50):
                batch = topics[start:start + 50]
                replies = await asyncio.gather(*(c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": t}, version=513)
                                                 for t in batch))
                for t, r in zip(batch, replies, strict=True):
                    out[t] = fastjson.loads(r.body) if r.code == 0 else {"code": r.code, "remark": r.remark}
        finally:
            await c.close()
        return out

    return asyncio.run(go())


def test_a_5x_broker_with_compressed_register_and_3000_topics_is_routed_on_both_workers(interop_jars,
                                                                                        interop_redis):
    root = rmq.temp_root("interop-zipped-")
    ours = OurNameServer(interop_redis.url, "iz" + uuid.uuid4().hex[:8], {"support_acting_master": "true"}).start()
    tap = RegistrationTap(ours.procs[0].remoting_port)
    # registerNameServerPeriod: the broker's floor (10 s), so the periodic re-registration comes soon
    broker = rmq.Broker(rmq.LINE5, root, "ClusterZ", "broker-z", 0, f"127.0.0.1:{tap.port};{ours.addr(1)}",
                        compressedRegister="true", registerNameServerPeriod=10000)
    write_topics_json(broker)
    ok = False
    try:
        broker.start()
        for i in range(2):
            rmq.wait_until(lambda i=i: broker.alive and registered(ours.cluster_info(i), broker), 90,
                           f"broker-z registered with worker {i} ({'' if broker.alive else broker.tail(20)})")

        # the premise: what the broker sent is zipped, and its header says it is not
        first = tap.registrations[0]
        assert first.ext_fields["compressed"] == "false"
        assert first.body[:2] == b"\x78\xda" and first.version == 513  # Deflater(BEST_COMPRESSION), V5_5_0

        names = [f"ZIP{i:04d}" for i in range(TOPICS)]
        for i in range(2):
            got = routes(ours.procs[i].remoting_port, names)
            missing = {t: r for t, r in got.items() if "code" in r}
            assert not missing, f"worker {i}: {len(missing)} topics without a route, e.g. {list(missing.items())[:5]}"
            for n, t in enumerate(names):
                (qd,) = got[t]["queueDatas"]
                assert (qd["brokerName"], qd["readQueueNums"], qd["writeQueueNums"], qd["perm"]) == (
                    "broker-z", queue_nums(n), queue_nums(n), 6), (i, t, qd)
                assert {str(k): v for k, v in got[t]["brokerDatas"][0]["brokerAddrs"].items()} == {"0": broker.addr}

        # the broker's periodic full re-registration (the same zipped bytes) keeps being taken, on the O(1)
        # unchanged path, by both workers; none is refused
        seen = len(tap.registrations)
        rmq.wait_until(lambda: all(registrations_by_result(ours.url(i)).get("unchanged", 0) >= 1 for i in range(2))
                       and len(tap.registrations) > seen, 60, "a periodic re-registration taken as unchanged")
        for i in range(2):
            results = registrations_by_result(ours.url(i))
            assert set(results) <= {"ok", "unchanged"}, (i, results)  # no refused or failed registration
        assert all(r.body[:2] == b"\x78\xda" and r.ext_fields["compressed"] == "false" for r in tap.registrations)
        assert all(registered(ours.cluster_info(i), broker) for i in range(2))
        ok = True
    finally:
        rmq.stop_all([broker])
        tap.close()
        ours.stop()
        if ok:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"interop logs kept in {root}")


def test_apaches_namesrv_reads_the_fixture_only_when_the_header_says_compressed(interop_jars):
    """The oracle for the unit tests' fixture (tests/fixtures/register_body_5x_zipped.bin) and for the deviation:
    Apache's 5.5.0 NameServer decodes those bytes under compressed=true and refuses them under compressed=false,
    as a 5.x broker sends them; ours takes both (tests/remoting/test_zipped_register.py)."""
    body = (Path(__file__).parents[1] / "fixtures" / "register_body_5x_zipped.bin").read_bytes()
    root = rmq.temp_root("interop-zipped-apache-")
    apache = rmq.ApacheNameServer(rmq.LINE5, root, free_port()).start()
    try:
        apache.wait_listening()
        ext = {"clusterName": "ClusterZ", "brokerName": "broker-z", "brokerId": "0", "brokerAddr": "127.0.0.1:10911",
               "haServerAddr": "127.0.0.1:10912", "bodyCrc32": str(crc32_of(body)), "enableActingMaster": "false"}
        refused = native(apache.port, codes.REGISTER_BROKER, {**ext, "compressed": "false"}, body, version=513)
        assert refused.code == 1 and "Failed to decode RegisterBrokerBody" in refused.remark

        async def register_and_read() -> tuple[RemotingCommand, RemotingCommand]:
            c = await Client.connect(apache.port)  # one connection: closing it unregisters the broker
            try:
                taken = await c.request(codes.REGISTER_BROKER, {**ext, "compressed": "true"}, body, version=513)
                return taken, await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA"}, version=513)
            finally:
                await c.close()

        taken, route = asyncio.run(register_and_read())
        assert taken.code == 0, taken.remark
        assert route.code == 0, route.remark
        (qd,) = fastjson.loads(route.body)["queueDatas"]
        assert (qd["readQueueNums"], qd["writeQueueNums"], qd["perm"]) == (8, 8, 6)
    finally:
        rmq.stop_all([apache])
        shutil.rmtree(root, ignore_errors=True)
