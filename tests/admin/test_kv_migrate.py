"""`namesrv admin kv import | export | copy` as operators run them (issue 42): a subprocess against real servers on
a real Redis — a dry run shows what would change and writes nothing, changing keys already set asks first, a
malformed or partial file is refused with its line and column and an entry the server cannot take is named, with
nothing written; export writes Apache's kvConfig.json layout; copy reads another NameServer over the native door.
Files written by Apache's own NameServer (4.9.7 and 5.5.0) are imported whole in tests/interop/test_migration.py."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import orjson
import pytest

from tests.admin.test_admin_cli import ADMIN, READ, admin
from tests.integration.conftest import Namesrv

pytestmark = [pytest.mark.integration, pytest.mark.redis]

JAVA_LIKE = ('{"configTable":{"ORDER_TOPIC_CONFIG":{"TopicA":"broker-a:4;broker-b:4"},'
             '"MIG_NS":{"键":"值","k k":"v","<b>":"x=1"},"Emptied":{}}}')


@pytest.fixture
def server(redis_server):
    n = Namesrv(redis_server.url, "kvm" + uuid.uuid4().hex[:8], admin_token=ADMIN, read_token=READ).wait_ready()
    yield n
    n.stop()


def kv_config(server) -> dict:
    r = admin(server, "--json", "kv", "export", "-")
    assert r.returncode == 0, r.stderr
    return orjson.loads(r.stdout)["configTable"]


def write(tmp_path: Path, text: str | bytes, name: str = "kvConfig.json") -> str:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return str(path)


def test_dry_run_then_import_then_nothing_to_change(server, tmp_path):
    f = write(tmp_path, JAVA_LIKE)
    r = admin(server, "kv", "import", f, "--dry-run")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        f"KV dry run: {f} -> {server.url}",
        "ORDER_TOPIC_CONFIG (new namespace)", "  + TopicA = broker-a:4;broker-b:4",
        "MIG_NS (new namespace)", "  + <b> = x=1", "  + k k = v", "  + 键 = 值",
        "Emptied (new namespace, empty)",
        "3 namespace(s), 3 new; keys: 4 added, 0 changed, 0 removed, 0 unchanged, 0 kept",
        "dry run: nothing written"]
    assert kv_config(server) == {}
    r = admin(server, "kv", "import", f)  # only additions: nothing to ask
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "written in one step"
    assert kv_config(server) == json.loads(JAVA_LIKE)["configTable"]
    r = admin(server, "kv", "import", f)
    assert r.stdout.splitlines()[-2:] == [
        "3 namespace(s), 0 new; keys: 0 added, 0 changed, 0 removed, 4 unchanged, 0 kept", "nothing to change"]


def test_changing_keys_already_set_asks_and_replace_removes(server, tmp_path):
    admin(server, "kv", "put", "MIG_NS", "k k", "other")
    admin(server, "kv", "put", "MIG_NS", "extra", "1")
    f = write(tmp_path, JAVA_LIKE)
    r = admin(server, "kv", "import", f)
    assert r.returncode == 2 and "Not asked: stdin is not a terminal; pass --yes" in r.stderr
    assert "  ~ k k: other -> v" in r.stdout and kv_config(server)["MIG_NS"] == {"k k": "other", "extra": "1"}
    r = admin(server, "--json", "kv", "import", f, "--replace", "--dry-run")
    ns = {n["namespace"]: n for n in orjson.loads(r.stdout)["namespaces"]}
    assert ns["MIG_NS"]["removed"] == {"extra": "1"} and ns["MIG_NS"]["changed"] == {
        "k k": {"before": "other", "after": "v"}}
    r = admin(server, "kv", "import", f, "--replace", "--yes")
    assert r.returncode == 0, r.stderr
    assert "  - extra (was 1)" in r.stdout
    assert kv_config(server)["MIG_NS"] == {"键": "值", "k k": "v", "<b>": "x=1"}
    r = admin(server, "kv", "import", f, "--yes", token=READ)
    assert r.returncode == 0  # nothing to change: a read token may see that
    admin(server, "kv", "put", "MIG_NS", "k k", "again")
    r = admin(server, "kv", "import", f, "--yes", token=READ)
    assert r.returncode == 4 and kv_config(server)["MIG_NS"]["k k"] == "again"


def test_a_malformed_file_is_refused_with_where_and_nothing_written(server, tmp_path):
    """(Every kind of malformed file: tests/admin/test_kv_file.py.)"""
    admin(server, "kv", "put", "Before", "k", "v")
    r = admin(server, "kv", "import", write(tmp_path, b'{"configTable":{\n  "A":{"k":"v"'))
    assert r.returncode == 2
    assert r.stderr.endswith("kvConfig.json: line 2 column 15: Expecting ',' delimiter (the file ends before its "
                             "JSON does: cut short?)\n")
    assert kv_config(server) == {"Before": {"k": "v"}}


def test_every_entry_the_server_cannot_take_is_named(server, tmp_path):
    f = write(tmp_path, json.dumps({"configTable": {"A": {"k\n": "v", "ok": "v", "x" * 256: "v"},
                                                    "B\x1b": {}, "C": {"n": 5, "z": None}}}))
    r = admin(server, "kv", "import", f)
    assert r.returncode == 2
    lines = r.stderr.splitlines()
    assert lines[:2] == ['  namespace A key "k\\n": key: control character U+000A at position 1 (any other text is '
                         'allowed)', f"  namespace A key {'x' * 256}: key: longer than 255 characters"]
    assert lines[2].startswith('  namespace "B\\u001b": namespace: control character U+001B at position 1')
    assert lines[3:5] == ["  namespace C key n: value: required, a string", "  namespace C key z: value: required, a "
                          "string"]
    assert lines[5].endswith(": 5 entries cannot be taken (listed above; docs/deviations.md, KV), nothing was written")
    assert kv_config(server) == {}


def test_an_encoding_and_standard_input(server, tmp_path):
    gbk = '{"configTable":{"订单":{"主题":"broker-a:4"}}}'.encode("gbk")
    assert admin(server, "kv", "import", write(tmp_path, gbk)).returncode == 2
    r = admin(server, "kv", "import", write(tmp_path, gbk), "--encoding", "gbk")
    assert r.returncode == 0, r.stderr
    assert kv_config(server) == {"订单": {"主题": "broker-a:4"}}
    import subprocess
    import sys

    from tests.admin.test_admin_cli import env_for

    r = subprocess.run([sys.executable, "-m", "service.cli", "admin", "kv", "import", "-", "--namespace", "B"],
                       env=env_for(server), input=b'{"configTable":{"A":{"a":"1"},"B":{"b":"2"}}}',
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert kv_config(server) == {"订单": {"主题": "broker-a:4"}, "B": {"b": "2"}}


def test_export_writes_javas_layout_and_round_trips(server, tmp_path):
    f = write(tmp_path, JAVA_LIKE)
    admin(server, "kv", "import", f)
    out = tmp_path / "out" / "kvConfig.json"
    out.parent.mkdir()
    r = admin(server, "kv", "export", str(out))
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"wrote {out}: 3 namespace(s), 4 key(s) from {server.url} (Apache's kvConfig.json layout)\n"
    text = out.read_text(encoding="utf-8")
    assert text == ('{"configTable":{"Emptied":{},"MIG_NS":{"<b>":"x=1","k k":"v","键":"值"},'
                    '"ORDER_TOPIC_CONFIG":{"TopicA":"broker-a:4;broker-b:4"}}}')
    assert admin(server, "kv", "export", str(out)).returncode == 2  # exists
    assert admin(server, "kv", "export", str(out), "--force").returncode == 0
    assert [p.name for p in out.parent.iterdir()] == ["kvConfig.json"]  # no temporary file left
    r = admin(server, "kv", "import", str(out))
    assert r.stdout.splitlines()[-1] == "nothing to change"
    rmq = f"rmq://127.0.0.1:{server.remoting_port}"
    r = admin(server, "--server", rmq, "kv", "export", "-")
    assert r.returncode == 2 and "--namespace" in r.stderr
    r = admin(server, "--server", rmq, "kv", "export", "-", "--namespace", "MIG_NS", "--namespace", "Emptied")
    assert json.loads(r.stdout) == {"configTable": {"Emptied": {}, "MIG_NS": {"<b>": "x=1", "k k": "v", "键": "值"}}}
    r = admin(server, "--server", rmq, "kv", "export", "-", "--namespace", "Nope")
    assert r.returncode == 1 and "has no KV namespace Nope" in r.stderr


def test_copy_from_another_nameserver_over_the_native_door(server, redis_server, tmp_path):
    source = Namesrv(redis_server.url, "kvs" + uuid.uuid4().hex[:8]).wait_ready()
    try:
        src = {"NAMESRV_SERVER": source.url}
        admin(server, "kv", "import", write(tmp_path, JAVA_LIKE), NAMESRV_SERVER=source.url)
        rmq = f"rmq://127.0.0.1:{source.remoting_port}"
        r = admin(server, "kv", "copy", "--from", rmq)
        assert r.returncode == 2 and "name them with --namespace" in r.stderr
        r = admin(server, "kv", "copy", "--from", rmq, "--namespace", "MIG_NS", "--namespace", "Emptied",
                  "--dry-run")
        assert r.returncode == 0 and r.stdout.splitlines()[0] == f"KV dry run: {rmq} -> {server.url}"
        assert kv_config(server) == {}
        r = admin(server, "kv", "copy", "--from", rmq, "--namespace", "MIG_NS", "--namespace", "Emptied")
        assert r.returncode == 0, r.stderr
        assert kv_config(server) == {"Emptied": {}, "MIG_NS": {"键": "值", "k k": "v", "<b>": "x=1"}}
        r = admin(server, "kv", "copy", "--from", rmq, "--namespace", "Nope")
        assert r.returncode == 1 and "has no KV namespace Nope: nothing was written" in r.stderr
        r = admin(server, "kv", "copy", "--from", source.url)  # over HTTP: every namespace
        assert r.returncode == 0, r.stderr
        assert kv_config(server) == kv_config(type("S", (), {"url": source.url, **src})())
        r = admin(server, "--server", f"rmq://127.0.0.1:{server.remoting_port}", "kv", "copy", "--from", rmq,
                  "--namespace", "MIG_NS")
        assert r.returncode == 2 and "needs the HTTP door" in r.stderr
    finally:
        source.stop()
