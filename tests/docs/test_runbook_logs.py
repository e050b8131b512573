"""Every log line a doc tells operators to look for is one the code writes, at a level the default log shows.

The convention: a runbook (or any doc) quotes log lines in a paragraph that starts with `**Log**`, each as a code
span holding the message as logged (what follows `logger: ` in a log line), `…` for its variable parts. The code's
messages are read from service/ with `ast`: the format string of every logging call (its level kept), and the
message of every `print` and every exception raised or built (it ends up in a log line). A cited line matches a
message when the message, its placeholders (`%s`, `%d`, f-string fields) standing for any text, can be that line.
"""

from __future__ import annotations

import ast
import functools
import logging
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.docs.doccheck import REPO, checked_docs, rel

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR,
          "exception": logging.ERROR, "critical": logging.CRITICAL}
DEFAULT_LEVEL = logging.INFO  # NAMESRV_LOG_LEVEL's default
PLACEHOLDER = re.compile(r"%(?:\([^)]*\))?[-#0 +]*\d*(?:\.\d+)?[sdrifegx]")
HOLE = "\0"  # an f-string field


@dataclass(frozen=True)
class Message:
    text: str  # the literal text, HOLE where an f-string field goes
    where: str
    level: int  # the logging level, or CRITICAL for prints and exception messages (always shown)

    def pattern(self) -> re.Pattern:
        parts = re.split(f"({PLACEHOLDER.pattern}|{HOLE})", self.text.replace("%%", "%"))
        return re.compile("".join(".*" if i % 2 else re.escape(p) for i, p in enumerate(parts)), re.S)

    @property
    def literal(self) -> str:
        return PLACEHOLDER.sub("", self.text).replace(HOLE, "")


def _text(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else HOLE for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return _text(node.left)
    return None


@functools.cache
def code_messages() -> tuple[Message, ...]:
    out: list[Message] = []
    for path in sorted((REPO / "service").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if isinstance(f, ast.Attribute) and name in LEVELS:
                level, arg = LEVELS[name], node.args[0]
            elif name == "print" or name[:1].isupper():  # print(...), SomeError(...)
                level, arg = logging.CRITICAL, node.args[0]
            else:
                continue
            text = _text(arg)
            if text:
                out.append(Message(text, f"{path.relative_to(REPO)}:{node.lineno}", level))
    return tuple(out)


def cited_log_lines(doc: Path) -> list[tuple[int, str]]:
    """(line number, text) of each code span in the doc's `**Log**` paragraphs."""
    out = []
    lines = doc.read_text().splitlines()
    in_log = False
    for n, line in enumerate(lines, 1):
        if line.startswith("**Log**"):
            in_log = True
        elif not line.strip() or line.startswith(("**", "#")):
            in_log = False
        if in_log:
            out.extend((n, span) for span in re.findall(r"`([^`]+)`", line))
    return out


def _problems(doc: Path, messages: tuple[Message, ...]) -> list[str]:
    problems = []
    for n, cited in cited_log_lines(doc):
        candidates = [m for m in messages if len(m.literal.strip()) >= 3 and m.pattern().fullmatch(cited)]
        shown = [m for m in candidates if m.level >= DEFAULT_LEVEL]
        where = f"{rel(doc)}:{n}"
        if not candidates:
            problems.append(f"{where}: no message in service/ can be the log line `{cited}`")
        elif not shown:
            problems.append(f"{where}: `{cited}` is logged below INFO ({candidates[0].where}): the default log "
                            "does not show it")
    return problems


DOCS_WITH_LOGS = [d for d in checked_docs() if cited_log_lines(d)]


def test_the_runbooks_cite_log_lines():
    assert any(d.name == "operating.md" for d in DOCS_WITH_LOGS)


@pytest.mark.parametrize("doc", DOCS_WITH_LOGS, ids=rel)
def test_every_cited_log_line_is_one_the_code_writes(doc):
    problems = _problems(doc, code_messages())
    assert not problems, "\n".join(problems)


def test_the_check_refuses_what_the_code_does_not_write(tmp_path):
    doc = tmp_path / "runbook.md"
    doc.write_text("#### Runbook: X\n\n**Check** the log.\n"
                   "**Log**: `Redis`, `scripts`, `listening`, `worker … serving HTTP on …, RocketMQ remoting on …`,\n"
                   "`worker … serving HTTP`, `route stream of … dropped: … bytes unsent`\n**Do**: `not a log line`\n")
    messages = code_messages()
    problems = _problems(doc, messages)
    # the port's colon is in the message: a line without it is not one the code writes
    assert [p.split("`")[1] for p in problems] == ["Redis", "scripts", "listening",
                                                   "worker … serving HTTP on …, RocketMQ remoting on …",
                                                   "worker … serving HTTP"]
    debug_only = (Message("route stream of %s dropped: %d bytes unsent", "x.py:1", logging.DEBUG),)
    assert "below INFO" in _problems(doc, debug_only)[-1]
