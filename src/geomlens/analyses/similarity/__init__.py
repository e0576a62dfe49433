"""similarity: a model's similarity function g(d) over a stimulus space (docs/similarity.md)."""

from geomlens.analyses.declaration import Declaration
from geomlens.lazy import lazy_attributes

from .config import SimilarityConfig
from .metrics import METRIC_SPECS

DECLARATION = Declaration(
    name="similarity",
    summary="The similarity function g(d) of a model's representations (or choices) over stimuli.",
    config=SimilarityConfig,
    default_data=(
        "Every year 1901–2000 in three templates (300 texts); behavioural: the shipped choice "
        "set the choice-set option names (see docs/similarity.md)."
    ),
    metrics=METRIC_SPECS,
    sweep_metrics=("g_first_bin",),
    example=".example:EXAMPLE",
    reading=".reading:reading",
    analysis=".analysis:Similarity",
)

# The class module's names, imported on first use (the declaration needs no torch).
__getattr__ = lazy_attributes(__name__, fallback=(".analysis",))
