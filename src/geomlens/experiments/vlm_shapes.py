"""The VLM shapes task scored by option logits: accuracy against the cross–shape distance and
the resolution scale beyond which it drops (the seed paper's VLM experiment; docs/vision.md).

Each scene (:mod:`geomlens.data.shapes`) is one multiple-choice trial with four options. The
``similarity`` analysis in its behavioural mode reads the next-token logits at the ``logits``
site, renormalises them over the four shape tokens (D_i) and gives p_S^4 and g(d) recovered
from the log-ratios. Here the trials are also binned by the distance from the cross to its
nearest shape: per bin the expected accuracy (mean D of the right shape) and the argmax
accuracy. The resolution scale is where the binned expected accuracy first falls below half way
between its value in the nearest bin and chance (1/4), linearly interpolated between bin
centres; NaN when it never does within the distances drawn.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from geomlens.data.shapes import SHAPES, ShapesScene, shapes_task
from geomlens.inputs.encoding import PaddingSide

CHANCE = 1 / len(SHAPES)


@dataclass
class ShapesOutcome:
    """Per-trial scores, the binned accuracy profile, the resolution scale and the analysis
    result (p_S^4, recovered g(d))."""

    nearest_distance: np.ndarray
    expected_correct: np.ndarray
    argmax_correct: np.ndarray
    profile: list[dict[str, float]]
    resolution_scale: float
    result: Any = None
    metrics: dict[str, float] = field(default_factory=dict)


def accuracy_profile(
    nearest_distance: np.ndarray, expected: np.ndarray, argmax: np.ndarray, bins: int
) -> list[dict[str, float]]:
    """Trials binned by nearest distance (equal-count bins): centre, both accuracies, count."""
    order = np.argsort(nearest_distance, kind="stable")
    rows = []
    for chunk in np.array_split(order, min(bins, len(order))):
        rows.append(
            {
                "distance": float(nearest_distance[chunk].mean()),
                "expected_accuracy": float(expected[chunk].mean()),
                "argmax_accuracy": float(argmax[chunk].mean()),
                "count": int(len(chunk)),
            }
        )
    return rows


def resolution_scale(profile: list[dict[str, float]], chance: float = CHANCE) -> float:
    """The distance where the expected accuracy first drops below half way to chance."""
    distance = np.array([row["distance"] for row in profile])
    accuracy = np.array([row["expected_accuracy"] for row in profile])
    threshold = (accuracy[0] + chance) / 2
    below = np.nonzero(accuracy < threshold)[0]
    if accuracy[0] <= chance or not len(below):
        return float("nan")
    k = int(below[0])
    a0, a1, d0, d1 = accuracy[k - 1], accuracy[k], distance[k - 1], distance[k]
    return float(d0 + (a0 - threshold) / (a0 - a1) * (d1 - d0))


def score_shapes(
    adapter: Any,
    scenes: list[ShapesScene],
    *,
    prompt: str,
    size: int = 224,
    option_prefix: str = " ",
    first_token: bool = True,
    batch_size: int = 8,
    bins: int = 6,
    padding_side: PaddingSide = "left",
) -> ShapesOutcome:
    """Run the shapes task on a VLM attached with its processor, in one pass.

    ``first_token`` scores a shape name that is several tokens by its first token (recorded in
    the result's ``first_token_options``).
    """
    from geomlens.analyses.similarity.analysis import Similarity
    from geomlens.data.dataset import as_dataset
    from geomlens.engine import stream

    data = shapes_task(scenes, prompt=prompt, size=size, option_prefix=option_prefix)
    dataset = as_dataset(data)
    analysis = Similarity(mode="behavioural", first_token=first_token)
    stream([analysis], adapter, dataset, batch_size=batch_size, padding_side=padding_side)
    result = analysis.finalize()
    trials = analysis.choices.trials(analysis.metric())
    expected, argmax = [], []
    for _, probabilities, distances in trials:
        right = distances == distances.min()
        expected.append(float(probabilities[right].sum() / right.sum()))
        argmax.append(float(right[int(np.argmax(probabilities))]))
    nearest = np.asarray(data["nearest_distance"])
    expected_arr, argmax_arr = np.asarray(expected), np.asarray(argmax)
    profile = accuracy_profile(nearest, expected_arr, argmax_arr, bins)
    scale = resolution_scale(profile)
    metrics = {
        "expected_accuracy": float(expected_arr.mean()),
        "argmax_accuracy": float(argmax_arr.mean()),
        "resolution_scale": scale,
        "trials": float(len(scenes)),
    }
    return ShapesOutcome(nearest, expected_arr, argmax_arr, profile, scale, result, metrics)
