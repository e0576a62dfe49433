"""llc: the local learning coefficient of a causal LM at its weights, by devinterp's estimator.

The LLC λ̂ (Lau et al. 2023; devinterp) measures how degenerate the loss landscape is around the
weights: SGLD chains sample near them, tempered (nβ) and localised (γ), and
λ̂ = nβ · (mean sampled loss − loss at the weights). The loss is the model's next-token
cross-entropy on the data; the pass keeps each row's token ids and the loss as the model is
(eval mode), and ``finalize`` packs the rows' real tokens into sequences and calls
``devinterp.slt.llc.llc`` on a copy of the model (the user's model is never changed). The
number depends on the sampler's settings (step size, localisation, nβ, batch, data): compare
λ̂ across checkpoints of one run at one setting, as ``geomlens sweep`` does, not across
settings. Dropout, where the model has it, is on while sampling (devinterp samples in train
mode). Needs ``pip install "geomlens[devinterp]"``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from geomlens.analyses.base import Analysis, Batch, RunContext
from geomlens.analyses.statistics.next_token import next_token_loss
from geomlens.hooks.sites import NEXT_TOKEN_SITE
from geomlens.models.adapter import Adapter
from geomlens.progress import showing
from geomlens.results import Result

from . import DECLARATION
from .config import LLCConfig
from .sampling import Estimate, estimate, pack


def check_causal_lm(adapter: Adapter) -> None:
    """Refuse, in one line, a model whose next-token loss llc cannot read."""
    if adapter.model is None or not adapter.is_causal_lm:
        raise ValueError(
            f"llc needs a causal language model (its next-token loss); {adapter.model_id!r} is "
            "not one. Name a causal LM with --model (each SGLD step is a forward and backward "
            "pass, chains × draws of them: keep it small on a CPU), or sweep a causal LM's "
            "checkpoints: geomlens sweep llc --series DIR."
        )


class LLC(Analysis, declaration=DECLARATION):
    """The local learning coefficient λ̂ at the model's weights (devinterp's SGLD estimate)."""

    config: LLCConfig

    def __init__(self, config: LLCConfig | None = None, **overrides: Any) -> None:
        super().__init__(config, **overrides)
        #: Per batch: its row numbers, token ids and attention mask (copies, on the device).
        self.parts: list[tuple[np.ndarray, torch.Tensor, torch.Tensor]] = []
        self.loss_sum: float | torch.Tensor = 0.0
        self.loss_count: float | torch.Tensor = 0.0

    def sites(self, adapter: Adapter) -> list[str]:
        check_causal_lm(adapter)
        return [NEXT_TOKEN_SITE]

    def setup(self, context: RunContext) -> None:
        check_causal_lm(context.adapter)
        super().setup(context)

    def update(self, batch: Batch) -> None:
        ids = batch.inputs.input_ids
        if ids is None:
            raise ValueError("llc needs token ids (a text model's inputs); this batch has none.")
        mask = batch.attention_mask
        self.parts.append((np.array(batch.index, copy=True), ids.clone(), mask.clone()))
        total, count = next_token_loss(batch.activations[NEXT_TOKEN_SITE], batch)
        self.loss_sum = _added(self.loss_sum, total)
        self.loss_count = _added(self.loss_count, count.double())

    def merge(self, other: Analysis) -> None:
        self._check_mergeable(other)
        assert isinstance(other, LLC)
        self.parts = [*self.parts, *((i.copy(), t.clone(), m.clone()) for i, t, m in other.parts)]
        self.loss_sum = _added(self.loss_sum, other.loss_sum)
        self.loss_count = _added(self.loss_count, other.loss_count)

    def _sequences(self) -> tuple[torch.Tensor, int]:
        """The packed sequences (rows in row order, whoever saw them) and the real tokens."""
        parts = sorted(
            ((int(i), ids[k], mask[k]) for index, ids, mask in self.parts
             for k, i in enumerate(index)),
            key=lambda part: part[0],
        )  # fmt: skip
        tokens = [ids[mask.bool()] for _, ids, mask in parts]
        return pack(tokens, self.config.sequence_length), sum(int(t.numel()) for t in tokens)

    def finalize(self) -> Result:
        if not self.parts:
            raise ValueError("llc saw no data; give at least one text.")
        context = self._run_context()
        sequences, tokens = self._sequences()
        size = self.config.sgld_batch_size
        if sequences.shape[0] < size:
            raise ValueError(
                f"llc: the data's {tokens} tokens make {sequences.shape[0]} sequences of "
                f"{self.config.sequence_length}, fewer than sgld_batch_size={size}; give more "
                "text, or a smaller sequence_length or sgld_batch_size."
            )
        seed = self.config.sampler_seed if self.config.sampler_seed is not None else context.seed
        adapter = context.adapter
        found = estimate(adapter.model, sequences, self.config, seed, str(adapter.device),
                         showing())  # fmt: skip
        return self._result(found, sequences.shape[0], tokens)

    def _result(self, found: Estimate, sequences: int, tokens: int) -> Result:
        per_chain = np.asarray(found.per_chain, dtype=float)
        mean = float(per_chain.mean())
        low, high = _interval(per_chain)
        count = float(self.loss_count)
        metrics = {
            "summary.llc": mean,
            "summary.llc_ci_low": low,
            "summary.llc_ci_high": high,
            # devinterp's own spread: the standard deviation over chains (ddof 0).
            "summary.llc_std": float(per_chain.std()),
            "summary.init_loss": found.init_loss,
            "summary.loss": float(self.loss_sum) / count if count else math.nan,
            "summary.n_beta": found.n_beta,
            "summary.chains": float(len(per_chain)),
            "summary.sequences": float(sequences),
            "summary.tokens": float(tokens),
        }
        chains = [{"chain": c, "llc": float(v)} for c, v in enumerate(per_chain)]
        trace = [
            {"chain": c, "step": s, "loss": float(loss)}
            for c, losses in enumerate(found.loss_trace)
            for s, loss in enumerate(losses)
        ]
        return Result(self.name, metrics=metrics, tables={"chains": chains, "loss_trace": trace})

    @classmethod
    def plot(cls, result: Result, **kwargs: Any) -> Any:
        from .figure import draw

        return draw(result)


def _added(mine: float | torch.Tensor, theirs: float | torch.Tensor) -> float | torch.Tensor:
    """A running sum kept as a device tensor (nothing read back to the host per batch)."""
    if isinstance(theirs, torch.Tensor):
        theirs = theirs.detach().double()
        if isinstance(mine, torch.Tensor):
            theirs = theirs.to(mine.device)
    return mine + theirs


def _interval(per_chain: np.ndarray) -> tuple[float, float]:
    """The 95 % Student-t interval of the mean over chains (undefined with one chain)."""
    if len(per_chain) < 2:
        return math.nan, math.nan
    from scipy import stats

    half = (
        stats.t.ppf(0.975, len(per_chain) - 1) * per_chain.std(ddof=1) / math.sqrt(len(per_chain))
    )
    return float(per_chain.mean() - half), float(per_chain.mean() + half)
