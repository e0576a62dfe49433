"""Built-in analyses (declared in :data:`geomlens.analyses.registry.BUILTINS`) and the base class."""

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
