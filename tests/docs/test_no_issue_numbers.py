"""Issue numbers stay in the tracker and the CHANGELOG: code, tests and user-facing text say the
reason itself ("the causal-LM default", not "the causal-LM default (issue 18)")."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: What users and readers of the code see (CHANGELOG.md is history and may name issues).
CHECKED = ["src", "tests", "docs", "tutorials", "scripts", "examples", "benchmarks"]
CHECKED_FILES = ["README.md", "CONTRIBUTING.md", "pyproject.toml", ".ci/run"]
SUFFIXES = {".py", ".md", ".txt", ".toml", ".j2", ".json", ".html", ".cfg", ".ini", ".yml", ".yaml"}
#: "issue 18", "(issue", "issues 17 and 18", "#18" (not a CSS colour such as "#222;").
ISSUE = re.compile(r"\bissues? \d+|\(issue\b|(?<![\w&/])#\d{2,}\b(?![;])", re.IGNORECASE)


def _files() -> list[Path]:
    files = [ROOT / name for name in CHECKED_FILES if (ROOT / name).is_file()]
    for folder in CHECKED:
        files += [
            path
            for path in sorted((ROOT / folder).rglob("*"))
            if path.is_file() and (path.suffix in SUFFIXES or path.name.endswith(".py.j2"))
        ]
    return files


def test_no_issue_numbers_in_code_or_docs():
    found = []
    for path in _files():
        if path == Path(__file__).resolve():
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if ISSUE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "say the reason, not the issue number:\n" + "\n".join(found)
