"""The abstraction analysis's reading for the report: plain words from its result's public metrics."""

from __future__ import annotations

import math

from geomlens.analyses.words import reading_words as words
from geomlens.analyses.words.guards import AT_THE_CEILING
from geomlens.results import Result


def reading(result: Result) -> list[str]:
    alpha = words.per_site(result, "alpha")
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
    corrected = words.per_site(result, "alpha_corrected")
    lines.extend(_corrected_lines(result, corrected))
    best, worst = words.extremes(alpha)
    if not best:
        lines.append("The raw α is undefined at every site (a difference vector vanishes).")
        return lines
    row = words.site_row(result, best)
    tasks = row.get("alpha_tasks") or row.get("tasks", "the concept sets")
    size = words.count(metrics.get(f"{best}.rows_per_cell"), "row")
    p95 = metrics.get(f"{best}.alpha_null_p95")
    null = result.config.get("null", "within-context")
    where = "inside each context" if null == "within-context" else "across contexts"
    above = p95 is not None and not math.isnan(p95) and alpha[best] > p95
    best_interval = words.metric_interval(result, f"{best}.alpha")
    if words.ranked(alpha, _intervals(result, "alpha", alpha)) == best:
        raw = (
            f"The raw α (at {size} per cell, the mean over {tasks}) is highest at "
            f"{words.layer_label(best)} ({words.metric_value(result, f'{best}.alpha')}, {best_interval} for "
            "the mean, tasks and contexts resampled) and lowest at "
            f"{words.layer_label(worst)} ({words.metric_value(result, f'{worst}.alpha')})."
        )
    else:
        raw = (
            f"The raw α (at {size} per cell, the mean over {tasks}) ranges from "
            f"{words.metric_value(result, f'{worst}.alpha')} to {words.metric_value(result, f'{best}.alpha')} "
            "across the layers, but their "
            "95 % intervals overlap, so no layer is named as the highest."
        )
    lines.append(raw)
    if p95 is not None and not math.isnan(p95):
        lines.append(
            f"With the concept label shuffled {where} ({null} null), the mean α there stays "
            f"below {words.metric_value(result, f'{best}.alpha_null_p95')} in 95 % of shuffles; the "
            f"measured {words.metric_value(result, f'{best}.alpha')} is "
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
    refusals = {s: words.metric_refused(result, f"{s}.alpha_corrected") for s in corrected}
    readable = {s: v for s, v in corrected.items() if refusals[s] is None}
    ceiling = [s for s, why in refusals.items() if (why or "").startswith(AT_THE_CEILING)]
    if (
        corrected
        and not readable
        and not ceiling
        and any(not words.missing(v) for v in corrected.values())
    ):
        why = str(refusals[words.extremes(corrected)[0]])
        return [
            f"Corrected for noise, α is not read at any layer ({why.removeprefix('not read: ')})."
        ]
    lines = []
    if ceiling:  # past ±1 by noise in the correction: words, never a number past a cosine's range
        tasks = words.site_row(result, ceiling[0]).get(
            "alpha_corrected_tasks", "the sets with several rows"
        )
        where = "every layer" if len(ceiling) == len(corrected) else _layers(ceiling)
        lines.append(
            f"Corrected for noise, α is {refusals[ceiling[0]]}, at {where} (the mean over {tasks})."
        )
    top, bottom = words.extremes(readable)
    if not top:
        return lines
    tasks = words.site_row(result, top).get("alpha_corrected_tasks", "the sets with several rows")
    # A layer at the ceiling may be the highest: no layer is named beside one.
    if (
        not ceiling
        and words.ranked(readable, _intervals(result, "alpha_corrected", readable)) == top
    ):
        key = f"{top}.alpha_corrected"
        return lines + [
            f"Corrected for noise, α is highest at {words.layer_label(top)}: "
            f"{words.metric_value(result, key)} ({words.metric_interval(result, key)}), the mean over {tasks}."
        ]
    return lines + [
        f"Corrected for noise, α ranges from {words.metric_value(result, f'{bottom}.alpha_corrected')} "
        f"to {words.metric_value(result, f'{top}.alpha_corrected')} across the layers (the mean over "
        f"{tasks}), but "
        + ("a layer is at the ceiling" if ceiling else "the layers' 95 % intervals overlap")
        + ", so no layer is named as the highest."
    ]


def _layers(sites: list[str]) -> str:
    """Sites in words, joined: "layer 3, layer 4 and layer 5"."""
    labels = [words.layer_label(site) for site in sites]
    return labels[0] if len(labels) == 1 else f"{', '.join(labels[:-1])} and {labels[-1]}"
