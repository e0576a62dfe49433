"""The llc analysis's reading for the report: plain words from its result's public metrics."""

from __future__ import annotations

import math

from geomlens.analyses.words.reading_words import number
from geomlens.results import Result


def reading(result: Result) -> list[str]:
    metrics = result.metrics
    llc = metrics.get("summary.llc")
    if llc is None or not math.isfinite(llc):
        return []
    chains = int(metrics.get("summary.chains", 0))
    low, high = metrics.get("summary.llc_ci_low"), metrics.get("summary.llc_ci_high")
    spread = (
        f" (95 % interval over {chains} chains {number(low)} to {number(high)})"
        if low is not None and high is not None and math.isfinite(low) and math.isfinite(high)
        else ""
    )
    if llc < 0:
        return [
            f"λ̂ = {number(llc)}{spread} is negative: the SGLD chains found lower loss than at "
            "these weights, so at this setting the weights are not at a local minimum of the "
            "sampled loss (training still descends, or the sampler wanders): λ̂ is not a "
            "complexity here. Raise localization or n_beta, or lower step_size, and check the "
            "figure's loss traces.",
        ]
    return [
        f"The local learning coefficient at these weights is λ̂ = {number(llc)}{spread}: the "
        "effective number of directions the loss rises in around them, by devinterp's SGLD "
        "estimate; a simpler (more degenerate) solution has a smaller λ̂.",
        "Its value depends on the sampler's step size, localisation and nβ and on the data: "
        "compare it across checkpoints of one run at one setting (geomlens sweep), and check "
        "the figure's loss traces level off above the loss at the weights.",
    ]
