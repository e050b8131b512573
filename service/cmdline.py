"""Command-line plumbing every entry point shares (`namesrv …` in service/cli.py, the skew job's own
`python -m service.skew.job` / spark-submit entry): the common options and the settings they resolve to.

Below both the CLI and service/skew/, so the skew package never imports the CLI (which imports it).
"""

from __future__ import annotations

import argparse

from service.config import Settings, load_settings


def add_common(p: argparse.ArgumentParser) -> None:
    """The options every command shares: where the settings come from and which registry they address."""
    p.add_argument("-c", "--config-file", help="properties file (key=value; NAMESRV_X, x_y or RocketMQ camelCase)")
    p.add_argument("--redis-url", help="redis://host:port/db (env NAMESRV_REDIS_URL); empty = embedded")
    p.add_argument("--redis-sentinels", help="Sentinel mode: host:port,host:port (env NAMESRV_REDIS_SENTINELS) "
                   "instead of --redis-url")
    p.add_argument("--redis-master-name", help="Sentinel mode: monitored service name (env "
                   "NAMESRV_REDIS_MASTER_NAME, default mymaster)")
    p.add_argument("--redis-sentinel-tls", action="store_const", const=True, help="Sentinel mode: TLS to the "
                   "sentinels and data nodes (env NAMESRV_REDIS_SENTINEL_TLS=true)")
    p.add_argument("--redis-tls-ca-file", help="Sentinel mode with TLS: CA bundle of the Redis servers (env "
                   "NAMESRV_REDIS_TLS_CA_FILE); with --redis-url use rediss://…?ssl_ca_certs=")
    p.add_argument("--redis-tls-cert-file", help="Sentinel mode with TLS: client certificate (env "
                   "NAMESRV_REDIS_TLS_CERT_FILE)")
    p.add_argument("--redis-tls-key-file", help="Sentinel mode with TLS: client key (env NAMESRV_REDIS_TLS_KEY_FILE)")
    p.add_argument("--redis-cluster", action="store_const", const=True, help="Redis Cluster mode: --redis-url "
                   "names any seed node (env NAMESRV_REDIS_CLUSTER=true)")
    p.add_argument("--redis-cluster-nodes", help="Redis Cluster mode: more seed nodes host:port,host:port besides "
                   "--redis-url's (env NAMESRV_REDIS_CLUSTER_NODES)")
    p.add_argument("--key-prefix", help="key prefix / hash tag (env NAMESRV_KEY_PREFIX, default nsrv)")



def settings_from(args: argparse.Namespace) -> Settings:
    flags = {k: getattr(args, k, None) for k in ("host", "port", "remoting_port", "workers", "redis_url",
                                                  "redis_sentinels", "redis_master_name", "redis_cluster",
                                                  "redis_cluster_nodes", "redis_sentinel_tls", "redis_tls_ca_file",
                                                  "redis_tls_cert_file", "redis_tls_key_file", "key_prefix",
                                                  "controller")}
    return load_settings(file=getattr(args, "config_file", None), flags=flags)
