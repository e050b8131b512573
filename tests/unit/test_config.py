"""Settings: flags > env > file > defaults, RocketMQ spellings in files, `-p` output with secrets masked."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from service.cli import build_parser, main
from service.config import SETTINGS, ConfigError, load_settings


def test_precedence(tmp_path):
    f = tmp_path / "namesrv.properties"
    f.write_text("# comment\nport=7000\norderMessageEnable=true\nNAMESRV_SCAN_INTERVAL_MS=2000\nkey-prefix: fromfile\n")
    s = load_settings(file=str(f), env={"NAMESRV_PORT": "7100", "NAMESRV_KEY_PREFIX": "fromenv"},
                      flags={"port": 7200})
    assert s.port == 7200  # flag beats env and file
    assert s.key_prefix == "fromenv"  # env beats file
    assert s.order_message_enable is True and s.scan_interval_ms == 2000  # file beats defaults
    assert s.broker_timeout_ms == 120_000  # default
    assert load_settings(env={}).embedded


@pytest.mark.parametrize(("env", "fragment"), [
    ({"NAMESRV_PORT": "http"}, "integer"), ({"NAMESRV_PORT": "0"}, "minimum"),
    ({"NAMESRV_ORDER_MESSAGE_ENABLE": "maybe"}, "true/false"), ({"NAMESRV_KEY_PREFIX": "a:b"}, "key_prefix"),
    ({"NAMESRV_REDIS_URL": "http://x"}, "redis_url"), ({"NAMESRV_BROKER_TOKENS": "c:short"}, "at least 8"),
    ({"NAMESRV_LOG_LEVEL": "LOUD"}, "one of"),
])
def test_bad_values_are_clear_errors(env, fragment):
    with pytest.raises(ConfigError, match=fragment):
        load_settings(env=env)


@pytest.mark.parametrize(("env", "setting"), [
    ({"NAMESRV_ADMIN_TOKEN": "Q"}, "admin_token"), ({"NAMESRV_READ_TOKEN": "r-1234"}, "read_token"),
    ({"NAMESRV_BROKER_TOKENS": "C1:b-12345"}, "broker_tokens"), ({"NAMESRV_BROKER_TOKENS": "zq#1234"}, "broker_tokens"),
])
def test_one_minimum_length_for_every_token(env, setting, capsys, monkeypatch):
    with pytest.raises(ConfigError, match=f"^{setting}: .* needs at least 8") as err:
        load_settings(env=env)
    assert next(iter(env.values())).split(":")[-1] not in str(err.value)  # the error never shows the token
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["serve", "-p"]) == 2  # the start-up error states the rule
    assert "every token (admin_token, read_token, broker_tokens) needs at least 8" in capsys.readouterr().err
    eight = {name: value.rpartition(":")[0] + ":" * (":" in value) + "12345678" for name, value in env.items()}
    load_settings(env=eight)  # 8 characters start, whichever token it is


def test_readme_token_examples_start():
    """Every literal token setting the docs show is one the server accepts (README examples must start)."""
    root = Path(__file__).resolve().parents[2]
    pattern = re.compile(r"(NAMESRV_(?:BROKER_TOKENS|ADMIN_TOKEN|READ_TOKEN))=([^\s`$…'\"]+)")
    found = []
    for doc in [root / "README.md", root / "helm" / "README.md", *(root / "docs").glob("*.md")]:
        for name, value in pattern.findall(doc.read_text()):
            found.append(doc.name)
            load_settings(env={name: value})
    assert "README.md" in found


def test_unknown_file_key(tmp_path):
    f = tmp_path / "x.properties"
    f.write_text("noSuchSetting=1\n")
    with pytest.raises(ConfigError, match="unknown setting"):
        load_settings(file=str(f), env={})


def test_print_config_masks_secrets(capsys, monkeypatch):
    monkeypatch.setenv("NAMESRV_ADMIN_TOKEN", "super-secret-admin")
    monkeypatch.setenv("NAMESRV_PORT", "9999")
    assert main(["serve", "-p"]) == 0
    out = capsys.readouterr().out
    assert "NAMESRV_PORT=9999" in out and "NAMESRV_ADMIN_TOKEN=***" in out
    assert "super-secret-admin" not in out
    assert len(out.strip().splitlines()) == len(SETTINGS)


def test_a_mistyped_environment_variable_is_named(capsys, monkeypatch):
    """`NAMESRV_PROT=18090 namesrv serve -p` printed NAMESRV_PORT=8080 and nothing else: in a Deployment's env a
    typo silently keeps the default (issue 39, second round), while the same typo in a -c file is refused. A
    warning, not an error: NAMESRV_ADDR is RocketMQ's own client variable, NAMESRV_SERVER the admin CLI's."""
    monkeypatch.setenv("NAMESRV_PROT", "18090")
    monkeypatch.setenv("NAMESRV_REDIS_PASWORD", "s3cret")
    monkeypatch.setenv("NAMESRV_ADDR", "10.0.0.1:9876")
    monkeypatch.setenv("NAMESRV_SERVER", "http://10.0.0.1:8080")
    assert main(["serve", "-p"]) == 0
    said = capsys.readouterr()
    assert "NAMESRV_PORT=8080" in said.out
    assert said.err.splitlines() == [
        "namesrv: warning: NAMESRV_PROT is not a setting, ignored (did you mean NAMESRV_PORT?)",
        "namesrv: warning: NAMESRV_REDIS_PASWORD is not a setting, ignored (did you mean NAMESRV_REDIS_PASSWORD?)"]


def test_kubernetes_service_links_are_told_apart(capsys, monkeypatch):
    """Kubernetes gives every pod <SERVICE>_PORT=tcp://… and the like for each Service of its namespace: those are
    not typos, and a Service named `namesrv` (a RocketMQ NameServer's usual name) sets NAMESRV_PORT itself."""
    monkeypatch.setenv("NAMESRV_RMQ_NAMESRV_SERVICE_HOST", "10.96.0.5")
    monkeypatch.setenv("NAMESRV_RMQ_NAMESRV_PORT", "tcp://10.96.0.5:8080")
    monkeypatch.setenv("NAMESRV_RMQ_NAMESRV_PORT_8080_TCP_ADDR", "10.96.0.5")
    assert main(["serve", "-p"]) == 0
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("NAMESRV_PORT", "tcp://10.96.0.7:9876")
    assert main(["serve", "-p"]) == 2
    assert capsys.readouterr().err == "namesrv: configuration error: port: expected an integer, got " \
        "'tcp://10.96.0.7:9876': that is how Kubernetes links a Service named namesrv into every pod of its " \
        "namespace; set enableServiceLinks: false in the pod spec (the chart does), or rename that Service\n"


def test_cli_errors_exit_2(capsys, monkeypatch):
    monkeypatch.setenv("NAMESRV_PORT", "nope")
    assert main(["serve"]) == 2
    assert "configuration error" in capsys.readouterr().err
    monkeypatch.delenv("NAMESRV_PORT")
    assert main(["serve", "--workers", "2"]) == 2  # embedded + several workers: refused
    assert main(["snapshot"]) == 2  # needs a shared Redis


def test_parser_has_the_subcommands():
    parser = build_parser()
    for argv in (["serve", "--port", "1"], ["snapshot"], ["expire"], ["skew-report", "--since", "1h"]):
        assert parser.parse_args(argv).command == argv[0]


def test_redis_passwords_are_masked_in_print_config_and_the_config_endpoint(capsys, monkeypatch):
    monkeypatch.setenv("NAMESRV_REDIS_URL", "redis://app:s3cret-pass@10.0.0.5:6379/0")
    assert main(["serve", "-p"]) == 0
    out = capsys.readouterr().out
    assert "s3cret-pass" not in out and "NAMESRV_REDIS_URL=redis://app:***@10.0.0.5:6379/0" in out
    s = load_settings(env={"NAMESRV_REDIS_URL": "rediss://:only-pass@h:1/0"})
    assert s.masked()["redis_url"] == "rediss://:***@h:1/0"
    assert load_settings(env={"NAMESRV_REDIS_URL": "redis://h:1/0"}).masked()["redis_url"] == "redis://h:1/0"


def test_log_lines_never_carry_secrets(capsys):
    import logging

    from service.logs import setup_logging

    s = load_settings(env={"NAMESRV_REDIS_URL": "redis://u:pw-in-url@h:1/0", "NAMESRV_ADMIN_TOKEN": "admin-secret-1",
                           "NAMESRV_BROKER_TOKENS": "C1:broker-secret-1"})
    setup_logging(s)
    log = logging.getLogger("test.secrets")
    log.warning("connect %s failed (token %s, %s)", "redis://u:pw-in-url@h:1/0", "admin-secret-1", "broker-secret-1")
    try:
        raise ConnectionError("cannot reach rediss://x:another-pw@h2:6380")
    except ConnectionError:
        log.exception("boom")
    err = capsys.readouterr().err
    for secret in ("pw-in-url", "admin-secret-1", "broker-secret-1", "another-pw"):
        assert secret not in err
    assert "redis://u:***@h:1/0" in err and "rediss://x:***@h2:6380" in err


def test_every_number_setting_has_a_documented_range():
    for s in SETTINGS:
        if s.kind in (int, float):
            assert s.minimum is not None and s.maximum is not None, s.name
            assert s.minimum <= s.default <= s.maximum, s.name


@pytest.mark.parametrize(("key", "value"), [("waitSecondsForService", 100_000), ("brokerTimeoutMs", 10**12),
                                            ("waitSecondsForService", -1)])
async def test_runtime_settings_are_bounded(client, key, value):
    r = await client.put("/v1/config", json={key: value})
    message = (await r.json())["message"]
    assert r.status == 400 and ("maximum" in message or "minimum" in message), message


def test_one_shot_commands_against_an_unreachable_redis_print_one_line(capsys):
    for command in ("snapshot", "expire"):
        assert main([command, "--redis-url", "redis://127.0.0.1:1/0"]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"namesrv {command}: ") and "Redis" in err[0], err
        assert "Redis redis://127.0.0.1:1/0 is unavailable (ConnectionError: Error 111 connecting to 127.0.0.1:1." in \
            err[0]  # where and why (issue 39), not only "ConnectionError; retry shortly"


def test_registration_chunk_topics_shows_the_step_in_force():
    """0 means "the store's step": the config shown (`config get`, `-p`) says which, as README and docs say."""
    assert load_settings(env={}).masked()["registration_chunk_topics"] == 200  # embedded
    redis = load_settings(env={"NAMESRV_REDIS_URL": "redis://h:1/0"})
    assert (redis.registration_chunk_topics, redis.chunk_topics) == (0, 1000)
    assert "NAMESRV_REGISTRATION_CHUNK_TOPICS=1000\n" in redis.as_properties()
    assert load_settings(env={"NAMESRV_REGISTRATION_CHUNK_TOPICS": "50"}).masked()["registration_chunk_topics"] == 50
