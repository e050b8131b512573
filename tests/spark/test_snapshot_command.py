"""`namesrv snapshot`: the byte count it prints, the manifest's and its own log line's are one number (they
once disagreed), and the reader the skew job uses sees the same snapshot."""

from __future__ import annotations

import re
import subprocess
import sys
import uuid

import orjson
import pytest
import redis
import redis.asyncio as aioredis

from service.models import RegisterBroker, TopicConfig
from service.store import RouteStore
from service.store.snapshot_reader import RedisSpec, SnapshotReader

pytestmark = pytest.mark.redis


async def test_snapshot_command_bytes_agree(redis_server):
    prefix = "cmd" + uuid.uuid4().hex[:8]
    client = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
    try:
        store = RouteStore(client, prefix=prefix)
        await store.load_scripts()
        for n, name in enumerate(("broker-a", "broker-b")):
            topics = {f"topic-{i:05d}-{name}": TopicConfig(8, 8, 6, 0) for i in range(6000)}
            await store.register_broker(RegisterBroker(cluster="C", broker_name=name, broker_id=0,
                                                       broker_addr=f"10.0.0.{n}:10911", ha_server_addr="",
                                                       topics=topics))
    finally:
        await client.aclose()

    p = subprocess.run(
        [sys.executable, "-m", "service.cli", "snapshot", "--redis-url", redis_server.url, "--key-prefix", prefix],
        capture_output=True, text=True, timeout=60,
    )
    assert p.returncode == 0, p.stderr
    printed = orjson.loads(p.stdout)
    (logged,) = re.findall(r"snapshot (\d+): (\d+) rows in (\d+) parts, (\d+) bytes", p.stderr)
    c = redis.Redis.from_url(redis_server.url)
    try:
        manifest = {k.decode(): v for k, v in c.hgetall(f"{{{prefix}}}:snap:{printed['snapshot']}").items()}
    finally:
        c.close()
    assert printed["rows"] == 12_000 and printed["parts"] == 3  # parts of at most 5 000 rows
    assert (logged[0], int(logged[1]), int(logged[2])) == (printed["snapshot"], printed["rows"], printed["parts"])
    assert printed["bytes"] == int(manifest["bytes"]) == int(logged[3]) > 0
    with SnapshotReader(RedisSpec(redis_server.url), prefix) as reader:
        (snap,) = reader.list_snapshots(0)
    assert (snap.snap_id, snap.rows, snap.parts, snap.bytes) == (
        printed["snapshot"], printed["rows"], printed["parts"], printed["bytes"])
