"""What `namesrv serve` says when its Redis cannot be used, as real processes: a Redis that is not there is named
once with the OS error, and its return is told; a Redis that answers but refuses the configuration (a database it
does not have, a wrong or missing password) stops the start with a configuration error."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import urllib.request

import pytest
import redis

from tests.integration.conftest import Namesrv, refused_start
from tests.redis_server import RedisServer, free_port

pytestmark = [pytest.mark.integration, pytest.mark.redis]


def test_a_configuration_redis_refuses_stops_the_start(tmp_path):
    """`redis://…/99` was reported as "not reachable" and the worker kept retrying for ever; a wrong or missing
    password likewise. Each is a configuration error now: exit 2 at once, naming Redis and what it said."""
    server = RedisServer().start()
    try:
        redis.Redis(port=server.port).config_set("requirepass", "sekret")
        base = f"127.0.0.1:{server.port}"
        for url, said in [(f"redis://:sekret@{base}/99", "DB index is out of range"),
                          (f"redis://:wrong@{base}/0", "invalid username-password pair"),
                          (f"redis://{base}/0", "it requires a password and none was given (NOAUTH)")]:
            r = refused_start(redis_url=url, port=free_port(), remoting_port=0)
            assert r.returncode == 2, (url, r.stderr[-2000:])
            masked = url.replace(":sekret@", ":***@").replace(":wrong@", ":***@")
            assert f"namesrv serve: configuration error: Redis {masked} refuses this configuration: {said}" in r.stderr
            assert "sekret" not in r.stderr and "Traceback" not in r.stderr
    finally:
        server.cleanup()


def test_an_address_that_is_not_redis_stops_the_start():
    """`--redis-url` naming an HTTP port: 46 lines in 12 s of `unexpected Redis error: Protocol error, got "H" as
    reply type byte`, never naming the address, and a worker serving 503s for ever (issue 39, second round). It is
    a configuration error: exit 2, naming the address and what answered there."""
    http = socket.create_server(("127.0.0.1", 0))

    def answer_http() -> None:  # as aiohttp answers a request line it cannot parse
        with contextlib.suppress(OSError):
            while True:
                conn, _ = http.accept()
                with conn:
                    conn.recv(4096)
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    threading.Thread(target=answer_http, daemon=True).start()
    try:
        url = f"redis://127.0.0.1:{http.getsockname()[1]}/0"
        r = refused_start(redis_url=url, port=free_port(), remoting_port=0)
        assert r.returncode == 2, r.stderr[-2000:]
        assert r.stderr.strip() == f"namesrv serve: configuration error: Redis {url} refuses this configuration: it " \
            "does not answer in Redis's protocol (Protocol error, got \"H\" as reply type byte): is this address " \
            "Redis's, not another service's?"
    finally:
        http.close()


def failed_calls(url: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
        text = r.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("namesrv_redis_errors_total{"))


def test_an_unreachable_redis_is_named_once_and_its_return_told():
    """With Redis absent the log said `ConnectionError; retry shortly` 40 times in 40 s, from several components,
    never where or why. Now: one line with host:port and the OS error, nothing more while calls keep failing (a
    reminder comes after 10 s), one line when it answers again."""
    port = free_port()
    n = Namesrv(f"redis://127.0.0.1:{port}/0", "gone")
    server = RedisServer(port=port)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the worker answers (503) and keeps failing its Redis calls
            try:
                if failed_calls(n.url) >= 15:
                    break
            except OSError:
                pass
            if n.proc.poll() is not None:
                pytest.fail(f"namesrv exited: {n.output()}")
            time.sleep(0.05)
        log = n.output()
        # the OS error as redis-py words it: "Connection refused." (uvloop) or "Connect call failed (…)" (asyncio)
        assert log.count(f"Redis redis://127.0.0.1:{port}/0 is unavailable (ConnectionError: Error 111 connecting to "
                         f"127.0.0.1:{port}. Conn") == 1, log
        assert log.count("retry shortly") <= 4, log  # the start-up line, the announcement, the first listener loss
        server.start()
        n.wait_ready()
        deadline = time.monotonic() + 10
        while "answers again after" not in n.output() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert f"Redis redis://127.0.0.1:{port}/0 answers again after" in n.output()
    finally:
        n.stop()
        server.cleanup()
