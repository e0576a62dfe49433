"""activation-stats: per-site mean norm, per-dimension mean and variance, dead units.

The folder is the analysis: this declaration is all that listing, ``run NAME --help``, the
report's plan and a sweep's columns read (no torch; see :mod:`geomlens.analyses.declaration`).
"""

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
