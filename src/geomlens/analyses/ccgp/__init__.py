"""ccgp: cross-condition generalisation of linear concept probes, beside within-context accuracy."""

from geomlens.analyses.declaration import Declaration
from geomlens.lazy import lazy_attributes

from .config import CCGPConfig
from .metrics import METRIC_SPECS

DECLARATION = Declaration(
    name="ccgp",
    summary="Cross-condition generalisation (CCGP) of linear concept probes, and within-context accuracy.",
    config=CCGPConfig,
    default_data=(
        "The shipped English two-factor concept sets (gender, number, tense, degree, "
        "animacy-by-colour), each concept in many contexts."
    ),
    metrics=METRIC_SPECS,
    sweep_metrics=("ccgp", "within_context_accuracy"),
    example=".example:EXAMPLE",
    reading=".reading:reading",
    analysis=".analysis:CCGP",
)

# The class module's names, imported on first use (the declaration needs no torch).
__getattr__ = lazy_attributes(__name__, fallback=(".analysis",))
