"""ccgp: cross-condition generalisation of linear concept probes, beside within-context accuracy.

A logistic-regression probe (scikit-learn, on standardised activations) is trained to decode a
binary concept on some contexts and tested on held-out ones: all balanced context splits when
there are at most 6 contexts (for 2, both directions), otherwise leave one context out exactly
(``max_splits`` > 0 trades that for that many groups of contexts; ``split_scheme`` and
``n_splits`` record what ran). CCGP is the mean held-out accuracy. The within-context accuracy
cross-validates a probe inside each context that has two or more rows per concept value (NaN
for word-pair sets, which have one); the mixed-context accuracy is the old cross-validation
with rows split at random over all contexts. CCGP near the within-context accuracy: the concept
is decoded the same way everywhere; near chance: each context codes it its own way.

State: the pooled ``[N, d]`` rows per site. A concept set is a few thousand rows, which fit in
memory (3,000 rows × 2,048 dims × 4 bytes ≈ 25 MB per site); do not stream a corpus through it.
See docs/abstraction.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from geomlens import progress
from geomlens.analyses.abstraction.figures import legend_with_styles, plot_by_layer
from geomlens.analyses.statistics.concept_state import (
    ConceptAnalysis,
    ConceptState,
    site_averages,
    site_tasks,
)
from geomlens.analyses.statistics.duplicates import refuse_duplicates
from geomlens.analyses.statistics.probe_scores import ccgp_scores
from geomlens.results import Result

from . import DECLARATION
from .config import CCGPConfig

CCGP_COLUMNS = ("ccgp", "within_context_accuracy", "mixed_context_accuracy")


def site_ccgp_metrics(per_task: list[dict]) -> dict[str, float]:
    """``<site>.<column>`` means over tasks (:func:`site_averages`), and
    ``<site>.ccgp_within_tasks``: CCGP averaged over exactly the tasks that the site's
    ``within_context_accuracy`` averages (NaN when none has one), so the two are read side by
    side over the same tasks."""
    metrics = site_averages(per_task, CCGP_COLUMNS)
    for site in dict.fromkeys(r["site"] for r in per_task):
        matched = [
            r["ccgp"]
            for r in per_task
            if r["site"] == site and np.isfinite(r.get("within_context_accuracy", np.nan))
        ]
        metrics[f"{site}.ccgp_within_tasks"] = float(np.mean(matched)) if matched else np.nan
    return metrics


def ccgp_tables(
    state: ConceptState, config: CCGPConfig, seed: int
) -> tuple[list[dict], list[dict]]:
    """Per-(site, task) rows and per-split rows."""
    per_task: list[dict] = []
    per_split: list[dict] = []
    for site in progress.each(list(state.sites()), "sites finished"):
        for task in state.tasks():
            state.class_means_across_contexts(
                site, task, "CCGP tests a probe trained on some contexts on another"
            )
            rows, concept, context = state.pooled(site, task)
            refuse_duplicates(
                "ccgp",
                f"{site} (task {task})",
                rows,
                [concept, context],
                state.pooled_index(task),
                effect="a copy and its twin would land in the training and the test split, "
                "inflating the within-context and mixed-context accuracies",
            )
            summary, splits = ccgp_scores(
                rows,
                concept,
                context,
                seed=seed,
                max_splits=config.max_splits,
                folds=config.folds,
                inverse_regularisation=config.inverse_regularisation,
            )
            per_task.append({"site": site, "task": task, **summary})
            per_split.extend({"site": site, "task": task, **split} for split in splits)
    return per_task, per_split


def plot_ccgp(axis: Any, rows: list[dict]) -> None:
    """CCGP per task by layer (solid), with the within-context accuracy dotted beside it (where
    contexts have rows enough) and the mixed-context accuracy dash-dotted."""
    plot_by_layer(axis, rows, "ccgp")
    plot_by_layer(axis, rows, "within_context_accuracy", linestyle=":", labelled=False)
    plot_by_layer(axis, rows, "mixed_context_accuracy", linestyle="-.", labelled=False)
    axis.axhline(0.5, color="grey", lw=0.5)
    axis.set_ylabel("probe accuracy")


class CCGP(ConceptAnalysis, declaration=DECLARATION):
    """Cross-condition generalisation (CCGP) of linear concept probes, and within-context accuracy."""

    config: CCGPConfig

    keeps_rows = True

    def finalize(self) -> Result:
        per_task, per_split = ccgp_tables(self.state, self.config, self.checked_seed())
        metrics = site_ccgp_metrics(per_task)
        tables = {
            "per_task": per_task,
            "splits": per_split,
            "sites": site_tasks(per_task, CCGP_COLUMNS),
        }
        return Result(self.name, metrics=metrics, tables=tables)

    @classmethod
    def plot(cls, result: Result, **kwargs: Any) -> Any:
        import matplotlib.pyplot as plt

        figure, axis = plt.subplots(figsize=(7, 4))
        plot_ccgp(axis, result.tables["per_task"])
        legend_with_styles(
            axis,
            {"CCGP": "-", "within-context (CV inside each context)": ":", "mixed-context": "-."},
        )
        figure.suptitle(f"ccgp · {result.provenance.get('model_id', '')}")
        figure.tight_layout()
        return figure
