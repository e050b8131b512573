"""One argument policy for every `namesrv` command (service/cmdline.py CommandParser): no abbreviations, a mistake
reported by the parser it was given to, with that command's own usage and a "did you mean", exit 2."""

from __future__ import annotations

import pytest

from service.cli import build_parser


def refused(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(list(argv))
    assert e.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("argv,usage,message", [
    (["serve", "--http-port", "1"], "usage: namesrv serve ", "unrecognized option --http-port (did you mean --port?)"),
    (["serve", "--remoting", "1"], "usage: namesrv serve ",  # no abbreviation of --remoting-port
     "unrecognized option --remoting (did you mean --remoting-port?)"),
    (["admin", "--token", "x", "clusters"], "usage: namesrv admin ",  # not --token-file, not "invalid choice: 'x'"
     "unrecognized option --token (did you mean --token-file?)"),
    (["admin", "--token=x"], "usage: namesrv admin ", "unrecognized option --token (did you mean --token-file?)"),
    (["admin", "brokers", "--clustr", "A"], "usage: namesrv admin brokers ",
     "unrecognized option --clustr (did you mean --cluster?)"),
    (["admin", "topics", "--sys"], "usage: namesrv admin topics ",
     "unrecognized option --sys (did you mean --system?)"),
    (["admin", "clusterz"], "usage: namesrv admin ", "invalid choice: 'clusterz', did you mean clusters?"),
    (["admin", "kv", "gett", "ns", "k"], "usage: namesrv admin kv ", "invalid choice: 'gett', did you mean get?"),
    (["admin", "config", "get", "a", "b"], "usage: namesrv admin config get ", "unrecognized arguments: b"),
    (["snapshot", "--redis-ur", "redis://x"], "usage: namesrv snapshot ",
     "unrecognized option --redis-ur (did you mean --redis-url?)"),
    (["servee"], "usage: namesrv ", "invalid choice: 'servee', did you mean serve?"),
])
def test_each_mistake_is_named_by_its_own_command_with_a_suggestion(capsys, argv, usage, message):
    err = refused(capsys, *argv)
    assert err.startswith(usage), err
    assert message in err.splitlines()[-1], err


def test_no_command_accepts_abbreviations(capsys):
    """`serve` used to take `--remoting` for `--remoting-port` while `admin` refused `--token`: now neither does,
    in any sub-command (each is built from the same parser class)."""
    parser = build_parser()
    pending = [parser]
    while pending:
        p = pending.pop()
        assert p.allow_abbrev is False, p.prog
        for action in p._subparsers._group_actions if p._subparsers else []:
            pending.extend(action.choices.values())
    assert "--remoting" in refused(capsys, "serve", "--remoting", "0", "-p")
    assert "--count" in refused(capsys, "admin", "watch", "--cou", "1")


def test_well_formed_commands_still_parse():
    a = build_parser().parse_args(["serve", "--port", "1", "--remoting-port=2"])
    assert (a.port, a.remoting_port) == (1, 2)
    a = build_parser().parse_args(["admin", "--json", "brokers", "--cluster", "A"])
    assert (a.json, a.cluster) == (True, "A")
    a = build_parser().parse_args(["admin", "kv", "put", "ns", "k", "-5"])  # a negative-looking value is a value
    assert a.value == "-5"


@pytest.mark.parametrize("command", ["skew-report", "skew-scheduler"])
def test_a_missing_extra_is_told_with_an_install_that_works(command, capsys, monkeypatch):
    """`namesrv skew-scheduler` without the extra said `namesrv skew-report needs the Spark extra: pip install
    'rmq-namesrv[spark]'`: the other command's name, and an install no package index serves (issue 39, round 2).
    From a clone, the clone's editable install with the extra."""
    import sys
    from pathlib import Path

    from service.cli import main

    for module in ("service.skew.job", "service.skew.scheduler"):
        monkeypatch.setitem(sys.modules, module, None)  # as if pyspark were missing: importing it fails
    assert main([command]) == 2
    root = Path(__file__).resolve().parents[2]
    assert capsys.readouterr().err.startswith(f"namesrv {command} needs the spark extra: pip install -e "
                                              f"'{root}[spark]' (")
