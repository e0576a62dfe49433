"""The activation-stats analysis's reading for the report: plain words from its result's public metrics."""

from __future__ import annotations

import math

from geomlens.analyses.words import reading_words as words
from geomlens.results import Result

from .metrics import NORM_GROWTH


def reading(result: Result) -> list[str]:
    norms = words.per_site(result, "mean_norm")
    dead = words.per_site(result, "dead_fraction")
    if not norms:
        return []
    sites = list(norms)
    first, last = (f"{site}.mean_norm" for site in (sites[0], sites[-1]))
    growth = norms[sites[-1]] / norms[sites[0]] if norms[sites[0]] else math.nan
    grown = words.derived_value(result, f"{sites[-1]}.{NORM_GROWTH.name}", growth, NORM_GROWTH)
    lines = [
        f"The mean token norm goes from {words.metric_value(result, first)} at "
        f"{words.layer_label(sites[0])} to {words.metric_value(result, last)} at {words.layer_label(sites[-1])} "
        f"(changed by {grown}): this is the scale the other analyses' representations live at."
    ]
    worst = max(dead, key=dead.__getitem__) if dead else None
    # A residual-stream dimension has no activation function: one that stays negative on every
    # token is a direction the data never push positive, not a "dead" (unused) unit.
    if worst is not None and dead[worst] > 0:
        text = (
            f"{words.metric_value(result, f'{worst}.dead_fraction')} of the dimensions at "
            f"{words.layer_label(worst)} were never "
            "positive on this data."
        )
        if "resid" in worst:
            text += (
                " In the residual stream that is a sign convention, not a dead unit: such a "
                "dimension still carries information in its negative values."
            )
        else:
            text += " After an activation function these are dead units (they pass nothing)."
        lines.append(text)
    else:
        lines.append("Every dimension at every site was positive on some token of this data.")
    return lines
