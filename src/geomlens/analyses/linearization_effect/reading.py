"""The linearization-effect analysis's reading for the report: plain words from its result's public metrics."""

from __future__ import annotations

import math

from geomlens.analyses.words.guards import probe_at_chance
from geomlens.analyses.words.reading_words import direction, interval, layer_label, number
from geomlens.results import Result

from .metrics import LOSS_OF, loss_above_uniform, uniform_loss_of

#: CCGP before and after, each refused within the range coin flips reach on its test rows.
_CCGP_AT_CHANCE = {condition: probe_at_chance(condition) for condition in ("base", "linearized")}


def _alpha_within_null(metrics: dict[str, float], site: str) -> str | None:
    """Words for a raw α that is within its label-shuffle null both before and after (no shared
    direction to change, so its change is not read), or None."""
    values = []
    for condition in ("base", "linearized"):
        alpha = metrics.get(f"{site}.alpha_{condition}")
        p95 = metrics.get(f"{site}.alpha_null_p95_{condition}")
        if not (_finite(alpha) and _finite(p95)) or alpha > p95:  # type: ignore[operator]
            return None
        values.append((alpha, p95))
    (base, base_p95), (linearized, linearized_p95) = values
    return (
        f"is within its label-shuffle null before and after ({number(base)} against a 95th "
        f"percentile of {number(base_p95)}, then {number(linearized)} against "
        f"{number(linearized_p95)}): no shared direction is measured, so its change is not read"
    )


def _loss_words(result: Result, family: str) -> str:
    """The next-token loss of ``family`` before and after, naming what it is a loss of and
    beside the uniform-guess loss of the same predictions; its guard's words when refused."""
    metrics = result.metrics
    failed = loss_above_uniform(result, family)
    if failed is not None:
        return failed
    return (
        f"the next-token loss {LOSS_OF[family]} goes from "
        f"{number(metrics.get(f'{family}.lm_loss_base', math.nan))} to "
        f"{number(metrics.get(f'{family}.lm_loss_linearized', math.nan))} nats (a uniform guess "
        f"over the vocabulary scores {number(uniform_loss_of(metrics, family))})"
    )


def _fidelity_phrase(result: Result) -> str:
    metrics = result.metrics
    if "heldout.lm_loss_base" in metrics:  # the section's held-out loss: the cost that matters
        return _loss_words(result, "heldout") + (
            f"; {_loss_words(result, 'fidelity')}" if "fidelity.lm_loss_base" in metrics else ""
        )
    if "fidelity.lm_loss_base" in metrics:
        return _loss_words(result, "fidelity")
    if "fidelity.output_embedding_cosine" in metrics:
        return (
            f"the linearised model's output embedding keeps a cosine of "
            f"{number(metrics['fidelity.output_embedding_cosine'])} with the original's "
            "(1 = unchanged)"
        )
    return "its fidelity cost was not measured"


def reading(result: Result) -> list[str]:
    metrics = result.metrics
    info = (result.tables.get("linearization") or [{}])[0]
    mode = info.get("mode", result.config.get("mode", "identity"))
    lines = [
        f"The MLP nonlinearity of {_layers_words(info.get('layers'))} is replaced by its linear "
        f"version ({mode}) and α and CCGP are measured again; the theory predicts that a "
        "nonlinearity attenuates abstraction, so linearising should raise α."
    ]
    fidelity = _fidelity_phrase(result)
    where = layer_label(info.get("summary_site", "the summary site"))
    site = info.get("summary_site", "")
    if _finite(metrics.get("summary.alpha_corrected_base")):
        overshoot = [
            metrics[f"summary.alpha_corrected_{c}"]
            for c in ("base", "linearized")
            if abs(metrics.get(f"summary.alpha_corrected_{c}", 0.0)) > 1.0
        ]
        if overshoot:  # a cosine divided by a reliability, past where any cosine lies
            lines.append(
                f"At {where}, the noise-corrected α is not read: {number(overshoot[0])} is "
                "outside [−1, 1], where a cosine lies (the noise correction overshoots on these "
                "rows)."
            )
        elif _alpha_within_null(metrics, site):  # no shared direction: nothing to correct
            lines.append(
                f"At {where}, the noise-corrected α is not read: the raw α is within its "
                "label-shuffle null before and after, so no shared direction is measured to "
                "correct."
            )
        else:
            lines.append(
                f"At {where}, the noise-corrected α (which does not grow with the rows per cell) "
                + _change_words(metrics, "alpha_corrected", "n_tasks_alpha_corrected")
                + "."
            )
    if "summary.alpha_base" in metrics:
        rows = metrics.get("summary.rows_per_cell", math.nan)
        within_null = _alpha_within_null(metrics, site)
        alpha_words = f"At {where}, the raw α of the sets with {number(rows)} row(s) per cell " + (
            within_null if within_null else _change_words(metrics, "alpha", "n_tasks_alpha")
        )
        ccgp_base = metrics.get("summary.ccgp_base", math.nan)
        ccgp_linearized = metrics.get("summary.ccgp_linearized", math.nan)
        at_chance = [
            _CCGP_AT_CHANCE[condition](result, f"{site}.ccgp_{condition}")
            for condition in ("base", "linearized")
        ]
        if all(at_chance) and site:
            ccgp_words = (
                f"CCGP is at chance before and after ({number(ccgp_base)} and "
                f"{number(ccgp_linearized)}, each within the range coin flips reach on these "
                "test rows): nothing measured here, so no change of CCGP is read."
            )
        else:
            ccgp_words = (
                f"CCGP goes from {number(ccgp_base)} to {number(ccgp_linearized)}, up or equal in "
                f"{number(metrics.get('summary.tasks_ccgp_up_or_equal', math.nan))} of "
                f"{number(metrics.get('summary.n_tasks', math.nan))} sets (no interval is "
                "computed for the CCGP change: read its direction from the per-task counts only)."
            )
        lines.append(f"{alpha_words}, while {fidelity}. {ccgp_words}")
    return lines


def _finite(value: float | None) -> bool:
    return value is not None and not math.isnan(value)


def _change_words(metrics: dict[str, float], column: str, count: str) -> str:
    """ "goes from a to b (change c, interval: resolved or not), up in u and down in d of n
    sets" for the summary's ``column``."""
    low = metrics.get(f"summary.{column}_change_ci_low")
    high = metrics.get(f"summary.{column}_change_ci_high")
    n = metrics.get(f"summary.{count}", metrics.get("summary.n_tasks", math.nan))
    up = metrics.get(f"summary.tasks_{column}_up", math.nan)
    down = n - up if _finite(n) and _finite(up) else math.nan
    resolved = _finite(low) and _finite(high) and (low > 0 or high < 0)  # type: ignore[operator]
    # The sets' directions are read only beside a resolved change: inside an interval that
    # includes 0, "rises in 2 and falls in 2" is the noise the interval already describes.
    counts = (
        f"; it rises in {number(up)} and falls in {number(down)} of {number(n)} concept sets"
        if resolved
        else ""
    )
    return (
        f"goes from {number(metrics[f'summary.{column}_base'])} to "
        f"{number(metrics[f'summary.{column}_linearized'])} (change "
        f"{number(metrics.get(f'summary.{column}_change', math.nan))}, {interval(low, high)} "
        f"from a paired bootstrap over tasks and contexts: "
        f"{direction(low, high, 'the change')}){counts}"
    )


def _layers_words(layers: object) -> str:
    """``[4]`` → "layer 4"; ``[3, 4]`` → "layers 3 and 4" (never a Python list)."""
    if not isinstance(layers, (list, tuple)) or not layers:
        return "the linearised layers"
    names = [str(layer) for layer in layers]
    if len(names) == 1:
        return f"layer {names[0]}"
    return f"layers {', '.join(names[:-1])} and {names[-1]}"
