"""The sae-features analysis: which SAEs read which sites, counting each batch, splicing the
reconstruction in, merging, and the result."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from geomlens.analyses.base import Analysis, Batch, RunContext
from geomlens.analyses.sae_features.config import (
    CALIBRATION,
    COSINE_FIDELITY,
    DEFAULT_CALIBRATION_ROWS,
    DEFAULT_HELDOUT_ROWS,
    DEFAULT_MAX_TOKENS,
    DEFAULT_OOD_ROWS,
    SMOOTHED_BITS,
    SAEFeaturesConfig,
    check_choice,
    check_latents,
)
from geomlens.analyses.sae_features.counting import ConditionStats, SiteState, count_active
from geomlens.analyses.sae_features.plots import plot_sae_features
from geomlens.analyses.sae_features.provisioning import default_sae, default_site
from geomlens.analyses.sae_features.splicing import (
    cosine_distance_per_sequence,
    reconstruct,
    smoothed_bits_per_sequence,
)
from geomlens.analyses.sae_features.summary import headline_first, summarize_site
from geomlens.hooks.base import Adapter
from geomlens.results import Result


class SAEFeatures(Analysis):
    """SAE active counts k, pool P and SSD, pool mismatch η̂, ε̂_loss, the SSD bound, OOD AUROC."""

    name = "sae-features"

    Config = SAEFeaturesConfig
    config: SAEFeaturesConfig

    def __init__(self, config: SAEFeaturesConfig | None = None, **overrides: Any) -> None:
        super().__init__(config, **overrides)
        check_choice("score", self.config.score, ("mean", "max"))
        check_choice("shuffle", self.config.shuffle, ("fixed", "per-batch", "none"))
        check_choice("bound_form", self.config.bound_form, ("pool", "released"))
        for name in ("pool_top_k", "splice_top_k"):
            value = getattr(self.config, name)
            if value is not None and value < 1:
                raise ValueError(f"sae-features option {name} must be at least 1; got {value}.")
        from geomlens.sae.config import check_training_overrides

        check_training_overrides(self.config.training)
        if not 0.0 < self.config.delta < 1.0:
            raise ValueError(
                f"sae-features option delta must lie in (0, 1); got {self.config.delta}."
            )
        self.saes: list[tuple[str, Any]] | None = None
        self.states: dict[str, SiteState] = {}
        self.loss_kind: str | None = None
        self.output_site: str | None = None
        self.notes: dict[str, str] = {}
        self._permutations: dict[str, torch.Tensor] = {}

    # -- data and sites ------------------------------------------------------------------------
    def required_columns(self) -> tuple[str, ...]:
        return ("condition",)

    def default_data(self, adapter: Adapter) -> Any:
        """Calibration and held-out English (disjoint parts of the bundled corpus) and three OOD
        sets: uniform random token ids and 15 % replaced tokens (both made from the held-out
        rows, so lengths match), and Python standard-library source."""
        from geomlens.data.ood import feature_explosion_data

        if adapter.tokenizer is None:
            raise ValueError(
                f"sae-features' default data is text, and model {adapter.model_id!r} has no "
                "tokenizer; pass data with token_ids and a 'condition' column."
            )
        return feature_explosion_data(
            adapter.tokenizer,
            calibration_rows=DEFAULT_CALIBRATION_ROWS,
            heldout_rows=DEFAULT_HELDOUT_ROWS,
            ood_rows=DEFAULT_OOD_ROWS,
            max_tokens=DEFAULT_MAX_TOKENS,
        )

    def _default_site(self, adapter: Adapter) -> str:
        return self.config.site if self.config.site is not None else default_site(adapter)

    def _sae_sites(self, adapter: Adapter) -> list[str]:
        if self.saes is not None:
            return [site for site, _ in self.saes]
        if self.config.sae is None:
            return [adapter.resolve_site(self._default_site(adapter))]
        from geomlens.sae.loading import resolve_saes

        self.saes = resolve_saes(self.config.sae, site=self.config.site)
        return [site for site, _ in self.saes]

    def sites(self, adapter: Adapter) -> list[str]:
        sites = self._sae_sites(adapter)
        output = self._output_site(adapter)
        return sites + ([output] if output and output not in sites else [])

    def _output_site(self, adapter: Adapter) -> str | None:
        """Where the splice's effect is read: logits on a causal LM, else the last residual."""
        if not self.config.fidelity or adapter.backend == "recorded":
            return None
        offered = adapter.sites()
        if "logits" in offered and adapter.is_causal_lm:
            return "logits"
        residual = adapter.residual_sites()
        return residual[-1] if residual else None

    # -- the protocol --------------------------------------------------------------------------
    def setup(self, context: RunContext) -> None:
        super().setup(context)
        adapter = context.adapter
        from geomlens.sae.loading import check_sae_fits

        if self.saes is None and self.config.sae is None:
            self.saes = [self._default_sae(adapter)]
        elif self.saes is None:
            self._sae_sites(adapter)
        assert self.saes is not None
        checked = []
        for site, sae in self.saes:
            site = check_sae_fits(sae, adapter, site)  # before any forward pass
            check_latents("splice_pool", self.config.splice_pool, int(sae.cfg.d_sae))
            sae.to(adapter.device)
            checked.append((site, sae))
            if site not in self.states:
                self.states[site] = SiteState.empty(int(sae.cfg.d_sae))
            generator = torch.Generator().manual_seed(context.seed)
            self._permutations[site] = torch.randperm(int(sae.cfg.d_sae), generator=generator)
        self.saes = checked
        self.output_site = self._output_site(adapter)
        if self.output_site == "logits":
            self.loss_kind = SMOOTHED_BITS
        elif self.output_site is not None:
            self.loss_kind = COSINE_FIDELITY
            self.notes["loss"] = (
                f"{adapter.model_id} is not a causal LM: ε̂_loss is an output-space fidelity, the "
                f"mean 1 − cosine between {self.output_site} with and without the splice; the "
                "bound, which needs a loss in bits, is not computed."
            )
        elif adapter.backend == "recorded":
            self.notes["loss"] = "recorded activations: no model to splice into, no ε̂_loss."

    def _default_sae(self, adapter: Adapter) -> tuple[str, Any]:
        site = adapter.resolve_site(self._default_site(adapter))
        sae, self.notes["sae"] = default_sae(adapter, site, self.config.training)
        return site, sae

    def update(self, batch: Batch) -> None:
        assert self.saes is not None, "setup() runs before the first batch"
        mask = batch.attention_mask.bool()
        conditions = np.asarray(batch.columns["condition"]).astype(str)
        for site, sae in self.saes:
            activation = batch.activations[site]
            if activation.shape[-1] != sae.cfg.d_in:
                raise ValueError(
                    f"The SAE at {site!r} reads width d_in={sae.cfg.d_in} but the activations "
                    f"there have width {activation.shape[-1]}."
                )
            with torch.no_grad():
                latents = sae.encode(activation.to(sae.dtype))
            state = self.states[site]
            count_active(
                state,
                latents,
                mask.to(latents.device),
                conditions,
                threshold=self.config.threshold,
                pool_top_k=self.config.pool_top_k,
            )
            del latents
            # Calibration rows only build the pool: a batch of them needs no spliced passes.
            if self.output_site is not None and (conditions != CALIBRATION).any():
                self._losses(site, sae, state, batch, mask, conditions)

    # -- splicing ------------------------------------------------------------------------------
    def _reconstruct(
        self, sae: Any, activation: torch.Tensor, permutation: torch.Tensor | None = None
    ) -> torch.Tensor:
        return reconstruct(
            sae,
            activation,
            permutation,
            splice_pool=self.config.splice_pool,
            splice_top_k=self.config.splice_top_k,
        )

    def _permutation(self, site: str, batch: Batch) -> torch.Tensor | None:
        if self.config.shuffle == "none":
            return None
        if self.config.shuffle == "fixed":
            return self._permutations[site]
        # A fresh permutation per batch, seeded by the batch's first row: the same rows get the
        # same permutation in one pass or split across workers.
        seed = (self.context.seed if self.context else 0) * 1_000_003 + int(batch.index[0])
        m = len(self._permutations[site])
        return torch.randperm(m, generator=torch.Generator().manual_seed(seed))

    def _losses(
        self,
        site: str,
        sae: Any,
        state: SiteState,
        batch: Batch,
        mask: torch.Tensor,
        conditions: np.ndarray,
    ) -> None:
        adapter = self.context.adapter
        output = self.output_site
        assert output is not None
        clean = batch.activations[output]
        with torch.no_grad():
            with adapter.intervene(site, lambda act: self._reconstruct(sae, act)):
                spliced = adapter.capture(batch.inputs, [output])[output]
            permutation = self._permutation(site, batch)
            shuffled = None
            if permutation is not None:
                with adapter.intervene(site, lambda act: self._reconstruct(sae, act, permutation)):
                    shuffled = adapter.capture(batch.inputs, [output])[output]
        if self.loss_kind == SMOOTHED_BITS:
            state.vocab_size = int(clean.shape[-1])
            ids = batch.inputs.input_ids
            model_loss, predicted = smoothed_bits_per_sequence(
                clean, ids, mask, self.config.smoothing
            )
            proxy_loss, _ = smoothed_bits_per_sequence(spliced, ids, mask, self.config.smoothing)
            shuffled_loss = (
                smoothed_bits_per_sequence(shuffled, ids, mask, self.config.smoothing)[0]
                if shuffled is not None
                else torch.full_like(model_loss, math.nan)
            )
        else:
            predicted = mask.sum(-1)
            model_loss = torch.zeros(len(mask), dtype=torch.float64)
            proxy_loss = cosine_distance_per_sequence(clean, spliced, mask)
            shuffled_loss = (
                cosine_distance_per_sequence(clean, shuffled, mask)
                if shuffled is not None
                else torch.full_like(model_loss, math.nan)
            )
        for row, condition in enumerate(conditions):
            if int(predicted[row]) == 0 or condition == CALIBRATION:
                continue
            stats = state.conditions.setdefault(str(condition), ConditionStats())
            stats.losses.append(
                (
                    float(model_loss[row]),
                    float(proxy_loss[row]),
                    float(shuffled_loss[row]),
                    int(predicted[row]),
                )
            )

    # -- merge and finalise --------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The counts, without the SAE modules: those come from the config (``setup`` loads
        them on every rank and on resume) and sae-lens SAEs do not pickle."""
        state = super().state_dict()
        state.pop("saes", None)
        return state

    def merge(self, other: Analysis) -> None:
        self._check_mergeable(other)
        assert isinstance(other, SAEFeatures)
        if self.saes is None:
            self.saes = other.saes
            self._permutations = dict(other._permutations)
            self.output_site, self.loss_kind = other.output_site, other.loss_kind
        for site, state in other.states.items():
            if site in self.states:
                self.states[site].merge(state)
            else:
                self.states[site] = state
        self.notes = {**other.notes, **self.notes}

    def finalize(self) -> Result:
        if not any(state.conditions for state in self.states.values()):
            raise ValueError("sae-features saw no data; give rows with a 'condition' column.")
        metrics: dict[str, float] = {}
        tables: dict[str, list[dict[str, Any]]] = {
            "ood": [],
            "k_histogram": [],
            "pool_growth": [],
            "bound_terms": [],
            "pool": [],
            "notes": [],
        }
        for site, state in self.states.items():
            summarize_site(site, state, self.config, self.loss_kind, metrics, tables)
        tables["notes"] = [{"item": k, "note": v} for k, v in self.notes.items()]
        if self.loss_kind:
            tables["notes"].append({"item": "loss_kind", "note": self.loss_kind})
        return Result(self.name, metrics=headline_first(metrics), tables=tables)

    # -- figure --------------------------------------------------------------------------------
    @classmethod
    def plot(cls, result: Result, **kwargs: Any) -> Any:
        return plot_sae_features(result)
