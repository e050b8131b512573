"""Everything the docs point at exists: each relative link and its anchor, each repository path they cite (in prose,
in code spans, in command lines), and each Markdown file they name. A doc that names a file the repository does
not have (a design contract kept elsewhere, a path on the author's machine) fails here."""

from __future__ import annotations

import glob
import re
from pathlib import Path

import pytest

from tests.docs.doccheck import REPO, checked_docs, rel

DOCS = checked_docs()
TOP_DIRS = sorted(p.name for p in REPO.iterdir() if p.is_dir() and not p.name.startswith(".") or p.name == ".ci")
URL = re.compile(r"[a-z][a-z0-9+.-]*://\S+")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text as rendered (links to their text, code and emphasis marks gone),
    lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(doc: Path) -> set[str]:
    found: set[str] = set()
    counts: dict[str, int] = {}
    in_code = False
    for line in doc.read_text().splitlines():
        if re.match(r"\s*(```|~~~)", line):
            in_code = not in_code
            continue
        if in_code:
            continue
        m = HEADING.match(line)
        if m:
            base = slug(m.group(2))
            n = counts.get(base, 0)
            counts[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
        found.update(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", line))
    return found


def _resolve(target: str, doc: Path) -> Path:
    return (REPO / target.lstrip("/")) if target.startswith("/") else (doc.parent / target)


def _link_problems(doc: Path) -> list[str]:
    problems = []
    text = doc.read_text()
    for n, line in enumerate(text.splitlines(), 1):
        for target in LINK.findall(line):
            if URL.match(target) or target.startswith("mailto:"):
                continue
            path, _, anchor = target.partition("#")
            dest = _resolve(path, doc) if path else doc
            if not dest.exists():
                problems.append(f"{rel(doc)}:{n}: link to {target}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                problems.append(f"{rel(doc)}:{n}: link to {target}: {rel(dest)} has no heading #{anchor}")
    return problems




def _paths_under(dirs: list[str]) -> re.Pattern:
    """A path that starts with one of these folders (not inside a longer path or a URL), and its #anchor."""
    alternatives = "|".join(map(re.escape, dirs))
    return re.compile(rf"(?<![\w/.~$-])((?:{alternatives})/[\w.*/-]*[\w*/])(#[\w-]+)?")


CITED = _paths_under(TOP_DIRS)
DESIGN = re.compile(r"\bDESIGN(?:\.md)?\s*§\s*\d*")  # the project's design contract lives outside the repository
MD_FILE = re.compile(r"(?<![\w.~$-])([\w./-]*[\w-]\.md)(#[\w-]+)?\b")


def _exists(path: str, base: Path) -> bool:
    if any(c in path for c in "*?"):
        return bool(glob.glob(str(base / path)))
    return (base / path).exists()


def _path_problems(doc: Path) -> list[str]:
    """Repository paths cited anywhere in the doc (from a top folder, or from a folder beside the doc), and Markdown
    file names; `<placeholders>` and `…` are not paths. URLs are left out."""
    problems = []
    local_dirs = {p.name for p in doc.parent.iterdir() if p.is_dir()} if doc.parent != REPO else set()
    local = _paths_under(sorted(local_dirs)) if local_dirs else None
    in_code = False
    for n, line in enumerate(doc.read_text().splitlines(), 1):
        if re.match(r"\s*(```|~~~)", line):
            in_code = not in_code
        line = URL.sub(" ", line)
        if in_code:
            line = line.split("→", 1)[0]  # in a command's comment, what follows → is what it writes, not a citation
        for m in DESIGN.finditer(line):
            problems.append(f"{rel(doc)}:{n}: cites {m.group(0)}: the design contract is not in the repository")
        for path, anchor in CITED.findall(line):
            path = path.rstrip(".")
            if not _exists(path, REPO) and not _exists(path, doc.parent):
                problems.append(f"{rel(doc)}:{n}: cites {path}: not in the repository")
            elif anchor and path.endswith(".md") and anchor[1:] not in anchors(REPO / path):
                problems.append(f"{rel(doc)}:{n}: cites {path}{anchor}: no such heading")
        if local:
            for path, _anchor in local.findall(line):
                path = path.rstrip(".")
                if not _exists(path, doc.parent) and not _exists(path, REPO):
                    problems.append(f"{rel(doc)}:{n}: cites {path}: not in {rel(doc.parent)}/")
        for path, _anchor in MD_FILE.findall(line):
            if path.startswith("/"):
                problems.append(f"{rel(doc)}:{n}: names {path}: a path outside the repository")
            elif not (_exists(path, doc.parent) or _exists(path, REPO)):
                problems.append(f"{rel(doc)}:{n}: names {path}: no such file in the repository")
    return problems


@pytest.mark.parametrize("doc", DOCS, ids=rel)
def test_links_anchors_and_cited_paths_resolve(doc):
    problems = _link_problems(doc) + _path_problems(doc)
    assert not problems, "\n".join(problems)


def test_the_checker_sees_a_broken_link_a_missing_anchor_and_a_path_that_is_not_there(tmp_path, monkeypatch):
    doc = REPO / "docs" / "_link_probe.md"
    doc.write_text("# Title here\n\n[ok](#title-here) [bad](#nope) [file](operating.md#runbooks) "
                   "[gone](missing.md)\n`service/nothing_here.py`, service/config.py, DESIGN.md §8, lua/*.lua,\n"
                   "(reference: `/work/shared/reference/rocketmq-namesrv.md`)\n")
    try:
        problems = _link_problems(doc) + _path_problems(doc)
    finally:
        doc.unlink()
    for wrong in ("#nope", "missing.md", "service/nothing_here.py", "DESIGN.md §8", "/work/shared/reference"):
        assert any(wrong in p for p in problems), (wrong, problems)
    for right in ("#title-here", "operating.md#runbooks", "service/config.py", "lua/*.lua"):
        assert not any(right in p for p in problems), (right, problems)


def test_slugs_are_githubs():
    assert slug("With the address server: `rocketmq.namesrv.domain`") == "with-the-address-server-rocketmqnamesrvdomain"
    assert slug("Monitoring: alerts, runbooks, dashboard") == "monitoring-alerts-runbooks-dashboard"
    assert slug("Runbook: NamesrvNoReadyWorker") == "runbook-namesrvnoreadyworker"
