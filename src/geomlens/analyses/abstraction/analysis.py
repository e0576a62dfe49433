"""abstraction: the abstraction cosine α of binary concepts across contexts, at every site.

For a binary concept s seen in contexts c_1..c_k, class means μ(s, c) give difference vectors
u_c = μ(+, c) − μ(−, c); α is the mean cosine over pairs of contexts c ≠ c'. α near 1: one
shared concept direction (a linear, abstract representation); near 0: unrelated directions.
Every α carries ``rows_per_cell``: the raw α grows with the rows averaged into each class
mean (the Spearman–Brown reliability of a direction), so it is reported beside the
noise-corrected ``alpha_corrected`` (products of the difference vectors with the row noise
taken off, averaged before the ratio: the same at any cell size; NaN for one-row cells, and
refused with its reason below reliability 0.2, the reliability beside it). Reported with a bootstrap
confidence interval over contexts (none with fewer than three contexts) and two label-shuffle
nulls: ``within-context`` (the concept label shuffled among each context's rows, a sign flip
of u_c for one-row cells; ``alpha_null_kind`` says which; the default behind ``alpha_null*``)
and ``across-contexts`` (class means dealt at random into pairs). A site's raw α averages the
tasks of one cell size, its corrected α the tasks that define it (the ``sites`` table names
them), each with an interval for that mean from a bootstrap over tasks and contexts. State is
the pooled rows per (site, task).
See docs/abstraction.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from geomlens import progress
from geomlens.analyses.abstraction.figures import legend_with_styles, plot_by_layer
from geomlens.analyses.statistics.alpha_scores import (
    NULLS,
    AlphaDraws,
    TaskRows,
    alpha_draws,
    null_suffix,
    site_mean_interval,
    site_null_p95,
    summarise_alpha,
)
from geomlens.analyses.statistics.concept_state import (
    ConceptAnalysis,
    ConceptState,
    site_averages,
    site_tasks,
    task_rng,
)
from geomlens.analyses.statistics.duplicates import refuse_duplicates
from geomlens.results import Result

#: Per-task columns averaged into ``<site>.<column>`` (the interval and the null's 95th
#: percentile are then replaced by those of the site mean: see :func:`site_alpha_metrics`).
from . import DECLARATION
from .config import AbstractionConfig

ALPHA_COLUMNS = (
    "alpha",
    "alpha_ci_low",
    "alpha_ci_high",
    "alpha_null",
    "alpha_null_p95",
    *(f"alpha_null_p95{null_suffix(n)}" for n in NULLS),
    "rows_per_cell",
)
#: Per-task columns of the corrected α averaged into ``<site>.<column>`` over the tasks that
#: define it (its interval is then replaced by that of the site mean).
CORRECTED_COLUMNS = ("alpha_corrected", "alpha_corrected_ci_low", "alpha_corrected_ci_high")


def abstraction_draws(
    state: ConceptState, config: AbstractionConfig, seed: int, analysis: str = "abstraction"
) -> tuple[list[dict], dict[tuple[str, str], AlphaDraws]]:
    """One row per (site, task) — α, its interval over contexts, the nulls, the number of
    contexts — and each row's draws, keyed by (site, task). Data giving the same row twice
    is refused (``analysis`` names the analysis in the message)."""
    rows, draws = [], {}
    for site in progress.each(list(state.sites()), "sites finished"):
        for task in state.tasks():
            values, contexts, means = state.class_means_across_contexts(
                site, task, "α compares a concept across contexts"
            )
            task_rows = None
            if state.keep_rows:
                pooled, concept, context = state.pooled(site, task)
                refuse_duplicates(
                    analysis,
                    f"{site} (task {task})",
                    pooled,
                    [concept, context],
                    state.pooled_index(task),
                    effect="a copy would count twice in its class mean and fall into both "
                    "halves of a split, inflating the split-half reliability, rows_per_cell "
                    "and the corrected α",
                )
                task_rows = TaskRows.from_labels(pooled, concept, context, values, contexts)
            task_draws = alpha_draws(
                means,
                task_rng(seed, site, task),
                n_bootstrap=config.n_bootstrap,
                n_shuffles=config.n_shuffles,
                rows=task_rows,
                n_half_splits=config.n_half_splits,
            )
            draws[(site, task)] = task_draws
            scores = summarise_alpha(task_draws, confidence=config.confidence, null=config.null)
            rows.append({"site": site, "task": task, **scores})
    return rows, draws


def abstraction_table(state: ConceptState, config: AbstractionConfig, seed: int) -> list[dict]:
    """One row per (site, task): α, its CI, the shuffle nulls, the number of contexts."""
    return abstraction_draws(state, config, seed)[0]


def comparable_tasks(rows: list[dict]) -> list[dict]:
    """The rows a site mean of the raw α may average: those with the same rows per cell (the
    raw α grows with it, see docs/abstraction.md), the smallest size present. Rows without a
    known cell size all count as one size."""

    def size(row: dict) -> float:
        value = row.get("rows_per_cell", float("nan"))
        return -1.0 if value is None or value != value else float(value)

    smallest = min(size(r) for r in rows)
    return [r for r in rows if size(r) == smallest]


def site_alpha_metrics(
    rows: list[dict],
    draws: dict[tuple[str, str], AlphaDraws],
    config: AbstractionConfig,
    seed: int,
) -> dict[str, float]:
    """Per site: ``alpha`` and its columns averaged over the tasks with the same rows per cell
    (:func:`comparable_tasks`; ``alpha_ci_low/high`` an interval for that mean, tasks and
    contexts resampled, each ``alpha_null_p95*`` the 95th percentile of the mean over tasks
    under that null), and ``alpha_corrected`` averaged over the tasks that define it (a
    cell-size-free quantity), with an interval for that mean."""
    metrics: dict[str, float] = {}
    for site in dict.fromkeys(r["site"] for r in rows):
        everything = [r for r in rows if r["site"] == site]
        comparable = comparable_tasks(everything)
        metrics.update(site_averages(comparable, ALPHA_COLUMNS))
        mine = [draws[(site, r["task"])] for r in comparable]
        low, high = site_mean_interval(
            [d.alpha for d in mine],
            [d.bootstrap for d in mine],
            task_rng(seed, site, "\x00site mean"),
            confidence=config.confidence,
        )
        metrics[f"{site}.alpha_ci_low"], metrics[f"{site}.alpha_ci_high"] = low, high
        metrics[f"{site}.alpha_null_p95"] = site_null_p95([d.nulls[config.null] for d in mine])
        for null in NULLS:
            p95 = site_null_p95([d.nulls[null] for d in mine])
            metrics[f"{site}.alpha_null_p95{null_suffix(null)}"] = p95
        metrics[f"{site}.n_tasks"] = float(len(mine))
        corrected = [draws[(site, r["task"])] for r in everything]
        reliabilities = [d.reliability for d in corrected if np.isfinite(d.reliability)]
        # Beside the corrected α: its tasks' reliability (the mean; NaN without rows).
        metrics[f"{site}.alpha_corrected_reliability"] = (
            float(np.mean(reliabilities)) if reliabilities else float("nan")
        )
        corrected = [d for d in corrected if np.isfinite(d.alpha_corrected)]
        metrics[f"{site}.n_tasks_corrected"] = float(len(corrected))
        if not corrected:
            for column in CORRECTED_COLUMNS:
                metrics[f"{site}.{column}"] = float("nan")
            continue
        metrics[f"{site}.alpha_corrected"] = float(np.mean([d.alpha_corrected for d in corrected]))
        low, high = site_mean_interval(
            [d.alpha_corrected for d in corrected],
            [d.corrected_bootstrap for d in corrected],
            task_rng(seed, site, "\x00site corrected mean"),
            confidence=config.confidence,
        )
        metrics[f"{site}.alpha_corrected_ci_low"] = low
        metrics[f"{site}.alpha_corrected_ci_high"] = high
    return metrics


def abstraction_sites(rows: list[dict]) -> list[dict]:
    """The ``sites`` table: which tasks each site mean averages — every task (``tasks``), the
    raw α's comparable ones (``alpha_tasks``, at ``rows_per_cell``) and the corrected α's
    (``alpha_corrected_tasks``)."""
    table = site_tasks(rows, ("alpha_ci_low",))
    for entry in table:
        mine = [r for r in rows if r["site"] == entry["site"]]
        comparable = comparable_tasks(mine)
        entry["alpha_tasks"] = ", ".join(r["task"] for r in comparable)
        entry["rows_per_cell"] = comparable[0].get("rows_per_cell", float("nan"))
        entry["alpha_corrected_tasks"] = ", ".join(
            r["task"] for r in mine if np.isfinite(r.get("alpha_corrected", float("nan")))
        )
    return table


class Abstraction(ConceptAnalysis, declaration=DECLARATION):
    """Abstraction cosine α of binary concepts across contexts (bootstrap CI, shuffle null)."""

    config: AbstractionConfig

    #: The corrected α halves each cell's rows and the row-level null reshuffles them.
    keeps_rows = True

    def finalize(self) -> Result:
        seed = self.checked_seed()
        rows, draws = abstraction_draws(self.state, self.config, seed)
        metrics = site_alpha_metrics(rows, draws, self.config, seed)
        sites = abstraction_sites(rows)
        return Result(self.name, metrics=metrics, tables={"per_task": rows, "sites": sites})

    @classmethod
    def plot(cls, result: Result, **kwargs: Any) -> Any:
        import matplotlib.pyplot as plt

        figure, axis = plt.subplots(figsize=(7, 4))
        rows = result.tables["per_task"]
        plot_by_layer(axis, rows, "alpha", band=("alpha_ci_low", "alpha_ci_high"))
        plot_by_layer(axis, rows, "alpha_null_p95", linestyle=":", labelled=False)
        plot_by_layer(axis, rows, "alpha_corrected", linestyle="--", labelled=False)
        axis.axhline(0, color="grey", lw=0.5)
        axis.set_ylabel("abstraction cosine α")
        null = result.config.get("null", "within-context")
        legend_with_styles(
            axis,
            {
                "raw α at the set's rows per cell (band: 95 % CI over contexts; none below 3)": "-",
                "noise-corrected α (sets with ≥ 2 rows per cell)": "--",
                f"{null} shuffle null, 95th pct": ":",
            },
        )
        figure.suptitle(f"abstraction · {result.provenance.get('model_id', '')}")
        figure.tight_layout()
        return figure
