"""Docstrings cite the project's docs by anchors that exist (not "SPEC §1.2", a file users
do not have)."""

from __future__ import annotations

import re
from pathlib import Path

from helpers.paths import REPO

ROOT = REPO
CITATION = re.compile(r"docs/([\w-]+\.md)#([\w-]+)")


def _anchors(doc: Path) -> set[str]:
    text = doc.read_text()
    explicit = set(re.findall(r'<a id="([\w-]+)"></a>', text))
    headings = {  # GitHub's slugs: lower case, punctuation dropped, spaces to hyphens
        re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
        for title in re.findall(r"^#+ (.+)$", text, flags=re.M)
    }
    return explicit | headings


def test_every_cited_anchor_exists():
    cited = {}
    for path in [*ROOT.glob("src/geomlens/**/*.py"), *ROOT.glob("docs/*.md"), ROOT / "README.md"]:
        for doc, anchor in CITATION.findall(path.read_text()):
            cited.setdefault((doc, anchor), path.relative_to(ROOT))
    assert len(cited) >= 8
    missing = [
        f"{where}: docs/{doc}#{anchor}"
        for (doc, anchor), where in cited.items()
        if not (ROOT / "docs" / doc).exists() or anchor not in _anchors(ROOT / "docs" / doc)
    ]
    assert not missing, missing


def test_no_docstring_cites_the_internal_spec():
    cites = [
        f"{path.relative_to(ROOT)}: {line.strip()}"
        for path in ROOT.glob("src/geomlens/**/*.py")
        for line in path.read_text().splitlines()
        if re.search(r"\bSPEC\b", line)
    ]
    assert not cites, cites
