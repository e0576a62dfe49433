"""Built-in analyses. Importing this package registers them."""

from geomlens.analyses import (  # noqa: F401  (importing a module registers its analyses)
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
