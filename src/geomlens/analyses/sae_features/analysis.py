"""The sae-features analysis: which SAEs read which sites, counting each batch, splicing the
reconstruction in, merging, and the result."""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any

import numpy as np
import torch

from geomlens import progress
from geomlens.analyses.base import Analysis, Batch, RunContext
from geomlens.analyses.sae_features.config import (
    CALIBRATION,
    COSINE_FIDELITY,
    DEFAULT_CALIBRATION_ROWS,
    DEFAULT_HELDOUT_ROWS,
    DEFAULT_MAX_TOKENS,
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
    smoothed_bits_from_log_probs,
)
from geomlens.analyses.sae_features.summary import headline_first, summarize_site, tokens_note
from geomlens.hooks.sites import NEXT_TOKEN_SITE
from geomlens.inputs.content_tokens import TokenSelection, select_tokens, special_token_ids
from geomlens.inputs.encoding import ModelInputs, to_device
from geomlens.interventions.resume import capture_from_layer, resume_site_for
from geomlens.models.adapter import LOGITS_SITE, Adapter, layer_of
from geomlens.models.widths import expected_widths
from geomlens.results import Result

__all__ = ["SAEFeatures"]
from . import DECLARATION


class SAEFeatures(Analysis, declaration=DECLARATION):
    """SAE active counts k, pool P and SSD, pool mismatch η̂, ε̂_loss, the SSD bound, OOD AUROC."""

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
        #: The model's vocabulary size V (the smoothing's a / V), read in setup.
        self.vocab_size = 0
        self.notes: dict[str, str] = {}
        #: Per site, what the SAE itself records: its activation normalisation and the norms of
        #: its decoder columns (the bound assumes a unit-norm dictionary).
        self.provenance: dict[str, dict[str, Any]] = {}
        self._special_ids: list[int] = []
        self._permutations: dict[str, torch.Tensor] = {}

    # -- data and sites ------------------------------------------------------------------------
    def required_columns(self) -> tuple[str, ...]:
        return ("condition",)

    def default_data(self, adapter: Adapter) -> Any:
        """Calibration and held-out English (disjoint parts of the bundled corpus) and three OOD
        sets as long as the held-out set, row for row: uniform random token ids and 15 % replaced
        tokens (made from the held-out rows, each paired with its source row), and Python
        standard-library source cut to the held-out lengths."""
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
        if output is None:
            return sites
        # The spliced passes start at the SAE's block from its cached input (resume_site_for).
        resumes = [resume_site_for(adapter, layer_of(site)) for site in sites]
        return list(dict.fromkeys([*sites, output, *filter(None, resumes)]))

    def _output_site(self, adapter: Adapter) -> str | None:
        """Where the splice's effect is read: logits on a causal LM, else the last residual."""
        if not self.config.fidelity or adapter.backend == "recorded":
            return None
        offered = adapter.sites()
        if LOGITS_SITE in offered and adapter.is_causal_lm and adapter.makes_head_sites:
            # Each token's log-probability of the next, scored inside the pass: the passes never
            # hold [B, T, vocab] logits.
            return NEXT_TOKEN_SITE
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
        self._special_ids = special_token_ids(adapter.tokenizer)
        checked = []
        for site, sae in self.saes:
            site = check_sae_fits(sae, adapter, site)  # before any forward pass
            sae = self._with_own_normalisation(site, sae)
            check_latents("splice_pool", self.config.splice_pool, int(sae.cfg.d_sae))
            sae.to(adapter.device)
            checked.append((site, sae))
            if site not in self.states:
                self.states[site] = SiteState.empty(int(sae.cfg.d_sae))
            generator = torch.Generator().manual_seed(context.seed)
            self._permutations[site] = torch.randperm(int(sae.cfg.d_sae), generator=generator)
        self.saes = checked
        self.output_site = self._output_site(adapter)
        if self.output_site == NEXT_TOKEN_SITE:
            self.loss_kind = SMOOTHED_BITS
            vocab = expected_widths(adapter).get("vocab")
            if vocab is None:
                raise ValueError(
                    f"The smoothed-bits loss needs the vocabulary size of {adapter.model_id!r}, "
                    "which its config and output head do not give."
                )
            self.vocab_size = int(vocab)
        elif self.output_site is not None:
            self.loss_kind = COSINE_FIDELITY
            self.notes["loss"] = (
                f"{adapter.model_id} is not a causal LM: ε̂_loss is an output-space fidelity, the "
                f"mean 1 − cosine between {self.output_site} with and without the splice; the "
                "bound, which needs a loss in bits, is not computed."
            )
        elif adapter.backend == "recorded":
            self.notes["loss"] = "recorded activations: no model to splice into, no ε̂_loss."

    def _with_own_normalisation(self, site: str, sae: Any) -> Any:
        """The SAE reading raw activations the way sae-lens normalised them for it.

        sae-lens applies ``constant_norm_rescale`` and ``layer_norm`` inside ``encode`` /
        ``decode`` itself, and folds the ``expected_average_only_in`` factor into the weights
        at the end of training (``fold_activation_norm_scaling_factor``). An SAE still marked
        ``expected_average_only_in`` has not been folded: its factor is folded into a copy here
        (the caller's SAE is left as it is), or the SAE is refused.
        """
        norm = str(getattr(sae.cfg, "normalize_activations", "none") or "none")
        factor = self.config.norm_scaling_factor
        if factor is not None and norm != "expected_average_only_in":
            raise ValueError(
                f"sae-features option norm_scaling_factor is for an SAE whose "
                f"normalize_activations is 'expected_average_only_in'; the SAE at {site!r} "
                f"records {norm!r}."
            )
        if norm == "expected_average_only_in":
            if factor is None or not factor > 0:
                raise ValueError(
                    f"The SAE at {site!r} expects activations scaled by sae-lens's norm scaling "
                    "factor (normalize_activations='expected_average_only_in') and the factor is "
                    "not folded in; pass norm_scaling_factor=<the positive factor it was trained "
                    "with> or fold it with sae.fold_activation_norm_scaling_factor."
                )
            sae = copy.deepcopy(sae)
            sae.fold_activation_norm_scaling_factor(float(factor))
        elif norm == "covariance_whitening":
            raise ValueError(
                f"The SAE at {site!r} expects whitened activations "
                "(normalize_activations='covariance_whitening') and its whitening is not folded "
                "in; fold it with sae.fold_activation_whitening, as sae-lens's trainer does."
            )
        with torch.no_grad():
            norms = sae.W_dec.detach().to(torch.float64).norm(dim=-1).cpu().numpy()
        self.provenance[site] = {
            "normalize_activations": norm,
            "norm_scaling_factor": factor,
            "decoder_norms": (float(norms.min()), float(norms.mean()), float(norms.max())),
            "training_l0": sae.cfg.metadata.get("l0"),
            "training_dead_latents": sae.cfg.metadata.get("num_dead_features"),
        }
        return sae

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
            selection = self._select_tokens(activation, batch.inputs)
            with torch.no_grad():
                latents = sae.encode(activation.to(sae.dtype))
                reconstruction = sae.decode(latents)
            state = self.states[site]
            count_active(
                state,
                latents,
                selection,
                conditions,
                threshold=self.config.threshold,
                pool_top_k=self.config.pool_top_k,
                activation=activation,
                pairs=batch.columns.get("source_row"),
            )
            self._reconstruction_sums(state, activation, reconstruction, selection, conditions)
            del latents, reconstruction
            # Calibration rows only build the pool: a batch of them needs no spliced passes.
            if self.output_site is not None and (conditions != CALIBRATION).any():
                self._losses(site, sae, state, batch, mask, conditions)

    def _select_tokens(self, activation: torch.Tensor, inputs: ModelInputs) -> TokenSelection:
        """Content tokens, special tokens and attention sinks of ``activation`` (the config's
        sink ratio)."""
        return select_tokens(
            activation,
            inputs.attention_mask,
            inputs.input_ids,
            self._special_ids,
            self.config.sink_norm_ratio,
        )

    @staticmethod
    def _reconstruction_sums(
        state: SiteState,
        activation: torch.Tensor,
        reconstruction: torch.Tensor,
        selection: TokenSelection,
        conditions: np.ndarray,
    ) -> None:
        """Per condition, on content tokens: the sums the explained variance is made of (kept
        on the device)."""
        content = selection.content.to(activation.device).bool()
        # Selected, not multiplied by the mask: a padded position (even NaN) never reaches a sum.
        x = torch.where(content[..., None], activation.detach().to(torch.float64), 0.0)
        residual = x - reconstruction.to(torch.float64)
        residual_sq = torch.where(content, (residual**2).sum(-1), 0.0)
        input_sq = (x**2).sum(-1)
        for name in dict.fromkeys(conditions.tolist()):
            rows = to_device(np.flatnonzero(conditions == name), activation.device)
            stats = state.conditions.setdefault(str(name), ConditionStats())
            stats.add("residual_sq", residual_sq[rows].sum())
            stats.add("input_sq", input_sq[rows].sum())
            stats.add("input_sum", x[rows].sum(dim=(0, 1)))

    # -- splicing ------------------------------------------------------------------------------
    def _reconstruct(
        self,
        sae: Any,
        activation: torch.Tensor,
        inputs: ModelInputs,
        permutation: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The SAE's reconstruction at content tokens; the model's own activation at special
        tokens and sinks unless ``splice_excluded`` (as sae-lens's ``get_recons_loss``)."""
        excluded = None
        if not self.config.splice_excluded:
            excluded = self._select_tokens(activation, inputs).excluded
        return reconstruct(
            sae,
            activation,
            permutation,
            splice_pool=self.config.splice_pool,
            splice_top_k=self.config.splice_top_k,
            keep_original=excluded,
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

    def _spliced_pass(
        self, site: str, batch: Batch, inputs: ModelInputs, rows: torch.Tensor
    ) -> torch.Tensor:
        """The output under the splice at ``site`` for the batch's ``rows`` (``inputs``),
        computed from the SAE's block on (the blocks before it are unchanged; their output is
        in the batch)."""
        adapter = self._run_context().adapter
        output = self.output_site
        assert output is not None
        layer = layer_of(site) or 0
        resume = resume_site_for(adapter, layer)
        cached = batch.activations.get(resume) if resume is not None else None
        if cached is not None and len(rows) != len(cached):
            cached = cached[rows.to(cached.device)]
        if cached is not None and cached.dim() == 3:
            # The pass resumes from the cached activations: padded positions are set to 0, as
            # attention gives them weight 0 (0 × NaN would still reach the real tokens).
            real = inputs.attention_mask.to(cached.device).bool()
            if tuple(real.shape) == tuple(cached.shape[:2]):
                cached = torch.where(
                    real[..., None],
                    cached,
                    torch.zeros((), dtype=cached.dtype, device=cached.device),
                )
        return capture_from_layer(adapter, inputs, [output], layer, cached)[output]

    def _losses(
        self,
        site: str,
        sae: Any,
        state: SiteState,
        batch: Batch,
        mask: torch.Tensor,
        conditions: np.ndarray,
    ) -> None:
        adapter = self._run_context().adapter
        output = self.output_site
        assert output is not None
        # Calibration rows only build the pool: the spliced passes read the other rows only.
        needed = np.flatnonzero(conditions != CALIBRATION)
        inputs = _rows(batch.inputs, needed)
        keep = torch.from_numpy(needed)
        clean = batch.activations[output]
        clean = clean[to_device(keep, clean.device)]
        mask, conditions = mask[to_device(keep, mask.device)], conditions[needed]
        with torch.no_grad():
            with adapter.intervene(site, lambda act: self._reconstruct(sae, act, inputs)):
                spliced = self._spliced_pass(site, batch, inputs, keep)
            permutation = self._permutation(site, batch)
            shuffled = None
            if permutation is not None:
                with adapter.intervene(
                    site, lambda act: self._reconstruct(sae, act, inputs, permutation)
                ):
                    shuffled = self._spliced_pass(site, batch, inputs, keep)
        device = clean.device
        if self.loss_kind == SMOOTHED_BITS:
            state.vocab_size = self.vocab_size
            a, vocab = self.config.smoothing, self.vocab_size
            model_loss, predicted = smoothed_bits_from_log_probs(clean, mask, a, vocab)
            proxy_loss, _ = smoothed_bits_from_log_probs(spliced, mask, a, vocab)
            shuffled_loss = (
                smoothed_bits_from_log_probs(shuffled, mask, a, vocab)[0]
                if shuffled is not None
                else torch.full_like(model_loss, math.nan)
            )
        else:
            predicted = mask.to(device).sum(-1)
            model_loss = torch.zeros(len(mask), dtype=torch.float64, device=device)
            proxy_loss = cosine_distance_per_sequence(clean, spliced, mask)
            shuffled_loss = (
                cosine_distance_per_sequence(clean, shuffled, mask)
                if shuffled is not None
                else torch.full_like(model_loss, math.nan)
            )
        # [n, 4] on the device; inputs that predicted no token are dropped when it settles.
        losses = torch.stack(
            [model_loss, proxy_loss.to(device), shuffled_loss.to(device), predicted.double()], -1
        )
        for condition in dict.fromkeys(conditions.tolist()):
            rows = to_device(np.flatnonzero(conditions == condition), device)
            stats = state.conditions.setdefault(str(condition), ConditionStats())
            stats.pending_losses.append(losses[rows])

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
        self.provenance = {**other.provenance, **self.provenance}
        self._special_ids = self._special_ids or list(other._special_ids)

    def finalize(self) -> Result:
        if not any(state.conditions for state in self.states.values()):
            raise ValueError("sae-features saw no data; give rows with a 'condition' column.")
        metrics: dict[str, float] = {}
        tables: dict[str, list[dict[str, Any]]] = {
            "ood": [],
            "k_histogram": [],
            "k_histogram_content": [],
            "pool_growth": [],
            "bound_terms": [],
            "pool": [],
            "notes": [],
        }
        notes = dict(self.notes)  # finalize leaves the state as it is
        for site, state in progress.each(list(self.states.items()), "sites finished"):
            summarize_site(
                site,
                state.settled(),  # the device's counts come to the host, once
                self.config,
                self.loss_kind,
                metrics,
                tables,
                seed=self.context.seed if self.context else 0,
                provenance=self.provenance.get(site, {}),
                notes=notes,
            )
        notes.setdefault("tokens", tokens_note(self.config, self._special_ids))
        tables["notes"] = [{"item": k, "note": v} for k, v in notes.items()]
        if self.loss_kind:
            tables["notes"].append({"item": "loss_kind", "note": self.loss_kind})
        return Result(self.name, metrics=headline_first(metrics), tables=tables)

    # -- figure --------------------------------------------------------------------------------
    @classmethod
    def plot(cls, result: Result, **kwargs: Any) -> Any:
        return plot_sae_features(result)


def _rows(inputs: ModelInputs, rows: np.ndarray) -> ModelInputs:
    """The batch's ``rows`` only (every per-row tensor sliced, the rest as it is)."""
    if len(rows) == inputs.batch_size:
        return inputs
    size = inputs.batch_size

    def take(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape[0] == size:
            return value[torch.as_tensor(rows, device=value.device)]
        return value

    return dataclasses.replace(
        inputs,
        index=np.asarray(inputs.index)[rows],
        attention_mask=take(inputs.attention_mask),
        input_ids=take(inputs.input_ids),
        position_ids=take(inputs.position_ids),
        span_mask=take(inputs.span_mask),
        extra={k: take(v) for k, v in inputs.extra.items()},
    )
