"""abstraction: the abstraction cosine α of binary concepts across contexts, at every site.

For a binary concept s seen in contexts c_1..c_k, class means μ(s, c) give difference vectors
u_c = μ(+, c) − μ(−, c); α is the mean cosine over pairs of contexts c ≠ c'. α near 1: one
shared concept direction (a linear, abstract representation); near 0: unrelated directions.
Reported with a bootstrap confidence interval over contexts (none with fewer than three
contexts) and two label-shuffle nulls: ``within-context`` (the concept label shuffled inside
each context; the default behind ``alpha_null*``) and ``across-contexts`` (class means dealt at
random into pairs). A site's metrics are means over the tasks listed in the ``sites`` table,
with an interval for that mean from a bootstrap over tasks and contexts. State is the class
means per (task, concept, context), streamed, so memory does not grow with the number of rows.
See docs/abstraction.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from geomlens.analyses.alpha_scores import (
    NULLS,
    AlphaDraws,
    alpha_draws,
    null_suffix,
    site_mean_interval,
    site_null_p95,
    summarise_alpha,
)
from geomlens.analyses.base import option
from geomlens.analyses.concept_geometry import (
    ConceptAnalysis,
    ConceptConfig,
    ConceptState,
    legend_with_styles,
    plot_by_layer,
    site_averages,
    site_tasks,
    task_rng,
)
from geomlens.results import Result

from .example import EXAMPLE
from .metrics import METRIC_SPECS
from .reading import reading as read_result

#: Per-task columns averaged into ``<site>.<column>`` (the interval and the null's 95th
#: percentile are then replaced by those of the site mean: see :func:`site_alpha_metrics`).
ALPHA_COLUMNS = (
    "alpha",
    "alpha_ci_low",
    "alpha_ci_high",
    "alpha_null",
    "alpha_null_p95",
    *(f"alpha_null_p95{null_suffix(n)}" for n in NULLS),
)


@dataclass
class AbstractionConfig(ConceptConfig):
    n_bootstrap: int = option(
        1000,
        "Bootstrap resamples of contexts (and, for a site's mean, of tasks) for the interval; "
        "tasks with fewer than three contexts get none.",
        low=0,
    )
    n_shuffles: int = option(200, "Label shuffles for the null distribution of α.", low=0)
    confidence: float = option(0.95, "Confidence level of the bootstrap interval.", low=0, high=1)
    null: str = option(
        "within-context",
        "The null behind alpha_null/alpha_null_p95/alpha_p_value: 'within-context' (the "
        "concept label shuffled inside each context) or 'across-contexts' (class means dealt "
        "into random pairs). Both are reported under their own names.",
        choices=NULLS,
    )


def abstraction_draws(
    state: ConceptState, config: AbstractionConfig, seed: int
) -> tuple[list[dict], dict[tuple[str, str], AlphaDraws]]:
    """One row per (site, task) — α, its interval over contexts, the nulls, the number of
    contexts — and each row's draws, keyed by (site, task)."""
    rows, draws = [], {}
    for site in state.sites():
        for task in state.tasks():
            _, _, means = state.class_means_across_contexts(
                site, task, "α compares a concept across contexts"
            )
            task_draws = alpha_draws(
                means,
                task_rng(seed, site, task),
                n_bootstrap=config.n_bootstrap,
                n_shuffles=config.n_shuffles,
            )
            draws[(site, task)] = task_draws
            scores = summarise_alpha(task_draws, confidence=config.confidence, null=config.null)
            rows.append({"site": site, "task": task, **scores})
    return rows, draws


def abstraction_table(state: ConceptState, config: AbstractionConfig, seed: int) -> list[dict]:
    """One row per (site, task): α, its CI, the shuffle nulls, the number of contexts."""
    return abstraction_draws(state, config, seed)[0]


def site_alpha_metrics(
    rows: list[dict],
    draws: dict[tuple[str, str], AlphaDraws],
    config: AbstractionConfig,
    seed: int,
) -> dict[str, float]:
    """``<site>.<column>`` means over tasks, with ``alpha_ci_low/high`` an interval for the site
    mean α (tasks and contexts resampled) and each ``alpha_null_p95*`` the 95th percentile of
    the mean over tasks under that null."""
    metrics = site_averages(rows, ALPHA_COLUMNS)
    for site in dict.fromkeys(r["site"] for r in rows):
        mine = [draws[(site, r["task"])] for r in rows if r["site"] == site]
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
    return metrics


class Abstraction(ConceptAnalysis):
    """Abstraction cosine α of binary concepts across contexts (bootstrap CI, shuffle null)."""

    name = "abstraction"
    example = EXAMPLE
    metric_specs = METRIC_SPECS
    reading = staticmethod(read_result)

    Config = AbstractionConfig
    config: AbstractionConfig

    def finalize(self) -> Result:
        seed = self.checked_seed()
        rows, draws = abstraction_draws(self.state, self.config, seed)
        metrics = site_alpha_metrics(rows, draws, self.config, seed)
        sites = site_tasks(rows, ("alpha_ci_low",))
        return Result(self.name, metrics=metrics, tables={"per_task": rows, "sites": sites})

    @classmethod
    def plot(cls, result: Result, **kwargs: Any) -> Any:
        import matplotlib.pyplot as plt

        figure, axis = plt.subplots(figsize=(7, 4))
        rows = result.tables["per_task"]
        plot_by_layer(axis, rows, "alpha", band=("alpha_ci_low", "alpha_ci_high"))
        plot_by_layer(axis, rows, "alpha_null_p95", linestyle=":", labelled=False)
        axis.axhline(0, color="grey", lw=0.5)
        axis.set_ylabel("abstraction cosine α")
        null = result.config.get("null", "within-context")
        legend_with_styles(
            axis,
            {
                "α (band: 95 % CI over contexts; none below 3 contexts)": "-",
                f"{null} shuffle null, 95th pct": ":",
            },
        )
        figure.suptitle(f"abstraction · {result.provenance.get('model_id', '')}")
        figure.tight_layout()
        return figure
