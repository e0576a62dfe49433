"""The linearization-effect analysis's reading for the report: plain words from its result's public metrics."""

from __future__ import annotations

import math

from geomlens.analyses.reading_words import (
    direction,
    interval,
    layer_label,
    number,
)
from geomlens.results import Result


def _fidelity_phrase(metrics: dict[str, float]) -> str:
    if "fidelity.output_embedding_cosine" in metrics:
        return (
            f"the linearised model's output embedding keeps a cosine of "
            f"{number(metrics['fidelity.output_embedding_cosine'])} with the original's "
            "(1 = unchanged)"
        )
    uniform = metrics.get("heldout.uniform_loss", math.nan)
    reference = (
        f"; a uniform guess over the vocabulary scores {number(uniform)} nats"
        if math.isfinite(uniform)
        else ""
    )
    if "heldout.lm_loss_change" in metrics:  # the loss the report promises: held-out English
        base = metrics.get("heldout.lm_loss_base", math.nan)
        after = metrics.get("heldout.lm_loss_linearized", math.nan)
        return (
            f"the next-token loss on held-out English goes from {number(base)} to "
            f"{number(after)} nats per token (change {number(after - base)} nats, over "
            f"{number(metrics.get('heldout.tokens', math.nan))} tokens{reference})"
        )
    if "fidelity.lm_loss_change" in metrics:
        base = metrics.get("fidelity.lm_loss_base", math.nan)
        if math.isfinite(uniform) and base > uniform:  # worse than guessing: not a loss to read
            return (
                f"the next-token loss on the concept words is {number(base)} nats per token, "
                f"worse than a uniform guess ({number(uniform)} nats): a failed measurement, "
                "not read"
            )
        return (
            f"the next-token loss on the concept words (nats per token) changes by "
            f"{number(metrics['fidelity.lm_loss_change'])} nats (from {number(base)}"
            f"{reference})"
        )
    return "its fidelity cost was not measured"


def reading(result: Result) -> list[str]:
    metrics = result.metrics
    info = (result.tables.get("linearization") or [{}])[0]
    mode = info.get("mode", result.config.get("mode", "identity"))
    lines = [
        f"The MLP nonlinearity of layer(s) {info.get('layers', '?')} is replaced by its linear "
        f"version ({mode}) and α and CCGP are measured again; the theory predicts that a "
        "nonlinearity attenuates abstraction, so linearising should raise α."
    ]
    if "summary.alpha_base" in metrics:
        low = metrics.get("summary.alpha_change_ci_low")
        high = metrics.get("summary.alpha_change_ci_high")
        lines.append(
            f"At {layer_label(info.get('summary_site', 'the summary site'))}, mean α goes from "
            f"{number(metrics['summary.alpha_base'])} to "
            f"{number(metrics['summary.alpha_linearized'])} (change "
            f"{number(metrics.get('summary.alpha_change', math.nan))}, {interval(low, high)} "
            f"from a paired bootstrap over tasks and contexts: "
            f"{direction(low, high, 'the change')}), up in "
            f"{number(metrics.get('summary.tasks_alpha_up', math.nan))} of "
            f"{number(metrics.get('summary.n_tasks', math.nan))} concept sets, while "
            f"{_fidelity_phrase(metrics)}. CCGP goes from "
            f"{number(metrics.get('summary.ccgp_base', math.nan))} to "
            f"{number(metrics.get('summary.ccgp_linearized', math.nan))}, up or equal in "
            f"{number(metrics.get('summary.tasks_ccgp_up_or_equal', math.nan))} of "
            f"{number(metrics.get('summary.n_tasks', math.nan))} sets (no interval is computed "
            "for the CCGP change: read its direction from the per-task counts only)."
        )
    return lines
