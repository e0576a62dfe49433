"""Built-in analyses. Importing this package registers them."""

from geomlens.analyses import activation_stats
from geomlens.analyses import abstraction, ccgp, linearization_effect  # noqa: F401  (registers them)
from geomlens.analyses import resolution, similarity  # noqa: F401  (registers them)
from geomlens.analyses import sae_features  # noqa: F401  (registers it)
from geomlens.analyses.base import Analysis, AnalysisConfig, Batch, RunContext, option

__all__ = ["Analysis", "AnalysisConfig", "Batch", "RunContext", "activation_stats", "option"]
