"""Read a recorded ``geomlens report`` run (its standard error, saved to a file) for what its
progress lines promise: a plan line first, a line before SAE training, no count above its
target, and no target that changes within a phase.

    geomlens report 2> run.log; python scripts/check_progress_log.py run.log

Exits 1 when a promise is broken (a run that trains no SAE needs no training line).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

#: A progress line with a count: "geomlens: PHASE: DONE of TARGET ...".
COUNT = re.compile(r"geomlens: (.*?): ([\d,]+) of ([\d,]+) ")


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def findings(log: str) -> dict[str, list[str]]:
    """What the log shows of each promise: plan lines, SAE-training lines, counts above their
    target, and phases whose target changed (with their targets)."""
    text = log.replace("\r", "\n")
    lines = [line for line in text.splitlines() if line.startswith("geomlens: ")]
    lines = [line for line in lines if "%|" not in line]  # bars are not progress lines
    targets: dict[str, set[int]] = {}
    over = []
    for line in lines:
        counted = COUNT.match(line)
        if counted:
            phase, done, total = counted.group(1), *map(_number, counted.groups()[1:])
            if done > total:
                over.append(line)
            targets.setdefault(phase, set()).add(total)
    return {
        "plan": [line for line in lines if line.startswith("geomlens: plan:")],
        "training": [line for line in lines if "training an SAE" in line],
        "over": over,
        "changing": [f"{p}: {sorted(t)}" for p, t in targets.items() if len(t) > 1],
    }


def main(argv: list[str]) -> int:
    found = findings(Path(argv[0]).read_text(encoding="utf-8", errors="replace"))
    for name, lines in found.items():
        print(f"{name}: {len(lines)}")
        for line in lines[:3]:
            print(f"  {line}")
    return 1 if not found["plan"] or found["over"] or found["changing"] else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
