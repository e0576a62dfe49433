"""abstraction: the abstraction cosine α of binary concepts across contexts, at every site."""

from geomlens.analyses.declaration import Declaration
from geomlens.lazy import lazy_attributes

from .config import AbstractionConfig
from .metrics import METRIC_SPECS

DECLARATION = Declaration(
    name="abstraction",
    summary="Abstraction cosine α of binary concepts across contexts (bootstrap CI, shuffle null).",
    config=AbstractionConfig,
    default_data=(
        "The shipped English two-factor concept sets (gender, number, tense, degree, "
        "animacy-by-colour), each concept in many contexts."
    ),
    metrics=METRIC_SPECS,
    sweep_metrics=("alpha",),
    quick={"n_bootstrap": 100, "n_shuffles": 20},
    example=".example:EXAMPLE",
    reading=".reading:reading",
    analysis=".analysis:Abstraction",
)

# The class module's names, imported on first use (the declaration needs no torch).
__getattr__ = lazy_attributes(__name__, fallback=(".analysis",))
