"""The llc analysis's metrics: words, units, headlines (see :class:`~geomlens.analyses.spec.MetricSpec`)."""

from __future__ import annotations

from typing import Any

from geomlens.analyses.spec import MetricSpec as M
from geomlens.analyses.spec import interval_ends


def not_negative(result: Any, key: str) -> str | None:
    """A negative λ̂ is no complexity: the SGLD chains found lower loss than at the weights, so
    at this setting the weights are not at a local minimum of the sampled loss."""
    value = result.metrics.get(key)
    if value is not None and value == value and value < 0:
        return (
            "not read: negative (the SGLD chains found lower loss than at these weights, so at "
            "this setting they are not at a local minimum of the sampled loss: training still "
            "descends, or the sampler wanders)"
        )
    return None


METRIC_SPECS: tuple[M, ...] = (
    M(
        "llc",
        "local learning coefficient λ̂ (mean over chains)",
        headline=True,
        guards=(not_negative,),
    ),
    *interval_ends("llc", "local learning coefficient λ̂"),
    M("llc_std", "standard deviation of λ̂ across chains"),
    M("init_loss", "next-token loss at the checkpoint's weights (the sampler's origin)", "nats"),
    M("loss", "next-token loss on the data, the model as it is (eval mode)", "nats"),
    M("n_beta", "inverse temperature nβ of the sampler"),
    M("chains", "SGLD chains", "chains"),
    M("sequences", "sequences sampled from", "sequences"),
    M("tokens", "real tokens of the data", "tokens"),
)
