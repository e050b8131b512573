"""Who may listen on a port already served, as real `namesrv serve` processes: the workers of one registry share
it (SO_REUSEPORT: one supervisor's workers, or a second supervisor on the same Redis and key prefix); an embedded
server, or a server of another registry, is refused with a message naming the address, the holder and why."""

from __future__ import annotations

import subprocess
import time
import urllib.request
import uuid

import orjson
import pytest

from tests.integration.conftest import Namesrv, refused_start
from tests.redis_server import free_port
from tests.unit.conftest import master

pytestmark = [pytest.mark.integration, pytest.mark.redis]


def serve_once(redis_url: str, prefix: str, port: int, remoting_port: int) -> subprocess.CompletedProcess:
    return refused_start(redis_url=redis_url, key_prefix=prefix, port=port, remoting_port=remoting_port)


def put_route(url: str, topic: str) -> None:
    """A broker registers with `topic`: the registry then has its route."""
    body = master(topics={topic: {"readQueueNums": 4, "writeQueueNums": 4, "perm": 6, "topicSysFlag": 0}})
    req = urllib.request.Request(f"{url}/v1/brokers/register", method="POST", data=orjson.dumps(body),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 200


def status_of(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_a_second_embedded_server_on_the_same_ports_is_refused():
    """Two embedded servers on one port both bound (SO_REUSEPORT) and reads alternated between two private
    registries (8 of 20 answered 404). The second now refuses, naming the address, the holder and why."""
    first = Namesrv("", "emb").wait_ready()
    try:
        put_route(first.url, "Shared")
        second = serve_once("", "emb", first.port, first.remoting_port)
        assert second.returncode == 2, second.stderr[-2000:]
        assert (f"namesrv serve: cannot listen on 127.0.0.1:{first.port}: the address is already in use by namesrv "
                f"serve pid {first.proc.pid}, whose registry is its own memory (embedded); this server is embedded"
                in second.stderr), second.stderr
        assert [status_of(f"{first.url}/v1/topics/Shared/route") for _ in range(20)] == [200] * 20
    finally:
        first.stop()


def test_servers_of_one_registry_share_the_ports_and_others_are_refused(redis_server):
    prefix = "share" + uuid.uuid4().hex[:6]
    a = Namesrv(redis_server.url, prefix, workers=2).wait_ready()
    b = None
    try:
        deadline = time.monotonic() + 30  # both workers of the supervisor listen on the same ports
        while a.output().count("serving HTTP on") < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert a.output().count("serving HTTP on") == 2, a.output()
        put_route(a.url, "Shared")
        # a second supervisor on the same Redis and key prefix (a new deployment before the old one stops): shares
        b = Namesrv(redis_server.url, prefix, port=a.port, remoting_port=a.remoting_port)
        deadline = time.monotonic() + 30
        while "serving HTTP on" not in b.output() and time.monotonic() < deadline:
            assert b.proc.poll() is None, b.output()
            time.sleep(0.05)
        assert f"127.0.0.1:{a.port} is served by namesrv pid {a.proc.pid} of the same registry" in b.output()
        assert a.stop() == 0
        assert status_of(f"{b.url}/v1/topics/Shared/route") == 200  # b answers alone now, from the same registry
        # another key prefix is another registry: refused, naming both
        other = serve_once(redis_server.url, prefix + "x", a.port, a.remoting_port)
        assert other.returncode == 2, other.stderr[-2000:]
        assert (f"already in use by namesrv serve pid {b.proc.pid}, whose registry is Redis {redis_server.url}, key "
                f"prefix {prefix}; servers share a port only when they share a registry, and this one's is Redis "
                f"{redis_server.url}, key prefix {prefix}x") in other.stderr, other.stderr
    finally:
        a.stop()
        if b is not None:
            b.stop()


def test_a_port_held_by_something_else_is_refused_naming_it():
    with __import__("socket").create_server(("127.0.0.1", 0)) as holder:
        port = holder.getsockname()[1]
        r = serve_once("", "x", port, free_port())
    assert r.returncode == 2
    # nothing about registries and splitting them (issue 39, second round): the port is simply someone else's
    assert r.stderr.strip().endswith(f"cannot listen on 127.0.0.1:{port}: the address is already in use by a process "
                                     "that is not a namesrv server (or one too old to say which registry it serves). "
                                     "Choose other ports (--port, --remoting-port) or stop that process"), r.stderr
