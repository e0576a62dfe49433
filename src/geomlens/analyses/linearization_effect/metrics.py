"""The linearization-effect analysis's metrics: words, units, headlines and the guards a number
passes before it is read (see :class:`~geomlens.analyses.spec.MetricSpec`)."""

from __future__ import annotations

import math
from typing import Any

from geomlens.analyses.spec import MetricSpec as M
from geomlens.formatting import number


def loss_above_uniform(result: Any) -> str | None:
    """Words for a next-token loss above the uniform-guess loss ln V (a model that predicts
    worse than guessing: a failure of the measurement, never a reading), or None."""
    metrics = result.metrics
    uniform = metrics.get("fidelity.lm_loss_uniform")
    if uniform is None or math.isnan(uniform):
        return None
    for condition in ("base", "linearized"):
        loss = metrics.get(f"fidelity.lm_loss_{condition}")
        if loss is not None and not math.isnan(loss) and loss > uniform:
            which = "the model's" if condition == "base" else "the linearised model's"
            return (
                f"not read: {which} next-token loss {number(loss)} nats is above the "
                f"uniform-guess loss {number(uniform)} nats (ln of the vocabulary), so the "
                "measurement failed"
            )
    return None


def _loss_guard(result: Any, key: str) -> str | None:
    return loss_above_uniform(result)


METRIC_SPECS: tuple[M, ...] = (
    M("alpha_corrected_base", headline=True),
    M("alpha_corrected_linearized", headline=True),
    M("alpha_base", headline=True),
    M("alpha_linearized", headline=True),
    M("ccgp_base", headline=True),
    M("ccgp_linearized", headline=True),
    M("alpha", "abstraction α"),
    M("ccgp", "CCGP"),
    M("lm_loss_change", "next-token loss change", unit="nats", guards=(_loss_guard,)),
    M("lm_loss_linearized", "next-token loss, linearised", unit="nats", guards=(_loss_guard,)),
    M("lm_loss_uniform", "uniform-guess next-token loss (ln of the vocabulary)", unit="nats"),
)
