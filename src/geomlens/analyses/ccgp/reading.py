"""The ccgp analysis's reading for the report: plain words from its result's public metrics."""

from __future__ import annotations

import math

from geomlens.analyses.words import reading_words as words
from geomlens.results import Result

from .metrics import AT_CHANCE, ONE_ROW_SETS


def reading(result: Result) -> list[str]:
    ccgp = words.per_site(result, "ccgp")
    if not ccgp:
        return []
    best, _ = words.extremes(ccgp)
    if not best:
        return []
    rows = [r for r in result.tables.get("per_task", []) if r.get("site") == best]
    tasks = words.site_row(result, best).get("tasks", "the concept sets")
    lines = [
        "CCGP trains a linear probe for the concept in some contexts and tests it in contexts "
        "it never saw; 0.5 is chance.",
    ]
    refused = AT_CHANCE(result, f"{best}.ccgp")
    if refused is not None:  # the best is at chance, so every site is: nothing to compare
        lines.append(
            f"Even at the best site, {words.layer_label(best)} (CCGP averaged over {tasks}), it is "
            f"{refused}."
        )
        return lines
    lines.append(
        f"The best site is {words.layer_label(best)}: CCGP {words.metric_value(result, f'{best}.ccgp')}, the "
        f"mean over {tasks}."
    )
    within = [r for r in rows if not math.isnan(words.mean_of([r], "within_context_accuracy"))]
    without = [r for r in rows if r not in within]
    if within:
        lines.append(
            f"For {', '.join(r['task'] for r in within)}, whose contexts hold several rows of "
            f"each value, CCGP is {words.metric_value(result, f'{best}.ccgp_within_tasks')} against a "
            "within-context accuracy of "
            f"{words.metric_value(result, f'{best}.within_context_accuracy')} (probes "
            "cross-validated inside each context): a CCGP close to it means the concept is "
            "coded the same way everywhere (abstractly)."
        )
    if without:
        lines.append(
            f"{', '.join(r['task'] for r in without)} have one row per value and context, so "
            "no within-context accuracy exists; their mixed-context accuracy (rows split at "
            f"random over all contexts, i.e. unseen words) is "
            f"{_one_row_mean(result, best, without, 'mixed_context_accuracy')} against a CCGP "
            f"of {_one_row_mean(result, best, without, 'ccgp')}."
        )
    return lines


def _one_row_mean(result: Result, site: str, rows: list[dict], column: str) -> str:
    """``column`` averaged over ``rows`` (the one-row sets), through its derived spec."""
    spec = ONE_ROW_SETS[column]
    return words.derived_value(result, f"{site}.{spec.name}", words.mean_of(rows, column), spec)
