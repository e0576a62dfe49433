"""activation-stats: per-site mean norm, per-dimension mean and variance, dead units."""

from geomlens.analyses.declaration import Declaration
from geomlens.lazy import lazy_attributes

from .config import ActivationStatsConfig
from .metrics import METRIC_SPECS

DECLARATION = Declaration(
    name="activation-stats",
    aliases=("activation_stats", "stats"),
    summary="Streaming per-dimension moments at each site.",
    config=ActivationStatsConfig,
    metrics=METRIC_SPECS,
    example=".example:EXAMPLE",
    reading=".reading:reading",
    analysis=".analysis:ActivationStats",
)

# The class module's names, imported on first use (the declaration needs no torch).
__getattr__ = lazy_attributes(__name__, fallback=(".analysis",))
