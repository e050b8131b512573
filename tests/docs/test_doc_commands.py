"""Every command the docs show, run as printed against a real server, its output compared with what the doc shows
under it (tests/docs/doccheck.py; the convention: README, "How docs are tested"). One fresh server per doc,
shared by its blocks in document order, as a reader following the doc top to bottom would have: `namesrv serve`
in embedded mode, or on a real redis-server of its own for `check redis` blocks.

What is normalised, and why (nothing else is): the ports — the doc's 8080, 9876 and 6379 are the test servers'
free loopback ports, in the commands run and back in the output compared; and whatever the doc itself elides
with `…` (request ids, heartbeat ages, timestamps: the reader sees the elision).
"""

from __future__ import annotations

import re
import shlex
import subprocess

import pytest

from tests.conftest import need
from tests.docs.doccheck import REPO, SHELL_LANGS, Block, Shell, blocks, checked_docs, rel, report
from tests.integration.conftest import Namesrv
from tests.redis_server import RedisServer

DOCS = checked_docs()
RUN = [d for d in DOCS if any(b.checked for b in blocks(d))]


def test_every_shell_block_is_checked_or_says_why_not():
    """No shell block is skipped silently: each is `check`ed, or marked `not-run: <reason>`."""
    problems = []
    for doc in DOCS:
        for b in blocks(doc):
            if not b.is_shell and b.info.split()[:1] == ["check"]:
                problems.append(f"{b.where}: only shell blocks ({', '.join(sorted(SHELL_LANGS))}) can be checked")
            if not b.is_shell or b.checked:
                continue
            reason = b.not_run_reason
            if reason is None:
                problems.append(f"{b.where}: ```{b.lang} block is neither `check` nor `not-run: <reason>`")
            elif len(reason.split()) < 3:
                problems.append(f"{b.where}: say why it is not run, in a few words (not-run: {reason!r})")
    assert not problems, "\n".join(problems)


def test_checked_blocks_have_commands():
    """A `check` block runs something (a checked block with only comments would check nothing)."""
    empty = [b.where for d in RUN for b in blocks(d) if b.checked and not b.commands()]
    assert not empty, empty


class Servers:
    """The doc's servers, started when a block first needs one: embedded, or on a redis-server of its own (the
    default key prefix `nsrv`, so keys a doc shows are the real ones)."""

    def __init__(self) -> None:
        self.started: dict[str, tuple[Namesrv, RedisServer | None]] = {}

    def ports(self, backend: str) -> dict[str, int]:
        if backend not in self.started:
            redis = None
            if backend == "redis":
                need("redis-server")
                redis = RedisServer().start()
            srv = Namesrv(redis.url if redis else "", "nsrv", watch_keepalive_s=1).wait_ready()
            self.started[backend] = (srv, redis)
        srv, redis = self.started[backend]
        ports = {"http": srv.port, "remoting": srv.remoting_port}
        if redis:
            ports["redis"] = redis.port
        return ports

    def stop(self) -> None:
        for srv, redis in self.started.values():
            srv.stop()
            if redis:
                redis.cleanup()


@pytest.mark.parametrize("doc", RUN, ids=rel)
def test_doc_commands_print_what_the_doc_shows(doc):
    need("curl")
    servers = Servers()
    shell = Shell({})
    failures: list[str] = []
    try:
        for b in blocks(doc):
            if not b.checked:
                continue
            failures += run_block(b, shell, servers)
    finally:
        servers.stop()
    assert not failures, f"{len(failures)} command(s) of {rel(doc)} differ from the doc:\n\n" + "\n".join(failures)


def run_block(b: Block, shell: Shell, servers: Servers) -> list[str]:
    shell.ports = servers.ports(b.backend)
    out = []
    for cmd in b.commands():
        result = shell.run(cmd)
        if result.problem:
            out.append(report(b, result))
    return out


def test_the_first_screen_says_how_to_change_ports():
    """The README's first screen (above its first rule) keeps its two commands, start and test, and names the flags
    that move the two doors; the command it shows takes them (`-p` prints the settings in force and exits)."""
    first = (REPO / "README.md").read_text().split("\n---\n", 1)[0]
    assert "namesrv serve" in first and "bash .ci/run" in first
    shown = re.findall(r"`(namesrv serve --port \d+ --remoting-port \d+)`", first)
    assert shown, "the first screen shows no `namesrv serve --port N --remoting-port M`"
    http, remoting = re.findall(r"\d+", shown[0])
    printed = subprocess.run([*shlex.split(shown[0]), "-p"], capture_output=True, text=True, timeout=30, check=True,
                             cwd=REPO, env=Shell({}).env).stdout.splitlines()
    assert f"NAMESRV_PORT={http}" in printed and f"NAMESRV_REMOTING_PORT={remoting}" in printed
    assert "NAMESRV_PORT" in first and "NAMESRV_REMOTING_PORT" in first


def test_a_check_redis_block_runs_on_a_server_over_a_real_redis(tmp_path):
    """`check redis`: the server the block talks to on 8080 keeps its registry on the redis-server the block reaches
    on 6379 (both rewritten to the test's ports); a wrong output is reported with the doc's line."""
    need("redis-server")
    need("redis-cli")
    doc = tmp_path / "d.md"
    doc.write_text("```bash check redis\n"
                   "curl -s -XPUT localhost:8080/v1/kv/NS/k -d '{\"value\": \"v\"}'\n"
                   '# {"namespace":"NS","key":"k","value":"v"}\n'
                   "redis-cli -p 6379 HGET '{nsrv}:kv:NS' k\n# v\n"
                   "redis-cli -p 6379 HGET '{nsrv}:kv:NS' k\n# w\n```\n")
    servers = Servers()
    try:
        (block,) = blocks(doc)
        failures = run_block(block, Shell({}), servers)
    finally:
        servers.stop()
    assert len(failures) == 1 and failures[0].startswith("d.md:6: output differs"), failures
