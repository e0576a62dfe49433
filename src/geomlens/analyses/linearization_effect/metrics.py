"""The linearization-effect analysis's metrics: words, units, headlines (see :class:`~geomlens.analyses.spec.MetricSpec`)."""

from __future__ import annotations

from typing import Any

from geomlens.analyses.guards import below_uniform_loss
from geomlens.analyses.spec import MetricSpec as M


def _vocabulary(result: Any, key: str) -> float:
    """The vocabulary size a loss is read against (the held-out measurement records it)."""
    return float(result.metrics.get("heldout.vocab_size", float("nan")))


_LOSS = (below_uniform_loss(_vocabulary),)

METRIC_SPECS: tuple[M, ...] = (
    M("alpha_base", headline=True),
    M("alpha_linearized", headline=True),
    M("ccgp_base", headline=True),
    M("ccgp_linearized", headline=True),
    M("alpha", "abstraction α"),
    M("ccgp", "CCGP"),
    M("lm_loss_base", "next-token loss, original model", "nats", guards=_LOSS),
    M("lm_loss_linearized", "next-token loss, MLP linearised", "nats", guards=_LOSS),
    M("lm_loss_change", "change in next-token loss", "nats"),
    M("uniform_loss", "next-token loss of a uniform guess (log V)", "nats"),
)
