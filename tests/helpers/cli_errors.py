"""What a command said on standard error besides its progress, and the one-line error check
the bad-input tests share (exit 2, one ``error: …`` line, no traceback)."""

from __future__ import annotations

import re

#: Progress on standard error: a bar (``name:  40%|``) or a phase's line (``geomlens: step …``).
PROGRESS = re.compile(r"^[\w ]+:\s+\d+%\||^geomlens: (?!error)")


def message_lines(done) -> list[str]:
    """The lines of ``done``'s standard error that are not progress."""
    return [line for line in done.stderr.splitlines() if line.strip() and not PROGRESS.match(line)]


def error_line(done, *fragments: str) -> str:
    """The one line ``error: …`` (exit 2, no traceback) holding every fragment."""
    assert done.exit_code == 2, done.output
    lines = message_lines(done)
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "Traceback" not in done.output
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]
