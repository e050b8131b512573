"""Command-line plumbing every entry point shares (`namesrv …` in service/cli.py, the skew job's own
`python -m service.skew.job` / spark-submit entry): the common options and the settings they resolve to.

Below both the CLI and service/skew/, so the skew package never imports the CLI (which imports it).
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from service import __version__
from service.config import Settings, load_settings, unknown_env


class CommandParser(argparse.ArgumentParser):
    """The one argument policy of every `namesrv` command and sub-command (their sub-parsers are built from this
    class too): no abbreviations (`--remoting` is not `--remoting-port`, `--token x` is not `--token-file x`), an
    unknown option or command is refused by the parser it was given to, with that parser's own usage and a "did you
    mean" from its own options or commands, and every argument error exits 2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self._seen: list[str] = []

    def parse_known_args(self, args: Sequence[str] | None = None,
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        """As argparse's, but what this parser (or a sub-command's) cannot place is an error here, not text handed
        up to the top-level parser, which would print its own usage for a sub-command's mistake."""
        self._seen = list(sys.argv[1:] if args is None else args)
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(self._unrecognized(extras))
        return namespace, extras

    def _unrecognized(self, extras: list[str]) -> str:
        option = next((a for a in extras if a.startswith("-") and a != "-"), None)
        if option is None:
            return f"unrecognized arguments: {' '.join(extras)}"
        return f"unrecognized option {option.split('=', 1)[0]}{self._suggest(option, self._option_string_actions)}"

    @staticmethod
    def _suggest(word: str, known: Any) -> str:
        close = difflib.get_close_matches(word.split("=", 1)[0], [k for k in known if k != "-h"], n=1, cutoff=0.6)
        return f" (did you mean {close[0]}?)" if close else ""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        """A mistyped command or choice: name it, suggest the nearest, list the rest."""
        if action.choices is not None and value not in action.choices:
            choices = ", ".join(str(c) for c in action.choices)
            hint = self._suggest(str(value), action.choices).replace(" (", ", ").rstrip(")")
            raise argparse.ArgumentError(action, f"invalid choice: {value!r}{hint} (choose from {choices})")

    def error(self, message: str) -> NoReturn:
        """An option this parser does not know, given before the command or value it then choked on (`admin --token
        x` fails on the command `x`), is the mistake to name."""
        option = self._unknown_option_before_positionals()
        if option is not None and "unrecognized" not in message:
            message = f"unrecognized option {option}{self._suggest(option, self._option_string_actions)}"
        super().error(message)

    def _unknown_option_before_positionals(self) -> str | None:
        args = iter(self._seen)
        for arg in args:
            if arg == "--" or not arg.startswith("-") or arg == "-":
                return None
            name = arg.split("=", 1)[0]
            action = self._option_string_actions.get(name)
            if action is None:
                return name
            if "=" not in arg and action.nargs != 0:
                next(args, None)  # the option's value
        return None


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
    for warning in unknown_env(os.environ):
        print(f"namesrv: warning: {warning}", file=sys.stderr)
    return load_settings(file=getattr(args, "config_file", None), flags=flags)


def install_extra(extra: str) -> str:
    """How to add an extra to this installation: no package index serves rmq-namesrv, so `pip install
    'rmq-namesrv[spark]'` fails. Installed from a clone (editable): that clone with the extra; else the wheel it
    was installed from, with the extra (docs/skew-report.md says how to build it)."""
    root = Path(__file__).resolve().parent.parent
    if (root / "pyproject.toml").is_file():
        return f"pip install -e '{root}[{extra}]'"
    return f"pip install './rmq_namesrv-{__version__}-py3-none-any.whl[{extra}]' (the wheel this was installed from)"
