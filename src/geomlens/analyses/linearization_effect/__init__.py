"""linearization-effect: α and CCGP with and without locally linearising an MLP, and what it costs."""

from geomlens.analyses.declaration import Declaration
from geomlens.lazy import lazy_attributes

from .config import LinearizationEffectConfig
from .metrics import METRIC_SPECS

DECLARATION = Declaration(
    name="linearization-effect",
    aliases=("linearization_effect",),
    summary="α and CCGP with and without local linearisation of an MLP, and its fidelity cost.",
    config=LinearizationEffectConfig,
    default_data=(
        "The shipped English two-factor concept sets (gender, number, tense, degree, "
        "animacy-by-colour), each concept in many contexts."
    ),
    metrics=METRIC_SPECS,
    quick={"n_bootstrap": 100, "n_shuffles": 20},
    example=".example:EXAMPLE",
    reading=".reading:reading",
    analysis=".analysis:LinearizationEffect",
)

# The class module's names, imported on first use (the declaration needs no torch).
__getattr__ = lazy_attributes(__name__, fallback=(".analysis",))
