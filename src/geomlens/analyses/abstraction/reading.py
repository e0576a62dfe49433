"""The abstraction analysis's reading for the report: plain words from its result's public metrics."""

from __future__ import annotations

import math

from geomlens.analyses.words.metric_words import metric_refused
from geomlens.analyses.words.reading_words import (
    extremes,
    interval,
    layer_label,
    missing,
    number,
    per_site,
    ranked,
    site_row,
)
from geomlens.results import Result


def _rows(count: float | None) -> str:
    if count is None or math.isnan(count):
        return "an unknown number of rows"
    return f"{number(count)} row{'' if count == 1 else 's'}"


def reading(result: Result) -> list[str]:
    alpha = per_site(result, "alpha")
    if not alpha:
        return []
    metrics = result.metrics
    lines = [
        "α is the mean cosine between a concept's difference vectors across contexts (e.g. "
        "king − queen against actor − actress): 1 means one shared direction, 0 none. The raw "
        "α grows with the rows averaged into each class mean (n r / (1 + (n − 1) r), "
        "Spearman–Brown), so raw α is only compared between sets of the same rows per cell; "
        "the corrected α takes the row noise out of the directions before the ratio and does "
        "not depend on it (it is refused where the directions' reliability is below 0.2)."
    ]
    corrected = per_site(result, "alpha_corrected")
    lines.extend(_corrected_lines(result, corrected))
    best, worst = extremes(alpha)
    if not best:
        lines.append("The raw α is undefined at every site (a difference vector vanishes).")
        return lines
    row = site_row(result, best)
    tasks = row.get("alpha_tasks") or row.get("tasks", "the concept sets")
    size = _rows(metrics.get(f"{best}.rows_per_cell"))
    p95 = metrics.get(f"{best}.alpha_null_p95")
    null = result.config.get("null", "within-context")
    where = "inside each context" if null == "within-context" else "across contexts"
    above = p95 is not None and not math.isnan(p95) and alpha[best] > p95
    best_interval = interval(
        metrics.get(f"{best}.alpha_ci_low"), metrics.get(f"{best}.alpha_ci_high")
    )
    if ranked(alpha, _intervals(result, "alpha", alpha)) == best:
        raw = (
            f"The raw α (at {size} per cell, the mean over {tasks}) is highest at "
            f"{layer_label(best)} ({number(alpha[best])}, {best_interval} for the mean, tasks "
            f"and contexts resampled) and lowest at {layer_label(worst)} ({number(alpha[worst])})."
        )
    else:
        raw = (
            f"The raw α (at {size} per cell, the mean over {tasks}) ranges from "
            f"{number(alpha[worst])} to {number(alpha[best])} across the layers, but their "
            "95 % intervals overlap, so no layer is named as the highest."
        )
    lines.append(raw)
    if p95 is not None and not math.isnan(p95):
        lines.append(
            f"With the concept label shuffled {where} ({null} null), the mean α there stays "
            f"below {number(p95)} in 95 % of shuffles; the measured {number(alpha[best])} is "
            + ("above it." if above else "not above it: no shared direction is measured there.")
        )
    return lines


def _intervals(
    result: Result, name: str, values: dict[str, float]
) -> dict[str, tuple[float, float]]:
    """Each site's 95 % interval of ``<site>.<name>`` (NaN ends when it has none)."""
    get = result.metrics.get
    return {
        site: (get(f"{site}.{name}_ci_low", math.nan), get(f"{site}.{name}_ci_high", math.nan))
        for site in values
    }


def _corrected_lines(result: Result, corrected: dict[str, float]) -> list[str]:
    """The noise-corrected α: the highest layer only when its interval lies above every other
    layer's; otherwise the range, with no layer named."""
    readable = {
        s: v for s, v in corrected.items() if not metric_refused(result, f"{s}.alpha_corrected")
    }
    if corrected and not readable and any(not missing(v) for v in corrected.values()):
        why = str(metric_refused(result, f"{extremes(corrected)[0]}.alpha_corrected"))
        return [
            f"Corrected for noise, α is not read at any layer ({why.removeprefix('not read: ')})."
        ]
    corrected = readable
    top, bottom = extremes(corrected)
    if not top:
        return []
    tasks = site_row(result, top).get("alpha_corrected_tasks", "the sets with several rows")
    if ranked(corrected, _intervals(result, "alpha_corrected", corrected)) == top:
        low = result.metrics.get(f"{top}.alpha_corrected_ci_low")
        high = result.metrics.get(f"{top}.alpha_corrected_ci_high")
        return [
            f"Corrected for noise, α is highest at {layer_label(top)}: "
            f"{number(corrected[top])} ({interval(low, high)}), the mean over {tasks}."
        ]
    return [
        f"Corrected for noise, α ranges from {number(corrected[bottom])} to "
        f"{number(corrected[top])} across the layers (the mean over {tasks}), but the layers' "
        "95 % intervals overlap, so no layer is named as the highest."
    ]
