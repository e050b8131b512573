"""Auth with stock pieces: unmodified Java 5.x brokers register through each way the README documents (a TLS
client certificate whose CN is their cluster, a trusted network) and are refused without them, with nothing
written; mqadmin signs with `conf/tools.yml` (RocketMQ's own AclClientRPCHook) and is refused without it.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.interop import rocketmq as rmq
from tests.interop.conftest import OurNameServer, http_json, registered
from tests.interop.test_e2e import metric_sum
from tests.redis_topology import make_certs

ADMIN_TOKEN = "admin-token-for-interop-1234"
BROKER_TOKEN = "broker-token-for-interop-123"


def client_cert(d: Path, cn: str) -> tuple[Path, Path]:
    """A client certificate with subject CN=`cn`, signed by the test CA; the key in PKCS#8 PEM (Netty's
    SslContextBuilder, which the broker uses, reads no other form). Made once per CN: brokers sharing one must
    not see its files rewritten under them."""
    if (d / f"{cn}.crt").is_file():
        return d / f"{cn}.crt", d / f"{cn}.key"
    run = {"cwd": d, "check": True, "capture_output": True, "timeout": 30}
    subprocess.run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{cn}.raw.key",
                    "-out", f"{cn}.csr", "-subj", f"/CN={cn}"], **run)
    subprocess.run(["openssl", "pkcs8", "-topk8", "-nocrypt", "-in", f"{cn}.raw.key", "-out", f"{cn}.key"], **run)
    subprocess.run(["openssl", "x509", "-req", "-in", f"{cn}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                    "-CAcreateserial", "-out", f"{cn}.crt", "-days", "1"], **run)
    return d / f"{cn}.crt", d / f"{cn}.key"


def tls_props(certs: Path, cn: str) -> dict[str, str]:
    """RocketMQ's TLS system properties for a broker whose NameServer client presents a certificate of `cn` and
    checks the server against the CA (its own server stays plain)."""
    cert, key = client_cert(certs, cn)
    return {"tls.enable": "true", "tls.test.mode.enable": "false", "tls.server.mode": "disabled",
            "tls.client.certPath": str(cert), "tls.client.keyPath": str(key),
            "tls.client.trustCertPath": str(certs / "ca.crt"), "tls.client.authServer": "true",
            "tls.config.file": str(certs / "none.properties")}


@dataclass
class Secured:
    ours: OurNameServer
    brokers: dict[str, rmq.Broker]
    clients: rmq.Clients


@pytest.fixture(scope="module")
def secured(request, interop_jars, interop_redis) -> Iterator[Secured]:
    line = rmq.LINE5
    root = rmq.temp_root("interop-auth-")
    certs = root / "certs"
    certs.mkdir()
    make_certs(str(certs))
    ours = OurNameServer(interop_redis.url, "ia" + uuid.uuid4().hex[:8], {
        "admin_token": ADMIN_TOKEN, "broker_tokens": f"ClusterS:{BROKER_TOKEN}",
        "remoting_tls_mode": "PERMISSIVE", "remoting_tls_cert_file": certs / "ip.crt",
        "remoting_tls_key_file": certs / "ip.key", "remoting_tls_ca_file": certs / "ca.crt",
        "remoting_trusted_networks": "127.0.0.1/32=ClusterN"}).start()
    ns = ours.addrs
    brokers = {
        # a certificate of its cluster: registers
        "tls": rmq.Broker(line, root, "ClusterT", "broker-t", 0, ns, props=tls_props(certs, "ClusterT")),
        # the network it registers from is trusted for its cluster: registers
        "net": rmq.Broker(line, root, "ClusterN", "broker-n", 0, ns),
        # neither: refused
        "none": rmq.Broker(line, root, "ClusterX", "broker-x", 0, ns),
        # a valid certificate, but of another cluster: refused
        "wrong": rmq.Broker(line, root, "ClusterY", "broker-y", 0, ns, props=tls_props(certs, "ClusterT")),
    }
    for b in brokers.values():
        b.start()
    failed = request.session.testsfailed
    try:
        yield Secured(ours, brokers, rmq.Clients(line, root))
    finally:
        rmq.stop_all(brokers.values())
        ours.stop()
        if request.session.testsfailed > failed:
            print(f"interop logs kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


def refusals(ours: OurNameServer) -> float:
    return sum(metric_sum(ours.url(i), 'namesrv_remoting_requests_total{code="103",request="REGISTER_BROKER",'
                                       'result="16"')
               for i in range(len(ours.procs)))


def test_stock_brokers_register_by_certificate_and_trusted_network_and_not_otherwise(secured: Secured):
    ours, brokers = secured.ours, secured.brokers
    for key in ("tls", "net"):
        for i in range(len(ours.procs)):
            rmq.wait_until(lambda b=brokers[key], i=i: registered(ours.cluster_info(i), b), 60,
                           f"{brokers[key].name} registered with worker {i}")
    # each refused broker tried (REGISTER_BROKER answered NO_PERMISSION at both workers, twice each)...
    rmq.wait_until(lambda: refusals(ours) >= 4, 90, "the two unauthorised brokers' registrations refused")
    assert brokers["none"].alive and brokers["wrong"].alive
    # ...and nothing of theirs was written
    info = ours.cluster_info()
    assert set(info["clusterAddrTable"]) == {"ClusterT", "ClusterN"}
    assert set(info["brokerAddrTable"]) == {"broker-t", "broker-n"}
    assert {(b["cluster"], b["brokerName"]) for b in ours.brokers()} == {("ClusterT", "broker-t"),
                                                                          ("ClusterN", "broker-n")}
    topics = set(http_json(ours.url() + "/v1/topics")["topicList"])
    assert "broker-t" in topics and "ClusterN" in topics  # the registered brokers' own topics
    assert not topics & {"broker-x", "broker-y", "ClusterX", "ClusterY"}


def test_mqadmin_writes_need_the_admin_credentials(secured: Secured):
    ns = secured.ours.addr()
    put = ["updateKvConfig", "-n", ns, "-s", "AUTH_NS", "-k", "k1", "-v", "v1"]
    wipe = ["wipeWritePerm", "-n", ns, "-b", "broker-n"]
    read = ["topicList", "-n", ns]
    anonymous = secured.clients.mqadmin([put, wipe, read])
    assert "16" in anonymous[0] and "success" not in anonymous[0], anonymous[0]
    assert "OK" not in anonymous[1], anonymous[1]
    assert "broker-n" in anonymous[2]  # reads stay open (no read token set)
    wrong = secured.clients.mqadmin([put], tools_yml=f"accessKey: admin\nsecretKey: not-{ADMIN_TOKEN}\n")
    assert "success" not in wrong[0], wrong[0]
    url = secured.ours.url(1)
    with pytest.raises(Exception, match="404"):
        http_json(url + "/v1/kv/AUTH_NS/k1")
    signed = secured.clients.mqadmin([put, wipe, ["addWritePerm", "-n", ns, "-b", "broker-n"]],
                                     tools_yml=f"accessKey: admin\nsecretKey: {ADMIN_TOKEN}\n")
    assert "success" in signed[0], signed[0]
    assert "OK" in signed[1] and "OK" in signed[2], signed[1:]
    assert http_json(url + "/v1/kv/AUTH_NS/k1")["value"] == "v1"
