"""The analyses: one folder per built-in (``geomlens/analyses/<name>/``, found by walking this
package, see :mod:`geomlens.analyses.registry`), the base class and the machinery they share."""

from geomlens.analyses import (  # noqa: F401  (geomlens.analyses.similarity, … stay attributes)
    abstraction,
    activation_stats,
    ccgp,
    linearization_effect,
    resolution,
    sae_features,
    similarity,
)
from geomlens.analyses.base import Analysis, AnalysisConfig, Batch, RunContext, option

__all__ = ["Analysis", "AnalysisConfig", "Batch", "RunContext", "activation_stats", "option"]
