"""The llc analysis's metrics: words, units, headlines (see :class:`~geomlens.analyses.spec.MetricSpec`)."""

from __future__ import annotations

from geomlens.analyses.spec import MetricSpec as M
from geomlens.analyses.spec import interval_ends

METRIC_SPECS: tuple[M, ...] = (
    M("llc", "local learning coefficient λ̂ (mean over chains)", headline=True),
    *interval_ends("llc", "local learning coefficient λ̂"),
    M("llc_std", "standard deviation of λ̂ across chains"),
    M("init_loss", "next-token loss at the checkpoint's weights (the sampler's origin)", "nats"),
    M("loss", "next-token loss on the data, the model as it is (eval mode)", "nats"),
    M("n_beta", "inverse temperature nβ of the sampler"),
    M("chains", "SGLD chains", "chains"),
    M("sequences", "sequences sampled from", "sequences"),
    M("tokens", "real tokens of the data", "tokens"),
)
