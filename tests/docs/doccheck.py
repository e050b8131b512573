"""The docs' shell blocks, read and run as a reader would: which blocks are checked, which are not run and why,
each command with the output the doc shows under it, and the comparison of that output with what the command
prints. The convention is written for doc authors in the README ("How docs are tested"); in short:

    ```bash check                     <- run against a fresh embedded `namesrv serve` of this doc (`check redis`:
    curl -s localhost:8080/livez          one on a real redis-server); blocks of a doc run top to bottom
    # {"status":"ok"}                 <- `# ` lines right under a command: what it prints (stdout and stderr)
    ```
    ```sh not-run: needs a Kubernetes cluster     <- never run; the reason is required

Every shell block (bash, sh, shell, console) of a checked doc must say one or the other.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHELL_LANGS = {"bash", "sh", "shell", "console", "zsh"}
ELLIPSIS = "…"
CTRL_C = "^C"
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
# the ports a doc names, and the real ones a test server listens on instead (nothing else of a command is changed)
DOC_PORTS = {"http": 8080, "remoting": 9876, "redis": 6379}
MACHINE_ENV = {"COLUMNS", "LINES", "FORCE_COLOR", "CLICOLOR_FORCE", "TTY_COMPATIBLE", "TTY_INTERACTIVE"}


def rel(path: Path) -> str:
    """A doc's name in messages: relative to the repository (a doc elsewhere, as in the checker's own tests: its
    file name)."""
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else path.name


def checked_docs() -> list[Path]:
    """The docs whose shell blocks must be checked or marked: the README, docs/, and every top folder's README."""
    docs = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    docs += sorted(p for p in REPO.glob("*/README.md") if p.parent.name not in {"tests", "docs"}
                   and not p.parent.name.startswith("."))
    return docs


@dataclass
class Command:
    """One command of a checked block: its text as printed, where it is, and the output lines shown under it."""

    text: str
    line: int  # 1-based line of the doc where the command starts
    expected: list[str] = field(default_factory=list)

    @property
    def interrupted(self) -> bool:
        """The doc shows `# ^C` as its last output line: the reader stops it with Ctrl-C (a stream, a watch)."""
        return bool(self.expected) and self.expected[-1].strip() == CTRL_C


@dataclass
class Block:
    doc: Path
    line: int  # 1-based line of the opening fence
    lang: str
    info: str  # the info string after the language: "check", "check redis", "not-run: <reason>", or ""
    lines: list[str]

    @property
    def where(self) -> str:
        return f"{rel(self.doc)}:{self.line}"

    @property
    def is_shell(self) -> bool:
        return self.lang in SHELL_LANGS

    @property
    def checked(self) -> bool:
        return self.is_shell and self.info.split()[:1] == ["check"]

    @property
    def backend(self) -> str:
        """Which server a checked block runs against: "embedded" (default) or "redis"."""
        words = self.info.split()[1:]
        return "redis" if "redis" in words else "embedded"

    @property
    def not_run_reason(self) -> str | None:
        m = re.match(r"not-run:\s*(.*)$", self.info)
        return m.group(1).strip() if m else None

    def commands(self) -> list[Command]:
        return parse_commands(self.lines, self.line + 1)


def blocks(doc: Path) -> list[Block]:
    """Every fenced block of a Markdown file (fences may be indented, inside list items)."""
    out: list[Block] = []
    lines = doc.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = m.group("indent"), m.group("fence"), m.group("info").strip()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not (lines[j].strip().startswith(fence) and lines[j].strip().strip(fence[0]) == ""):
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j].lstrip())
            j += 1
        lang, _, rest = info.partition(" ")
        out.append(Block(doc, i + 1, lang.lower(), rest.strip(), body))
        i = j + 1
    return out


def _complete(text: str) -> bool:
    """Whether a command's lines so far make a whole shell command (quotes closed, no trailing backslash)."""
    if text.rstrip().endswith("\\"):
        return False
    try:
        shlex.split(text, comments=True)
    except ValueError:
        return False
    return True


def parse_commands(lines: list[str], first_line: int) -> list[Command]:
    """Commands and the `# ` output lines right under each. A comment after a blank line, or before the first
    command, is prose; a comment at the end of a command's line is prose too (the shell ignores it)."""
    commands: list[Command] = []
    current: Command | None = None  # the command whose output lines may follow
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not stripped:
            current = None
            i += 1
            continue
        if stripped.startswith("#"):
            if current is not None:
                current.expected.append(stripped[2:] if stripped.startswith("# ") else stripped[1:])
            i += 1
            continue
        start = i
        text = line
        while not _complete(text) and i + 1 < len(lines):
            i += 1
            text += "\n" + lines[i]
        current = Command(text, first_line + start)
        commands.append(current)
        i += 1
    return commands


# -- comparison ---------------------------------------------------------------------------------------------------

def expected_pattern(expected: list[str], actual_lines: int) -> re.Pattern:
    """The output a doc shows as a regular expression: text as written, `…` within a line any text on that line,
    `…` alone on a line any number of lines. A command that prints one line may have it wrapped in the doc:
    lines indented by two spaces or more continue the line above and are joined without their indent."""
    lines = list(expected)
    if actual_lines == 1 and len(lines) > 1 and all(x.startswith("  ") for x in lines[1:]):
        lines = ["".join([lines[0], *(x.lstrip() for x in lines[1:])])]
    parts: list[str] = []
    for x in lines:
        if x.strip() == ELLIPSIS:
            parts.append(r"(?:[^\n]*\n)*?")
            continue
        parts.append(".*?".join(re.escape(piece) for piece in x.rstrip().split(ELLIPSIS)) + r"\n")
    return re.compile("".join(parts))


def normalise_output(raw: str, ports: dict[str, int]) -> str:
    """What a command printed, as compared: the test server's real ports written back as the doc's (8080, 9876,
    6379), trailing blanks of each line dropped, and a final newline. Nothing else is changed."""
    for name, port in ports.items():
        raw = re.sub(rf"(?<!\d){port}(?!\d)", str(DOC_PORTS[name]), raw)
    lines = [x.rstrip() for x in raw.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return "".join(x + "\n" for x in lines)


def matches(expected: list[str], actual: str) -> bool:
    """`actual` (normalised) is what `expected` (the doc's lines, `^C` removed) shows."""
    n = actual.count("\n")
    return expected_pattern(expected, n).fullmatch(actual) is not None


def doc_command(text: str, ports: dict[str, int]) -> str:
    """The command as it runs: the doc's port numbers replaced by the test server's, nothing else."""
    for name, port in ports.items():
        text = re.sub(rf"(?<![\w.]){DOC_PORTS[name]}(?!\d)", str(port), text)
    return text


# -- running ------------------------------------------------------------------------------------------------------

@dataclass
class Result:
    command: Command
    output: str  # normalised
    status: int | None
    problem: str = ""  # empty when the command did what the doc shows


class Shell:
    """Runs a doc's commands one after the other as a reader's shell would: each in bash from the repository root,
    stdout and stderr together, with the environment the commands before it exported (an `export` in one block
    holds for the rest of the doc). The environment starts as the test's without any NAMESRV_* setting and without
    what would make output depend on the machine running the test (a terminal width, forced colour)."""

    def __init__(self, ports: dict[str, int], timeout: float = 30.0) -> None:
        self.ports = ports
        self.timeout = timeout
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("NAMESRV_") and k not in MACHINE_ENV}
        # the virtualenv's `namesrv` and `python`, as for a reader who activated it
        bin_dir = str(Path(sys.executable).parent)
        self.env["PATH"] = bin_dir + os.pathsep + self.env.get("PATH", "")

    def run(self, cmd: Command) -> Result:
        with tempfile.NamedTemporaryFile(prefix="doc-env-", delete=False) as f:
            env_file = f.name
        script = f"{doc_command(cmd.text, self.ports)}\n__rc=$?\nenv -0 > {shlex.quote(env_file)}\nexit $__rc\n"
        proc = subprocess.Popen(["bash", "-c", script], cwd=REPO, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        chunks: list[bytes] = []
        reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: proc.stdout.read1(65536), b"")),
                                  daemon=True)
        reader.start()
        expected = cmd.expected[:-1] if cmd.interrupted else cmd.expected
        deadline = time.monotonic() + self.timeout
        problem = ""
        interrupted = False
        try:
            while proc.poll() is None and time.monotonic() < deadline:
                if cmd.interrupted and matches(expected, self._output(chunks)):
                    os.killpg(proc.pid, signal.SIGINT)  # the reader's Ctrl-C
                    interrupted = True
                    proc.wait(10)
                    break
                time.sleep(0.05)
            if proc.poll() is None:
                problem = f"still running after {self.timeout:.0f} s"
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            elif cmd.interrupted and not interrupted:
                problem = f"ended by itself (exit {proc.returncode}) where the doc shows Ctrl-C"
        finally:
            reader.join(5)
        output = self._output(chunks)
        if not problem and not cmd.interrupted and proc.returncode != 0:
            problem = f"exit status {proc.returncode}"
        if not problem and not matches(expected, output):
            problem = "output differs"
        try:
            if not cmd.interrupted and os.path.getsize(env_file):
                raw = Path(env_file).read_bytes().split(b"\0")
                self.env = dict(e.decode().split("=", 1) for e in raw if b"=" in e)
        finally:
            os.unlink(env_file)
        return Result(cmd, output, proc.returncode, problem)

    def _output(self, chunks: list[bytes]) -> str:
        return normalise_output(b"".join(chunks).decode(errors="replace"), self.ports)


def report(block: Block, result: Result) -> str:
    shown = "\n".join("# " + x for x in result.command.expected) or "(nothing)"
    got = "".join("# " + x + "\n" for x in result.output.splitlines()) or "(nothing)\n"
    return (f"{rel(block.doc)}:{result.command.line}: {result.problem}\n"
            f"$ {result.command.text}\n--- the doc shows:\n{shown}\n--- it printed:\n{got}")
