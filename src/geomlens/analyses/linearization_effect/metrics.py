"""The linearization-effect analysis's metrics: words, units, headlines and the guards a number
passes before it is read (see :class:`~geomlens.analyses.spec.MetricSpec`)."""

from __future__ import annotations

import math
from typing import Any

from geomlens.analyses.spec import MetricSpec as M
from geomlens.analyses.words.guards import a_cosine
from geomlens.formatting import number

#: The noise-corrected α is a cosine divided by a reliability: past ±1 it is at the ceiling
#: (its interval holds ±1) or not read, never a number.
A_COSINE = a_cosine

#: What each family of next-token losses is a loss of (the part of its key before the dot).
LOSS_OF = {
    "fidelity": "on the concept words themselves (one to three tokens each, little context)",
    "heldout": "on held-out English (paragraphs of the bundled corpus)",
}


def uniform_loss_key(metrics: Any, family: str) -> str | None:
    """The key of ln V of the predictions of the losses of ``family``: the uniform-guess loss
    recorded beside them (``<family>.lm_loss_uniform`` or ``<family>.uniform_loss``), or None."""
    for name in ("lm_loss_uniform", "uniform_loss"):
        value = metrics.get(f"{family}.{name}")
        if value is not None and not math.isnan(value):
            return f"{family}.{name}"
    return None


def uniform_loss_of(metrics: Any, family: str) -> float:
    """ln V of the predictions of the losses of ``family`` (NaN when not recorded)."""
    key = uniform_loss_key(metrics, family)
    return float(metrics[key]) if key is not None else math.nan


def loss_above_uniform(result: Any, family: str = "fidelity") -> str | None:
    """Words for a next-token loss of ``family`` (``fidelity``: on the concept words;
    ``heldout``: on held-out paragraphs) above the uniform-guess loss ln V of the same
    predictions (a model that predicts worse than guessing), or None. The words name what the
    loss is a loss of."""
    metrics = result.metrics
    uniform = uniform_loss_of(metrics, family)
    if math.isnan(uniform):
        return None
    for condition in ("base", "linearized"):
        loss = metrics.get(f"{family}.lm_loss_{condition}")
        if loss is not None and not math.isnan(loss) and loss > uniform:
            which = "the model's" if condition == "base" else "the linearised model's"
            return (
                f"not read: {which} next-token loss {LOSS_OF.get(family, '')} is above the "
                f"uniform-guess loss of the same predictions ({number(uniform)} nats, ln of the "
                "vocabulary), so it measures no fidelity"
            )
    return None


def _loss_guard(result: Any, key: str) -> str | None:
    return loss_above_uniform(result, key.split(".", 1)[0] if "." in key else "fidelity")


METRIC_SPECS: tuple[M, ...] = (
    M("alpha_corrected_base", headline=True, guards=(A_COSINE,)),
    M("alpha_corrected_linearized", headline=True, guards=(A_COSINE,)),
    M("alpha_base", headline=True),
    M("alpha_linearized", headline=True),
    M("ccgp_base", headline=True),
    M("ccgp_linearized", headline=True),
    M("alpha", "abstraction α"),
    M("ccgp", "CCGP"),
    M("lm_loss_base", "next-token loss, original model", unit="nats", guards=(_loss_guard,)),
    M("lm_loss_change", "next-token loss change", unit="nats", guards=(_loss_guard,)),
    M("lm_loss_linearized", "next-token loss, linearised", unit="nats", guards=(_loss_guard,)),
    M("lm_loss_uniform", "uniform-guess next-token loss (ln of the vocabulary)", unit="nats"),
    M("uniform_loss", "uniform-guess next-token loss (ln of the vocabulary)", unit="nats"),
)
