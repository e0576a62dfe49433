"""abstraction: the abstraction cosine α of binary concepts across contexts, at every site.

For a binary concept s seen in contexts c_1..c_k, class means μ(s, c) give difference vectors
u_c = μ(+, c) − μ(−, c); α is the mean cosine over pairs of contexts c ≠ c'. α near 1: one
shared concept direction (a linear, abstract representation); near 0: unrelated directions.
Reported with a bootstrap confidence interval over contexts and a label-shuffle null (class
means dealt at random into pairs). State is the class means per (task, concept, context),
streamed, so memory does not grow with the number of rows. See docs/abstraction.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from geomlens.analyses.base import option
from geomlens.analyses.concept_geometry import (
    ConceptAnalysis,
    ConceptConfig,
    ConceptState,
    abstraction_scores,
    legend_with_styles,
    plot_by_layer,
    site_averages,
    task_rng,
)
from geomlens.results import Result

ALPHA_COLUMNS = ("alpha", "alpha_ci_low", "alpha_ci_high", "alpha_null", "alpha_null_p95")


@dataclass
class AbstractionConfig(ConceptConfig):
    n_bootstrap: int = option(
        1000, "Bootstrap resamples of contexts for the confidence interval.", low=0
    )
    n_shuffles: int = option(200, "Label shuffles for the null distribution of α.", low=0)
    confidence: float = option(0.95, "Confidence level of the bootstrap interval.", low=0, high=1)


def abstraction_table(state: ConceptState, config: AbstractionConfig, seed: int) -> list[dict]:
    """One row per (site, task): α, its CI, the shuffle null, the number of contexts."""
    rows = []
    for site in state.sites():
        for task in state.tasks():
            _, _, means = state.class_means_across_contexts(
                site, task, "α compares a concept across contexts"
            )
            scores = abstraction_scores(
                means,
                task_rng(seed, site, task),
                n_bootstrap=config.n_bootstrap,
                n_shuffles=config.n_shuffles,
                confidence=config.confidence,
            )
            rows.append({"site": site, "task": task, **scores})
    return rows


class Abstraction(ConceptAnalysis):
    """Abstraction cosine α of binary concepts across contexts (bootstrap CI, shuffle null)."""

    name = "abstraction"

    Config = AbstractionConfig
    config: AbstractionConfig

    def finalize(self) -> Result:
        rows = abstraction_table(self.state, self.config, self.checked_seed())
        metrics = site_averages(rows, ALPHA_COLUMNS)
        return Result(self.name, metrics=metrics, tables={"per_task": rows})

    @classmethod
    def plot(cls, result: Result, **kwargs: Any) -> Any:
        import matplotlib.pyplot as plt

        figure, axis = plt.subplots(figsize=(7, 4))
        rows = result.tables["per_task"]
        plot_by_layer(axis, rows, "alpha", band=("alpha_ci_low", "alpha_ci_high"))
        plot_by_layer(axis, rows, "alpha_null_p95", linestyle=":", labelled=False)
        axis.axhline(0, color="grey", lw=0.5)
        axis.set_ylabel("abstraction cosine α")
        legend_with_styles(axis, {"α (band: CI)": "-", "shuffle null, 95th pct": ":"})
        figure.suptitle(f"abstraction · {result.provenance.get('model_id', '')}")
        figure.tight_layout()
        return figure
