"""REGISTER_BROKER from a stock 5.x broker with compressedRegister=true: the body is zipped (Apache's own
RegisterBrokerBody.encode(true), tests/fixtures/register_body_5x_zipped.bin) while the header says
compressed=false. The native door takes it for what it is; a zlib stream that is no RegisterBrokerBody, or one
that inflates beyond the limit, is refused and writes nothing."""

from __future__ import annotations

import struct
import zlib

import pytest

from service.remoting import codes
from service.remoting.bodies import MAX_INFLATED, crc32_of
from tests.remoting.test_bodies import ZIPPED_5X
from tests.remoting.test_door import SUCCESS, SYSTEM_ERROR, register_ext

V5_5_0 = 513


def registrations(door, result: str) -> float:
    return door.ns.metrics.registrations.labels(result=result)._value.get()


async def send(client, body: bytes, version: int = V5_5_0):
    # what BrokerOuterAPI.registerBrokerAll sends: compressed=false, the CRC of the zipped bytes
    return await client.request(codes.REGISTER_BROKER, register_ext(compressed="false", bodyCrc32=crc32_of(body)),
                                body, version=version)


async def test_zipped_body_with_compressed_false_is_registered_and_then_unchanged(door):
    c = await door.client()
    first = await send(c, ZIPPED_5X)
    assert (first.code, first.remark) == (SUCCESS, None)
    route = await (await door.http.get("/v1/topics/TopicA/route")).json()
    assert route["queueDatas"] == [{"brokerName": "broker-a", "readQueueNums": 8, "writeQueueNums": 8, "perm": 6,
                                    "topicSysFlag": 0}]
    assert (await door.http.get("/v1/topics/%25RETRY%25group_a/route")).status == 200
    # the broker's periodic re-registration: the same bytes, taken on the O(1) unchanged path, answered alike
    again = await send(c, ZIPPED_5X)
    assert (again.code, again.ext_fields, again.body) == (first.code, first.ext_fields, first.body)
    assert registrations(door, "unchanged") == 1 and registrations(door, "ok") == 1


def _bomb() -> bytes:
    return zlib.compress(struct.pack(">i", 2) + b"{}" + bytes(MAX_INFLATED), 9)


@pytest.mark.parametrize("body", [
    b"\x78\xda garbage after a good zlib header",
    zlib.compress(b"hello, world"),
    ZIPPED_5X[:-40],
    pytest.param(_bomb(), id="zip-bomb"),
])
async def test_zlib_streams_that_are_no_register_body_are_refused_and_write_nothing(door, body):
    c = await door.client()
    before = await door.ns.store.version()
    r = await send(c, body)
    assert r.code == SYSTEM_ERROR and "is a zlib stream (header compressed=false)" in r.remark
    assert await door.ns.store.version() == before
    assert registrations(door, "unchanged") == 0
    r = await send(c, body)  # a refused body is never recorded: refused again, not taken as unchanged
    assert r.code == SYSTEM_ERROR and registrations(door, "unchanged") == 0
    assert (await door.http.get("/v1/topics/TopicA/route")).status == 404
