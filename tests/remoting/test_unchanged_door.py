"""Both doors take an unchanged registration (the same bytes as the broker's last one) without decoding it and
answer it as a full one; anything that could change the answer sends it in full."""

from __future__ import annotations

import struct
import zlib

import orjson

from service.remoting import codes
from service.remoting.bodies import crc32_of
from tests.remoting.test_door import SUCCESS, register_body, register_ext


def registrations(door, result: str) -> float:
    return door.ns.metrics.registrations.labels(result=result)._value.get()


def compressed_body(counter: int = 3) -> bytes:
    """RegisterBrokerBody.encode(true) of a 5.x broker: zipped (the header may say compressed=false)."""
    def chunk(text: str) -> bytes:
        raw = text.encode()
        return struct.pack(">i", len(raw)) + raw

    raw = chunk(f'{{"counter":{counter},"stateVersion":0,"timestamp":5}}') + struct.pack(">i", 2)
    raw += chunk("ZTopic 4 4 6 SINGLE_TAG {}") + chunk("YTopic 2 2 6 SINGLE_TAG {}") + chunk("[]")
    raw += struct.pack(">i", 0)  # no TopicQueueMappingInfo entries (5.x)
    return zlib.compress(raw, 9)


async def test_native_same_bytes_are_unchanged_and_answer_alike(door):
    c = await door.client()
    master = await c.request(codes.REGISTER_BROKER, register_ext(), register_body())
    assert master.code == SUCCESS
    ext = register_ext(brokerId=1, brokerAddr="10.0.0.2:10911", haServerAddr="10.0.0.2:10912")
    first = await c.request(codes.REGISTER_BROKER, ext, register_body())
    assert registrations(door, "unchanged") == 0
    await door.ns.store.kv_put("ORDER_TOPIC_CONFIG", "TopicA", "broker-a:8")
    second = await c.request(codes.REGISTER_BROKER, ext, register_body())
    assert registrations(door, "unchanged") == 1
    assert second.code == SUCCESS and second.ext_fields == first.ext_fields
    assert first.ext_fields["masterAddr"] == "10.0.0.1:10911"
    assert orjson.loads(second.body) == {"table": {"TopicA": "broker-a:8"}}  # the KV as it is now
    # another header (here the HA address) is another registration: in full
    await c.request(codes.REGISTER_BROKER, {**ext, "haServerAddr": "10.0.0.2:10999"}, register_body())
    assert registrations(door, "unchanged") == 1


async def test_native_compressed_form_is_unchanged_too(door):
    c = await door.client()
    body = compressed_body()
    for _ in range(3):
        r = await c.request(codes.REGISTER_BROKER, register_ext(compressed="true", bodyCrc32=crc32_of(body)), body,
                            version=493)
        assert r.code == SUCCESS
    assert registrations(door, "unchanged") == 2
    route = await (await door.http.get("/v1/topics/ZTopic/route")).json()
    assert route["queueDatas"][0]["writeQueueNums"] == 4


async def test_native_topic_deleted_meanwhile_comes_back(door):
    c = await door.client()
    await c.request(codes.REGISTER_BROKER, register_ext(), register_body())
    await door.ns.store.delete_topic("TopicA")
    await c.request(codes.REGISTER_BROKER, register_ext(), register_body())
    assert registrations(door, "unchanged") == 0
    assert (await door.http.get("/v1/topics/TopicA/route")).status == 200


def http_body(cluster: str = "C1") -> bytes:
    return orjson.dumps({"clusterName": cluster, "brokerName": "broker-h", "brokerId": 0,
                         "brokerAddr": "10.0.0.7:10911", "haServerAddr": "10.0.0.7:10912",
                         "topicConfigTable": {"TopicH": {"readQueueNums": 8, "writeQueueNums": 8, "perm": 6}}})


async def test_http_same_bytes_are_unchanged_and_answer_alike(door):
    post = door.http.post
    first = await post("/v1/brokers/register", data=http_body(), headers={"Content-Type": "application/json"})
    second = await post("/v1/brokers/register", data=http_body(), headers={"Content-Type": "application/json"})
    assert first.status == second.status == 200
    assert await first.json() == await second.json()
    assert registrations(door, "unchanged") == 1


async def test_http_credential_of_another_cluster_is_refused_not_unchanged(make_door):
    door = await make_door(broker_tokens="C1:tok-c1-123456,C2:tok-c2-123456", admin_token="admin-token-123456")
    post = door.http.post

    def as_(token: str):
        return {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}

    assert (await post("/v1/brokers/register", data=http_body(), headers=as_("tok-c1-123456"))).status == 200
    refused = await post("/v1/brokers/register", data=http_body(), headers=as_("tok-c2-123456"))
    assert refused.status == 403
    assert registrations(door, "unchanged") == 0
    assert (await post("/v1/brokers/register", data=http_body(), headers=as_("tok-c1-123456"))).status == 200
    assert registrations(door, "unchanged") == 1



async def test_native_zipped_body_sent_as_not_compressed(door):
    """Stock 5.x brokers zip the body but send compressed=false: it is decoded as zipped (docs/deviations.md),
    and the second sending is taken as unchanged and answers as the first."""
    c = await door.client()
    body = compressed_body()
    ext = register_ext(compressed="false", bodyCrc32=crc32_of(body))
    first, second = [await c.request(codes.REGISTER_BROKER, ext, body, version=493) for _ in range(2)]
    assert (first.code, first.remark) == (second.code, second.remark) == (SUCCESS, None)
    assert first.ext_fields == second.ext_fields
    assert registrations(door, "unchanged") == 1


async def test_the_same_bytes_with_another_crc_are_still_checked(door):
    """The connection's memo spares the CRC only for the very bodyCrc32 the same bytes were verified against."""
    c = await door.client()
    body = compressed_body()
    ok = await c.request(codes.REGISTER_BROKER, register_ext(compressed="true", bodyCrc32=crc32_of(body)), body,
                         version=493)
    assert ok.code == SUCCESS
    bad = await c.request(codes.REGISTER_BROKER, register_ext(compressed="true", bodyCrc32=crc32_of(body) ^ 1), body,
                          version=493)
    assert (bad.code, bad.remark) == (1, "crc32 not match")
    again = await c.request(codes.REGISTER_BROKER, register_ext(compressed="true", bodyCrc32=crc32_of(body)), body,
                            version=493)
    assert again.code == SUCCESS and registrations(door, "unchanged") == 1


def test_memo_gives_the_digest_of_the_bytes():
    from service.core.bodies import RegistrationMemo, digest_key, registration_digest

    memo = RegistrationMemo()
    a, b = compressed_body(1), compressed_body(2)
    for body in (a, a, b, a):
        assert memo.digest_of(digest_key(b"k", 5), body) == registration_digest(b"k", 5, body)
    assert memo.digest_of(digest_key(b"other", 5), a) == registration_digest(b"other", 5, a)
    big = b"x" * (RegistrationMemo.MAX_BYTES + 1)
    assert memo.digest_of(digest_key(b"k", 5), big) == registration_digest(b"k", 5, big)
    assert memo.body == a  # too big to keep: the last kept body stays
