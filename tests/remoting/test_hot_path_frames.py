"""The native door's cached-route shortcut answers only frames the one decoder accepts: a header the decoder
refuses (`code: 105.0`, `language: [1]`, …) closes the connection whether or not the route is cached, and a frame
the shortcut answers decodes to the same route request the general path would serve."""

from __future__ import annotations

import asyncio
import struct

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.remoting import codes
from service.remoting.codec import BadFrame, decode_frame
from tests.remoting.test_door import register

GOOD = {"code": 105, "extFields": {"topic": "TopicA"}, "flag": 0, "language": "JAVA", "opaque": 7,
        "serializeTypeCurrentRPC": "JSON", "version": 479}
REFUSED = [  # each one field away from GOOD, each refused by the decoder
    {"code": 105.0}, {"language": [1]}, {"language": {"JAVA": 1}}, {"language": 1.5}, {"flag": 0.0},
    {"flag": []}, {"flag": False}, {"opaque": 7.0}, {"opaque": 2**31}, {"version": 479.0}, {"version": "479"},
    {"remark": 5}, {"remark": ["x"]}, {"extFields": {"topic": "TopicA", "acceptStandardJsonOnly": [1]}},
    {"extFields": {"topic": "TopicA", "acceptStandardJsonOnly": {"a": 1}}},
]


def frame(header: dict) -> bytes:
    raw = orjson.dumps(header)
    return struct.pack(">ii", 4 + len(raw), len(raw)) + raw


def fast(door, data: bytes) -> bytes | None:
    with memoryview(data) as view:
        return door.server.fast_route(view, 4, len(data))


@pytest.mark.parametrize("change", REFUSED, ids=[orjson.dumps(c).decode() for c in REFUSED])
async def test_a_frame_the_decoder_refuses_is_refused_with_the_route_cached(door, change):
    c = await door.client()
    await register(c)
    assert (await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA"})).code == 0  # cached now
    data = frame({**GOOD, **change})
    with pytest.raises(BadFrame):
        decode_frame(data)
    assert fast(door, data) is None
    errors = door.server.stats.frame_errors
    c.writer.write(data)
    async with asyncio.timeout(5):
        await c.closed.wait()  # closed as any undecodable frame: no reply
    assert not [o for o, f in c.pending.items() if f.done() and not f.exception() and o == GOOD["opaque"]]
    assert door.server.stats.frame_errors == errors + 1


scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**33, 2**33), st.floats(allow_nan=False,
                    allow_infinity=False), st.text(max_size=4), st.sampled_from(["JAVA", "CPP", "TopicA", "true"]))
values = st.one_of(scalars, st.lists(scalars, max_size=2), st.dictionaries(st.text(max_size=3), scalars, max_size=2))
ext_values = st.one_of(values, st.just("TopicA"), st.just("true"))


@st.composite
def headers(draw):
    header = dict(GOOD)
    for name in draw(st.sets(st.sampled_from(["code", "language", "flag", "opaque", "version", "remark"]))):
        header[name] = draw(st.one_of(values, st.just(105)))
    if draw(st.booleans()):
        keys = st.sampled_from(["topic", "acceptStandardJsonOnly", "AccessKey", "lo"])
        header["extFields"] = draw(st.one_of(values, st.dictionaries(keys, ext_values, max_size=3)))
    return header


async def test_the_shortcut_answers_only_what_the_decoder_accepts_as_a_plain_route_read(door):
    c = await door.client()
    await register(c)
    await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA"})

    @settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(headers())
    def check(header):
        data = frame(header)
        answered = fast(door, data)
        if answered is None:
            return
        cmd = decode_frame(data)  # raises if the shortcut answered a frame the decoder refuses
        assert (cmd.code, cmd.flag) == (codes.GET_ROUTEINFO_BY_TOPIC, 0)
        assert cmd.ext_fields.get("topic") == "TopicA" and set(cmd.ext_fields) <= {"topic", "acceptStandardJsonOnly"}
        assert decode_frame(answered).opaque == cmd.opaque

    check()
