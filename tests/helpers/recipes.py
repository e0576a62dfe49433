"""A small run of every built-in analysis: its options and rows, on the tiny GPT-2 (nnsight).

The scale tests (streamed data, 2-process runs, checkpoint and resume) run every recipe and
compare the results with a plain in-memory run; ``test_every_builtin_has_a_recipe`` fails when
an analysis lands without one. Rows are plain mappings so that each test can hand the same
rows over as a list, a generator, a .jsonl file or a ``datasets`` dataset.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from geomlens.registry import analysis_class, list_analyses

MALE = ("king", "man", "boy")
FEMALE = ("queen", "woman", "girl")
TEMPLATES = ("the {} sat on the mat .", "a {} was in the house .", "this {} is old .")
ADJECTIVES = ("big", "small")


def corpus_rows(count: int = 22) -> list[dict[str, Any]]:
    """Plain texts of varied length over the tiny tokenizer's vocabulary."""
    words = [
        "the",
        "quick",
        "brown",
        "fox",
        "jumps",
        "over",
        "the",
        "lazy",
        "dog",
        "and",
        "a",
        "cat",
        "sat",
        "on",
        "the",
        "mat",
    ]
    return [{"text": " ".join(words[: 3 + (i * 5) % 12])} for i in range(count)]


def concept_rows() -> list[dict[str, Any]]:
    """A binary concept (gender) seen in three contexts (sentence templates), 6 rows per cell."""
    rows = []
    for context, template in enumerate(TEMPLATES):
        for concept, words in enumerate((MALE, FEMALE)):
            for word in words:
                for adjective in ADJECTIVES:
                    text = template.format(f"{adjective} [[{word}]]")
                    rows.append({"text": text, "concept": concept, "context": f"c{context}"})
    return rows


@dataclass(frozen=True)
class Recipe:
    """Options for the analysis and a builder of its rows."""

    rows: Callable[[], list[dict[str, Any]]]
    options: dict[str, Any] = field(default_factory=dict)
    batch_size: int = 4


RECIPES: dict[str, Recipe] = {
    "activation-stats": Recipe(corpus_rows),
    "abstraction": Recipe(concept_rows, {"n_bootstrap": 20, "n_shuffles": 10}),
    "ccgp": Recipe(concept_rows, {"folds": 3}),
}


def builtin_analyses() -> list[str]:
    """Registered analyses that ship with geomlens (plugins excluded)."""
    return [n for n in list_analyses() if analysis_class(n).__module__.startswith("geomlens.")]


def assert_same_results(got: Any, expected: Any, tolerance: float = 1e-6) -> None:
    """Metrics within ``tolerance`` (relative to their size), tables equal (floats likewise)."""
    if isinstance(expected, dict):
        assert set(got) == set(expected)
        for name in expected:
            assert_same_results(got[name], expected[name], tolerance)
        return
    assert set(got.metrics) == set(expected.metrics)
    for name, value in expected.metrics.items():
        assert _close(got.metrics[name], value, tolerance), (name, got.metrics[name], value)
    assert set(got.tables) == set(expected.tables)
    for table, rows in expected.tables.items():
        assert len(got.tables[table]) == len(rows), table
        for got_row, row in zip(got.tables[table], rows):
            assert set(got_row) == set(row), table
            for key, value in row.items():
                assert _close(got_row[key], value, tolerance), (table, key, got_row[key], value)


def _close(a: Any, b: Any, tolerance: float) -> bool:
    if isinstance(b, float) and isinstance(a, (int, float)):
        if math.isnan(b):
            return math.isnan(a)
        return abs(a - b) <= tolerance * max(1.0, abs(b))
    if isinstance(b, list) and isinstance(a, list):
        return len(a) == len(b) and all(_close(x, y, tolerance) for x, y in zip(a, b))
    return a == b
