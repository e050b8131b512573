"""Settings: flags > env > file > defaults, RocketMQ spellings in files, `-p` output with secrets masked."""

from __future__ import annotations

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
    ({"NAMESRV_REDIS_URL": "http://x"}, "redis_url"), ({"NAMESRV_BROKER_TOKENS": "c:short"}, "8 characters"),
    ({"NAMESRV_LOG_LEVEL": "LOUD"}, "one of"),
])
def test_bad_values_are_clear_errors(env, fragment):
    with pytest.raises(ConfigError, match=fragment):
        load_settings(env=env)


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
