"""Auth on the native door, the same decisions as HTTP: ACL signatures (AccessKey = a cluster of
NAMESRV_BROKER_TOKENS, `admin` or `read`), trusted networks, TLS client certificates naming a cluster, and the
cross-cluster guard. Every refusal is NO_PERMISSION and writes nothing."""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

import pytest

from service.remoting import codes, signature
from tests.conftest import need
from tests.remoting.conftest import ADMIN, BROKER_C1, READ
from tests.remoting.test_door import BROKER, register_body, register_ext

SUCCESS, NO_PERMISSION, TOPIC_NOT_EXIST = 0, 16, 17
SECURED = {"admin_token": ADMIN, "broker_tokens": f"C1:{BROKER_C1},C2:broker-c2-token-12"}


def signed(ext, body, key, secret):
    return signature.sign({k: str(v) for k, v in ext.items()}, body, key, secret)


async def state(door):
    return await door.ns.store.version(), sorted(await door.ns.store.redis.keys("*"))


async def test_signed_registration_only_into_its_cluster(make_door):
    door = await make_door(**SECURED)
    c = await door.client()
    body = register_body()
    before = await state(door)
    for ext in (register_ext(), signed(register_ext(clusterName="C2"), body, "C1", BROKER_C1),
                signed(register_ext(), body, "C1", "wrong-secret-1234"), signed(register_ext(), body, "C9", "x" * 12),
                {**register_ext(), "AccessKey": "C1"}):
        r = await c.request(codes.REGISTER_BROKER, ext, body)
        assert r.code == NO_PERMISSION, (ext, r.remark)
    assert await state(door) == before
    r = await c.request(codes.REGISTER_BROKER, signed(register_ext(), body, "C1", BROKER_C1), body)
    assert r.code == SUCCESS, r.remark
    # a tampered body no longer matches its signature
    ext = signed(register_ext(), body, "C1", BROKER_C1)
    r = await c.request(codes.REGISTER_BROKER, ext, register_body({"Evil": 8, "TopicA": 8}))
    assert r.code == NO_PERMISSION


async def test_admin_operations_need_the_admin_key(make_door):
    door = await make_door(**SECURED)
    c = await door.client()
    await c.request(codes.REGISTER_BROKER, signed(register_ext(), register_body(), "C1", BROKER_C1), register_body())
    wipe = {"brokerName": "broker-a"}
    for ext in (wipe, signed(wipe, b"", "C1", BROKER_C1)):
        assert (await c.request(codes.WIPE_WRITE_PERM_OF_BROKER, ext)).code == NO_PERMISSION
    r = await c.request(codes.WIPE_WRITE_PERM_OF_BROKER, signed(wipe, b"", "admin", ADMIN))
    assert (r.code, r.ext_fields) == (SUCCESS, {"wipeTopicCount": "2"})
    r = await c.request(codes.UPDATE_NAMESRV_CONFIG, signed({}, b"enableTopicList=false", "C1", BROKER_C1),
                        b"enableTopicList=false")
    assert r.code == NO_PERMISSION
    assert (await c.request(codes.GET_NAMESRV_CONFIG)).code == NO_PERMISSION
    body = (await c.request(codes.GET_NAMESRV_CONFIG, signed({}, b"", "admin", ADMIN))).body.decode()
    assert "adminToken=***" in body and ADMIN not in body and BROKER_C1 not in body


async def test_reads_follow_the_read_token_rule(make_door):
    open_reads = await make_door(**SECURED)
    c = await open_reads.client()
    assert (await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})).code == TOPIC_NOT_EXIST
    closed = await make_door(**SECURED, read_token=READ)
    c = await closed.client()
    assert (await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})).code == NO_PERMISSION
    assert (await c.request(codes.GET_BROKER_CLUSTER_INFO)).code == NO_PERMISSION
    r = await c.request(codes.GET_ROUTEINFO_BY_TOPIC, signed({"topic": "T"}, b"", "read", READ))
    assert r.code == TOPIC_NOT_EXIST
    r = await c.request(codes.GET_ROUTEINFO_BY_TOPIC, signed({"topic": "T"}, b"", "C1", BROKER_C1))
    assert r.code == TOPIC_NOT_EXIST  # a broker may read


async def test_an_empty_access_key_is_anonymous_not_a_failed_login(make_door):
    # The RocketMQ C++ client sends AccessKey "" and a Signature (keyed with its empty secret) on every call.
    def cpp(ext, body=b""):
        return {**{k: str(v) for k, v in ext.items()}, "AccessKey": "", "OnsChannel": "ALIYUN",
                "Signature": "dGhlIEMrKyBjbGllbnQncyBlbXB0eQ=="}

    door = await make_door(**SECURED)
    c = await door.client()
    r = await c.request(codes.GET_ROUTEINFO_BY_TOPIC, cpp({"topic": "T"}))
    assert r.code == TOPIC_NOT_EXIST, r.remark  # reads are open: no read token is set
    assert (await c.request(codes.GET_BROKER_CLUSTER_INFO, cpp({}))).code == SUCCESS
    before = await state(door)
    r = await c.request(codes.REGISTER_BROKER, cpp(register_ext()), register_body())
    assert r.code == NO_PERMISSION and "needs a broker credential" in r.remark
    assert (await c.request(codes.WIPE_WRITE_PERM_OF_BROKER, cpp({"brokerName": "b"}))).code == NO_PERMISSION
    assert await state(door) == before
    closed = await make_door(**SECURED, read_token=READ)
    c = await closed.client()
    assert (await c.request(codes.GET_ROUTEINFO_BY_TOPIC, cpp({"topic": "T"}))).code == NO_PERMISSION


async def test_a_signed_time_bounds_replays_and_stock_signatures_still_pass(make_door):
    import time

    door = await make_door(**SECURED)
    c = await door.client()
    wipe = {"brokerName": "broker-a"}
    now_ms = int(time.time() * 1000)
    stock = signed(wipe, b"", "admin", ADMIN)  # what AclClientRPCHook sends: no time at all
    assert (await c.request(codes.WIPE_WRITE_PERM_OF_BROKER, stock)).code == SUCCESS
    fresh = signed({**wipe, "SignedAt": str(now_ms)}, b"", "admin", ADMIN)
    assert (await c.request(codes.WIPE_WRITE_PERM_OF_BROKER, fresh)).code == SUCCESS
    for stale in (now_ms - 301_000, now_ms + 301_000):  # captured and sent again 5 minutes later (or a bad clock)
        r = await c.request(codes.WIPE_WRITE_PERM_OF_BROKER, signed({**wipe, "SignedAt": str(stale)}, b"", "admin",
                                                                    ADMIN))
        assert r.code == NO_PERMISSION and "window" in r.remark
    moved = {**fresh, "SignedAt": str(now_ms + 1)}  # the time is signed: it cannot be refreshed
    assert (await c.request(codes.WIPE_WRITE_PERM_OF_BROKER, moved)).code == NO_PERMISSION
    garbage = signed({**wipe, "SignedAt": "yesterday"}, b"", "admin", ADMIN)
    assert (await c.request(codes.WIPE_WRITE_PERM_OF_BROKER, garbage)).code == NO_PERMISSION


async def test_namesrv_admin_signs_its_time(make_door):
    import asyncio

    from service.admin.client import RemotingApi

    door = await make_door(**SECURED)
    seen = []
    verify = door.server.credentials.of_request

    def spy(ext, body, unsigned):
        seen.append(dict(ext))
        return verify(ext, body, unsigned)

    door.server.credentials.of_request = spy  # observe what the real client sends; the real check still runs
    api = RemotingApi("127.0.0.1", door.port, ADMIN)
    try:
        assert await asyncio.to_thread(api.wipe_write_perm, "broker-a") == {"wipeTopicCount": 0}
    finally:
        api.close()
    assert seen and "SignedAt" in seen[-1] and seen[-1]["AccessKey"] == "admin"


async def test_trusted_networks_admit_unsigned_brokers_of_their_clusters(make_door):
    door = await make_door(**SECURED, remoting_trusted_networks="127.0.0.0/8=C1|C3,10.0.0.0/8=C2")
    c = await door.client()
    assert (await c.request(codes.REGISTER_BROKER, register_ext(), register_body())).code == SUCCESS
    r = await c.request(codes.REGISTER_BROKER, register_ext(clusterName="C2", brokerName="b2",
                                                            brokerAddr="10.0.0.7:1"), register_body())
    assert r.code == NO_PERMISSION
    assert (await c.request(codes.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})).code == NO_PERMISSION


async def test_cross_cluster_topics_and_addresses_are_refused(make_door):
    door = await make_door(**SECURED)
    c = await door.client()
    await c.request(codes.REGISTER_BROKER, signed(register_ext(), register_body(), "C1", BROKER_C1), register_body())
    c2 = "broker-c2-token-12"
    before = await state(door)
    steal = register_ext(clusterName="C2", brokerName="evil", brokerAddr="10.6.6.6:1")
    body = register_body({"TopicA": 8, "Mine": 8})  # TopicA lives only on C1's broker-a
    r = await c.request(codes.REGISTER_BROKER, signed(steal, body, "C2", c2), body)
    assert r.code == NO_PERMISSION and "TopicA" in r.remark
    same_addr = register_ext(clusterName="C2", brokerName="evil")  # broker-a's live address, in C2
    r = await c.request(codes.REGISTER_BROKER, signed(same_addr, register_body({"Mine": 8, "M2": 1}), "C2", c2),
                        register_body({"Mine": 8, "M2": 1}))
    assert r.code == NO_PERMISSION and "10.0.0.1:10911" in r.remark
    assert await state(door) == before
    system = register_body({"TBW102": 8, "Mine": 8})  # system topics live on every cluster
    r = await c.request(codes.REGISTER_BROKER, signed(steal, system, "C2", c2), system)
    assert r.code == SUCCESS, r.remark


async def test_cross_cluster_topics_allowed_by_the_setting(make_door):
    door = await make_door(**SECURED, allow_cross_cluster_topics="true")
    c = await door.client()
    await c.request(codes.REGISTER_BROKER, signed(register_ext(), register_body(), "C1", BROKER_C1), register_body())
    steal = register_ext(clusterName="C2", brokerName="other", brokerAddr="10.6.6.6:1")
    r = await c.request(codes.REGISTER_BROKER, signed(steal, register_body(), "C2", "broker-c2-token-12"),
                        register_body())
    assert r.code == SUCCESS


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    """A throwaway CA, a server certificate for 127.0.0.1 and a client certificate whose CN is cluster C1."""
    need("openssl")
    d = tmp_path_factory.mktemp("pki")

    def run(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
        "-subj", "/CN=test-ca")
    for name, cn, ext in (("server", "127.0.0.1", "subjectAltName=IP:127.0.0.1"), ("client", "C1", None)):
        run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
            "-subj", f"/CN={cn}")
        args = ["x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", f"{name}.crt", "-days", "2"]
        if ext:
            (d / f"{name}.ext").write_text(ext + "\n")
            args += ["-extfile", f"{name}.ext"]
        run(*args)
    return d


def client_ctx(pki: Path, cert: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    if cert:
        ctx.load_cert_chain(str(pki / "client.crt"), str(pki / "client.key"))
    return ctx


async def test_tls_permissive_and_client_certificates(make_door, pki):
    door = await make_door(**SECURED, remoting_tls_mode="permissive", remoting_tls_cert_file=pki / "server.crt",
                           remoting_tls_key_file=pki / "server.key", remoting_tls_ca_file=pki / "ca.crt")
    plain = await door.client()
    assert (await plain.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})).code == TOPIC_NOT_EXIST
    assert (await plain.request(codes.REGISTER_BROKER, register_ext(), register_body())).code == NO_PERMISSION
    anonymous_tls = await door.client(ssl_ctx=client_ctx(pki, cert=False))
    assert (await anonymous_tls.request(codes.REGISTER_BROKER, register_ext(), register_body())).code == \
        NO_PERMISSION
    c1 = await door.client(ssl_ctx=client_ctx(pki, cert=True))  # CN=C1: may register into C1, unsigned
    assert (await c1.request(codes.REGISTER_BROKER, register_ext(), register_body())).code == SUCCESS
    r = await c1.request(codes.REGISTER_BROKER, register_ext(clusterName="C2", brokerName="b2",
                                                             brokerAddr="10.0.0.9:1"), register_body())
    assert r.code == NO_PERMISSION


async def test_tls_enforcing_refuses_plain_connections(make_door, pki):
    door = await make_door(remoting_tls_mode="enforcing", remoting_tls_cert_file=pki / "server.crt",
                           remoting_tls_key_file=pki / "server.key")
    tls = await door.client(ssl_ctx=client_ctx(pki, cert=False))
    assert (await tls.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})).code == TOPIC_NOT_EXIST
    plain = await door.client()
    plain.send(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
    import asyncio

    async with asyncio.timeout(5):
        await plain.closed.wait()
    assert door.ns.metrics.remoting.closes["plain-refused"] == 1


def test_broker_token_is_the_ext_that_ali_ons_signs():
    """The verification the door uses accepts what RocketMQ's client hook computes (AclSignerTest known answer)."""
    assert signature.signature_of(b"RocketMQ", "12345678") == "IUc8rrO/0gDch8CjObLQsW2rsiA="
    ext = signed(BROKER, b"body", "C1", BROKER_C1)
    assert signature.verify(ext, b"body", BROKER_C1) and not signature.verify(ext, b"body2", BROKER_C1)
