"""The abstraction analysis's reading for the report: plain words from its result's public metrics."""

from __future__ import annotations

from geomlens.analyses.reading_words import (
    extremes,
    interval,
    layer_label,
    number,
    per_site,
    site_row,
)
from geomlens.results import Result


def reading(result: Result) -> list[str]:
    alpha = per_site(result, "alpha")
    if not alpha:
        return []
    best, worst = extremes(alpha)
    if not best:
        return []
    metrics = result.metrics
    tasks = site_row(result, best).get("tasks", "the concept sets")
    lines = [
        "α is the mean cosine between a concept's difference vectors across contexts (e.g. "
        "king − queen against actor − actress): 1 means one shared direction, 0 none.",
        f"α is highest at {layer_label(best)} ({number(alpha[best])}, "
        f"{interval(metrics.get(f'{best}.alpha_ci_low'), metrics.get(f'{best}.alpha_ci_high'))}"
        f" for the mean, tasks and contexts resampled) and lowest at {layer_label(worst)} "
        f"({number(alpha[worst])}); each is the mean over {tasks}.",
    ]
    p95 = metrics.get(f"{best}.alpha_null_p95")
    if p95 is not None:
        null = result.config.get("null", "within-context")
        where = "inside each context" if null == "within-context" else "across contexts"
        lines.append(
            f"With the concept label shuffled {where} ({null} null), the mean α there stays "
            f"below {number(p95)} in 95 % of shuffles; the measured {number(alpha[best])} is "
            f"{'above' if alpha[best] > p95 else 'not above'} it."
        )
    return lines
