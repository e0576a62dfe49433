"""The llc analysis's reading for the report: plain words from its result's public metrics."""

from __future__ import annotations

import math

from geomlens.analyses.words import reading_words as words
from geomlens.results import Result

KEY = "summary.llc"


def reading(result: Result) -> list[str]:
    llc = result.metrics.get(KEY)
    if llc is None or not math.isfinite(llc):
        return []
    chains = words.count(result.metrics.get("summary.chains"), "chain")
    refused = words.metric_refused(result, KEY)
    if refused is not None:  # a negative λ̂: the weights are not at a minimum of the sampled loss
        return [
            f"λ̂ is {refused}. Raise localization or n_beta, or lower step_size, and check the "
            "figure's loss traces."
        ]
    spread = words.metric_interval(result, KEY)
    return [
        f"The local learning coefficient at these weights is λ̂ = {words.metric_value(result, KEY)}"
        f" ({spread} over {chains}): the effective number of directions the loss rises in "
        "around them, by devinterp's SGLD estimate; a simpler (more degenerate) solution has a "
        "smaller λ̂.",
        "Its value depends on the sampler's step size, localisation and nβ and on the data: "
        "compare it across checkpoints of one run at one setting (geomlens sweep), and check "
        "the figure's loss traces level off above the loss at the weights.",
    ]
