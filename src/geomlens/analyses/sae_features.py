"""sae-features: SAE feature counts, the sparse semantic dimension, its bound, and OOD detection.

An sae-lens SAE reads a site of the model. Per token, ``k`` latents are active (``f_j > τ``);
per input its mean and max. Rows carry a ``condition``: ``calibration`` rows build the pool G
of latents ever active (P = |G|, SSD = P ln(em/P)); ``heldout`` rows give the pool mismatch η̂
(the fraction of sequences using a latent outside G) and the bound's empirical terms; every
other condition is an out-of-distribution set scored by mean (or max) k, with AUROC against
``heldout``. With a model to run, the SAE's reconstruction is spliced in place of the site
(``adapter.intervene``) and the loss gap ε̂_loss measured: smoothed bits per token on causal
LMs (through the ``logits`` site), or an output-space fidelity on encoders (1 − cosine of the
final hidden states, named in the result). A feature-shuffle ablation permutes latent indices
before decoding (same L0, broken semantics). docs/sae.md gives every formula.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from geomlens.analyses.base import Analysis, AnalysisConfig, Batch, RunContext, option
from geomlens.hooks.base import Adapter
from geomlens.plain_state import state_class
from geomlens.registry import register_analysis
from geomlens.results import Result
from geomlens.theory import ssd as ssd_theory

CALIBRATION = "calibration"
HELDOUT = "heldout"
#: Loss names recorded in the result.
SMOOTHED_BITS = "smoothed_bits_per_token"
COSINE_FIDELITY = "final_hidden_cosine_distance"
NEVER = np.iinfo(np.int64).max
#: Default data sizes (rows) and truncation of ``default_data``.
DEFAULT_CALIBRATION_ROWS = 128
DEFAULT_HELDOUT_ROWS = 64
DEFAULT_OOD_ROWS = 32
DEFAULT_MAX_TOKENS = 64


@dataclass
class SAEFeaturesConfig(AnalysisConfig):
    sae: Any = option(
        None,
        "An sae_lens.SAE, a folder saved by sae-lens, 'release/sae_id', a list of them, or "
        "{site: sae}. None: a small SAE trained offline on the bundled corpus (cached).",
    )
    site: str | None = option(
        None,
        "Override the SAE's own site (its metadata hook_name); with sae=None the site to train "
        "on (default: the middle block's hook_resid_post).",
    )
    threshold: float = option(0.0, "τ: a latent is active when its activation exceeds this.")
    pool_top_k: int | None = option(
        None, "Only each token's top-k active latents join the pool G (None: all active)."
    )
    score: str = option("mean", "OOD score of an input: 'mean' or 'max' of its per-token k.")
    fidelity: bool = option(
        True, "Splice the reconstruction and measure ε̂_loss (needs a model, not recordings)."
    )
    splice_pool: list[int] | None = option(
        None, "Keep only these latents when splicing (e.g. the 'pool' table of an earlier run)."
    )
    splice_top_k: int | None = option(
        None, "Keep each token's top-k latents when splicing (None: all)."
    )
    shuffle: str = option(
        "fixed",
        "Feature-shuffle ablation: 'fixed' (one permutation), 'per-batch' (fresh each batch, as "
        "the authors' released code) or 'none'.",
    )
    bound_form: str = option(
        "pool",
        "Form reported as <site>.bound: 'pool' (the paper's pool form) or 'released' (the authors' code).",
    )
    delta: float = option(0.05, "Failure probability δ of the bound.")
    smoothing: float = option(0.5, "Uniform mixing weight a of the smoothed loss.")
    training: dict = option(
        {}, "With sae=None: overrides of geomlens.sae.TrainingConfig (d_sae, tokens, ...)."
    )

    def to_dict(self) -> dict[str, Any]:
        """Plain data: an SAE object is recorded by its description, not its weights."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        values["sae"] = _describe_sae_spec(self.sae)
        return values


def _describe_sae_spec(spec: Any) -> Any:
    if spec is None or isinstance(spec, (str, int, float)):
        return spec
    if isinstance(spec, dict):
        return {str(k): _describe_sae_spec(v) for k, v in spec.items()}
    if isinstance(spec, (list, tuple)):
        return [_describe_sae_spec(v) for v in spec]
    cfg = getattr(spec, "cfg", None)
    if cfg is not None:
        return (
            f"{type(spec).__name__}(d_in={cfg.d_in}, d_sae={cfg.d_sae}, "
            f"hook_name={cfg.metadata.get('hook_name')!r})"
        )
    return str(spec)


@state_class
@dataclass
class ConditionStats:
    """Mergeable statistics of one condition at one site."""

    mean_k: list[float] = field(default_factory=list)
    max_k: list[int] = field(default_factory=list)
    tokens: int = 0
    k_sum: float = 0.0
    histogram: np.ndarray | None = None
    #: Per input, the latents active anywhere in it (np.packbits of a [m] bool); not kept for
    #: calibration rows, whose union is the pool itself.
    latents: list[np.ndarray] = field(default_factory=list)
    #: Per input with a loss: (model loss, spliced loss, shuffled loss, predicted tokens).
    losses: list[tuple[float, float, float, int]] = field(default_factory=list)

    def merge(self, other: ConditionStats) -> None:
        self.mean_k += other.mean_k
        self.max_k += other.max_k
        self.tokens += other.tokens
        self.k_sum += other.k_sum
        if other.histogram is not None:
            self.histogram = (
                other.histogram.copy()
                if self.histogram is None
                else self.histogram + other.histogram
            )
        self.latents += other.latents
        self.losses += other.losses


@state_class
@dataclass
class SiteState:
    """Everything sae-features keeps for one SAE at one site."""

    m: int
    #: For each latent, the calibration token (counted in row order) where it first joined G.
    first_seen: np.ndarray
    calibration_tokens: int = 0
    conditions: dict[str, ConditionStats] = field(default_factory=dict)
    vocab_size: int | None = None

    @classmethod
    def empty(cls, m: int) -> SiteState:
        return cls(m=m, first_seen=np.full(m, NEVER, dtype=np.int64))

    def merge(self, other: SiteState) -> None:
        shifted = np.where(
            other.first_seen == NEVER, NEVER, other.first_seen + self.calibration_tokens
        )
        self.first_seen = np.minimum(self.first_seen, shifted)
        self.calibration_tokens += other.calibration_tokens
        for name, stats in other.conditions.items():
            self.conditions.setdefault(name, ConditionStats()).merge(stats)
        self.vocab_size = self.vocab_size or other.vocab_size

    @property
    def pool(self) -> np.ndarray:
        return self.first_seen != NEVER


@register_analysis("sae-features", aliases=("sae_features", "ssd"))
class SAEFeatures(Analysis):
    """SAE active counts k, pool P and SSD, pool mismatch η̂, ε̂_loss, the SSD bound, OOD AUROC."""

    Config = SAEFeaturesConfig
    config: SAEFeaturesConfig

    def __init__(self, config: SAEFeaturesConfig | None = None, **overrides: Any) -> None:
        super().__init__(config, **overrides)
        _check_choice("score", self.config.score, ("mean", "max"))
        _check_choice("shuffle", self.config.shuffle, ("fixed", "per-batch", "none"))
        _check_choice("bound_form", self.config.bound_form, ("pool", "released"))
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
        if self.config.site is not None:
            return self.config.site
        # The middle of the network: where SAEs are usually trained (gpt2-small-res-jb reads
        # blocks.6 of 12), past the token-level early layers, before the output-specific ones.
        return f"blocks.{adapter.n_layers // 2}.hook_resid_post"

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
        if "logits" in offered and _is_causal_lm(adapter):
            return "logits"
        residual = [s for s in offered if s.endswith("hook_resid_post")]
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
            _check_latents("splice_pool", self.config.splice_pool, int(sae.cfg.d_sae))
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
        from geomlens.sae.config import TrainingConfig, default_corpus_name
        from geomlens.sae.training import cached_sae, corpus_texts

        site = adapter.resolve_site(self._default_site(adapter))
        training = TrainingConfig(**self.config.training)
        trained = cached_sae(
            adapter, site, corpus=default_corpus_name(), data=corpus_texts(), config=training
        )
        self.notes["sae"] = (
            f"{'reused' if trained.reused else 'trained'} {trained.path} (sae-lens standard SAE, "
            f"m={trained.sae.cfg.d_sae}, {training.tokens} tokens of the corpus's training part)"
        )
        return site, trained.sae

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
            self._count(state, latents, mask.to(latents.device), conditions)
            del latents
            # Calibration rows only build the pool: a batch of them needs no spliced passes.
            if self.output_site is not None and (conditions != CALIBRATION).any():
                self._losses(site, sae, state, batch, mask, conditions)

    def _count(
        self, state: SiteState, latents: torch.Tensor, mask: torch.Tensor, conditions: np.ndarray
    ) -> None:
        active = latents > self.config.threshold
        counts = active.sum(-1)  # k per token [B, T]
        eligible = active
        if self.config.pool_top_k is not None:
            top = latents.topk(min(self.config.pool_top_k, state.m), dim=-1).indices
            eligible = torch.zeros_like(active).scatter_(-1, top, True) & active
        eligible = eligible & mask[..., None]
        for row, condition in enumerate(conditions):
            real = mask[row]
            k = counts[row][real].cpu().numpy()
            if len(k) == 0:
                continue
            stats = state.conditions.setdefault(str(condition), ConditionStats())
            stats.mean_k.append(float(k.mean()))
            stats.max_k.append(int(k.max()))
            stats.tokens += len(k)
            stats.k_sum += float(k.sum())
            histogram = np.bincount(k, minlength=state.m + 1).astype(np.int64)
            stats.histogram = histogram if stats.histogram is None else stats.histogram + histogram
            used = eligible[row][real]  # [tokens, m]
            if condition == CALIBRATION:
                seen = used.any(0).cpu().numpy()
                first = used.int().argmax(0).cpu().numpy()  # first token where each is active
                new = seen & (state.first_seen == NEVER)
                state.first_seen[new] = state.calibration_tokens + first[new]
                state.calibration_tokens += len(k)
            else:
                stats.latents.append(np.packbits(used.any(0).cpu().numpy()))

    # -- splicing ------------------------------------------------------------------------------
    def _reconstruct(
        self, sae: Any, activation: torch.Tensor, permutation: torch.Tensor | None = None
    ) -> torch.Tensor:
        latents = sae.encode(activation.to(sae.dtype))
        if self.config.splice_pool is not None:
            keep = torch.zeros(latents.shape[-1], dtype=torch.bool, device=latents.device)
            keep[torch.as_tensor(self.config.splice_pool, dtype=torch.long)] = True
            latents = latents * keep
        if self.config.splice_top_k is not None:
            top = latents.topk(min(self.config.splice_top_k, latents.shape[-1]), dim=-1)
            latents = torch.zeros_like(latents).scatter_(-1, top.indices, top.values)
        if permutation is not None:
            latents = latents[..., permutation.to(latents.device)]
        return sae.decode(latents).to(activation.dtype)

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
            self._finalize_site(site, state, metrics, tables)
        tables["notes"] = [{"item": k, "note": v} for k, v in self.notes.items()]
        if self.loss_kind:
            tables["notes"].append({"item": "loss_kind", "note": self.loss_kind})
        return Result(self.name, metrics=_headline_first(metrics), tables=tables)

    def _finalize_site(
        self,
        site: str,
        state: SiteState,
        metrics: dict[str, float],
        tables: dict[str, list[dict[str, Any]]],
    ) -> None:
        from sklearn.metrics import roc_auc_score

        pool = state.pool
        P = int(pool.sum())
        metrics[f"{site}.pool_size"] = float(P)
        metrics[f"{site}.ssd"] = ssd_theory.ssd(P, state.m)
        metrics[f"{site}.calibration_tokens"] = float(state.calibration_tokens)
        metrics[f"{site}.dictionary_size"] = float(state.m)
        tables["pool"].extend(
            {"site": site, "latent": int(j), "first_seen_token": int(state.first_seen[j])}
            for j in np.flatnonzero(pool)
        )
        tables["pool_growth"].extend(_pool_growth(site, state))
        heldout = state.conditions.get(HELDOUT)
        for name, stats in state.conditions.items():
            metrics[f"{site}.mean_k.{name}"] = float(np.mean(stats.mean_k))
            metrics[f"{site}.max_k.{name}"] = float(np.max(stats.max_k))
            metrics[f"{site}.mean_max_k.{name}"] = float(np.mean(stats.max_k))
            metrics[f"{site}.token_mean_k.{name}"] = stats.k_sum / stats.tokens
            assert stats.histogram is not None
            tables["k_histogram"].extend(
                {"site": site, "condition": name, "k": int(k), "count": int(c)}
                for k, c in enumerate(stats.histogram)
                if c
            )
            row: dict[str, Any] = {
                "site": site,
                "condition": name,
                "inputs": len(stats.mean_k),
                "tokens": stats.tokens,
                "mean_k": float(np.mean(stats.mean_k)),
                "max_k": int(np.max(stats.max_k)),
            }
            if name != CALIBRATION and stats.latents:
                eta = _pool_mismatch(stats.latents, pool, state.m)
                metrics[f"{site}.eta.{name}" if name != HELDOUT else f"{site}.eta"] = eta
                row["eta"] = eta
            if stats.losses:
                losses = np.asarray(stats.losses, dtype=float)
                gap = np.abs(losses[:, 1] - losses[:, 0])
                shuffled_gap = np.abs(losses[:, 2] - losses[:, 0])
                suffix = "" if name == HELDOUT else f".{name}"
                metrics[f"{site}.epsilon_loss{suffix}"] = float(gap.mean())
                if not np.isnan(shuffled_gap).any():
                    metrics[f"{site}.epsilon_loss_shuffled{suffix}"] = float(shuffled_gap.mean())
                row["epsilon_loss"] = float(gap.mean())
                row["epsilon_loss_shuffled"] = float(shuffled_gap.mean())
                if self.loss_kind == SMOOTHED_BITS:
                    metrics[f"{site}.model_loss{suffix}"] = float(losses[:, 0].mean())
                    metrics[f"{site}.proxy_loss{suffix}"] = float(losses[:, 1].mean())
            if name not in (CALIBRATION, HELDOUT) and heldout is not None:
                labels = np.r_[np.zeros(len(heldout.mean_k)), np.ones(len(stats.mean_k))]
                by_mean = float(roc_auc_score(labels, np.r_[heldout.mean_k, stats.mean_k]))
                by_max = float(roc_auc_score(labels, np.r_[heldout.max_k, stats.max_k]))
                metrics[f"{site}.auroc.{name}"] = by_mean if self.config.score == "mean" else by_max
                row["auroc_mean_k"], row["auroc_max_k"] = by_mean, by_max
            tables["ood"].append(row)
        if heldout is not None and heldout.losses and self.loss_kind == SMOOTHED_BITS:
            self._bound(site, state, heldout, metrics, tables)

    def _bound(
        self,
        site: str,
        state: SiteState,
        heldout: ConditionStats,
        metrics: dict[str, float],
        tables: dict[str, list[dict[str, Any]]],
    ) -> None:
        losses = np.asarray(heldout.losses, dtype=float)
        risk = float(losses[:, 1].mean())
        eps = float(np.abs(losses[:, 1] - losses[:, 0]).mean())
        eta = metrics.get(f"{site}.eta", 0.0)
        P, V = int(state.pool.sum()), float(state.vocab_size or 2)
        common = dict(m=state.m, V=V, risk=risk, eps_loss=eps, delta=self.config.delta)
        common["a"] = self.config.smoothing
        pool_form = ssd_theory.bound(P=P, N=len(losses), eta=eta, **common)
        pool_star = ssd_theory.crossing_size(P=P, eta=eta, **common)
        k = heldout.k_sum / heldout.tokens
        predicted = int(losses[:, 3].sum())
        released = ssd_theory.released_bound(k=k, N=predicted, **common)
        released_star = ssd_theory.released_crossing_size(k=k, **common)
        forms = {"pool": (pool_form, pool_star), "released": (released, released_star)}
        for form, (terms, star) in forms.items():
            metrics[f"{site}.bound.{form}"] = terms.total
            metrics[f"{site}.n_star.{form}"] = star
            metrics[f"{site}.non_vacuous.{form}"] = float(terms.non_vacuous)
            for term in ("empirical_risk", "eps_loss", "pool_mismatch", "complexity", "k_union"):
                if hasattr(terms, term):
                    tables["bound_terms"].append(
                        {"site": site, "form": form, "term": term, "value": getattr(terms, term)}
                    )
            tables["bound_terms"].append(
                {"site": site, "form": form, "term": "confidence", "value": terms.confidence}
            )
        chosen, star = forms[self.config.bound_form]
        metrics[f"{site}.bound"] = chosen.total
        metrics[f"{site}.n_star"] = star
        metrics[f"{site}.vacuity_threshold"] = math.log2(V)
        metrics[f"{site}.risk"] = risk
        metrics[f"{site}.heldout_sequences"] = float(len(losses))
        metrics[f"{site}.heldout_predicted_tokens"] = float(predicted)

    # -- figure --------------------------------------------------------------------------------
    @classmethod
    def plot(cls, result: Result, **kwargs: Any) -> Any:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        sites = sorted({row["site"] for row in result.tables.get("ood", [])})
        figure, axes = plt.subplots(len(sites), 3, figsize=(14, 3.8 * len(sites)), squeeze=False)
        for (ax_k, ax_pool, ax_bound), site in zip(axes, sites):
            _plot_histograms(ax_k, result, site)
            growth = [r for r in result.tables.get("pool_growth", []) if r["site"] == site]
            ax_pool.plot(
                [r["tokens"] for r in growth], [r["pool_size"] for r in growth], "-o", ms=3
            )
            ax_pool.set_xscale("log")
            ax_pool.set_xlabel("calibration tokens")
            ax_pool.set_ylabel("pool size P")
            ax_pool.set_title("pool growth")
            _plot_bound(ax_bound, result, site)
        figure.suptitle(f"sae-features · {result.provenance.get('model_id', '')}")
        figure.tight_layout()
        return figure


# -- losses ------------------------------------------------------------------------------------
def smoothed_bits_per_sequence(
    logits: torch.Tensor, input_ids: torch.Tensor, mask: torch.Tensor, a: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean smoothed bits ``-log2((1 - a) p + a / V)`` of each sequence's next tokens, and how
    many tokens were predicted (positions t whose token t+1 is also real)."""
    log_probs = torch.log_softmax(logits.to(torch.float64), dim=-1)
    vocab = logits.shape[-1]
    targets = input_ids[:, 1:].to(log_probs.device)
    p = log_probs[:, :-1].gather(-1, targets[..., None]).squeeze(-1).exp()
    valid = (mask[:, :-1] & mask[:, 1:]).to(log_probs.device)
    bits = -torch.log2((1.0 - a) * p + a / vocab)
    counts = valid.sum(-1)
    means = (bits * valid).sum(-1) / counts.clamp(min=1)
    return means.cpu(), counts.cpu()


def cosine_distance_per_sequence(
    clean: torch.Tensor, edited: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """Mean over each sequence's real tokens of ``1 - cos(clean, edited)``."""
    cosine = torch.nn.functional.cosine_similarity(
        clean.to(torch.float64), edited.to(torch.float64), dim=-1
    )
    valid = mask.to(cosine.device)
    return (((1.0 - cosine) * valid).sum(-1) / valid.sum(-1).clamp(min=1)).cpu()


# -- helpers -----------------------------------------------------------------------------------
def _is_causal_lm(adapter: Adapter) -> bool:
    if adapter.backend == "transformer-lens":
        return True  # HookedTransformer and bridged models with logits are causal LMs
    config = getattr(adapter, "config", None)
    if config is None:
        return False
    from geomlens.hooks.nnsight import _is_decoder

    return _is_decoder(config)


def _pool_mismatch(latents: list[np.ndarray], pool: np.ndarray, m: int) -> float:
    """Fraction of inputs with any active latent outside the pool."""
    outside = ~pool
    leaves = [
        bool((np.unpackbits(packed, count=m).astype(bool) & outside).any()) for packed in latents
    ]
    return float(np.mean(leaves))


def _pool_growth(site: str, state: SiteState, points: int = 40) -> list[dict[str, Any]]:
    if state.calibration_tokens == 0:
        return []
    first = np.sort(state.first_seen[state.first_seen != NEVER])
    grid = np.unique(np.geomspace(1, state.calibration_tokens, points).round().astype(np.int64))
    sizes = np.searchsorted(first, grid, side="left")  # latents first seen before token t
    return [{"site": site, "tokens": int(t), "pool_size": int(p)} for t, p in zip(grid, sizes)]


#: Metric names in the order a reader wants them (the CLI prints the first ones): a pattern
#: ending in "." is a family (``.mean_k.<condition>``), any other is one metric.
_HEADLINE = (
    ".mean_k.", ".auroc.", ".max_k.", ".pool_size", ".ssd", ".eta", ".epsilon_loss",
    ".epsilon_loss_shuffled", ".bound", ".n_star",
)  # fmt: skip


def _headline_first(metrics: dict[str, float]) -> dict[str, float]:
    """The same metrics, headline ones first in ``_HEADLINE`` order, the rest after."""

    def rank(name: str) -> int:
        for position, pattern in enumerate(_HEADLINE):
            if (pattern in name) if pattern.endswith(".") else name.endswith(pattern):
                return position
        return len(_HEADLINE)

    return dict(sorted(metrics.items(), key=lambda item: rank(item[0])))


def _check_latents(name: str, latents: list[int] | None, m: int) -> None:
    if latents is not None and not all(0 <= j < m for j in latents):
        bad = next(j for j in latents if not 0 <= j < m)
        raise ValueError(
            f"sae-features option {name} lists latent {bad}, but the SAE has latents 0..{m - 1}."
        )


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(
            f"sae-features option {name}={value!r} is not one of {', '.join(map(repr, choices))}."
        )


def _plot_histograms(ax: Any, result: Result, site: str, bins: int = 40) -> None:
    rows = [r for r in result.tables.get("k_histogram", []) if r["site"] == site]
    if not rows:
        return
    width = max(1, int(np.ceil((max(r["k"] for r in rows) + 1) / bins)))
    edges = np.arange(0, max(r["k"] for r in rows) + width + 1, width)
    for condition in dict.fromkeys(r["condition"] for r in rows):
        mine = [r for r in rows if r["condition"] == condition]
        counts, _ = np.histogram(
            [r["k"] for r in mine], bins=edges, weights=[r["count"] for r in mine]
        )
        auroc = result.metrics.get(f"{site}.auroc.{condition}")
        label = condition + (f" (AUROC {auroc:.2f})" if auroc is not None else "")
        ax.stairs(counts / counts.sum(), edges, label=label)
    ax.set_xlabel("active latents per token, k")
    ax.set_ylabel("fraction of tokens")
    ax.set_title(site, fontsize=9)
    ax.legend(fontsize=7)


def _plot_bound(ax: Any, result: Result, site: str) -> None:
    rows = [r for r in result.tables.get("bound_terms", []) if r["site"] == site]
    if not rows:
        _plot_fidelity(ax, result, site)
        return
    forms = list(dict.fromkeys(r["form"] for r in rows))
    bottoms = [0.0] * len(forms)
    for term in dict.fromkeys(r["term"] for r in rows):
        values = [
            next((r["value"] for r in rows if r["form"] == f and r["term"] == term), 0.0)
            for f in forms
        ]
        ax.bar(forms, values, bottom=bottoms, label=term)
        bottoms = [b + v for b, v in zip(bottoms, values)]
    threshold = result.metrics.get(f"{site}.vacuity_threshold")
    if threshold is not None:
        ax.axhline(threshold, color="k", ls="--", lw=1, label="log2 V (vacuous above)")
    ax.set_ylabel("bits per token")
    ax.set_title("bound terms")
    ax.legend(fontsize=7)


def _plot_fidelity(ax: Any, result: Result, site: str) -> None:
    """Without a bound (an encoder, or no held-out losses): ε̂ per condition, with the shuffle."""
    rows = [r for r in result.tables.get("ood", []) if r["site"] == site and "epsilon_loss" in r]
    if not rows:
        ax.text(0.5, 0.5, "no bound: needs a causal LM's loss", ha="center", va="center")
        ax.set_axis_off()
        return
    positions = np.arange(len(rows))
    ax.bar(positions - 0.2, [r["epsilon_loss"] for r in rows], 0.4, label="SAE splice")
    ax.bar(positions + 0.2, [r["epsilon_loss_shuffled"] for r in rows], 0.4, label="shuffled")
    ax.set_xticks(positions, [r["condition"] for r in rows], rotation=30, ha="right", fontsize=7)
    kind = next((n["note"] for n in result.tables.get("notes", []) if n["item"] == "loss_kind"), "")
    ax.set_ylabel(f"ε̂_loss ({kind})" if kind else "ε̂_loss", fontsize=8)
    ax.set_title("no bound (no LM loss): splice fidelity", fontsize=9)
    ax.legend(fontsize=7)
