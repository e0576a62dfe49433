"""The README's benchmark table, generated from ``benchmarks/results/*.json`` (never typed).

Registered for the numbers script (``scripts/regenerate_numbers.py``) under the key
``benchmarks``: the region between ``<!-- numbers:benchmarks -->`` and
``<!-- /numbers:benchmarks -->``. It reads the committed benchmark results, not the analyses'
run, so its function ignores the results it is handed. Each ratio is printed with the spread the
benchmark reached (``±`` the relative spread of the ratio of medians) where the JSON holds one;
older results without a spread say so.

    python scripts/numbers/benchmarks.py            # print the table
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def _load(folder: Path) -> dict[str, dict[str, Any]]:
    return {path.stem: json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))}


def _ratio(numbers: dict[str, Any], key: str) -> str:
    value = numbers.get(key)
    if value is None:
        return "–"
    spread = numbers.get(f"{key}_spread")
    shown = f"{value:.2f}×"
    return (
        f"{shown} ± {100 * spread:.0f} %"
        if spread is not None
        else f"{shown} (spread not recorded)"
    )


def _where(numbers: dict[str, Any]) -> str:
    parts = [str(numbers.get("model", "?")), str(numbers.get("device", "?"))]
    if "inputs" in numbers:
        parts.append(f"{numbers['inputs']} inputs")
    if "max_length" in numbers:
        parts.append(f"max_length {numbers['max_length']}")
    return ", ".join(parts)


def _overhead_rows(name: str, numbers: dict[str, Any]) -> list[tuple[str, str, str]]:
    rows = []
    for key in sorted(k for k in numbers if k.endswith("_over_bare")):
        label = key.removesuffix("_over_bare")
        shown = "every built-in fused" if label == "all" else label
        rows.append((f"{shown} / bare forward", _ratio(numbers, key), _where(numbers)))
    return rows


def _memory_rows(numbers: dict[str, Any]) -> list[tuple[str, str, str]]:
    rows = []
    layers = numbers.get("by_max_length") or {str(numbers.get("max_length")): numbers}
    for length, at in layers.items():
        where = f"{at.get('model')}, {at.get('device')}, max_length {length}"
        largest = max((int(k) for k in at.get("geomlens_by_inputs", {})), default=None)
        if largest is not None:
            where += f", {largest} inputs"
        for key, what in (
            ("run_with_cache_over_geomlens_memory", "run_with_cache peak / geomlens peak"),
            ("run_with_cache_over_geomlens_added_memory", "same, memory the run adds"),
            ("run_with_cache_over_geomlens_seconds", "run_with_cache time / geomlens time"),
        ):
            if at.get(key) is not None:
                rows.append((what, f"{at[key]:.2f}×", where))
        if at.get("peak_growth_smallest_to_largest") is not None:
            growth = 100 * at["peak_growth_smallest_to_largest"]
            rows.append(("geomlens peak growth, fewest → most inputs", f"{growth:+.1f} %", where))
    return rows


def benchmark_table(folder: Path = RESULTS) -> str:
    """A markdown table of every committed benchmark ratio, with its spread and conditions."""
    rows: list[tuple[str, str, str]] = []
    for name, numbers in _load(folder).items():
        if name.startswith("overhead"):
            rows += _overhead_rows(name, numbers)
        elif name.startswith("memory"):
            rows += _memory_rows(numbers)
        elif name.startswith("cache_speed"):
            key = "geomlens_over_run_with_cache_seconds"
            rows.append(("geomlens time / run_with_cache", _ratio(numbers, key), _where(numbers)))
        elif name.startswith("sae"):
            key = "sae_features_over_bare_encode"
            rows.append(("sae-features / bare SAE encode", _ratio(numbers, key), _where(numbers)))
    if not rows:
        return "_No benchmark results in benchmarks/results/._"
    lines = ["| measure | ratio | conditions |", "|---|---|---|"]
    lines += [f"| {what} | {ratio} | {where} |" for what, ratio, where in rows]
    return "\n".join(lines)


#: No analysis run is needed: the table reads the committed benchmark results.
ANALYSES: tuple[str, ...] = ()

SECTIONS: dict[str, Callable[[dict[str, Any]], str]] = {
    "benchmarks": lambda results: benchmark_table(),
}


if __name__ == "__main__":
    print(benchmark_table())
