"""llc: the local learning coefficient λ̂ of a causal LM at its weights, by devinterp's SGLD
estimator (the optional extra ``geomlens[devinterp]``)."""

from geomlens.analyses.declaration import BUNDLED_CORPUS, Declaration
from geomlens.lazy import lazy_attributes

from .config import LLCConfig
from .metrics import METRIC_SPECS

DECLARATION = Declaration(
    name="llc",
    aliases=("local-learning-coefficient",),
    summary="Local learning coefficient λ̂ at a causal LM's weights (devinterp's SGLD estimate).",
    config=LLCConfig,
    default_data=(
        f"{BUNDLED_CORPUS} Their tokens, in order, cut into sequences for the next-token loss."
    ),
    metrics=METRIC_SPECS,
    sweep_metrics=("llc",),
    quick={"chains": 2, "draws": 20},
    requires=("devinterp",),
    install="geomlens[devinterp]",
    # Many backward passes per checkpoint and a causal LM's loss: a sweep's column, not a
    # section of the default report on MiniLM (an encoder).
    report=False,
    example=".example:EXAMPLE",
    reading=".reading:reading",
    analysis=".analysis:LLC",
)

# The class module's names, imported on first use (the declaration needs no torch).
__getattr__ = lazy_attributes(__name__, fallback=(".analysis",))
