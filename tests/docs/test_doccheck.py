"""The doc checker itself: how it reads blocks and commands, and that a wrong output, a failing command or a
stream that never shows its output fails (a checker that cannot fail would check nothing)."""

from __future__ import annotations

import textwrap

from tests.docs.doccheck import Command, Shell, blocks, matches, normalise_output, parse_commands


def _cmds(text: str) -> list[Command]:
    return parse_commands(textwrap.dedent(text).strip("\n").splitlines(), 1)


def test_commands_take_the_comment_lines_right_under_them_as_output():
    cmds = _cmds("""
        # prose before the first command
        curl -s localhost:8080/a   # a trailing comment is prose
        # {"a":1}
        # second line

        # prose after a blank line
        curl -s -XPOST localhost:8080/b -d '{
          "x": 1}'
        # {"b":2}
        echo done
        """)
    assert [c.text.splitlines()[0] for c in cmds] == [
        "curl -s localhost:8080/a   # a trailing comment is prose", "curl -s -XPOST localhost:8080/b -d '{",
        "echo done"]
    assert cmds[0].expected == ['{"a":1}', "second line"]
    assert cmds[1].expected == ['{"b":2}'] and cmds[1].line == 7
    assert cmds[2].expected == []


def test_blocks_read_their_info_string(tmp_path):
    doc = tmp_path / "d.md"
    doc.write_text("x\n```bash check\necho a\n# a\n```\n\n  ```sh not-run: needs a Kubernetes cluster\n"
                   "  kubectl get pods\n  ```\n```json\n{}\n```\n```bash\nls\n```\n")
    bs = blocks(doc)
    assert [(b.lang, b.checked, b.not_run_reason, b.is_shell) for b in bs] == [
        ("bash", True, None, True), ("sh", False, "needs a Kubernetes cluster", True), ("json", False, None, False),
        ("bash", False, None, True)]
    assert bs[1].lines == ["kubectl get pods"]


def test_matching_is_exact_but_for_the_ellipsis_and_wrapping():
    assert matches(['{"a":1}'], '{"a":1}\n')
    assert not matches(['{"a":1}'], '{"a":2}\n')
    assert not matches(['{"a":1}'], '{"a":1}\nmore\n')  # nothing printed beyond what the doc shows
    assert not matches([], "something\n")  # a command shown without output must print nothing
    assert matches(['{"id":"…","a":1}'], '{"id":"2ce6-1","a":1}\n')
    assert not matches(['{"id":"…","a":1}'], '{"id":"2ce6-1","a":2}\n')
    assert matches(["first", "…", "last"], "first\nx\ny\nlast\n")
    assert matches(["first", "…", "last"], "first\nlast\n")
    # a one-line output wrapped in the doc: indented continuation lines joined without their indent
    assert matches(['{"a":1,', '  "b":2}'], '{"a":1,"b":2}\n')
    assert not matches(['{"a":1,', '  "b":3}'], '{"a":1,"b":2}\n')
    # lines of a multi-line output are not joined
    assert not matches(["{", '  "a": 1', "}"], '{"a": 1}\nx\n')
    assert matches(["{", '  "a": 1', "}"], '{\n  "a": 1\n}\n')


def test_only_the_servers_ports_are_written_back():
    ports = {"http": 41234, "remoting": 41235}
    assert normalise_output("at 127.0.0.1:41234 and :41235; 412345 stays  \n\n", ports) == (
        "at 127.0.0.1:8080 and :9876; 412345 stays\n")


def test_a_command_that_fails_or_prints_otherwise_is_reported():
    sh = Shell({"http": 41234})
    ok = sh.run(_cmds("echo localhost:8080\n# localhost:8080")[0])
    assert ok.problem == "" and ok.output == "localhost:8080\n"
    assert sh.run(_cmds("echo hello\n# goodbye")[0]).problem == "output differs"
    assert sh.run(_cmds("echo hi >&2; false\n# hi")[0]).problem == "exit status 1"


def test_exports_hold_for_the_commands_after_them():
    sh = Shell({})
    for c in _cmds('export DOC_X=42\necho "x=$DOC_X"\n# x=42'):
        assert sh.run(c).problem == ""


def test_ctrl_c_stops_a_command_once_its_output_is_shown():
    sh = Shell({}, timeout=10)
    stream = _cmds("while true; do echo tick; sleep 0.1; done\n# tick\n# tick\n# …\n# ^C")[0]
    # the output seen before Ctrl-C may be any number of ticks; it only has to match
    assert stream.interrupted and sh.run(stream).problem == ""
    never = Shell({}, timeout=1).run(_cmds("sleep 5\n# ready\n# ^C")[0])
    assert never.problem == "still running after 1 s"
    early = Shell({}, timeout=5).run(_cmds("echo done\n# ready\n# ^C")[0])  # exits before showing it
    assert early.problem.startswith("ended by itself")


def test_ctrl_c_reaches_commands_when_the_suite_was_started_with_it_ignored():
    """`.ci/run` started in the background of a script (`bash .ci/run > log &`, as one runs a 40-minute job) inherits
    SIGINT ignored, and so did every process the tests started: the doc checker's Ctrl-C, and the interop tier's
    to the README's Python consumer, did nothing, and three tests failed on a fresh clone (issue 39, second round).
    The suite restores Ctrl-C for itself and its children (tests/conftest.py)."""
    import signal
    import subprocess
    import sys

    from tests.docs.doccheck import REPO

    def ignore_ctrl_c() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "tests/docs/test_doccheck.py::test_ctrl_c_stops_a_command_once_its_output_is_shown"],
                       cwd=REPO, preexec_fn=ignore_ctrl_c, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-3000:]
