"""`namesrv admin` without a server: value wording, tables, exit-code mapping, where the token comes from."""

from __future__ import annotations

import argparse
import collections
import io
import os
import re
from datetime import datetime

import pytest

from service import display
from service.admin import commands, render
from service.admin.client import AdminError, HttpApi, RemotingApi, connect, exit_code_of_status
from service.cli import build_parser


def text_of(renderable) -> str:
    out = io.StringIO()
    render.show(render.make_console(out), renderable)
    return out.getvalue()


@pytest.mark.parametrize("ms,text", [(None, "-"), (0, "0 ms"), (999, "999 ms"), (12_400, "12 s"), (60_000, "1 min"),
                                     (65_000, "1 min 5 s"), (3_600_000, "1 h"), (3_660_000, "1 h 1 min"),
                                     (90_000_000, "1 d 1 h"), (86_400_000, "1 d")])
def test_ages_read_as_people_say_them(ms, text):
    assert display.age(ms) == text


@pytest.mark.parametrize("stamp,text", [("2026-11-28T06:41:18Z", "2026-11-28 06:41:18 UTC"),
                                        ("2026-11-28T07:41:18+01:00", "2026-11-28 06:41:18 UTC"),
                                        (None, "-"), ("", "-"), ("yesterday", "yesterday"),
                                        ("2026-11-28T06:41:18", "2026-11-28T06:41:18")])
def test_report_times_read_like_the_registrys_times(stamp, text):
    """A skew report's ISO times and the registry's millisecond times print alike in one table; a time without a
    zone is not guessed at."""
    assert display.when_iso(stamp) == text
    if text.endswith(" UTC"):
        assert display.when(int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)) == text


@pytest.mark.parametrize("perm,text", [(6, "RW"), (4, "R-"), (2, "-W"), (0, "--"), (7, "RWX"), (None, "-")])
def test_permissions_as_letters(perm, text):
    assert display.perm(perm) == text


def test_brokers_table_is_aligned_and_plain_when_piped():
    data = {"now": 1_000_000, "brokers": [
        {"cluster": "C1", "brokerName": "broker-a", "brokerId": 0, "brokerAddr": "10.0.0.1:10911",
         "lastHeartbeat": 988_000, "ageMillis": 12_000, "heartbeatTimeoutMillis": 120_000,
         "dataVersion": {"counter": 3, "timestamp": 1_700_000_000_000, "stateVersion": 0}, "topicCount": 12},
        {"cluster": "C1", "brokerName": "broker-a", "brokerId": 1, "brokerAddr": "10.0.0.2:10911",
         "lastHeartbeat": 870_000, "ageMillis": 130_000, "heartbeatTimeoutMillis": 120_000,
         "dataVersion": None, "topicCount": 12}]}
    lines = text_of(render.brokers(data)).splitlines()
    assert lines[0].split() == ["CLUSTER", "BROKER", "ID", "ROLE", "ADDRESS", "LAST", "HEARTBEAT", "TIMEOUT", "DATA",
                                "VERSION", "TOPICS"]
    assert lines[2].split() == ["C1", "broker-a", "0", "master", "10.0.0.1:10911", "12", "s", "2", "min", "counter",
                                "3", "·", "2023-11-14", "22:13:20", "UTC", "12"]
    assert "2 min 10 s" in lines[3] and "slave" in lines[3]
    assert lines[2].index("12 s") + 4 == lines[3].index("2 min 10 s") + 10  # right-aligned ages
    assert "\x1b[" not in "".join(lines)  # no colour codes when not a terminal
    assert all(line == line.rstrip() for line in lines)


def test_route_table_shows_perm_letters_and_roles():
    route = {"brokerDatas": [{"brokerName": "b", "cluster": "C", "brokerAddrs": {"1": "h:2", "0": "h:1"}}],
             "queueDatas": [{"brokerName": "b", "readQueueNums": 4, "writeQueueNums": 8, "perm": 4,
                             "topicSysFlag": 0}], "filterServerTable": {}, "orderTopicConf": "b:8"}
    text = text_of(render.route("T", route))
    assert "h:1 (master), h:2 (slave)" in text
    assert text.splitlines()[3].split()[-4:] == ["8", "4", "R-", "0"]
    assert "orderTopicConf: b:8" in text


def test_markup_and_emoji_codes_in_data_are_printed_as_written():
    text = text_of(render.kv("ns", {"[red]k[/]": ":smile: [/] <b>"}))
    assert "[red]k[/]" in text and ":smile: [/] <b>" in text


def test_cluster_rows_combine_cluster_info_and_liveness():
    info = {"clusterAddrTable": {"C": ["a", "b"]},
            "brokerAddrTable": {"a": {"brokerAddrs": {"0": "h:1", "1": "h:2"}}, "b": {"brokerAddrs": {"0": "h:3"}}}}
    live = {"now": 100_000, "brokers": [
        {"cluster": "C", "lastHeartbeat": 99_000, "ageMillis": 1000, "heartbeatTimeoutMillis": 120_000},
        {"cluster": "C", "lastHeartbeat": 0, "ageMillis": 100_000, "heartbeatTimeoutMillis": 120_000}]}
    (row,) = render.cluster_rows(info, live)
    assert row == {"cluster": "C", "brokerNames": ["a", "b"], "addresses": 3, "masters": 2, "live": 2,
                   "oldestHeartbeatMillis": 100_000, "late": 1}
    assert "live" not in render.cluster_rows(info, None)[0]  # the native door has no liveness


@pytest.mark.parametrize("status,code", [(404, 1), (400, 2), (413, 2), (401, 4), (403, 4), (405, 4), (409, 4),
                                         (500, 3), (503, 3)])
def test_http_statuses_map_to_exit_codes(status, code):
    assert exit_code_of_status(status) == code


def test_server_addresses():
    assert isinstance(connect("http://h:1", None), HttpApi)
    assert connect("h:8080/", None).base == "http://h:8080"
    api = connect("rmq://h", "t")
    assert isinstance(api, RemotingApi) and (api.host, api.port) == ("h", 9876)
    with pytest.raises(AdminError) as e:
        connect("ftp://h", None)
    assert e.value.exit_code == 2


def args_for(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["admin", *argv])


def test_options_work_before_and_after_the_command():
    a = args_for("--json", "--server", "http://x:1", "brokers")
    assert (a.json, a.server) == (True, "http://x:1")
    a = args_for("--server", "http://x:1", "brokers", "--json", "--server", "http://y:2")
    assert (a.json, a.server) == (True, "http://y:2")
    a = args_for("kv", "list", "--json")
    assert a.json and a.namespace is None


def test_no_token_flag_exists(capsys):
    with pytest.raises(SystemExit) as e:
        args_for("--token", "secret", "clusters")
    assert e.value.code == 2


def test_token_from_file_else_the_servers_variables(tmp_path, capsys):
    env = {"NAMESRV_ADMIN_TOKEN": "admin-env", "NAMESRV_READ_TOKEN": "read-env"}
    assert commands.read_token(args_for("clusters"), env) == ("admin-env", "admin")
    assert commands.read_token(args_for("clusters"), {"NAMESRV_READ_TOKEN": "read-env"}) == ("read-env", "read")
    assert commands.read_token(args_for("clusters"), {}) == (None, "admin")
    f = tmp_path / "token"
    f.write_text("from-file\n")
    os.chmod(f, 0o600)
    assert commands.read_token(args_for("--token-file", str(f), "clusters"), env) == ("from-file", "admin")
    assert commands.read_token(args_for("--token-file", str(f), "--access-key", "read", "clusters"), env) == (
        "from-file", "read")
    assert capsys.readouterr().err == ""
    os.chmod(f, 0o644)
    commands.read_token(args_for("--token-file", str(f), "clusters"), env)
    assert "readable by others" in capsys.readouterr().err
    f.write_text("\n")
    with pytest.raises(AdminError) as e:
        commands.read_token(args_for("--token-file", str(f), "clusters"), env)
    assert e.value.exit_code == 2
    with pytest.raises(AdminError) as e:
        commands.read_token(args_for("--token-file", str(tmp_path / "missing"), "clusters"), env)
    assert e.value.exit_code == 2


def test_unreachable_is_exit_3(capsys):
    from tests.redis_server import free_port

    code = commands.run(args_for("--server", f"http://127.0.0.1:{free_port()}", "clusters"), env={})
    assert code == 3 and "cannot reach" in capsys.readouterr().err
    code = commands.run(args_for("--server", f"rmq://127.0.0.1:{free_port()}", "route", "T"), env={})
    assert code == 3


def test_skew_history_without_runs_says_where_runs_come_from():
    assert "no skew runs kept yet" in text_of(render.skew_history([]))


def _error_classes() -> list[type]:
    from service import errors

    found, pending = [], [errors.NamesrvError]
    while pending:
        cls = pending.pop()
        if cls.__module__ == "service.errors":  # the core's errors: both doors carry them
            found.append(cls)
        pending.extend(cls.__subclasses__())
    return found


# docs/operating.md "Exit codes", by what the error means
DOCUMENTED = {"TOPIC_NOT_EXIST": 1, "QUERY_NOT_FOUND": 1, "REPORT_NOT_FOUND": 1, "BROKER_NOT_FOUND": 1,
              "INVALID_ARGUMENT": 2, "PAYLOAD_TOO_LARGE": 2, "NOT_SUPPORTED": 2,
              "SYSTEM_ERROR": 3, "UNAVAILABLE": 3, "NOT_READY": 3, "STORE_UNAVAILABLE": 3, "SYSTEM_BUSY": 3,
              "TOO_MANY_WATCHERS": 3,
              "UNAUTHORIZED": 4, "FORBIDDEN": 4, "CROSS_CLUSTER_REFUSED": 4, "CONFIG_BLACKLISTED": 4, "DISABLED": 4,
              "CONFLICT": 4, "BROKER_NAME_CONFLICT": 4, "REGISTER_FAILED": 4}


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda c: c.code)
def test_every_error_exits_alike_on_both_doors(cls):
    """Each error as each door sends it (the HTTP door's status and JSON, the native door's response code and
    remark), read back by `namesrv admin`'s two clients: the same exit code, the same message and code."""
    import urllib.error

    from service.http.errors import error_response, http_status
    from service.remoting.handlers import error_reply

    err = cls("the reason")
    body = error_response(err).body
    http_error = urllib.error.HTTPError("http://h/v1/x", http_status(err), "", {}, io.BytesIO(body))
    over_http = HttpApi("http://h", None)._refused(http_error)
    with pytest.raises(AdminError) as e:
        RemotingApi._check(error_reply(err))
    over_rmq = e.value
    assert over_http.exit_code == over_rmq.exit_code == DOCUMENTED[cls.code]
    if cls.rocketmq_code == 1:  # SYSTEM_ERROR stands for many: the remark names ours
        assert (over_rmq.message, over_rmq.code) == (over_http.message, over_http.code) == ("the reason", cls.code)


LONG_FLEET = {"now": 1_000_000, "brokers": [
    {"cluster": "ClusterProduction", "brokerName": f"broker-orders-{g}", "brokerId": i,
     "brokerAddr": f"10.200.100.{110 + 2 * n + i}:10911", "lastHeartbeat": 988_000, "ageMillis": 12_000 + 60_000 * i,
     "heartbeatTimeoutMillis": 120_000, "dataVersion": {"counter": 3, "timestamp": 1_700_000_000_000,
                                                         "stateVersion": 0}, "topicCount": 12}
    for n, g in enumerate("ab") for i in (0, 1)]}


def on_terminal(renderable, columns: int) -> list[str]:
    from rich.console import Console

    out = io.StringIO()
    render.show(Console(file=out, width=columns, force_terminal=True, color_system=None), renderable)
    return [line.rstrip() for line in out.getvalue().splitlines()]


def test_a_narrow_terminal_drops_columns_and_never_cuts_a_name_id_role_or_address():
    """At 80 columns `brokers` printed `B…` and `10.0.0.…`, dropped ID and ROLE and kept DATA VERSION: now the
    least useful columns go first and what identifies a broker is printed whole (issue 39)."""
    lines = on_terminal(render.brokers(LONG_FLEET), 80)
    text = "\n".join(lines)
    assert "…" not in text and all(len(line) <= 80 for line in lines), text
    for b in LONG_FLEET["brokers"]:
        row = next(line.split() for line in lines if b["brokerAddr"] in line)
        assert row[:5] == [b["cluster"], b["brokerName"], str(b["brokerId"]), display.role(b["brokerId"]),
                           b["brokerAddr"]]
    assert "DATA VERSION" not in text and "TIMEOUT" not in text  # the least useful went first
    assert "HEARTBEAT" in text  # what the command is for stays
    wide = "\n".join(on_terminal(render.brokers(LONG_FLEET), 120))
    assert "TOPICS" in wide and "TIMEOUT" in wide and "DATA VERSION" not in wide  # dropped in the order given
    assert "counter 3 · 2023-11-14 22:13:20 UTC" in "\n".join(on_terminal(render.brokers(LONG_FLEET), 200))


def test_when_even_the_kept_columns_are_wider_the_terminal_wraps_rather_than_anything_being_cut():
    lines = on_terminal(render.brokers(LONG_FLEET), 40)
    text = "\n".join(lines)
    assert "…" not in text and "10.200.100.113:10911" in text and "broker-orders-b" in text


def redrawn(renderable, columns: int) -> list[str]:
    """What `watch` shows: the renderable in rich's Live, which cuts what passes the terminal's width."""
    from rich.console import Console
    from rich.live import Live

    out = io.StringIO()
    console = Console(file=out, width=columns, height=200, force_terminal=True, color_system=None)
    with Live(renderable, console=console, auto_refresh=False):
        pass
    lines = [re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", line).rstrip() for line in out.getvalue().splitlines()]
    last = max(i for i, line in enumerate(lines) if line.startswith("Live brokers"))  # Live draws on stop too
    return lines[last:]


def test_a_table_redrawn_in_place_fits_the_terminal_with_every_character():
    """`watch` at 60 columns showed `HEARTB` and no age at all: Live cuts what passes the width (issue 39, second
    round). Its table closes up, then folds its widest values over more lines: every character is still there."""
    shown = ["Live brokers", "CLUSTER", "BROKER", "ID", "ROLE", "ADDRESS", "LAST HEARTBEAT"]
    for b in LONG_FLEET["brokers"]:
        shown += [b["cluster"], b["brokerName"], str(b["brokerId"]), display.role(b["brokerId"]), b["brokerAddr"],
                  display.age(b["ageMillis"])]
    expected = collections.Counter("".join(shown).replace(" ", ""))
    for columns in (70, 60, 40):
        lines = redrawn(render.brokers(LONG_FLEET, title="Live brokers", fit=True), columns)
        assert all(len(line) <= columns for line in lines), (columns, lines)
        assert collections.Counter("".join(lines).replace(" ", "").replace("─", "")) == expected, (columns, lines)


def test_lists_and_values_wrap_inside_their_column_whole_words_kept():
    info = {"clusterAddrTable": {"ClusterProduction": [f"broker-with-a-long-name-{i}" for i in range(6)]},
            "brokerAddrTable": {}}
    lines = on_terminal(render.clusters(render.cluster_rows(info, None)), 80)
    text = "\n".join(lines)
    assert all(len(line) <= 80 for line in lines) and "…" not in text
    assert all(f"broker-with-a-long-name-{i}" in text for i in range(6))  # each name whole on its line
    lines = on_terminal(render.kv("ns", {"key": "v" * 150}), 80)
    assert "".join(line.split()[-1] for line in lines[3:]).endswith("v" * 150)  # folded, not cut


def test_piped_output_is_whole_whatever_columns_says(monkeypatch):
    """A pipe gets every column and every value in full, even with COLUMNS=80 in the environment."""
    monkeypatch.setenv("COLUMNS", "80")
    text = text_of(render.brokers(LONG_FLEET))
    assert "counter 3 · 2023-11-14 22:13:20 UTC" in text and "TIMEOUT" in text and "…" not in text
    assert max(len(line) for line in text.splitlines()) > 80


@pytest.mark.parametrize("server,said", [
    ("http://127.0.0.1:8080/v1?x=1", "--server 'http://127.0.0.1:8080/v1?x=1': a server is "
                                     "scheme://host:port[/prefix], nothing more (got '/v1?x=1')"),
    ("rmq://127.0.0.1:9876/x", "--server 'rmq://127.0.0.1:9876/x': a server is scheme://host:port, nothing more "
                               "(got '/x')"),
    ("http://127.0.0.1:99999", "--server 'http://127.0.0.1:99999': the port is 1..65535"),
    ("http://:8080", "--server 'http://:8080': no host"),
])
def test_a_server_address_that_cannot_be_meant_is_a_usage_error(server, said):
    """Port 99999 was "Connection refused" (exit 3), a path on rmq:// was dropped: mistakes in the address, told as
    such (issue 39, round 2). An HTTP path stays: the prefix a proxy serves the API under."""
    with pytest.raises(AdminError) as e:
        connect(server, None)
    assert (e.value.exit_code, e.value.message) == (2, said)


@pytest.mark.parametrize("timeout", ["0", "-1", "nan", "1e9"])
def test_a_timeout_out_of_range_is_a_usage_error(timeout, capsys):
    """`--timeout -1` ended in a traceback (ValueError: Timeout value out of range), `--timeout 0` in "cannot reach
    …: Operation now in progress" with exit 3 (issue 39, round 2)."""
    assert commands.run(args_for("--timeout", timeout, "--server", "http://127.0.0.1:1", "clusters"), {}) == 2
    assert capsys.readouterr().err == "namesrv admin clusters: --timeout: seconds above 0, at most 3600\n"


@pytest.mark.parametrize("where,said", [("no-such-folder/kv.json", "no folder "), ("a-folder", "Is a directory")])
def test_kv_export_to_a_path_it_cannot_write_says_so(tmp_path, where, said):
    """`kv export /nonexistent-dir/x.json` ended in a FileNotFoundError traceback naming its temporary file
    (issue 39, round 2)."""
    from service.admin import kv_migrate

    (tmp_path / "a-folder").mkdir()
    with pytest.raises(AdminError) as e:
        kv_migrate.write_file(str(tmp_path / where), "{}", force=True)
    assert e.value.exit_code == 2 and e.value.message.startswith(f"cannot write {tmp_path / where}: ")
    assert said in e.value.message and ".kvConfig." not in e.value.message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-folder"]  # nothing left behind


def test_count_without_watch_is_a_usage_error(capsys):
    """`route TopicTest --count 1` printed the route once and ignored --count, which only counts --watch's routes
    (issue 39, round 2)."""
    assert commands.run(args_for("--server", "http://127.0.0.1:1", "route", "TopicTest", "--count", "1"), {}) == 2
    assert capsys.readouterr().err == "namesrv admin route: --count counts the routes --watch prints: add --watch\n"
