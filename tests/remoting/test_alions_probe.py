"""The ali-ons harness (js/probe.js) against tests/remoting/fake_namesrv.py: a real third-party client on our codec.

Needs node and `npm ci` in tests/remoting/js; skipped locally without them, a failure in CI.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from service.remoting import bodies, signature
from tests.conftest import IN_CI, need
from tests.remoting.fake_namesrv import FakeNamesrv

JS = Path(__file__).parent / "js"
PROBE = JS / "probe.js"
BROKER = ["--cluster", "DefaultCluster", "--broker-name", "broker-a", "--broker-addr", "127.0.0.1:10911"]


@pytest.fixture(scope="module")
def node_ready() -> None:
    need("node")
    if not (JS / "node_modules" / "ali-ons").is_dir():
        message = f"ali-ons is not installed: run `npm ci` in {JS}"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture
async def fake(node_ready):
    server = await FakeNamesrv().start()
    yield server
    await server.stop()


async def probe(*args: str, expect_ok: bool = True) -> dict:
    proc = await asyncio.create_subprocess_exec(
        "node",
        str(PROBE),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=JS,
    )
    async with asyncio.timeout(30):
        out, err = await proc.communicate()
    lines = out.decode().splitlines()
    assert len(lines) == 1, f"probe printed {lines!r}; stderr: {err.decode()[-2000:]}"
    result = json.loads(lines[0])
    assert (proc.returncode == 0) is expect_ok, (result, err.decode()[-2000:])
    return result


async def test_route_through_alions_client_api(fake):
    result = await probe("route", "TopicA", "--namesrv", fake.address)
    # ali-ons parsed fastjson's bare keys ({0:"..."}) with its JSON2 parser; JSON then quotes them.
    broker = result["route"]["brokerDatas"][0]
    assert broker["brokerAddrs"] == {"0": "127.0.0.1:10911", "1": "127.0.0.1:10921"}
    assert result["route"]["queueDatas"][0]["writeQueueNums"] == 8
    (seen,) = fake.received
    cmd = seen.command
    assert (cmd.code, cmd.language, cmd.version, cmd.flag, cmd.serialize_type) == (105, "JAVA", 121, 0, "JSON")
    assert cmd.ext_fields == {"topic": "TopicA"} and cmd.body == b"" and cmd.remark is None
    assert not fake.frame_errors


async def test_route_of_unknown_topic_is_an_error(fake):
    result = await probe("route", "NoSuchTopic", "--namesrv", fake.address, expect_ok=False)
    assert result["code"] == 17 and "NoSuchTopic" in result["error"]


async def test_cluster_info(fake):
    result = await probe("cluster-info", "--namesrv", fake.address)
    assert result["request"]["code"] == 106 and result["response"]["code"] == 0
    assert result["response"]["body"]["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {"0": "127.0.0.1:10911"}
    assert fake.received[0].command.ext_fields == {}


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "compressed"])
async def test_register_broker(fake, compressed):
    args = [
        "register-broker",
        *BROKER,
        "--broker-id",
        "0",
        "--topics",
        "T1,T2",
        "--counter",
        "4",
        "--timestamp",
        "1700000000000",
        "--queues",
        "4",
        "--perm",
        "6",
        "--namesrv",
        fake.address,
    ]
    result = await probe(*args, *(["--compressed"] if compressed else []))
    assert result["response"]["code"] == 0
    (seen,) = fake.received
    cmd = seen.command
    assert cmd.code == 103 and cmd.version == 121
    # ali-ons sends numbers and booleans raw in the JSON header; the codec reads them as Java strings.
    assert cmd.ext_fields == {
        "brokerName": "broker-a",
        "brokerAddr": "127.0.0.1:10911",
        "clusterName": "DefaultCluster",
        "brokerId": "0",
        "haServerAddr": "127.0.0.1:10911",
        "compressed": "true" if compressed else "false",
        "bodyCrc32": str(bodies.crc32_of(cmd.body)),
    }
    assert seen.register_body["dataVersion"] == {"counter": 4, "stateVersion": 0, "timestamp": 1700000000000}
    assert sorted(seen.register_body["topicConfigTable"]) == ["T1", "T2"]
    conf = seen.register_body["topicConfigTable"]["T2"]
    assert (conf["readQueueNums"], conf["writeQueueNums"], conf["perm"], conf["topicFilterType"]) == (
        4,
        4,
        6,
        "SINGLE_TAG",
    )
    assert seen.register_body["filterServerList"] == []


async def test_register_broker_without_crc(fake):
    await probe("register-broker", *BROKER, "--broker-id", "1", "--topics", "T1", "--no-crc", "--namesrv", fake.address)
    assert fake.received[0].command.ext_fields["bodyCrc32"] == "0"


async def test_unregister_broker(fake):
    result = await probe("unregister-broker", *BROKER, "--broker-id", "2", "--namesrv", fake.address)
    assert result["response"]["code"] == 0
    assert fake.received[0].command.ext_fields == {
        "brokerName": "broker-a",
        "brokerAddr": "127.0.0.1:10911",
        "clusterName": "DefaultCluster",
        "brokerId": "2",
    }


async def test_heartbeat_is_oneway(fake):
    result = await probe("heartbeat", *BROKER, "--namesrv", fake.address)
    assert "response" not in result
    (seen,) = await fake.wait_for(1)
    assert seen.command.code == 904 and seen.command.flag == 2
    assert seen.command.ext_fields == {
        "brokerName": "broker-a",
        "brokerAddr": "127.0.0.1:10911",
        "clusterName": "DefaultCluster",
    }


async def test_query_data_version(fake):
    result = await probe(
        "heartbeat", *BROKER, "--query", "--counter", "9", "--timestamp", "5", "--namesrv", fake.address
    )
    assert result["response"]["extFields"] == {"changed": "true"}
    assert result["response"]["body"] == {"counter": 9, "stateVersion": 0, "timestamp": 5}
    assert fake.received[0].command.code == 322


async def test_kv_put_then_get(fake):
    await probe(
        "kv-put",
        "--namespace",
        "ORDER_TOPIC_CONFIG",
        "--key",
        "TopicA",
        "--value",
        "broker-a:4",
        "--namesrv",
        fake.address,
    )
    got = await probe("kv-get", "--namespace", "ORDER_TOPIC_CONFIG", "--key", "TopicA", "--namesrv", fake.address)
    assert got["response"]["code"] == 0 and got["response"]["extFields"] == {"value": "broker-a:4"}
    missing = await probe("kv-get", "--namespace", "N", "--key", "nope", "--namesrv", fake.address)
    assert missing["response"]["code"] == 22
    assert missing["response"]["remark"] == "No config item, Namespace: N Key: nope"


async def test_raw_unknown_code(fake):
    result = await probe("raw", "--code", "9999", "--ext", "a=b", "--body", "héllo", "--namesrv", fake.address)
    assert result["response"] == {
        "code": 3,
        "opaque": result["request"]["opaque"],
        "flag": 1,
        "remark": " request type 9999 not supported",
        "extFields": {},
        "body": None,
    }
    assert fake.received[0].command.body == "héllo".encode()


async def test_signed_requests_verify(fake):
    fake.secrets = {"probe-ak": "probe-secret-ü"}
    auth = ["--access-key", "probe-ak", "--secret", "probe-secret-ü", "--namesrv", fake.address]
    await probe("route", "TopicA", *auth)
    await probe("register-broker", *BROKER, "--broker-id", "0", "--topics", "T1", "--compressed", *auth)
    await probe(
        "raw", "--code", "100", "--ext", "namespace=ns😀", "--ext", "key=k", "--ext", "value=v", "--body", "bödy", *auth
    )
    assert [r.signature_ok for r in fake.received] == [True, True, True]
    for seen in fake.received:
        ext = seen.command.ext_fields
        assert ext["AccessKey"] == "probe-ak" and ext["OnsChannel"] == "ALIYUN"
        assert signature.verify(ext, seen.command.body, "probe-secret-ü")
    wrong = await probe(
        "route", "TopicA", "--access-key", "probe-ak", "--secret", "nope", "--namesrv", fake.address, expect_ok=False
    )
    assert wrong["code"] == 16 and fake.received[-1].signature_ok is False
    unsigned = await probe("route", "TopicA", "--namesrv", fake.address, expect_ok=False)
    assert unsigned["code"] == 16 and fake.received[-1].signature_ok is None


@pytest.mark.parametrize(
    "exts,body",
    [
        (["topic=TopicA"], None),
        (["namespace=ns", "key=clé", "value=v"], '{"counter":1}'),
        (["\uff71=1", "\U0001f600=2", "a=3", "Z=", "sp ace=x y"], "\U0001f600 body"),
    ],
)
async def test_offline_signature_matches_python(node_ready, exts, body):
    args = ["sign", "--access-key", "ak-\u00e9", "--secret", "s\u00e9cret"]
    for e in exts:
        args += ["--ext", e]
    if body is not None:
        args += ["--body", body]
    ext = (await probe(*args))["extFields"]
    raw = body.encode() if body is not None else b""
    assert signature.verify(ext, raw, "s\u00e9cret")
    plain = {k: v for k, v in ext.items() if k not in ("Signature", "AccessKey")}
    assert signature.sign(plain, raw, "ak-\u00e9", "s\u00e9cret") == ext


async def test_probe_refuses_non_loopback_addresses(node_ready):
    result = await probe("route", "TopicA", "--namesrv", "10.0.0.1:9876", expect_ok=False)
    assert "loopback" in result["error"]


async def test_probe_against_a_closed_port_fails_cleanly(node_ready):
    server = await FakeNamesrv().start()
    address = server.address
    await server.stop()
    result = await probe("route", "TopicA", "--namesrv", address, "--timeout", "1000", expect_ok=False)
    assert result["error"]


def test_package_pins_an_exact_alions_version():
    version = json.loads((JS / "package.json").read_text())["dependencies"]["ali-ons"]
    assert version.replace(".", "").isdigit(), f"pin an exact version, not {version!r}"
    lock = json.loads((JS / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/ali-ons"]["version"] == version
