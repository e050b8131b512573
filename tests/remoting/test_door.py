"""The native door over the real core (fakeredis), driven by our own client: every request code, both
serializations, fastjson and standard JSON bodies, zones, hostile frames, liveness by connection, overload."""

from __future__ import annotations

import asyncio
import re
import struct
import zlib

import aiohttp
import orjson
import pytest

from service.remoting import codes, fastjson
from service.remoting.bodies import crc32_of
from service.remoting.codec import SERVER_VERSION

SUCCESS, SYSTEM_ERROR, SYSTEM_BUSY, NOT_SUPPORTED = 0, 1, 2, 3
NO_PERMISSION, TOPIC_NOT_EXIST, QUERY_NOT_FOUND = 16, 17, 22
BROKER = {"clusterName": "C1", "brokerName": "broker-a", "brokerId": 0, "brokerAddr": "10.0.0.1:10911"}


def register_body(topics: dict[str, int] | None = None, counter: int = 1, filters: list[str] | None = None) -> bytes:
    """A RegisterBrokerBody as a 5.x broker sends it (fastjson, compressed=false)."""
    table = {t: {"order": False, "perm": 6, "readQueueNums": q, "topicFilterType": "SINGLE_TAG", "topicName": t,
                 "topicSysFlag": 0, "writeQueueNums": q} for t, q in (topics or {"TopicA": 8, "TopicB": 4}).items()}
    return fastjson.dumps({"filterServerList": filters or [], "topicConfigSerializeWrapper": {
        "dataVersion": {"counter": counter, "stateVersion": 0, "timestamp": 1700000000000},
        "topicConfigTable": table}})


def register_ext(**over):
    return {**BROKER, "haServerAddr": "10.0.0.1:10912", "compressed": "false", "bodyCrc32": 0,
            "enableActingMaster": "false", **over}


async def register(client, topics=None, serialize="JSON", **over):
    return await client.request(codes.REGISTER_BROKER, register_ext(**over), register_body(topics),
                                serialize=serialize)


async def test_register_then_route_in_fastjson_and_standard_json(door):
    c = await door.client()
    r = await register(c)
    assert (r.code, r.flag & 1, r.version) == (SUCCESS, 1, SERVER_VERSION)
    assert r.ext_fields == {}  # a master: no haServerAddr/masterAddr (nulls are not sent)
    old = await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA"}, version=121)
    assert old.code == SUCCESS
    assert b'"brokerAddrs":{0:"10.0.0.1:10911"}' in old.body  # fastjson: bare numeric keys
    new = await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA"}, version=479)
    assert b'"brokerAddrs":{"0":"10.0.0.1:10911"}' in new.body  # standard JSON from V4_9_4 on
    asked = await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA", "acceptStandardJsonOnly": "true"},
                            version=121)
    assert asked.body == new.body
    # the same registry as the HTTP door, the same route
    http = await (await door.http.get("/v1/topics/TopicA/route")).json()
    assert orjson.loads(new.body) == http
    assert fastjson.loads(old.body)["queueDatas"] == http["queueDatas"]


async def test_unknown_topic_and_missing_topic(door):
    c = await door.client()
    r = await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "Nope"})
    assert r.code == TOPIC_NOT_EXIST and "Nope" in r.remark and r.body == b""
    r = await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {})
    assert r.code == TOPIC_NOT_EXIST


@pytest.mark.parametrize("serialize", ["JSON", "ROCKETMQ"])
async def test_answered_in_the_serialization_of_the_request_with_opaque_echoed(door, serialize):
    c = await door.client()
    await register(c)
    r = await c.request(codes.GET_BROKER_CLUSTER_INFO, serialize=serialize, opaque=424242)
    assert r.serialize_type == serialize and r.opaque == 424242 and r.code == SUCCESS
    info = fastjson.loads(r.body)
    assert info["clusterAddrTable"] == {"C1": ["broker-a"]}
    assert info["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {0: "10.0.0.1:10911"}


async def test_every_request_code_the_java_namesrv_answers(door):
    c = await door.client()
    await c.request(codes.PUT_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "TopicA", "value": "broker-a:8"})
    r = await register(c)
    assert fastjson.loads(r.body) == {"table": {"TopicA": "broker-a:8"}}  # the order-topic KV table
    slave = await c.request(codes.REGISTER_BROKER, register_ext(brokerId=1, brokerAddr="10.0.0.2:10911"),
                            register_body())
    assert slave.ext_fields == {"haServerAddr": "10.0.0.1:10912", "masterAddr": "10.0.0.1:10911"}

    r = await c.request(codes.GET_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "TopicA"})
    assert (r.code, r.ext_fields) == (SUCCESS, {"value": "broker-a:8"})
    r = await c.request(codes.GET_KV_CONFIG, {"namespace": "ns", "key": "k"})
    assert r.code == QUERY_NOT_FOUND and r.remark == "No config item, Namespace: ns Key: k"
    r = await c.request(codes.GET_KVLIST_BY_NAMESPACE, {"namespace": "ORDER_TOPIC_CONFIG"})
    assert fastjson.loads(r.body) == {"table": {"TopicA": "broker-a:8"}}
    r = await c.request(codes.GET_KVLIST_BY_NAMESPACE, {"namespace": "nothing"})
    assert r.code == QUERY_NOT_FOUND
    assert (await c.request(codes.DELETE_KV_CONFIG, {"namespace": "x", "key": "y"})).code == SUCCESS

    topics = fastjson.loads((await c.request(codes.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)).body)
    assert topics == {"topicList": ["TopicA", "TopicB"]}
    r = await c.request(codes.GET_TOPICS_BY_CLUSTER, {"cluster": "C1"})
    assert fastjson.loads(r.body) == {"topicList": ["TopicA", "TopicB"]}
    r = await c.request(codes.GET_SYSTEM_TOPIC_LIST_FROM_NS)
    assert fastjson.loads(r.body) == {"brokerAddr": "10.0.0.1:10911", "topicList": ["C1", "broker-a"]} or \
        fastjson.loads(r.body) == {"topicList": ["C1", "broker-a"], "brokerAddr": "10.0.0.1:10911"}
    for code in (codes.GET_UNIT_TOPIC_LIST, codes.GET_HAS_UNIT_SUB_TOPIC_LIST,
                 codes.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST):
        assert fastjson.loads((await c.request(code)).body) == {"topicList": []}

    r = await c.request(codes.GET_BROKER_MEMBER_GROUP, {"clusterName": "C1", "brokerName": "broker-a"})
    assert fastjson.loads(r.body) == {"brokerMemberGroup": {"brokerAddrs": {0: "10.0.0.1:10911",
                                                                            1: "10.0.0.2:10911"},
                                                            "brokerName": "broker-a", "cluster": "C1"}}
    dv = fastjson.dumps({"counter": 1, "stateVersion": 0, "timestamp": 1700000000000})
    r = await c.request(codes.QUERY_DATA_VERSION, BROKER, dv)
    assert r.ext_fields == {"changed": "false"} and fastjson.loads(r.body)["counter"] == 1
    r = await c.request(codes.QUERY_DATA_VERSION, {**BROKER, "brokerAddr": "10.9.9.9:1"}, dv)
    assert r.ext_fields == {"changed": "true"} and r.body == b""
    assert (await c.request(codes.BROKER_HEARTBEAT, {k: v for k, v in BROKER.items() if k != "brokerId"})).code == 0

    r = await c.request(codes.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    assert r.ext_fields == {"wipeTopicCount": "2"}
    r = await c.request(codes.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    assert r.ext_fields == {"addTopicCount": "2"}
    route = {"queueDatas": [{"brokerName": "broker-a", "perm": 6, "readQueueNums": 2, "topicSysFlag": 0,
                             "writeQueueNums": 2}]}
    assert (await c.request(codes.REGISTER_TOPIC_IN_NAMESRV, {"topic": "NewT"}, fastjson.dumps(route))).code == 0
    assert (await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "NewT"})).code == SUCCESS
    ghost = {"queueDatas": [{**route["queueDatas"][0], "brokerName": "ghost"}]}
    r = await c.request(codes.REGISTER_TOPIC_IN_NAMESRV, {"topic": "Ghost"}, fastjson.dumps(ghost))
    assert r.code == SUCCESS and "ignored" in r.remark  # Java ignores it too
    assert (await c.request(codes.DELETE_TOPIC_IN_NAMESRV, {"topic": "NewT", "clusterName": "C1"})).code == 0
    assert (await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "NewT"})).code == TOPIC_NOT_EXIST

    r = await c.request(codes.UPDATE_NAMESRV_CONFIG, body=b"enableTopicList=false\n")
    assert r.code == SUCCESS
    assert (await c.request(codes.GET_TOPICS_BY_CLUSTER, {"cluster": "C1"})).code == SYSTEM_ERROR
    r = await c.request(codes.UPDATE_NAMESRV_CONFIG, body=b"kvConfigPath=/tmp/evil\n")
    assert r.code == NO_PERMISSION and "black list" in r.remark
    config = (await c.request(codes.GET_NAMESRV_CONFIG)).body.decode()
    assert "enableTopicList=false\n" in config and config == "".join(sorted(config.splitlines(True)))

    assert (await c.request(codes.UNREGISTER_BROKER, {**BROKER, "brokerId": 1, "brokerAddr": "10.0.0.2:10911"}
                            )).code == SUCCESS
    r = await c.request(codes.GET_BROKER_MEMBER_GROUP, {"clusterName": "C1", "brokerName": "broker-a"})
    assert fastjson.loads(r.body)["brokerMemberGroup"]["brokerAddrs"] == {0: "10.0.0.1:10911"}


async def test_unknown_code_is_not_supported(door):
    c = await door.client()
    r = await c.request(99999)
    assert r.code == NOT_SUPPORTED and r.remark == " request type 99999 not supported"


async def test_oneway_gets_no_reply(door):
    c = await door.client()
    await register(c)
    c.send(codes.BROKER_HEARTBEAT, {k: v for k, v in BROKER.items()}, oneway=True, opaque=7)
    r = await c.request(codes.GET_BROKER_CLUSTER_INFO, opaque=8)
    assert r.opaque == 8 and [x.opaque for x in c.received] == [1, 8]  # nothing for opaque 7


async def test_compressed_register_and_crc(door):
    c = await door.client()

    def chunk(text):
        raw = text.encode()
        return struct.pack(">i", len(raw)) + raw

    raw = chunk('{"counter":3,"stateVersion":0,"timestamp":5}') + struct.pack(">i", 2)
    raw += chunk("ZTopic 4 4 6 SINGLE_TAG {}") + chunk("YTopic 2 2 6 SINGLE_TAG {}") + chunk("[]")
    body = zlib.compress(raw, 9)
    r = await c.request(codes.REGISTER_BROKER, register_ext(compressed="true", bodyCrc32=crc32_of(body)), body,
                        version=121)
    assert r.code == SUCCESS
    route = fastjson.loads((await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "ZTopic"})).body)
    assert route["queueDatas"][0]["writeQueueNums"] == 4
    bad = await c.request(codes.REGISTER_BROKER, register_ext(bodyCrc32=12345), register_body())
    assert (bad.code, bad.remark) == (SYSTEM_ERROR, "crc32 not match")


@pytest.mark.parametrize("body", [b"\x00\xff garbage", b"{", b'{"topicConfigSerializeWrapper": 5}', b"[1,2]"])
async def test_garbage_bodies_are_errors_not_dead_workers(door, body):
    c = await door.client()
    version_before = await door.ns.store.version()
    r = await c.request(codes.REGISTER_BROKER, register_ext(), body)
    assert r.code == SYSTEM_ERROR and r.remark
    r = await c.request(codes.REGISTER_BROKER, register_ext(compressed="true"), body)
    assert r.code == SYSTEM_ERROR
    assert await door.ns.store.version() == version_before  # nothing written
    assert (await c.request(codes.GET_BROKER_CLUSTER_INFO)).code == SUCCESS  # the connection still serves


@pytest.mark.parametrize("ext", [
    {**register_ext(), "brokerId": "１"},  # full-width digit
    {**register_ext(), "brokerAddr": "10.0.0.1"},
    {**register_ext(), "clusterName": "C1\n"},
    {**register_ext(), "heartbeatTimeoutMillis": "soon"},
    {k: v for k, v in register_ext().items() if k != "brokerName"},
])
async def test_bad_headers_are_errors_and_write_nothing(door, ext):
    c = await door.client()
    before = await door.ns.store.version()
    r = await c.request(codes.REGISTER_BROKER, ext, register_body())
    assert r.code == SYSTEM_ERROR and r.remark
    assert await door.ns.store.version() == before


async def test_single_topic_guard_on_the_native_door(door):
    c = await door.client()
    r = await register(c, topics={"OnlyOne": 1})
    assert (r.code, r.remark) == (SYSTEM_ERROR, "register broker failed: single-topic registration before the "
                                                "first full one (REGISTER_FAILED)")


async def test_zone_filtering_on_both_doors(door):
    c = await door.client()
    await register(c, __ZONE_NAME="zone-a")
    await c.request(codes.REGISTER_BROKER, register_ext(brokerName="broker-b", brokerAddr="10.0.0.5:10911",
                                                        __ZONE_NAME="zone-b"), register_body())
    ext = {"topic": "TopicA", "__ZONE_MODE": "true", "__ZONE_NAME": "ZONE-A"}
    route = fastjson.loads((await c.request(codes.GET_ROUTEINFO_BY_TOPIC, ext)).body)
    assert [b["brokerName"] for b in route["brokerDatas"]] == ["broker-a"]
    assert [q["brokerName"] for q in route["queueDatas"]] == ["broker-a"]
    everything = fastjson.loads((await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA"})).body)
    assert len(everything["brokerDatas"]) == 2
    r = await door.http.get("/v1/topics/TopicA/route", params={"zoneName": "zone-b", "zoneMode": "true"})
    assert [b["brokerName"] for b in (await r.json())["brokerDatas"]] == ["broker-b"]
    r = await door.http.get("/v1/topics/TopicA/route", params={"zoneName": "zone-b"})  # no zone mode: all
    assert len((await r.json())["brokerDatas"]) == 2


async def test_oversize_and_garbage_frames_close_only_that_connection(make_door):
    door = await make_door(remoting_max_frame_bytes=4096)
    good = await door.client()
    await register(good)
    big = await door.client()
    big.writer.write(struct.pack(">i", 10_000) + b"\x00" * 100)
    junk = await door.client()
    junk.writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    for c in (big, junk):
        async with asyncio.timeout(5):
            await c.closed.wait()
    assert (await good.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA"})).code == SUCCESS
    metrics = door.ns.metrics.render().decode()
    assert re.search(r"^namesrv_remoting_frame_errors_total 2\.0$", metrics, re.M)


async def test_an_http_request_on_the_native_port_is_answered_with_the_http_port(make_door):
    """`curl localhost:9876/v1/cluster-info` got "Empty reply from server" (curl exit 52) while the worker's log
    named the HTTP port (issue 39, second round): the answer now says it too, as HTTP, then the connection
    closes; a RocketMQ client on that port is served as before."""
    door = await make_door(port=18080)
    good = await door.client()
    await register(good)
    async with aiohttp.ClientSession() as http:
        r = await http.get(f"http://127.0.0.1:{door.port}/v1/cluster-info")
        assert r.status == 400 and r.headers["Connection"] == "close"
        assert await r.json() == {"code": "REMOTING_PORT", "message": "this is RocketMQ's remoting port (its "
                                  "native protocol), not HTTP: the HTTP API listens on port 18080"}
    assert (await good.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA"})).code == SUCCESS


async def test_closing_the_connection_unregisters_only_what_it_still_owns(door):
    a = await door.client()
    await register(a)
    await a.request(codes.REGISTER_BROKER, register_ext(brokerName="broker-b", brokerAddr="10.0.0.5:10911"),
                    register_body({"TopicB": 4, "TopicC": 4}))
    # broker-b registers again through another connection, broker-a stays owned by `a`
    b = await door.client()
    await b.request(codes.REGISTER_BROKER, register_ext(brokerName="broker-b", brokerAddr="10.0.0.5:10911"),
                    register_body({"TopicB": 4, "TopicC": 4}))
    await a.close()

    async def gone():
        while (await door.http.get("/v1/clusters/C1/brokers/broker-a")).status == 200 and \
                (await (await door.http.get("/v1/clusters/C1/brokers/broker-a")).json()
                 )["brokerMemberGroup"]["brokerAddrs"]:
            await asyncio.sleep(0.01)

    async with asyncio.timeout(5):
        await gone()
    assert (await door.http.get("/v1/topics/TopicA/route")).status == 404
    assert (await door.http.get("/v1/topics/TopicC/route")).status == 200  # broker-b kept: re-registered
    # the same through the HTTP door: a registration there takes the broker away from the connection
    await b.request(codes.REGISTER_BROKER, register_ext(), register_body())
    r = await door.http.post("/v1/brokers/register", json={**BROKER, "topicConfigTable": {"TopicA": {}}})
    assert r.status == 200
    await b.close()
    async with asyncio.timeout(5):  # broker-b (owned by b) goes; broker-a (re-registered over HTTP) stays
        while (await door.http.get("/v1/topics/TopicC/route")).status == 200:
            await asyncio.sleep(0.01)
    assert (await door.http.get("/v1/topics/TopicA/route")).status == 200


async def test_a_registration_answered_to_nobody_does_not_make_its_close_unregister_the_broker(door):
    """Found by tests/robustness (worker-stop): a broker's registration on connection `a` timed out (the worker was
    paused), the broker closed `a` and registered through `b`; the worker, resuming, read the old request and the
    close together, applied the registration (so `a` owned the broker again) and then unregistered the broker for
    `a`'s close, while its registration through `b` stood acknowledged. A registration that finishes after its
    connection is gone was answered to nobody: the close leaves its broker alone."""
    a = await door.client()
    assert (await register(a)).code == SUCCESS
    (a_conn,) = door.server.connections
    b = await door.client()
    assert (await register(b)).code == SUCCESS  # `b` owns broker-a now
    register_real, closed_real = door.ns.register_broker, door.ns.connection_closed
    entered, applied = asyncio.Event(), asyncio.Event()

    async def read_with_the_close(*args, **kwargs):  # the old request is applied once `a` is gone
        entered.set()
        async with asyncio.timeout(5):
            while a_conn in door.server.connections:
                await asyncio.sleep(0.005)
        try:
            return await register_real(*args, **kwargs)
        finally:
            applied.set()

    async def close_after_it(*args, **kwargs):  # and before the close is handled (as Redis saw it)
        async with asyncio.timeout(5):
            await applied.wait()
        return await closed_real(*args, **kwargs)

    door.ns.register_broker, door.ns.connection_closed = read_with_the_close, close_after_it
    a.send(codes.REGISTER_BROKER, register_ext(), register_body())
    async with asyncio.timeout(5):
        await entered.wait()
    await a.close()
    async with asyncio.timeout(5):
        await applied.wait()
        while door.server.pending or any(t.get_coro().__name__ == "_forget" for t in door.server._tasks):
            await asyncio.sleep(0.01)  # the registration answered, the close handled
    door.ns.register_broker, door.ns.connection_closed = register_real, closed_real
    assert (await door.http.get("/v1/topics/TopicA/route")).status == 200
    assert (await b.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA"})).code == SUCCESS


async def test_idle_connections_close_and_unregister(make_door):
    door = await make_door(remoting_idle_s=1)
    c = await door.client()
    await register(c)
    async with asyncio.timeout(10):
        await c.closed.wait()
        while (await door.http.get("/v1/topics/TopicA/route")).status == 200:
            await asyncio.sleep(0.02)
    assert door.ns.metrics.remoting.closes["idle"] == 1


async def test_a_stopping_worker_closes_connections_without_unregistering(door):
    c = await door.client()
    await register(c)
    await door.server.stop(0.5)
    async with asyncio.timeout(5):
        await c.closed.wait()
    assert (await door.http.get("/v1/topics/TopicA/route")).status == 200


async def test_a_connection_past_its_in_flight_bound_gets_system_busy_at_once(make_door):
    door = await make_door(remoting_max_in_flight=1)
    c = await door.client()
    await register(c)
    first = c.send(codes.GET_BROKER_CLUSTER_INFO)
    second = c.send(codes.GET_BROKER_CLUSTER_INFO)  # same write burst: the first is still in progress
    assert (await c.reply_to(second)).code == SYSTEM_BUSY
    assert (await c.reply_to(first)).code == SUCCESS
    cached = await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA"})  # fill the cache
    hits = [c.send(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA"}) for _ in range(5)]
    assert cached.code == SUCCESS and [(await c.reply_to(o)).code for o in hits] == [SUCCESS] * 5  # no task needed


async def test_a_worker_with_its_requests_in_progress_stops_reading_and_answers_every_one(make_door):
    """Past remoting_max_pending a worker does not answer SYSTEM_BUSY: it stops reading the connections that send
    more (TCP backpressure) and reads on as requests are answered, first come first served."""
    door = await make_door(remoting_max_pending=1)
    a, b = await door.client(), await door.client()
    await register(a)
    sent = [(a, a.send(codes.GET_BROKER_CLUSTER_INFO)) for _ in range(3)]  # one write burst: three in progress
    sent += [(b, b.send(codes.GET_BROKER_CLUSTER_INFO)) for _ in range(2)]
    assert [(await conn.reply_to(o)).code for conn, o in sent] == [SUCCESS] * 5
    assert door.server.stats.waits >= 1 and not door.server.waiting and door.server.pending == 0
    assert (await a.request(codes.GET_BROKER_CLUSTER_INFO)).code == SUCCESS  # read again


async def test_metrics_count_requests_by_code_and_result(door):
    c = await door.client()
    await register(c)
    await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA"})
    await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "Nope"})
    text = (await (await door.http.get("/metrics")).text())
    assert 'namesrv_remoting_requests_total{code="105",request="GET_ROUTEINFO_BY_TOPIC",result="0"} 1.0' in text
    assert 'namesrv_remoting_requests_total{code="105",request="GET_ROUTEINFO_BY_TOPIC",result="17"} 1.0' in text
    assert 'namesrv_remoting_requests_total{code="103",request="REGISTER_BROKER",result="0"} 1.0' in text
    assert re.search(r"^namesrv_remoting_connections 1\.0$", text, re.M)


def test_the_hot_path_frame_is_the_codec_frame():
    from service.remoting.codec import RemotingCommand, encode, make_response
    from service.remoting.server import route_frame

    for opaque in (0, 1, 7, 2**31 - 1, -5):
        request = RemotingCommand(code=105, opaque=opaque, serialize_type="JSON")
        assert route_frame(opaque, b'{"x":1}') == encode(make_response(request, 0, body=b'{"x":1}'))


async def test_hot_path_and_general_path_answer_the_same(door):
    c = await door.client()
    await register(c)
    await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA"})  # fill the cache
    fast_before = door.ns.metrics.remoting.fast_routes
    for version in (121, 479):
        fast = await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA"}, version=version)
        slow = await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA", "lo": "x"}, version=version)
        binary = await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA"}, version=version,
                                 serialize="ROCKETMQ")
        assert fast.body == slow.body == binary.body and fast.code == slow.code == 0
    assert door.ns.metrics.remoting.fast_routes == fast_before + 2  # only the plain JSON requests took it


async def test_readiness_follows_the_remoting_listener(door):
    """service/server.py puts this check into /readyz: a worker whose remoting port is down is not ready."""
    assert door.server.not_listening() is None
    await door.server.stop(0.1)
    assert door.server.not_listening() == "remoting: stopping"


async def test_a_peer_that_never_reads_its_replies_is_no_longer_read(door):
    """Replies for a client that does not read do not pile up in the worker: past the transport's high-water mark
    the connection stops being read (its requests wait in the kernel and in the client), others go on."""
    import asyncio
    import socket

    from service.remoting.codec import RemotingCommand, encode

    c = await door.client()
    await register(c)
    await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA"})  # cached: answered in data_received
    frame = encode(RemotingCommand(code=105, opaque=9, ext_fields={"topic": "TopicA"}))
    sock = socket.create_connection(("127.0.0.1", door.port))  # a peer that writes and never reads
    sock.setblocking(False)
    burst = frame * 64
    deadline = asyncio.get_running_loop().time() + 5
    while not door.ns.metrics.remoting.paused and asyncio.get_running_loop().time() < deadline:
        try:  # write until the kernel pushes back
            sock.send(burst)
        except BlockingIOError:
            pass
        await asyncio.sleep(0)
    assert door.ns.metrics.remoting.paused >= 1
    conn = next(x for x in door.server.connections if x.transport.get_write_buffer_size() > 0)
    assert conn.transport.get_write_buffer_size() < 4 * 1024 * 1024  # bounded, not 200 000 replies
    other = await door.client()
    assert (await other.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA"})).code == SUCCESS
    sock.close()


async def test_a_connection_closing_while_redis_fails_over_still_unregisters_its_broker(make_door):
    """Redis unreachable when the broker's connection closes (a failover): the worker keeps trying and
    unregisters once Redis is back, rather than leaving the broker routed until the 120 s expiry."""
    import fakeredis

    redis = fakeredis.FakeServer()
    door = await make_door(redis_server=redis)
    a = await door.client()
    await register(a)
    redis.connected = False
    await a.close()
    await asyncio.sleep(1.5)
    redis.connected = True
    async with asyncio.timeout(5):
        while (await door.http.get("/v1/clusters/C1/brokers/broker-a")).status == 200 and \
                (await (await door.http.get("/v1/clusters/C1/brokers/broker-a")).json()
                 )["brokerMemberGroup"]["brokerAddrs"]:
            await asyncio.sleep(0.05)


async def test_past_the_pending_bound_only_connections_with_requests_in_progress_stop_being_read(make_door):
    """A connection whose requests are answered from the route cache (no task) keeps being read while others wait
    for the worker's requests in progress to drain."""
    door = await make_door(remoting_max_pending=1)
    busy, reader = await door.client(), await door.client()
    await register(busy)
    assert (await reader.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA"})).code == SUCCESS  # cached now
    sent = [busy.send(codes.GET_BROKER_CLUSTER_INFO) for _ in range(3)]  # past the bound: busy waits
    hits = [reader.send(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA"}) for _ in range(5)]
    assert [(await reader.reply_to(o)).code for o in hits] == [SUCCESS] * 5
    assert [(await busy.reply_to(o)).code for o in sent] == [SUCCESS] * 3
    assert not door.server.backlog and not door.server.waiting
