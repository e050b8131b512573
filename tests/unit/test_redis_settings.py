"""The Redis deployment settings (one URL, Sentinel, Cluster), per-call deadlines and WAIT: parsing, conflicts,
`-p`, the CLI flags, and how the store words Redis trouble. Real topologies: tests/topology/test_store_modes.py."""

from __future__ import annotations

import pytest
from redis.exceptions import (
    AskError,
    ClusterDownError,
    ClusterError,
    ConnectionError,
    MovedError,
    ResponseError,
    SlotNotCoveredError,
    TryAgainError,
)

from service.cli import build_parser, main, settings_from
from service.config import ConfigError, load_settings, parse_addresses
from service.errors import StoreUnavailable
from service.store.routes import PER_TOPIC_S, StoreLimits, translate


@pytest.mark.parametrize("env", [
    {"NAMESRV_REDIS_URL": "redis://h:6379/0"},
    {"NAMESRV_REDIS_SENTINELS": "s1:26379"},
    {"NAMESRV_REDIS_URL": "redis://seed:7000", "NAMESRV_REDIS_CLUSTER": "true"},
], ids=["single", "sentinel", "cluster"])
@pytest.mark.parametrize(("socket_ms", "wait_ms"), [(None, None), ("500", "1000"), ("2000", "1000"),
                                                    ("100", "30000")])
async def test_the_clients_socket_timeout_outlasts_wait(env, socket_ms, wait_ms):
    """With WAIT on, the socket must not give up before WAIT answers (it answered STORE_UNAVAILABLE then)."""
    from service.store.connect import make_redis

    env = {**env, "NAMESRV_REDIS_WAIT_REPLICAS": "1"}
    env |= {"NAMESRV_REDIS_SOCKET_TIMEOUT_MS": socket_ms} if socket_ms else {}
    env |= {"NAMESRV_REDIS_WAIT_TIMEOUT_MS": wait_ms} if wait_ms else {}
    settings = load_settings(env=env)
    for bulk in (False, True):
        client = make_redis(settings, bulk=bulk)
        try:
            pool = getattr(client, "connection_pool", None)  # RedisCluster: its nodes manager's, for every node
            kwargs = pool.connection_kwargs if pool is not None else client.nodes_manager.connection_kwargs
            assert kwargs["socket_timeout"] * 1000 >= settings.redis_wait_timeout_ms + settings.redis_socket_timeout_ms
        finally:
            await client.aclose()
    off = load_settings(env={**env, "NAMESRV_REDIS_WAIT_REPLICAS": "0"})
    assert off.redis_command_timeout_ms == off.redis_socket_timeout_ms  # without WAIT, unchanged


def test_sentinel_addresses():
    assert parse_addresses(" s1:26379, 10.0.0.2:26380,[::1]:5000 ,") == [
        ("s1", 26379), ("10.0.0.2", 26380), ("::1", 5000)]
    for bad in ("s1", "s1:0", "s1:70000", "s 1:1", "[::1]", "http://s1:1"):
        with pytest.raises(ConfigError, match="redis_sentinels"):
            parse_addresses(bad)


@pytest.mark.parametrize(("env", "mode"), [
    ({}, "embedded"),
    ({"NAMESRV_REDIS_URL": "redis://h:6379/0"}, "single"),
    ({"NAMESRV_REDIS_URL": "rediss://h:6380/0?ssl_ca_certs=/ca.pem"}, "single"),
    ({"NAMESRV_REDIS_URL": "unix:///run/redis.sock"}, "single"),
    ({"NAMESRV_REDIS_SENTINELS": "s1:26379,s2:26379", "NAMESRV_REDIS_MASTER_NAME": "nsrv"}, "sentinel"),
    ({"NAMESRV_REDIS_URL": "redis://seed:7000", "NAMESRV_REDIS_CLUSTER": "true"}, "cluster"),
])
def test_one_setting_per_mode(env, mode):
    s = load_settings(env=env)
    assert s.redis_mode == mode and s.embedded is (mode == "embedded")


@pytest.mark.parametrize(("env", "fragment"), [
    ({"NAMESRV_REDIS_SENTINELS": "s1:1", "NAMESRV_REDIS_URL": "redis://h:1"}, "set one"),
    ({"NAMESRV_REDIS_SENTINELS": "s1:1", "NAMESRV_REDIS_MASTER_NAME": " "}, "service name"),
    ({"NAMESRV_REDIS_SENTINELS": "s1:1", "NAMESRV_REDIS_CLUSTER": "true"}, "does not use sentinels"),
    ({"NAMESRV_REDIS_CLUSTER": "true"}, "seed node"),
    ({"NAMESRV_REDIS_CLUSTER": "true", "NAMESRV_REDIS_URL": "unix:///s.sock"}, "not unix"),
    ({"NAMESRV_REDIS_URL": "redis://h:1", "NAMESRV_REDIS_CLUSTER_NODES": "a:1"}, "Cluster mode"),
    ({"NAMESRV_REDIS_URL": "redis://h:1", "NAMESRV_REDIS_CLUSTER": "true", "NAMESRV_REDIS_CLUSTER_NODES": "a:1,b"},
     "redis_cluster_nodes: 'b' is not host:port"),
    ({"NAMESRV_REDIS_WAIT_REPLICAS": "-1"}, "minimum"),
    ({"NAMESRV_REDIS_DEADLINE_MS": "10"}, "minimum"),
])
def test_conflicting_redis_settings_are_refused(env, fragment):
    with pytest.raises(ConfigError, match=fragment):
        load_settings(env=env)


def test_sentinel_tls_settings(tmp_path):
    """TLS options go to the sentinels and the data nodes alike; files are checked at start; with a URL the URL's
    own query says it (no second way)."""
    ca, cert, key = (tmp_path / "ca.pem", tmp_path / "c.pem", tmp_path / "k.pem")
    for f in (ca, cert, key):
        f.write_text("-")
    sentinel = {"NAMESRV_REDIS_SENTINELS": "s1:26379"}
    assert load_settings(env=sentinel).sentinel_tls_options == {}
    s = load_settings(env={**sentinel, "NAMESRV_REDIS_SENTINEL_TLS": "true"})
    assert s.sentinel_tls_options == {"ssl": True}  # the system CAs
    s = load_settings(env={**sentinel, "NAMESRV_REDIS_SENTINEL_TLS": "true", "NAMESRV_REDIS_TLS_CA_FILE": str(ca),
                           "NAMESRV_REDIS_TLS_CERT_FILE": str(cert), "NAMESRV_REDIS_TLS_KEY_FILE": str(key)})
    assert s.sentinel_tls_options == {"ssl": True, "ssl_ca_certs": str(ca), "ssl_certfile": str(cert),
                                      "ssl_keyfile": str(key)}
    args = build_parser().parse_args(["serve", "--redis-sentinels", "a:1", "--redis-sentinel-tls",
                                      "--redis-tls-ca-file", str(ca)])
    assert settings_from(args).sentinel_tls_options == {"ssl": True, "ssl_ca_certs": str(ca)}
    for env, fragment in (
            ({"NAMESRV_REDIS_SENTINEL_TLS": "true", "NAMESRV_REDIS_URL": "redis://h:1"}, "rediss://"),
            ({**sentinel, "NAMESRV_REDIS_TLS_CA_FILE": str(ca)}, "set redis_sentinel_tls too"),
            ({**sentinel, "NAMESRV_REDIS_SENTINEL_TLS": "true", "NAMESRV_REDIS_TLS_CA_FILE": str(tmp_path / "no")},
             "no such file"),
            ({**sentinel, "NAMESRV_REDIS_SENTINEL_TLS": "true", "NAMESRV_REDIS_TLS_CERT_FILE": str(cert)},
             "needs both")):
        with pytest.raises(ConfigError, match=fragment):
            load_settings(env=env)


def test_flags_and_print_config(capsys, monkeypatch):
    args = build_parser().parse_args(["serve", "--redis-sentinels", "a:1,b:2", "--redis-master-name", "rmq"])
    s = settings_from(args)
    assert (s.redis_mode, s.redis_sentinels, s.redis_master_name) == ("sentinel", "a:1,b:2", "rmq")
    args = build_parser().parse_args(["snapshot", "--redis-url", "redis://seed:7000", "--redis-cluster"])
    assert settings_from(args).redis_mode == "cluster"
    assert settings_from(build_parser().parse_args(["serve"])).redis_cluster is False  # flag absent: not forced

    monkeypatch.setenv("NAMESRV_REDIS_SENTINEL_PASSWORD", "sentinel-secret")
    monkeypatch.setenv("NAMESRV_REDIS_PASSWORD", "data-secret")
    monkeypatch.setenv("NAMESRV_REDIS_WAIT_REPLICAS", "1")
    assert main(["serve", "-p", "--redis-sentinels", "a:1"]) == 0
    out = capsys.readouterr().out
    assert "NAMESRV_REDIS_SENTINEL_PASSWORD=***" in out and "NAMESRV_REDIS_PASSWORD=***" in out
    assert "secret" not in out
    for line in ("NAMESRV_REDIS_SENTINELS=a:1", "NAMESRV_REDIS_MASTER_NAME=mymaster", "NAMESRV_REDIS_CLUSTER=false",
                 "NAMESRV_REDIS_WAIT_REPLICAS=1", "NAMESRV_REDIS_WAIT_TIMEOUT_MS=1000",
                 "NAMESRV_REDIS_WAIT_REGISTRATIONS=false", "NAMESRV_REDIS_DEADLINE_MS=1000",
                 "NAMESRV_REDIS_BULK_DEADLINE_MS=10000"):
        assert line in out.splitlines()


def test_bulk_deadline_scales_with_topics_up_to_a_ceiling():
    limits = StoreLimits(deadline_s=1.0, bulk_deadline_s=10.0)
    assert limits.bulk(0) == 1.0
    assert limits.bulk(10) == pytest.approx(1.0 + 10 * PER_TOPIC_S)
    assert limits.bulk(100_000) == pytest.approx(1.0 + 100_000 * PER_TOPIC_S)
    assert limits.bulk(100_000) < 10.0
    assert limits.bulk(10_000_000) == 10.0


@pytest.mark.parametrize("exc", [
    ConnectionError("refused"), TimeoutError(), TryAgainError("TRYAGAIN"), MovedError("3999 127.0.0.1:7001"),
    AskError("3999 127.0.0.1:7001"), ClusterDownError("CLUSTERDOWN"), ClusterError("TTL exhausted."),
    SlotNotCoveredError('Slot "5" is not covered by the cluster.'),
    ResponseError("Error running script: Script attempted to access a non local key in a cluster node"),
    ResponseError("READONLY You can't write against a read only replica."),
])
def test_failover_and_resharding_errors_are_transient(exc):
    assert isinstance(translate(exc), StoreUnavailable)


def test_a_script_bug_is_not_transient():
    err = translate(ResponseError("ERR user_script:1: Script attempted to access nonexistent global variable"))
    assert not isinstance(err, StoreUnavailable) and err.code == "SYSTEM_ERROR"
