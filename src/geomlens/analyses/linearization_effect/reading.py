"""The linearization-effect analysis's reading for the report: plain words from its result's public metrics."""

from __future__ import annotations

import math

from geomlens.analyses.words.guards import probe_at_chance
from geomlens.analyses.words.reading_words import (
    count,
    direction,
    layer_label,
    metric_interval,
    metric_refused,
    metric_value,
)
from geomlens.results import Result

from .metrics import LOSS_OF, loss_above_uniform, uniform_loss_key

#: CCGP before and after, each refused within the range coin flips reach on its test rows.
_CCGP_AT_CHANCE = {condition: probe_at_chance(condition) for condition in ("base", "linearized")}


def _alpha_within_null(result: Result, site: str) -> str | None:
    """Words for a raw α that is within its label-shuffle null both before and after (no shared
    direction to change, so its change is not read), or None."""
    metrics = result.metrics
    for condition in ("base", "linearized"):
        alpha = metrics.get(f"{site}.alpha_{condition}")
        p95 = metrics.get(f"{site}.alpha_null_p95_{condition}")
        if not (_finite(alpha) and _finite(p95)) or alpha > p95:  # type: ignore[operator]
            return None
    said, null = (
        {c: metric_value(result, f"{site}.{name}_{c}") for c in ("base", "linearized")}
        for name in ("alpha", "alpha_null_p95")
    )
    return (
        f"is within its label-shuffle null before and after ({said['base']} against a 95th "
        f"percentile of {null['base']}, then {said['linearized']} against "
        f"{null['linearized']}): no shared direction is measured, so its change is not read"
    )


def _loss_words(result: Result, family: str) -> str:
    """The next-token loss of ``family`` before and after, naming what it is a loss of and
    beside the uniform-guess loss of the same predictions; its guard's words when refused."""
    failed = loss_above_uniform(result, family)
    if failed is not None:
        return failed
    uniform = uniform_loss_key(result.metrics, family)
    return (
        f"the next-token loss {LOSS_OF[family]} goes from "
        f"{metric_value(result, f'{family}.lm_loss_base')} to "
        f"{metric_value(result, f'{family}.lm_loss_linearized')} (a uniform guess over the "
        "vocabulary scores "
        + (metric_value(result, uniform) if uniform else "an unrecorded loss")
        + ")"
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
            f"{metric_value(result, 'fidelity.output_embedding_cosine')} with the original's "
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
        # The summary site's own key carries the interval the guard reads (the summary's has none).
        overshoot = [
            refused
            for c in ("base", "linearized")
            if (
                refused := metric_refused(
                    result, _summary_key(result, site, f"alpha_corrected_{c}")
                )
            )
            is not None
        ]
        if overshoot:  # a cosine divided by a reliability, past where any cosine lies
            lines.append(f"At {where}, the noise-corrected α is {_refusal(overshoot[0])}.")
        elif _alpha_within_null(result, site):  # no shared direction: nothing to correct
            lines.append(
                f"At {where}, the noise-corrected α is not read: the raw α is within its "
                "label-shuffle null before and after, so no shared direction is measured to "
                "correct."
            )
        else:
            lines.append(
                f"At {where}, the noise-corrected α (which does not grow with the rows per cell) "
                + _change_words(result, "alpha_corrected", "n_tasks_alpha_corrected")
                + "."
            )
    if "summary.alpha_base" in metrics:
        rows = count(metrics.get("summary.rows_per_cell", math.nan), "row")
        within_null = _alpha_within_null(result, site)
        alpha_words = f"At {where}, the raw α of the sets with {rows} per cell " + (
            within_null if within_null else _change_words(result, "alpha", "n_tasks_alpha")
        )
        ccgp_base = metric_value(result, "summary.ccgp_base")
        ccgp_linearized = metric_value(result, "summary.ccgp_linearized")
        at_chance = [
            _CCGP_AT_CHANCE[condition](result, f"{site}.ccgp_{condition}")
            for condition in ("base", "linearized")
        ]
        if all(at_chance) and site:
            ccgp_words = (
                f"CCGP is at chance before and after ({ccgp_base} and "
                f"{ccgp_linearized}, each within the range coin flips reach on these "
                "test rows): nothing measured here, so no change of CCGP is read."
            )
        else:
            ccgp_words = (
                f"CCGP goes from {ccgp_base} to {ccgp_linearized}, up or equal in "
                f"{count(metrics.get('summary.tasks_ccgp_up_or_equal', math.nan), '')}"
                f" of {count(metrics.get('summary.n_tasks', math.nan), 'set')} (no interval is "
                "computed for the CCGP change: read its direction from the per-task counts only)."
            )
        lines.append(f"{alpha_words}, while {fidelity}. {ccgp_words}")
    return lines


def _summary_key(result: Result, site: str, name: str) -> str:
    """``<site>.<name>`` at the summary site where the result has it, else ``summary.<name>``."""
    return f"{site}.{name}" if f"{site}.{name}" in result.metrics else f"summary.{name}"


def _refusal(words: str) -> str:
    """A guard's words after "is": "at a cosine's ceiling (…)", or "not read (…)"."""
    return words if not words.startswith("not read: ") else f"not read ({words[10:]})"


def _finite(value: float | None) -> bool:
    return value is not None and not math.isnan(value)


def _change_words(result: Result, column: str, total: str) -> str:
    """ "goes from a to b (change c, interval: resolved or not), up in u and down in d of n
    sets" for the summary's ``column``."""
    metrics = result.metrics
    low = metrics.get(f"summary.{column}_change_ci_low")
    high = metrics.get(f"summary.{column}_change_ci_high")
    n = metrics.get(f"summary.{total}", metrics.get("summary.n_tasks", math.nan))
    up = metrics.get(f"summary.tasks_{column}_up", math.nan)
    down = n - up if _finite(n) and _finite(up) else math.nan
    resolved = _finite(low) and _finite(high) and (low > 0 or high < 0)  # type: ignore[operator]
    # The sets' directions are read only beside a resolved change: inside an interval that
    # includes 0, "rises in 2 and falls in 2" is the noise the interval already describes.
    counts = (
        f"; it rises in {count(up, '')} and falls in {count(down, '')} of {count(n, 'concept set')}"
        if resolved
        else ""
    )
    return (
        f"goes from {metric_value(result, f'summary.{column}_base')} to "
        f"{metric_value(result, f'summary.{column}_linearized')} (change "
        f"{metric_value(result, f'summary.{column}_change')}, "
        f"{metric_interval(result, f'summary.{column}_change')} "
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
