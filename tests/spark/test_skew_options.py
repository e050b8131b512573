"""skew-report takes the common options (-c, --redis-url, --key-prefix) and reads its settings like every
other command (flags > NAMESRV_* env > file); --prefix still works, deprecated."""

from __future__ import annotations

import argparse

import pytest
import redis

from service.cli import build_parser
from service.skew import job, options
from tests.redis_server import RedisServer


def parse(*argv: str) -> argparse.Namespace:
    return job.build_parser().parse_args(list(argv))


@pytest.fixture(autouse=True)
def fresh_deprecation_notice(monkeypatch):
    monkeypatch.setattr(options, "_warned_prefix", False)
    for name in ("NAMESRV_REDIS_URL", "NAMESRV_KEY_PREFIX", "NAMESRV_REDIS_PASSWORD"):
        monkeypatch.delenv(name, raising=False)


def test_parse_duration():
    assert options.parse_duration("24h") == 86400
    assert options.parse_duration("10m") == 600
    assert options.parse_duration("90s") == 90
    assert options.parse_duration("7d") == 7 * 86400
    assert options.parse_duration("1.5h") == 5400
    assert options.parse_duration("500ms") == 0.5
    assert options.parse_duration("42") == 42
    assert [options.duration_text(s) for s in (86400, 5400, 7200, 1.5)] == ["1d", "90m", "2h", "1.5s"]
    for bad in ("", "h", "24x", "-1h", "0m", "1h30m"):
        with pytest.raises(ValueError, match="bad duration"):
            options.parse_duration(bad)


def test_namesrv_skew_report_takes_the_common_options(tmp_path):
    conf = tmp_path / "namesrv.properties"
    conf.write_text("keyPrefix=fromfile\n")
    args = build_parser().parse_args(
        ["skew-report", "-c", str(conf), "--redis-url", "redis://h:1/0", "--key-prefix", "p1", "--since", "2h"]
    )
    opts = options.options_of(args, env={})
    assert (opts.settings.redis_url, opts.prefix, opts.since_s) == ("redis://h:1/0", "p1", 7200)


def test_flags_over_env_over_file(tmp_path):
    conf = tmp_path / "namesrv.properties"
    conf.write_text("NAMESRV_REDIS_URL=redis://file:1/0\nkey_prefix=fromfile\nredisPassword=filepw\n")
    env = {"NAMESRV_KEY_PREFIX": "fromenv", "NAMESRV_REDIS_PASSWORD": "envpw"}
    opts = options.options_of(parse("-c", str(conf)), env=env)
    assert (opts.settings.redis_url, opts.prefix, opts.settings.redis_password) == (
        "redis://file:1/0", "fromenv", "envpw")
    opts = options.options_of(parse("-c", str(conf), "--key-prefix", "fromflag"), env=env)
    assert opts.prefix == "fromflag"
    assert job.reader_for(opts).spec.password == "envpw"
    assert job.reader_for(opts).prefix == "fromflag"


def test_deprecated_prefix_still_works_and_says_so_once(capsys):
    a = parse("--redis-url", "redis://h:1/0", "--prefix", "old")
    assert options.options_of(a, env={}).prefix == "old"
    assert options.options_of(a, env={}).prefix == "old"
    err = capsys.readouterr().err
    assert err.count("--prefix is deprecated") == 1 and "--key-prefix" in err
    assert options.options_of(parse("--prefix", "old", "--key-prefix", "old"), env={}).prefix == "old"
    with pytest.raises(options.ConfigError, match="disagree"):
        options.options_of(parse("--prefix", "old", "--key-prefix", "new"), env={})


def test_bad_settings_are_usage_errors(capsys, monkeypatch):
    monkeypatch.setenv("NAMESRV_KEY_PREFIX", "not a prefix!")
    assert job.main(["--redis-url", "redis://127.0.0.1:1/0"]) == 2
    assert "configuration error" in capsys.readouterr().err


def test_redis_url_is_required(capsys):
    assert job.main([]) == 2
    assert "--redis-url" in capsys.readouterr().err


@pytest.mark.redis
def test_password_from_the_config_file_reaches_redis(tmp_path, capsys):
    """A Redis with a password: the job authenticates with NAMESRV_REDIS_PASSWORD from `-c` (it used to read
    the environment only). No snapshot there, so a successful login ends in exit 2 'no snapshots'."""
    server = RedisServer().start()
    try:
        redis.Redis.from_url(server.url).config_set("requirepass", "s3cret-pw")
        conf = tmp_path / "namesrv.properties"
        conf.write_text(f"NAMESRV_REDIS_URL={server.url}\nNAMESRV_REDIS_PASSWORD=s3cret-pw\n")
        assert job.main(["-c", str(conf), "--since", "1h", "--out", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err
        assert "no snapshots in the last 1h under {nsrv}:snaps" in err

        wrong = tmp_path / "wrong.properties"
        wrong.write_text(f"NAMESRV_REDIS_URL={server.url}\nNAMESRV_REDIS_PASSWORD=wrong-pw\n")
        assert job.main(["-c", str(wrong), "--since", "1h"]) == 1
        err = capsys.readouterr().err
        assert "Redis at" in err and "wrong-pw" not in err
    finally:
        server.cleanup()
