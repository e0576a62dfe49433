"""abstraction's options, and those every concept analysis shares (ccgp and
linearization-effect build theirs on :class:`ConceptConfig`)."""

from __future__ import annotations

from dataclasses import dataclass

from geomlens.analyses.declaration import AnalysisConfig, option
from geomlens.analyses.statistics.alpha_scores import DEFAULT_HALF_SPLITS, NULLS


@dataclass
class ConceptConfig(AnalysisConfig):
    """Options every concept analysis has: where to read and how to pool a row."""

    site: str | list[str] | None = option(
        None, "Site(s) to measure; default: every blocks.{L}.hook_resid_post (a layer sweep)."
    )
    pooling: str = option(
        "auto",
        "How a row's tokens become one vector: 'auto' (the [[marked]] word's tokens when texts "
        "mark one, else the mean), 'span', 'mean', 'last' or 'first'.",
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
    n_half_splits: int = option(
        DEFAULT_HALF_SPLITS,
        "Unused (kept for old calls): the corrected α averages every halving in closed form.",
        low=1,
    )
