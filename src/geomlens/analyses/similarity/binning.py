"""How distances are binned for g(d): one rule for the representational profile (pairs of
stimuli) and the behavioural recovery (the options' distances to the probe).

Default: one bin per distinct distance, never coarser than the grid where it has the data.
Past :data:`~geomlens.analyses.similarity.config.MAX_DISTINCT_BINS` distinct distances,
distances are taken from the smallest up: each keeps its own bin while it holds at least
1/``MAX_DISTINCT_BINS`` of the distances seen, and only distances seen less often are pooled
with their neighbours until a bin holds that many. So d₁ is always the smallest distance and
the bins stay at most ``MAX_DISTINCT_BINS`` (+1). ``bins``: that many equal-width bins instead.
"""

from __future__ import annotations

import numpy as np

from .config import MAX_DISTINCT_BINS

__all__ = ["distance_bins", "distance_edges"]


def distance_edges(values: np.ndarray, bins: int | None) -> np.ndarray:
    """Bin edges (the outer two infinite) over the distances ``values`` (1-D, one entry per
    pair or per option seen), by the module's rule."""
    seen = np.asarray(values, dtype=float).ravel()
    levels, counts = np.unique(seen, return_counts=True)
    if bins is not None:
        edges = np.linspace(seen.min(), seen.max(), bins + 1)
        edges[0], edges[-1] = -np.inf, np.inf
        return edges
    if len(levels) <= MAX_DISTINCT_BINS:
        middles = (levels[1:] + levels[:-1]) / 2
        return np.concatenate([[-np.inf], middles, [np.inf]])
    needed = len(seen) / MAX_DISTINCT_BINS
    ends: list[int] = []  # index of the last distinct distance in each bin
    held = 0
    for k, count in enumerate(counts):
        held += int(count)
        if held >= needed:
            ends.append(k)
            held = 0
    if not ends or ends[-1] != len(levels) - 1:
        ends.append(len(levels) - 1)
    middles = [(levels[k] + levels[k + 1]) / 2 for k in ends[:-1]]
    return np.concatenate([[-np.inf], middles, [np.inf]])


def distance_bins(distances: np.ndarray, bins: int | None) -> np.ndarray:
    """Bin edges over the off-diagonal pairs of the [S, S] ``distances`` (see
    :func:`distance_edges`)."""
    return distance_edges(distances[np.triu_indices_from(distances, k=1)], bins)
