"""The committed benchmark results the number sections read (``benchmarks/results/*.json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def load_results(folder: Path = RESULTS) -> dict[str, dict[str, Any]]:
    """Every ``*.json`` of ``folder``, by file stem."""
    return {path.stem: json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))}
