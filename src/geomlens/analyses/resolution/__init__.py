"""resolution: a model's resolution scale ε and its place on the theory's (p_S, p_I) front."""

from geomlens.analyses.declaration import Declaration
from geomlens.lazy import lazy_attributes

from .config import ResolutionConfig
from .metrics import METRIC_SPECS

DECLARATION = Declaration(
    name="resolution",
    summary="Resolution scale ε of g(d) by family and AIC, and the model's place on the (p_S, p_I) front.",
    config=ResolutionConfig,
    default_data=(
        "Every year 1901–2000 in three templates (300 texts); behavioural: the shipped choice "
        "set the choice-set option names (see docs/similarity.md)."
    ),
    metrics=METRIC_SPECS,
    sweep_metrics=("p_similarity", "p_identification", "front_distance", "epsilon"),
    quick={"bootstrap": 50, "samples": 20_000},
    example=".example:EXAMPLE",
    reading=".reading:reading",
    analysis=".analysis:Resolution",
)

# The class module's names, imported on first use (the declaration needs no torch).
__getattr__ = lazy_attributes(__name__, fallback=(".analysis",))
