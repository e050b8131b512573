"""`namesrv admin <command>`: mqadmin's everyday NameServer commands against a running server's API.

The server comes from `--server URL` or NAMESRV_SERVER (default http://127.0.0.1:8080; `rmq://host:9876` uses the
native door for what it carries). The token comes from the server's own variables, NAMESRV_ADMIN_TOKEN (else
NAMESRV_READ_TOKEN), or `--token-file PATH`: never from a flag's value, which any user could read in `ps`.
Tables for people, `--json` for scripts; exit codes 0 ok, 1 not found, 2 usage, 3 unreachable, 4 refused.
Destructive commands ask on a terminal and need `--yes` anywhere else.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from service import display
from service.admin import compare, kv_migrate
from service.admin.client import (
    DEFAULT_SERVER,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    AdminError,
    HttpApi,
    RemotingApi,
    connect,
)
from service.admin.terminal import confirm, read_token
from service.errors import InvalidArgument
from service.models import entity_name, kv_name, kv_value, topic_name

Api = HttpApi | RemotingApi
TOPIC_KINDS = {"system": "system", "unit": "unit", "unit_sub": "unitsub", "unit_sub_ununit": "unitsub-ununit"}


# ------------------------------------------------------------------ parser

def _shared(top: bool) -> argparse.ArgumentParser:
    """Options accepted before and after the command (`admin --json brokers` = `admin brokers --json`): the
    sub-command's copy only overrides when given."""
    p = argparse.ArgumentParser(add_help=False, allow_abbrev=False)  # `--token x` must not mean --token-file

    def default(value: Any) -> Any:
        return value if top else argparse.SUPPRESS

    p.add_argument("--server", default=default(None),
                   help=f"NameServer to talk to (env NAMESRV_SERVER, default {DEFAULT_SERVER}); "
                        "rmq://host:9876 for the native door, rmqs:// over TLS")
    p.add_argument("--token-file", default=default(None), metavar="PATH",
                   help="read the token from this file (default: env NAMESRV_ADMIN_TOKEN, else NAMESRV_READ_TOKEN)")
    p.add_argument("--access-key", default=default(None), choices=("admin", "read"),
                   help="rmq:// only: the AccessKey a --token-file token signs as (default admin)")
    p.add_argument("--json", action="store_true", default=default(False), help="JSON for scripts")
    p.add_argument("--timeout", type=float, default=default(10.0), help="seconds per request (default 10)")
    return p


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add `admin` and its commands to the `namesrv` parser's sub-parsers."""
    shared = _shared(False)
    admin = sub.add_parser("admin", parents=[_shared(True)], allow_abbrev=False,
                           help="operator commands against a running server (mqadmin's habits)",
                           description="Operator commands against a running NameServer's API.",
                           epilog="exit codes: 0 ok, 1 not found, 2 usage, 3 unreachable, 4 refused")
    cmds = admin.add_subparsers(dest="admin_command", required=True, metavar="COMMAND")

    def action(group: Any, name: str, help_text: str) -> argparse.ArgumentParser:
        return group.add_parser(name, parents=[shared], help=help_text, description=help_text, allow_abbrev=False)

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        return action(cmds, name, help_text)

    command("clusters", "clusters with their broker groups and live brokers (mqadmin clusterList)")
    p = command("brokers", "live brokers: role, address, last heartbeat age, data version (clusterList + liveness)")
    p.add_argument("--cluster", help="only this cluster")
    p = command("topics", "topic names (mqadmin topicList)")
    p.add_argument("--cluster", help="only this cluster's topics (RocketMQ 224)")
    kinds = p.add_mutually_exclusive_group()
    kinds.add_argument("--system", action="store_true", help="system topics (304)")
    kinds.add_argument("--unit", action="store_true", help="unit topics (311)")
    kinds.add_argument("--unit-sub", action="store_true", help="topics with unit subscriptions (312)")
    kinds.add_argument("--unit-sub-ununit", action="store_true", help="non-unit topics with unit subscriptions (313)")
    p.add_argument("--match", metavar="TEXT", help="only names containing TEXT (case-insensitive)")
    p = command("route", "a topic's route: queues per broker (mqadmin topicRoute)")
    p.add_argument("topic")
    p.add_argument("--watch", action="store_true",
                   help="then print the route again each time it changes (HTTP stream; Ctrl-C to stop)")
    p.add_argument("--count", type=int, default=0, help="with --watch: stop after this many routes (default: never)")
    p = command("delete-topic", "delete a topic's routes, everywhere or in one cluster (mqadmin deleteTopic)")
    p.add_argument("topic")
    p.add_argument("--cluster", help="only in this cluster")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask")
    p = command("wipe-write-perm", "stop writes to a broker's queues (mqadmin wipeWritePerm)")
    p.add_argument("broker")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask")
    p = command("add-write-perm", "restore writes to a broker's queues (mqadmin addWritePerm)")
    p.add_argument("broker")
    p.add_argument("--yes", "-y", action="store_true", help="accepted, as on wipe-write-perm (restoring asks nothing)")

    kv = command("kv", "KV config (mqadmin updateKvConfig / deleteKvConfig / getKvConfig)")
    kv_cmds = kv.add_subparsers(dest="kv_command", required=True, metavar="ACTION")
    p = action(kv_cmds, "get", "one value")
    p.add_argument("namespace")
    p.add_argument("key")
    p = action(kv_cmds, "put", "set a value")
    p.add_argument("namespace")
    p.add_argument("key")
    p.add_argument("value")
    p = action(kv_cmds, "delete", "delete a key")
    p.add_argument("namespace")
    p.add_argument("key")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask")
    p = action(kv_cmds, "list", "a namespace's keys and values; without one, the namespaces")
    p.add_argument("namespace", nargs="?")
    kv_migrate.add_actions(kv_cmds, action)

    config = command("config", "NameServer settings (mqadmin getNamesrvConfig / updateNamesrvConfig)")
    config_cmds = config.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    p = action(config_cmds, "get", "every setting (secrets masked), or one")
    p.add_argument("key", nargs="?")
    p = action(config_cmds, "set", "change a runtime switch for every worker")
    p.add_argument("key")
    p.add_argument("value")

    p = command("controller", "RocketMQ 5 controller: each broker set's master, epochs and SyncStateSet "
                              "(mqadmin getSyncStateSet)")
    p.add_argument("--broker", action="append", metavar="NAME", help="only this broker set (repeatable)")

    p = command("skew", "the latest topic load skew report, or the runs before it (ours: no mqadmin equivalent)")
    p.add_argument("--top", type=int, default=10, help="topics listed (default 10)")
    p.add_argument("--history", type=int, nargs="?", const=10, metavar="N",
                   help="instead: the last N runs, newest first, one line each (default 10, at most 48)")
    compare.add_command(command)
    command("capacity", "where the registry stands against the sizing model: brokers, topics, Redis memory, headroom "
                        "(ours: README, Sizing)")
    p = command("watch", "live brokers with last-heartbeat age, refreshed (Ctrl-C to stop)")
    p.add_argument("--cluster", help="only this cluster")
    p.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes (default 2)")
    p.add_argument("--count", type=int, default=0, help="stop after this many refreshes (default: never)")
    return admin


# ------------------------------------------------------------------ commands

class Out:
    """Where results go: a table (rich) for people, JSON for scripts, one-line messages."""

    def __init__(self, as_json: bool) -> None:
        self.json = as_json
        self._console: Any = None

    @property
    def console(self) -> Any:
        if self._console is None:
            from service.admin.render import make_console

            self._console = make_console()
        return self._console

    def data(self, value: Any, human: Callable[[], Any]) -> None:
        if self.json:
            sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode() + "\n")
        else:
            from service.admin.render import show

            show(self.console, human())

    def done(self, value: Any, message: str) -> None:
        self.data(value, lambda: message)


def cmd_clusters(api: Api, args: argparse.Namespace, out: Out) -> int:
    from service.admin import render

    info = api.cluster_info()
    live = api.brokers() if isinstance(api, HttpApi) else None
    rows = render.cluster_rows(info, live)
    out.data({"clusters": rows}, lambda: render.clusters(rows))
    return EXIT_OK


def require_cluster(api: Api, cluster: str | None) -> None:
    """An unknown cluster is "not found" (exit 1), not an empty table that reads as a cluster without brokers."""
    if cluster is None:
        return
    known = sorted(api.cluster_info().get("clusterAddrTable") or {})
    if cluster not in known:
        raise AdminError(EXIT_NOT_FOUND, f"no cluster named {cluster!r} is registered (clusters: "
                                         f"{', '.join(known) or 'none'})", "CLUSTER_NOT_FOUND")


def require_broker(api: Api, broker: str) -> None:
    """A broker name nobody registered is "not found" (exit 1): its write permission is nobody's, and "wiped on 0
    topic(s)" with exit 0 read as done when it was a typo."""
    known = sorted(api.cluster_info().get("brokerAddrTable") or {})
    if broker not in known:
        raise AdminError(EXIT_NOT_FOUND, f"no broker named {broker!r} is registered (brokers: "
                                         f"{', '.join(known) or 'none'})", "BROKER_NOT_FOUND")


def cmd_brokers(api: Api, args: argparse.Namespace, out: Out) -> int:
    from service.admin import render

    data = api.brokers(args.cluster)
    if not data["brokers"]:
        require_cluster(api, args.cluster)
    out.data(data, lambda: render.brokers(data))
    return EXIT_OK


def cmd_topics(api: Api, args: argparse.Namespace, out: Out) -> int:
    from service.admin import render

    kind = next((k for flag, k in TOPIC_KINDS.items() if getattr(args, flag)), None)
    if kind and args.cluster:
        raise AdminError(EXIT_USAGE, "--cluster lists one cluster's topics; it does not combine with --" +
                         kind.replace("unitsub", "unit-sub"))
    data = api.topics(kind or ("cluster" if args.cluster else "all"), args.cluster)
    names = sorted(data.get("topicList", []))
    if not names:
        require_cluster(api, args.cluster)
    if args.match:
        names = [n for n in names if args.match.lower() in n.lower()]

    def human() -> Any:  # a topic named after a cluster or a broker (RocketMQ's system list) is shown as such
        info = api.cluster_info()
        own = {**{b: "broker" for b in info.get("brokerAddrTable") or {}},
               **{c: "cluster" for c in info.get("clusterAddrTable") or {}}}
        return render.topics(names, own)

    out.data({**data, "topicList": names}, human)
    return EXIT_OK


def cmd_route(api: Api, args: argparse.Namespace, out: Out) -> int:
    from service.admin import render

    if args.watch:
        return _watch_route(api, args, out)
    if args.count:  # a count of nothing: it was ignored, and the reader waited for changes that were never shown
        raise AdminError(EXIT_USAGE, "--count counts the routes --watch prints: add --watch")
    data = api.route(args.topic)
    out.data(data, lambda: render.route(args.topic, data))
    return EXIT_OK


def _watch_route(api: Api, args: argparse.Namespace, out: Out) -> int:
    """The route now, then each change as the server streams it (GET /v1/watch): one table, or one JSON line
    ({topic, etag, route}; route null when the topic has none), per state."""
    from service.admin import render

    if not isinstance(api, HttpApi):
        raise AdminError(EXIT_USAGE, "--watch needs the HTTP door (--server http://…): the native protocol has "
                                     "no change stream")
    shown = 0
    try:
        for event in api.route_events([args.topic]):
            if out.json:
                sys.stdout.write(orjson.dumps(event).decode() + "\n")
            else:
                from service.admin.render import show

                route = event["route"]
                stamp = time.strftime("%H:%M:%S")
                if route is None:
                    show(out.console, f"{stamp} {args.topic}: no route (deleted, or its brokers are gone)")
                else:
                    show(out.console, f"{stamp} {args.topic} {event['etag']}")
                    show(out.console, render.route(args.topic, route))
            sys.stdout.flush()
            shown += 1
            if args.count and shown >= args.count:
                break
    except KeyboardInterrupt:
        pass
    return EXIT_OK


def cmd_delete_topic(api: Api, args: argparse.Namespace, out: Out) -> int:
    route = api.route(args.topic)  # not found: exit 1 before asking anything
    brokers = sorted(b["brokerName"] for b in route.get("brokerDatas", [])
                     if args.cluster is None or b.get("cluster") == args.cluster)
    where = f"cluster {args.cluster}" if args.cluster else "every cluster"
    if not brokers:  # nothing to delete there: say why before asking anything
        require_cluster(api, args.cluster)
        raise AdminError(EXIT_NOT_FOUND, f"topic {args.topic} has no queues in {where}", "TOPIC_NOT_EXIST")
    confirm(args, f"Delete topic {args.topic} from {where} ({len(brokers)} broker(s): {', '.join(brokers) or '-'})?")
    res = api.delete_topic(args.topic, args.cluster)
    removed = res.get("removedQueueDatas")
    out.done(res, f"deleted topic {args.topic} from {where}" + (f": {removed} queue data removed"
                                                                if removed is not None else ""))
    return EXIT_OK


def cmd_wipe_write_perm(api: Api, args: argparse.Namespace, out: Out) -> int:
    require_broker(api, args.broker)
    confirm(args, f"Wipe the write permission of broker {args.broker}? Producers stop sending to all its queues.")
    res = api.wipe_write_perm(args.broker)
    out.done(res, f"{args.broker}: write permission wiped on {res['wipeTopicCount']} topic(s)")
    return EXIT_OK


def cmd_add_write_perm(api: Api, args: argparse.Namespace, out: Out) -> int:
    require_broker(api, args.broker)
    res = api.add_write_perm(args.broker)
    out.done(res, f"{args.broker}: write permission restored on {res['addTopicCount']} topic(s)")
    return EXIT_OK


KV_MIGRATE = {"import": kv_migrate.cmd_import, "export": kv_migrate.cmd_export, "copy": kv_migrate.cmd_copy}


def cmd_kv(api: Api, args: argparse.Namespace, out: Out) -> int:
    from service.admin import render

    action = args.kv_command
    if action in KV_MIGRATE:
        return KV_MIGRATE[action](api, args, out)
    if action == "get":
        res = api.kv_get(args.namespace, args.key)
        out.data(res, lambda: res["value"])
    elif action == "put":
        res = api.kv_put(args.namespace, args.key, args.value)
        out.done(res, f"{args.namespace} {args.key} = {args.value}")
    elif action == "delete":
        confirm(args, f"Delete KV {args.namespace} {args.key}?")
        res = api.kv_delete(args.namespace, args.key)
        gone = res.get("deleted")
        out.done(res, f"{args.namespace} {args.key}: " + ("deleted" if gone or gone is None else "was not set"))
    elif args.namespace is None:
        res = api.kv_namespaces()
        out.data(res, lambda: render.namespaces(res["namespaces"]))
    else:
        res = api.kv_list(args.namespace)
        out.data(res, lambda: render.kv(args.namespace, res["table"]))
    return EXIT_OK


def cmd_config(api: Api, args: argparse.Namespace, out: Out) -> int:
    from service.admin import render

    if args.config_command == "set":
        res = api.config_set({args.key: args.value})
        out.done(res, "updated for every worker: " + ", ".join(
            f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in res["updated"].items()))
        return EXIT_OK
    res = api.config()
    if args.key is None:
        out.data(res, lambda: render.config(res))
        return EXIT_OK
    from service.config import canonical_name

    name = canonical_name(args.key) or args.key
    if name not in res["config"]:
        raise AdminError(EXIT_NOT_FOUND, f"no setting {args.key!r}", "QUERY_NOT_FOUND")
    value = res["config"][name]
    out.data({name: value}, lambda: str(value).lower() if isinstance(value, bool) else str(value))
    return EXIT_OK


def cmd_skew(api: Api, args: argparse.Namespace, out: Out) -> int:
    from service.admin import render

    if args.top < 1:
        raise AdminError(EXIT_USAGE, "--top: at least 1")
    if args.history is not None:
        if not 1 <= args.history <= 48:
            raise AdminError(EXIT_USAGE, "--history: 1..48 runs")
        runs = api.skew_history(args.history)
        out.data(runs, lambda: render.skew_history(runs["runs"]))
        return EXIT_OK
    res = api.skew()
    out.data(res, lambda: render.skew(res, args.top))
    return EXIT_OK


def cmd_controller(api: Api, args: argparse.Namespace, out: Out) -> int:
    if not isinstance(api, HttpApi):
        raise api.unsupported("the controller's table of broker sets (its liveness of every replica)")
    data = api.controller_sets(args.broker)

    def human() -> Any:  # a table as every other command's
        from service.admin import render

        if not data.get("enabled"):
            return "the controller is off (namesrv serve --controller)"
        return render.controller(data)

    out.data(data, human)
    return EXIT_OK if data.get("brokerSets") or not args.broker else EXIT_NOT_FOUND


def cmd_capacity(api: Api, args: argparse.Namespace, out: Out) -> int:
    from service.admin import render

    data = api.capacity()
    out.data(data, lambda: render.capacity(data))
    return EXIT_OK


def cmd_watch(api: Api, args: argparse.Namespace, out: Out) -> int:
    """Refresh the live-broker table every --interval: in place on a terminal, one table (or JSON line) after
    another otherwise."""
    from service.admin import render

    if args.interval < 0.1:
        raise AdminError(EXIT_USAGE, "--interval: at least 0.1 s")
    require_cluster(api, args.cluster)

    def frame(data: dict[str, Any]) -> Any:
        where = f"cluster {args.cluster}" if args.cluster else "all clusters"
        return render.brokers(data, title=f"Live brokers, {where}, as of {display.when(data['now'])} "
                                          f"(every {args.interval:g} s, Ctrl-C to stop)", fit=True)

    shown = 0
    try:
        if out.json or not sys.stdout.isatty():
            while True:
                data = api.brokers(args.cluster)
                if out.json:
                    sys.stdout.write(orjson.dumps(data).decode() + "\n")
                else:
                    from service.admin.render import show

                    show(out.console, frame(data))
                sys.stdout.flush()
                shown += 1
                if args.count and shown >= args.count:
                    return EXIT_OK
                time.sleep(args.interval)
        from rich.live import Live

        with Live(frame(api.brokers(args.cluster)), console=out.console, auto_refresh=False) as live:
            shown = 1
            while not args.count or shown < args.count:
                time.sleep(args.interval)
                live.update(frame(api.brokers(args.cluster)), refresh=True)
                shown += 1
    except KeyboardInterrupt:
        pass
    return EXIT_OK


COMMANDS: dict[str, Callable[[Api, argparse.Namespace, Out], int]] = {
    "clusters": cmd_clusters, "brokers": cmd_brokers, "topics": cmd_topics, "route": cmd_route,
    "delete-topic": cmd_delete_topic, "wipe-write-perm": cmd_wipe_write_perm, "add-write-perm": cmd_add_write_perm,
    "kv": cmd_kv, "config": cmd_config, "skew": cmd_skew, "watch": cmd_watch, "controller": cmd_controller,
    "compare": compare.cmd_compare,
    "capacity": cmd_capacity,
}


# The names a command sends, as the server checks them: (argument, check, for which commands; None: any).
NAME_CHECKS: tuple[tuple[str, Callable[[Any, str], Any], tuple[str, ...] | None], ...] = (
    ("topic", topic_name, None), ("broker", entity_name, None), ("cluster", entity_name, None),
    ("namespace", kv_name, ("kv",)), ("key", kv_name, ("kv",)), ("value", lambda v, _: kv_value(v), ("kv",)))


def check_names(args: argparse.Namespace) -> None:
    """Every name a command would send, checked before anything is sent, as the server would check it: a mistake
    is a usage error (exit 2) with the same words whichever door, where the native door answers an invalid topic
    "not found" (as Java does) and an empty KV key with a SYSTEM_ERROR, and HTTP an empty name with a 404."""
    for attr, check, commands in NAME_CHECKS:
        value = getattr(args, attr, None)
        if value is None or (commands is not None and args.admin_command not in commands):
            continue
        try:
            for one in value if isinstance(value, list) else [value]:
                check(one, attr)
        except InvalidArgument as exc:
            raise AdminError(EXIT_USAGE, exc.message, exc.code) from None


def run(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> int:
    """Run one admin command; every failure is a message on stderr and its exit code."""
    env = os.environ if env is None else env
    out = Out(args.json)
    api: Api | None = None
    try:
        check_names(args)
        if not 0 < args.timeout <= 3600:  # socket timeouts: 0 never connects, negative raises, NaN and 1e9 too
            raise AdminError(EXIT_USAGE, "--timeout: seconds above 0, at most 3600")
        if args.server == "":
            raise AdminError(EXIT_USAGE, "--server: empty (unset, it is NAMESRV_SERVER, else " + DEFAULT_SERVER + ")")
        token, access_key = read_token(args, env)
        api = connect(args.server or env.get("NAMESRV_SERVER") or DEFAULT_SERVER, token, timeout=args.timeout)
        if isinstance(api, RemotingApi):
            api.access_key = access_key
        return COMMANDS[args.admin_command](api, args, out)
    except AdminError as err:
        code = f" ({err.code})" if err.code and err.code not in ("UNREACHABLE", "ABORTED") else ""
        if (err.code == "NO_PERMISSION" and isinstance(api, RemotingApi) and args.token_file
                and args.access_key is None):  # signed as `admin`: the file may hold the read token
            code += "; a read token signs as --access-key read"
        print(f"namesrv admin {args.admin_command}: {err.message}{code}", file=sys.stderr)
        return err.exit_code
    except BrokenPipeError:  # `namesrv admin topics | head`
        return EXIT_OK
    finally:
        if isinstance(api, RemotingApi):
            api.close()
