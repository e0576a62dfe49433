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

from geomlens.analyses.catalog import builtin_analyses

__all__ = ["RECIPES", "assert_same_results", "builtin_analyses", "corpus_rows"]

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


def coordinate_rows() -> list[dict[str, Any]]:
    """Number words with their value as the coordinate, in two templates."""
    words = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
    templates = ("it happened in the year [[{}]] .", "the cat sat on the mat in year [[{}]] .")
    return [
        {"text": template.format(word), "coordinate": value}
        for template in templates
        for value, word in enumerate(words, start=1)
    ]


def condition_rows() -> list[dict[str, Any]]:
    """Calibration and held-out text and one out-of-distribution condition (shuffled words)."""
    texts = [row["text"] for row in corpus_rows(24)]
    rows = [{"text": t, "condition": "calibration"} for t in texts[:12]]
    rows += [{"text": t, "condition": "heldout"} for t in texts[12:]]
    rows += [{"text": " ".join(sorted(t.split())), "condition": "sorted_words"} for t in texts[12:]]
    return rows


def tiny_sae() -> dict[str, Any]:
    """A seeded sae-lens SAE (width 64) on the tiny GPT-2's last residual stream."""
    import torch
    from sae_lens.saes.sae import SAEMetadata
    from sae_lens.saes.standard_sae import StandardSAE, StandardSAEConfig

    torch.manual_seed(0)
    config = StandardSAEConfig(
        d_in=32, d_sae=64, metadata=SAEMetadata(hook_name="blocks.1.hook_resid_post")
    )
    sae = StandardSAE(config)
    with torch.no_grad():
        for parameter in sae.parameters():
            parameter.normal_(0.0, 0.3)
    return {"sae": sae.eval()}


@dataclass(frozen=True)
class Recipe:
    """Options for the analysis and a builder of its rows."""

    rows: Callable[[], list[dict[str, Any]]]
    options: dict[str, Any] = field(default_factory=dict)
    batch_size: int = 4
    #: Options built afresh for each run (objects such as an SAE), merged over ``options``.
    built_options: Callable[[], dict[str, Any]] | None = None

    def run_options(self) -> dict[str, Any]:
        """``batch_size`` and every option of the analysis, ready for ``gl.run``."""
        extra = self.built_options() if self.built_options is not None else {}
        return {"batch_size": self.batch_size, **self.options, **extra}


RECIPES: dict[str, Recipe] = {
    "activation-stats": Recipe(corpus_rows),
    "abstraction": Recipe(concept_rows, {"n_bootstrap": 20, "n_shuffles": 10}),
    "ccgp": Recipe(concept_rows, {"folds": 3}),
    "linearization-effect": Recipe(concept_rows, {"n_bootstrap": 20, "n_shuffles": 10}),
    "similarity": Recipe(coordinate_rows),
    "resolution": Recipe(coordinate_rows, {"bootstrap": 20}),
    "sae-features": Recipe(condition_rows, built_options=tiny_sae),
}


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
    if a is None and isinstance(b, float) and math.isnan(b):
        return True  # a NaN in a table is written to JSON as null
    if isinstance(b, float) and isinstance(a, (int, float)):
        if a == b:  # also equal infinities
            return True
        if math.isnan(b):
            return math.isnan(a)
        return abs(a - b) <= tolerance * max(1.0, abs(b))
    if isinstance(b, list) and isinstance(a, list):
        return len(a) == len(b) and all(_close(x, y, tolerance) for x, y in zip(a, b))
    return a == b
