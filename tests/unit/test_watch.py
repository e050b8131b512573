"""Conditional reads, long-polls and route streams over HTTP, through the production server on fakeredis: the
ETag and 304, `?wait=` answering on a change (any write, any door: they all publish the same events), the
watcher caps (429) and the route stream's events, resume and shutdown."""

from __future__ import annotations

import asyncio
import socket
import time

import orjson
import pytest

from service.http.handlers import NS
from tests.unit.conftest import master

TOPIC_A = {"TopicA": {"readQueueNums": 8, "writeQueueNums": 8, "perm": 6, "topicSysFlag": 0}}


def topics(queues: int, *names: str) -> dict:
    return {n: {"readQueueNums": queues, "writeQueueNums": queues, "perm": 6, "topicSysFlag": 0}
            for n in names or ("TopicA",)}


async def until(predicate, what: str, deadline_s: float = 5.0):
    end = time.monotonic() + deadline_s
    while not predicate():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


async def eventually(get, accept, what: str, deadline_s: float = 5.0):
    """`await get()` until `accept(answer)`: a worker's cache sees a write when its change event arrives."""
    end = time.monotonic() + deadline_s
    while True:
        answer = await get()
        if await accept(answer):
            return answer
        assert time.monotonic() < end, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


def watchers(client) -> int:
    return len(client.app[NS].routes.feed)


_versions = iter(range(1, 1_000_000))


async def register(client, queues: int, *names: str, **extra) -> None:
    """A registration with a new data version (an unchanged version keeps the broker's old topic config)."""
    extra.setdefault("dataVersion", {"timestamp": 1, "counter": next(_versions), "stateVersion": 0})
    resp = await client.post("/v1/brokers/register", json=master(topics=topics(queues, *names), **extra))
    assert resp.status == 200, await resp.text()


async def test_route_and_cluster_info_carry_an_etag_and_answer_304(client):
    await register(client, 8)
    first = await client.get("/v1/topics/TopicA/route")
    tag = first.headers["ETag"]
    assert first.headers["Cache-Control"] == "no-cache"
    again = await client.get("/v1/topics/TopicA/route", headers={"If-None-Match": tag})
    assert again.status == 304 and await again.read() == b"" and again.headers["ETag"] == tag
    await register(client, 4)
    changed = await eventually(lambda: client.get("/v1/topics/TopicA/route", headers={"If-None-Match": tag}),
                               lambda r: _status(r, 200), "the change")
    assert changed.headers["ETag"] != tag
    assert (await changed.json())["queueDatas"][0]["readQueueNums"] == 4

    info = await client.get("/v1/cluster-info")
    itag = info.headers["ETag"]
    assert info.headers["Cache-Control"] == "no-cache"
    assert (await client.get("/v1/cluster-info", headers={"If-None-Match": itag})).status == 304
    await register(client, 4, "TopicA", addr="10.0.0.2:10911", name="broker-b")
    assert (await client.get("/v1/cluster-info", headers={"If-None-Match": itag})).status == 200


async def _status(resp, status: int) -> bool:
    return resp.status == status


async def test_zone_views_have_their_own_tags(client):
    await register(client, 8, zoneName="z1")
    plain = await client.get("/v1/topics/TopicA/route")
    zoned = await client.get("/v1/topics/TopicA/route?zoneName=z2&zoneMode=true")
    assert zoned.status == 200 and zoned.headers["ETag"] != plain.headers["ETag"]
    assert (await client.get("/v1/topics/TopicA/route?zoneName=z2&zoneMode=true",
                             headers={"If-None-Match": zoned.headers["ETag"]})).status == 304


async def test_long_poll_answers_when_the_route_changes(client):
    await register(client, 8)
    tag = (await client.get("/v1/topics/TopicA/route")).headers["ETag"]
    poll = asyncio.create_task(client.get("/v1/topics/TopicA/route?wait=30s", headers={"If-None-Match": tag}))
    await until(lambda: watchers(client) == 1, "the long-poll to wait")
    assert not poll.done()
    await register(client, 2)
    resp = await poll
    assert resp.status == 200 and resp.headers["ETag"] != tag
    assert (await resp.json())["queueDatas"][0]["readQueueNums"] == 2
    assert watchers(client) == 0


async def test_long_poll_times_out_with_304_and_answers_a_stale_tag_at_once(client):
    await register(client, 8)
    tag = (await client.get("/v1/topics/TopicA/route")).headers["ETag"]
    resp = await client.get("/v1/topics/TopicA/route?wait=50ms", headers={"If-None-Match": tag})
    assert resp.status == 304 and resp.headers["ETag"] == tag and await resp.read() == b""
    stale = await client.get("/v1/topics/TopicA/route?wait=60s", headers={"If-None-Match": '"old"'})
    assert stale.status == 200 and stale.headers["ETag"] == tag


async def test_long_poll_sees_a_topic_deleted_and_created(client):
    await register(client, 8)
    tag = (await client.get("/v1/topics/TopicA/route")).headers["ETag"]
    poll = asyncio.create_task(client.get("/v1/topics/TopicA/route?wait=30s", headers={"If-None-Match": tag}))
    await until(lambda: watchers(client) == 1, "the long-poll to wait")
    assert (await client.delete("/v1/topics/TopicA")).status == 200
    gone = await poll
    assert gone.status == 404 and (await gone.json())["code"] == "TOPIC_NOT_EXIST"
    # waiting for it to appear: the absent state's tag
    poll = asyncio.create_task(client.get("/v1/topics/TopicA/route?wait=30s",
                                          headers={"If-None-Match": '"absent"'}))
    await until(lambda: watchers(client) == 1, "the long-poll to wait")
    await register(client, 3)
    back = await poll
    assert back.status == 200 and (await back.json())["queueDatas"][0]["writeQueueNums"] == 3


async def test_long_poll_sees_an_unregistration(client):
    await register(client, 8)
    tag = (await client.get("/v1/topics/TopicA/route")).headers["ETag"]
    poll = asyncio.create_task(client.get("/v1/topics/TopicA/route?wait=30s", headers={"If-None-Match": tag}))
    await until(lambda: watchers(client) == 1, "the long-poll to wait")
    body = {k: master()[k] for k in ("clusterName", "brokerName", "brokerId", "brokerAddr")}
    assert (await client.post("/v1/brokers/unregister", json=body)).status == 200
    assert (await poll).status == 404


@pytest.mark.parametrize("wait", ["0", "-1s", "61s", "forever", "nan", "1h", ""])
async def test_bad_waits_are_refused(client, wait):
    resp = await client.get(f"/v1/topics/TopicA/route?wait={wait}", headers={"If-None-Match": '"x"'})
    assert resp.status == 400 and (await resp.json())["code"] == "INVALID_ARGUMENT"
    assert watchers(client) == 0


async def test_watchers_are_capped_per_client_and_per_worker(make_client):
    client = await make_client(watch_max_per_client=2, watch_max_per_worker=3)
    await register(client, 8)
    tag = (await client.get("/v1/topics/TopicA/route")).headers["ETag"]
    polls = [asyncio.create_task(client.get("/v1/topics/TopicA/route?wait=30s", headers={"If-None-Match": tag}))
             for _ in range(2)]
    await until(lambda: watchers(client) == 2, "two long-polls to wait")
    refused = await client.get("/v1/topics/TopicA/route?wait=30s", headers={"If-None-Match": tag})
    assert refused.status == 429
    err = await refused.json()
    assert err["code"] == "TOO_MANY_WATCHERS" and "NAMESRV_WATCH_MAX_PER_CLIENT" in err["message"]
    stream = await client.get("/v1/watch?topics=TopicA")
    assert stream.status == 429
    feed = client.app[NS].routes.feed
    other = feed.open(("X",), "10.9.9.9", 3, 2)  # a third watcher from another address fills the worker
    with pytest.raises(Exception, match="NAMESRV_WATCH_MAX_PER_WORKER"):
        feed.open(("X",), "10.9.9.8", 3, 2)
    feed.close(other)
    await register(client, 1)
    assert [r.status for r in await asyncio.gather(*polls)] == [200, 200]
    metrics = await (await client.get("/metrics")).text()
    assert "namesrv_watch_refused_total 3.0" in metrics


async def read_events(resp, count: int, deadline_s: float = 5.0) -> list[dict]:
    """The next `count` SSE events (comments skipped) of a stream: {"id", "event", "data"}."""
    events: list[dict] = []
    current: dict = {}
    async with asyncio.timeout(deadline_s):
        while len(events) < count:
            line = (await resp.content.readline()).decode()
            assert line, "the stream ended"
            line = line.rstrip("\n")
            if not line:
                if "event" in current:
                    events.append(current)
                current = {}
            elif not line.startswith(":"):
                field, _, value = line.partition(": ")
                current[field] = orjson.loads(value) if field == "data" else value
    return events


async def test_a_stream_sends_current_routes_then_every_change_in_order(client):
    await register(client, 8, "TopicA", "TopicB")
    resp = await client.get("/v1/watch?topics=TopicA,TopicB,TopicC")
    assert resp.status == 200 and resp.headers["Content-Type"] == "text/event-stream"
    first = await read_events(resp, 3)
    assert [e["data"]["topic"] for e in first] == ["TopicA", "TopicB", "TopicC"]
    assert first[0]["data"]["route"]["queueDatas"][0]["readQueueNums"] == 8
    assert first[2]["data"]["route"] is None and first[2]["data"]["etag"] == '"absent"'
    tag_a = (await client.get("/v1/topics/TopicA/route")).headers["ETag"]
    assert first[0]["data"]["etag"] == tag_a and first[0]["event"] == "route"
    ids = [int(e["id"].split(":")[0]) for e in first]
    assert ids == [1, 2, 3]

    seen = []
    for queues in (4, 2, 1):  # one change at a time: each must arrive, in order
        await register(client, queues, "TopicA", "TopicB")
        events = await read_events(resp, 2)
        seen += [(e["data"]["topic"], e["data"]["route"]["queueDatas"][0]["readQueueNums"]) for e in events]
        ids += [int(e["id"].split(":")[0]) for e in events]
    assert sorted(seen[:2]) == [("TopicA", 4), ("TopicB", 4)]
    assert sorted(seen[2:4]) == [("TopicA", 2), ("TopicB", 2)] and sorted(seen[4:]) == [("TopicA", 1), ("TopicB", 1)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    await register(client, 1, "TopicA", "TopicC")  # TopicB stays (no deleteTopicWithBrokerRegistration)
    created = await read_events(resp, 1)
    assert created[0]["data"]["topic"] == "TopicC" and created[0]["data"]["route"] is not None
    assert (await client.delete("/v1/topics/TopicA")).status == 200
    deleted = await read_events(resp, 1)
    assert deleted[0]["data"] == {"topic": "TopicA", "etag": '"absent"', "route": None}
    resp.close()


async def test_last_event_id_resumes_with_what_changed_only(client):
    await register(client, 8, "TopicA", "TopicB")
    resp = await client.get("/v1/watch?topics=TopicA,TopicB")
    first = await read_events(resp, 2)
    last_id = first[-1]["id"]
    resp.close()
    await register(client, 4, "TopicA")  # TopicB keeps its 8 queues (no deleteTopicWithBrokerRegistration)
    tag_a = (await eventually(lambda: client.get("/v1/topics/TopicA/route"),
                              lambda r: _changed(r, first[0]["data"]["etag"]), "the change")).headers["ETag"]
    again = await client.get("/v1/watch?topics=TopicA,TopicB", headers={"Last-Event-ID": last_id})
    events = await read_events(again, 1)
    assert events[0]["data"]["etag"] == tag_a
    assert int(events[0]["id"].split(":")[0]) == int(last_id.split(":")[0]) + 1
    assert events[0]["data"]["topic"] == "TopicA"
    # TopicB was not sent again: the next event is its next change
    await register(client, 3, "TopicA", "TopicB")
    following = await read_events(again, 2)
    assert {(e["data"]["topic"], e["data"]["route"]["queueDatas"][0]["readQueueNums"]) for e in following} == {
        ("TopicA", 3), ("TopicB", 3)}
    again.close()
    fresh = await client.get("/v1/watch?topics=TopicA,TopicB", headers={"Last-Event-ID": "garbage"})
    assert len(await read_events(fresh, 2)) == 2  # a mangled id resumes nothing: everything again
    fresh.close()


async def test_streams_of_a_topic_get_the_identical_event(client):
    await register(client, 8)
    a = await client.get("/v1/watch?topics=TopicA")
    b = await client.get("/v1/watch?topics=TopicA")
    first = await read_events(a, 1)
    assert await read_events(b, 1) == first
    resumed = await client.get("/v1/watch?topics=TopicA", headers={"Last-Event-ID": "41:old"})
    assert (await read_events(resumed, 1))[0]["id"] == "42:" + first[0]["data"]["etag"].strip('"')
    await register(client, 4)
    changed = await read_events(a, 1)
    assert changed[0]["id"].startswith("2:") and changed[0]["data"]["route"]["queueDatas"][0]["readQueueNums"] == 4
    assert await read_events(b, 1) == changed
    other = (await read_events(resumed, 1))[0]
    assert other["data"] == changed[0]["data"] and other["id"] == "43:" + changed[0]["id"].split(":")[1]
    for resp in (a, b, resumed):
        resp.close()


async def test_a_client_that_does_not_read_is_dropped_and_the_others_go_on(client, monkeypatch):
    monkeypatch.setattr("service.core.watch.STREAM_BUFFER_MAX", 0)  # dropped as soon as the kernel takes no more
    names = [f"T{i}" for i in range(60)]
    await register(client, 8, *names)
    fast = await client.get("/v1/watch?topics=T0")
    await read_events(fast, 1)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (client.server.host, client.server.port))
    reader, writer = await asyncio.open_connection(sock=sock)
    writer.write(f"GET /v1/watch?topics={','.join(names)} HTTP/1.1\r\nHost: t\r\n\r\n".encode())  # never read
    feed = client.app[NS].routes.feed
    await until(lambda: watchers(client) == 2, "the slow stream to open")
    slow = next(s for s in feed._streams if len(s.topics) == len(names))
    slow.transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    for queues in [4, 8] * 10:
        await register(client, queues, *names)
        event = (await read_events(fast, 1))[0]  # every change reaches the reading client, whatever the other does
        assert event["data"]["route"]["queueDatas"][0]["readQueueNums"] == queues
        if feed.dropped:
            break
    assert feed.dropped == 1 and watchers(client) == 1
    metrics = await (await client.get("/metrics")).text()
    assert "namesrv_watch_dropped_total 1.0" in metrics
    fanouts = next(line for line in metrics.splitlines() if line.startswith("namesrv_watch_fanout_seconds_count"))
    assert float(fanouts.split()[-1]) >= 1  # every change's fan-out is timed
    async with asyncio.timeout(5):  # the dropped client's connection is closed (it resumes with Last-Event-ID)
        try:
            while await reader.read(65536):
                pass
        except ConnectionResetError:
            pass
    writer.close()
    fast.close()


async def _changed(resp, old_tag: str) -> bool:
    return resp.status == 200 and resp.headers["ETag"] != old_tag


async def test_idle_streams_get_keep_alive_comments(make_client):
    client = await make_client(watch_keepalive_s=0.05)
    resp = await client.get("/v1/watch?topics=TopicA")
    await read_events(resp, 1)
    async with asyncio.timeout(5):
        while (await resp.content.readline()) != b": keep-alive\n":
            pass
    resp.close()


async def test_shutdown_ends_streams_and_answers_long_polls(client):
    await register(client, 8)
    tag = (await client.get("/v1/topics/TopicA/route")).headers["ETag"]
    resp = await client.get("/v1/watch?topics=TopicA")
    await read_events(resp, 1)
    poll = asyncio.create_task(client.get("/v1/topics/TopicA/route?wait=30s", headers={"If-None-Match": tag}))
    await until(lambda: watchers(client) == 2, "the long-poll to wait")
    client.app[NS].routes.feed.shutdown()
    async with asyncio.timeout(5):
        rest = await resp.content.read()  # the stream ends
    assert b"shutting down" in rest
    answered = await poll
    assert answered.status == 304 and answered.headers.get("Connection", "").lower() == "close"
    refused = await client.get("/v1/watch?topics=TopicA")
    assert refused.status == 503


@pytest.mark.parametrize("query", ["", "?topics=", "?topics=bad%20name", "?topics=" + ",".join(
    f"T{i}" for i in range(101))])
async def test_bad_streams_are_refused(client, query):
    resp = await client.get("/v1/watch" + query)
    assert resp.status == 400 and (await resp.json())["code"] == "INVALID_ARGUMENT"


async def test_streams_need_the_read_token(make_client):
    secured = await make_client(read_token="read-token-1234567")
    assert (await secured.get("/v1/watch?topics=TopicA")).status == 401
    ok = await secured.get("/v1/watch?topics=TopicA", headers={"Authorization": "Bearer read-token-1234567"})
    assert ok.status == 200 and (await read_events(ok, 1))[0]["data"]["route"] is None
    ok.close()
