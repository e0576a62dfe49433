"""Exact duplicate rows, where a copy would change a result.

A row given twice is not a second observation. In a cross-validated probe a copy lands in the
training split and its twin in the test split, so the probe is tested on what it was trained
on (accuracy goes to 1.0); in ``similarity`` a copy counts as the same stimulus seen in another
text (``g0_across_texts`` goes to 1.0). The analyses whose results a copy changes refuse such
data with :class:`DuplicateRowsError`, naming the dataset rows, so the user removes the copies.

A duplicate is exact: the same pooled activation row (bit for bit) *and* the same labels, so
two rows of one text with the same labels are found whatever their wording in the file. Rows
the model cannot tell apart (a tokenizer mapping their words to one unknown token) are the same
observation to it as well, and are refused alike.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class DuplicateRowsError(ValueError):
    """Data holding the same row twice, where the copy would inflate a result."""


def duplicate_groups(
    vectors: np.ndarray, labels: Sequence[np.ndarray] = (), index: np.ndarray | None = None
) -> list[list[int]]:
    """Groups (of two or more) of rows with identical ``vectors`` rows and identical labels,
    each group as dataset row numbers (``index``, else positions), in order."""
    vectors = np.ascontiguousarray(np.asarray(vectors))
    count = len(vectors)
    if count < 2:
        return []
    numbers = np.arange(count) if index is None else np.asarray(index)
    keys: dict[tuple, list[int]] = {}
    flat = vectors.reshape(count, -1)
    for position in range(count):
        key = (
            flat[position].tobytes(),
            *(str(np.asarray(column)[position]) for column in labels),
        )
        keys.setdefault(key, []).append(int(numbers[position]))
    return sorted((group for group in keys.values() if len(group) > 1), key=lambda g: g[0])


def refuse_duplicates(
    analysis: str,
    where: str,
    vectors: np.ndarray,
    labels: Sequence[np.ndarray] = (),
    index: np.ndarray | None = None,
    *,
    effect: str,
) -> None:
    """Raise :class:`DuplicateRowsError` when rows repeat (see :func:`duplicate_groups`),
    naming them and what the copies would do (``effect``)."""
    groups = duplicate_groups(vectors, labels, index)
    if not groups:
        return
    shown = "; ".join(" = ".join(str(n) for n in group) for group in groups[:5])
    more = f" and {len(groups) - 5} more" if len(groups) > 5 else ""
    copies = sum(len(group) - 1 for group in groups)
    raise DuplicateRowsError(
        f"{analysis}: the data gives the same row more than once at {where} (dataset rows "
        f"{shown}{more}: the same activation and labels), and {effect}; remove the {copies} "
        "extra copies (keep one row of each group). Rows of different text are the same to a "
        "model whose tokenizer reads them alike (words it maps to one unknown token): use "
        "data in the model's vocabulary."
    )


__all__ = ["DuplicateRowsError", "duplicate_groups", "refuse_duplicates"]
