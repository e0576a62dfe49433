"""abstraction on the bundled MiniLM at its defaults: the corrected α of every set that has one
changes by less than its interval when the rows per cell are halved (the raw α does not)."""

from __future__ import annotations

import numpy as np
import pytest

import geomlens as gl
from geomlens.data.concepts import english_concepts

pytestmark = pytest.mark.slow  # two runs of the English sets through MiniLM


def halved(columns: dict[str, list[str]]) -> dict[str, list[str]]:
    """The same sets with the first half of every cell's rows (cells of one row kept)."""
    cells: dict[tuple[str, str, str], list[int]] = {}
    for i, key in enumerate(zip(columns["task"], columns["concept"], columns["context"])):
        cells.setdefault(key, []).append(i)
    keep = sorted(i for rows in cells.values() for i in rows[: max(1, len(rows) // 2)])
    return {name: [values[i] for i in keep] for name, values in columns.items()}


def test_corrected_alpha_survives_halving_the_rows_per_cell(minilm):
    data = english_concepts()
    full = gl.run("abstraction", minilm, data, progress=False)
    half = gl.run("abstraction", minilm, halved(data), progress=False)
    halves = {(r["site"], r["task"]): r for r in half.tables["per_task"]}
    checked = 0
    for row in full.tables["per_task"]:
        other = halves[(row["site"], row["task"])]
        if not np.isfinite(row["alpha_corrected"]):
            assert row["rows_per_cell_min"] < 2
            continue
        assert other["rows_per_cell"] == pytest.approx(row["rows_per_cell"] / 2)
        width = row["alpha_corrected_ci_high"] - row["alpha_corrected_ci_low"]
        assert np.isfinite(width) and width > 0
        assert abs(other["alpha_corrected"] - row["alpha_corrected"]) < width, row["site"]
        checked += 1
    assert checked >= 6  # animacy-by-colour at every layer
