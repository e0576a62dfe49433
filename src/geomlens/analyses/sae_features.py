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
from geomlens.hooks.content_tokens import SINK_NORM_RATIO, TokenSelection, select_tokens
from geomlens.registry import register_analysis
from geomlens.results import Result
from geomlens.theory import ssd as ssd_theory

CALIBRATION = "calibration"
HELDOUT = "heldout"
#: Loss names recorded in the result.
SMOOTHED_BITS = "smoothed_bits_per_token"
COSINE_FIDELITY = "final_hidden_cosine_distance"
NEVER = np.iinfo(np.int64).max
#: A pool within this fraction of the dictionary size is saturated (SSD ≈ m says nothing).
POOL_SATURATION = 0.05
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
    sink_norm_ratio: float | None = option(
        SINK_NORM_RATIO,
        "A position whose activation norm exceeds this many times its row's reference norm is "
        "an attention sink: counted in k_all, left out of k_content and of the splice (None: "
        "flag no sink).",
    )
    splice_excluded: bool = option(
        False,
        "Also splice the reconstruction at special tokens and sinks (the paper's code splices "
        "every position; sae-lens's evaluations keep the model's activation there).",
    )
    norm_scaling_factor: float | None = option(
        None,
        "For an SAE trained with normalize_activations='expected_average_only_in' whose scale "
        "was not folded in: sae-lens's factor (activations are multiplied by it before "
        "encoding). None: the SAE's own record; such an SAE without one is refused.",
    )
    bootstrap: int = option(1000, "Bootstrap resamples of each AUROC's interval (0: none).")
    confidence: float = option(0.95, "Coverage of the AUROC intervals.", low=0, high=1)
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


@dataclass
class ConditionStats:
    """Mergeable statistics of one condition at one site.

    ``mean_k`` ... ``histogram`` count every real token (the paper's way, special tokens and
    sinks included); the ``*_content`` fields count only content tokens (sae-lens's way). An
    input whose every token is excluded gets NaN content counts.
    """

    mean_k: list[float] = field(default_factory=list)
    max_k: list[int] = field(default_factory=list)
    tokens: int = 0
    k_sum: float = 0.0
    histogram: np.ndarray | None = None
    mean_k_content: list[float] = field(default_factory=list)
    max_k_content: list[float] = field(default_factory=list)
    tokens_content: int = 0
    k_sum_content: float = 0.0
    histogram_content: np.ndarray | None = None
    #: Real tokens per input; special tokens and sinks among them.
    lengths: list[int] = field(default_factory=list)
    special_tokens: int = 0
    sink_tokens: int = 0
    sinks_at_first_position: int = 0
    #: On content tokens: Σ‖x − x̂‖², Σ‖x‖² and Σx, for the explained variance.
    residual_sq: float = 0.0
    input_sq: float = 0.0
    input_sum: np.ndarray | None = None
    #: Per input, the latents active anywhere in it (np.packbits of a [m] bool); not kept for
    #: calibration rows, whose union is the pool itself.
    latents: list[np.ndarray] = field(default_factory=list)
    #: Per input with a loss: (model loss, spliced loss, shuffled loss, predicted tokens).
    losses: list[tuple[float, float, float, int]] = field(default_factory=list)

    def merge(self, other: ConditionStats) -> None:
        for name in ("mean_k", "max_k", "mean_k_content", "max_k_content", "lengths"):
            getattr(self, name).extend(getattr(other, name))
        for name in (
            "tokens", "k_sum", "tokens_content", "k_sum_content", "special_tokens",
            "sink_tokens", "sinks_at_first_position", "residual_sq", "input_sq",
        ):  # fmt: skip
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in ("histogram", "histogram_content", "input_sum"):
            theirs = getattr(other, name)
            if theirs is not None:
                mine = getattr(self, name)
                setattr(self, name, theirs.copy() if mine is None else mine + theirs)
        self.latents += other.latents
        self.losses += other.losses

    @property
    def explained_variance(self) -> float:
        """1 − Σ‖x − x̂‖² / Σ‖x − x̄‖² over content tokens (sae-lens's explained variance)."""
        if self.tokens_content == 0 or self.input_sum is None:
            return math.nan
        total = self.input_sq - float(self.input_sum @ self.input_sum) / self.tokens_content
        return 1.0 - self.residual_sq / total if total > 0 else math.nan


@dataclass
class SiteState:
    """Everything sae-features keeps for one SAE at one site."""

    m: int
    #: For each latent, the calibration token (counted in row order) where it first joined G.
    first_seen: np.ndarray
    calibration_tokens: int = 0
    conditions: dict[str, ConditionStats] = field(default_factory=dict)
    vocab_size: int | None = None
    #: Latents active on at least one content token of any condition (the rest are dead).
    fired: np.ndarray | None = None

    @classmethod
    def empty(cls, m: int) -> SiteState:
        return cls(m=m, first_seen=np.full(m, NEVER, dtype=np.int64), fired=np.zeros(m, bool))

    def merge(self, other: SiteState) -> None:
        shifted = np.where(
            other.first_seen == NEVER, NEVER, other.first_seen + self.calibration_tokens
        )
        self.first_seen = np.minimum(self.first_seen, shifted)
        self.calibration_tokens += other.calibration_tokens
        for name, stats in other.conditions.items():
            self.conditions.setdefault(name, ConditionStats()).merge(stats)
        self.vocab_size = self.vocab_size or other.vocab_size
        if other.fired is not None:
            self.fired = other.fired.copy() if self.fired is None else self.fired | other.fired

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
        from geomlens.hooks.content_tokens import special_token_ids

        self._special_ids = special_token_ids(adapter.tokenizer)
        checked = []
        for site, sae in self.saes:
            site = check_sae_fits(sae, adapter, site)  # before any forward pass
            sae = self._with_own_normalisation(site, sae)
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
            import copy

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
            selection = select_tokens(
                activation,
                batch.attention_mask,
                batch.inputs.input_ids,
                self._special_ids,
                self.config.sink_norm_ratio,
            )
            with torch.no_grad():
                latents = sae.encode(activation.to(sae.dtype))
                reconstruction = sae.decode(latents)
            state = self.states[site]
            self._count(state, latents, selection, conditions)
            self._reconstruction_sums(state, activation, reconstruction, selection, conditions)
            del latents, reconstruction
            # Calibration rows only build the pool: a batch of them needs no spliced passes.
            if self.output_site is not None and (conditions != CALIBRATION).any():
                self._losses(site, sae, state, batch, mask, conditions)

    def _count(
        self,
        state: SiteState,
        latents: torch.Tensor,
        selection: TokenSelection,
        conditions: np.ndarray,
    ) -> None:
        mask = selection.real.to(latents.device)
        content = selection.content.to(latents.device)
        active = latents > self.config.threshold
        counts = active.sum(-1)  # k per token [B, T]
        # Dead latents are judged on in-distribution text (calibration and held-out rows).
        in_distribution = torch.from_numpy(np.isin(conditions, (CALIBRATION, HELDOUT)))
        in_distribution = in_distribution.to(latents.device)[:, None, None]
        fired = (active & content[..., None] & in_distribution).any(dim=(0, 1)).cpu().numpy()
        state.fired = fired if state.fired is None else state.fired | fired
        eligible = active
        if self.config.pool_top_k is not None:
            top = latents.topk(min(self.config.pool_top_k, state.m), dim=-1).indices
            eligible = torch.zeros_like(active).scatter_(-1, top, True) & active
        eligible = eligible & mask[..., None]
        host_counts, host_mask = counts.cpu().numpy(), mask.cpu().numpy()
        host_content = content.cpu().numpy()
        host_special, host_sink = selection.special.cpu().numpy(), selection.sink.cpu().numpy()
        for row, condition in enumerate(conditions):
            real = host_mask[row]
            k = host_counts[row][real]
            if len(k) == 0:
                continue
            stats = state.conditions.setdefault(str(condition), ConditionStats())
            stats.mean_k.append(float(k.mean()))
            stats.max_k.append(int(k.max()))
            stats.tokens += len(k)
            stats.k_sum += float(k.sum())
            histogram = np.bincount(k, minlength=state.m + 1).astype(np.int64)
            stats.histogram = histogram if stats.histogram is None else stats.histogram + histogram
            stats.lengths.append(len(k))
            stats.special_tokens += int(host_special[row].sum())
            sinks = host_sink[row]
            stats.sink_tokens += int(sinks.sum())
            stats.sinks_at_first_position += int(sinks[np.flatnonzero(real)[0]])
            kept = host_counts[row][host_content[row]]
            stats.mean_k_content.append(float(kept.mean()) if len(kept) else math.nan)
            stats.max_k_content.append(float(kept.max()) if len(kept) else math.nan)
            stats.tokens_content += len(kept)
            stats.k_sum_content += float(kept.sum())
            histogram = np.bincount(kept, minlength=state.m + 1).astype(np.int64)
            stats.histogram_content = (
                histogram
                if stats.histogram_content is None
                else stats.histogram_content + histogram
            )
            used = eligible[row][mask[row]]  # [tokens, m]
            if condition == CALIBRATION:
                seen = used.any(0).cpu().numpy()
                first = used.int().argmax(0).cpu().numpy()  # first token where each is active
                new = seen & (state.first_seen == NEVER)
                state.first_seen[new] = state.calibration_tokens + first[new]
                state.calibration_tokens += len(k)
            else:
                stats.latents.append(np.packbits(used.any(0).cpu().numpy()))

    def _reconstruction_sums(
        self,
        state: SiteState,
        activation: torch.Tensor,
        reconstruction: torch.Tensor,
        selection: TokenSelection,
        conditions: np.ndarray,
    ) -> None:
        """Per condition, on content tokens: the sums the explained variance is made of."""
        content = selection.content.to(activation.device)
        x = activation.detach().to(torch.float64)
        residual_sq = ((x - reconstruction.to(torch.float64)) ** 2).sum(-1) * content
        input_sq = (x**2).sum(-1) * content
        for name in dict.fromkeys(conditions):
            rows = torch.from_numpy(conditions == name).to(activation.device)
            stats = state.conditions.setdefault(str(name), ConditionStats())
            stats.residual_sq += float(residual_sq[rows].sum())
            stats.input_sq += float(input_sq[rows].sum())
            total = (x[rows] * content[rows][..., None]).sum(dim=(0, 1)).cpu().numpy()
            stats.input_sum = total if stats.input_sum is None else stats.input_sum + total

    # -- splicing ------------------------------------------------------------------------------
    def _reconstruct(
        self,
        sae: Any,
        activation: torch.Tensor,
        inputs: Any,
        permutation: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The SAE's reconstruction at content tokens; the model's own activation at special
        tokens and sinks unless ``splice_excluded`` (as sae-lens's ``get_recons_loss``)."""
        spliced = self._spliced_reconstruction(sae, activation, permutation)
        if self.config.splice_excluded:
            return spliced
        selection = select_tokens(
            activation,
            inputs.attention_mask,
            inputs.input_ids,
            self._special_ids,
            self.config.sink_norm_ratio,
        )
        return torch.where(selection.excluded.to(activation.device)[..., None], activation, spliced)

    def _spliced_reconstruction(
        self, sae: Any, activation: torch.Tensor, permutation: torch.Tensor | None
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
        # Calibration rows only build the pool: the spliced passes read the other rows only.
        needed = np.flatnonzero(conditions != CALIBRATION)
        inputs = _rows(batch.inputs, needed)
        keep = torch.from_numpy(needed)
        clean = batch.activations[output][keep.to(batch.activations[output].device)]
        mask, conditions = mask[keep.to(mask.device)], conditions[needed]
        with torch.no_grad():
            with adapter.intervene(site, lambda act: self._reconstruct(sae, act, inputs)):
                spliced = adapter.capture(inputs, [output])[output]
            permutation = self._permutation(site, batch)
            shuffled = None
            if permutation is not None:
                with adapter.intervene(
                    site, lambda act: self._reconstruct(sae, act, inputs, permutation)
                ):
                    shuffled = adapter.capture(inputs, [output])[output]
        if self.loss_kind == SMOOTHED_BITS:
            state.vocab_size = int(clean.shape[-1])
            ids = inputs.input_ids
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
        for site, state in self.states.items():
            self._finalize_site(site, state, metrics, tables)
        self.notes.setdefault("tokens", self._tokens_note())
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
            if not stats.mean_k:
                continue
            row = self._condition_counts(site, name, stats, metrics, tables)
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
                self._aurocs(site, name, heldout, stats, metrics, row)
            tables["ood"].append(row)
        self._quality(site, state, metrics)
        if heldout is not None and heldout.losses and self.loss_kind == SMOOTHED_BITS:
            self._bound(site, state, heldout, metrics, tables)

    def _tokens_note(self) -> str:
        ratio = self.config.sink_norm_ratio
        sinks = (
            f"attention sinks (positions whose activation norm exceeds {ratio:g} × the median "
            "norm of the row's other real tokens)"
            if ratio is not None
            else "no attention sinks (sink_norm_ratio=None)"
        )
        splice = (
            "the splice replaces every position"
            if self.config.splice_excluded
            else "the splice keeps the model's own activation at excluded positions, as "
            "sae-lens's evaluations do"
        )
        return (
            "k is reported two ways. *_all counts every real token, special tokens and sinks "
            "included (the SSD paper's way; the pool P, η̂ and the bound's k̄ use it); *_content "
            f"leaves out special tokens (ids {self._special_ids}) and {sinks} (sae-lens's way; "
            f"explained variance, L0 and dead latents use it); {splice}. The deprecated names "
            "mean_k.<condition>, max_k.*, mean_max_k.*, token_mean_k.* and auroc.* are the *_all "
            "values."
        )

    def _condition_counts(
        self,
        site: str,
        name: str,
        stats: ConditionStats,
        metrics: dict[str, float],
        tables: dict[str, list[dict[str, Any]]],
    ) -> dict[str, Any]:
        """k both ways, lengths and excluded tokens of one condition; its ``ood`` table row."""
        ways = {
            "all": (stats.mean_k, stats.max_k, stats.k_sum, stats.tokens),
            "content": (
                stats.mean_k_content, stats.max_k_content, stats.k_sum_content,
                stats.tokens_content,
            ),
        }  # fmt: skip
        row: dict[str, Any] = {"site": site, "condition": name, "inputs": len(stats.mean_k)}
        for way, (means, maxima, k_sum, tokens) in ways.items():
            values = {
                "mean_k": _nanmean(means),
                "max_k": float(np.nanmax(maxima)) if np.isfinite(maxima).any() else math.nan,
                "mean_max_k": _nanmean(maxima),
                "token_mean_k": k_sum / tokens if tokens else math.nan,
            }
            for metric, value in values.items():
                metrics[f"{site}.{metric}_{way}.{name}"] = value
                if way == "all":  # deprecated names of the paper's way (CHANGELOG.md)
                    metrics[f"{site}.{metric}.{name}"] = value
            row[f"tokens_{way}"] = tokens
            row[f"mean_k_{way}"], row[f"max_k_{way}"] = values["mean_k"], values["max_k"]
        # The table's old columns: the paper's way.
        row.update(tokens=stats.tokens, mean_k=row["mean_k_all"], max_k=max(stats.max_k))
        lengths = np.asarray(stats.lengths)
        row.update(
            median_tokens=float(np.median(lengths)),
            min_tokens=int(lengths.min()),
            max_tokens=int(lengths.max()),
            special_tokens=stats.special_tokens,
            sink_tokens=stats.sink_tokens,
            sinks_at_first_position=stats.sinks_at_first_position,
            explained_variance=stats.explained_variance,
        )
        metrics[f"{site}.median_tokens.{name}"] = row["median_tokens"]
        metrics[f"{site}.excluded_tokens.{name}"] = float(stats.special_tokens + stats.sink_tokens)
        metrics[f"{site}.explained_variance.{name}"] = stats.explained_variance
        for way, histogram in (("all", stats.histogram), ("content", stats.histogram_content)):
            table = "k_histogram" if way == "all" else "k_histogram_content"
            tables.setdefault(table, []).extend(
                {"site": site, "condition": name, "k": int(k), "count": int(c)}
                for k, c in enumerate(histogram if histogram is not None else [])
                if c
            )
        return row

    def _aurocs(
        self,
        site: str,
        name: str,
        heldout: ConditionStats,
        stats: ConditionStats,
        metrics: dict[str, float],
        row: dict[str, Any],
    ) -> None:
        """AUROC of this condition against held-out, by mean and max k, both ways, each with a
        stratified bootstrap interval (``geomlens.stats.auroc_interval``)."""
        from geomlens.stats import auroc, auroc_interval

        seed = self.context.seed if self.context else 0
        scores = {
            ("mean", "all"): (heldout.mean_k, stats.mean_k),
            ("max", "all"): (heldout.max_k, stats.max_k),
            ("mean", "content"): (heldout.mean_k_content, stats.mean_k_content),
            ("max", "content"): (heldout.max_k_content, stats.max_k_content),
        }
        for (score, way), (negatives, positives) in scores.items():
            negatives, positives = _finite(negatives), _finite(positives)
            if len(negatives) == 0 or len(positives) == 0:
                continue
            value = float(auroc(negatives, positives))
            low, high = auroc_interval(
                negatives,
                positives,
                resamples=self.config.bootstrap,
                confidence=self.config.confidence,
                seed=seed,
            )
            suffix = "" if way == "all" else "_content"
            row[f"auroc_{score}_k{suffix}"] = value
            row[f"auroc_{score}_k{suffix}_ci_low"], row[f"auroc_{score}_k{suffix}_ci_high"] = (
                low,
                high,
            )
            if score == self.config.score:
                metrics[f"{site}.auroc_{way}.{name}"] = value
                metrics[f"{site}.auroc_{way}_ci_low.{name}"] = low
                metrics[f"{site}.auroc_{way}_ci_high.{name}"] = high
                if way == "all":  # the deprecated name (CHANGELOG.md)
                    metrics[f"{site}.auroc.{name}"] = value

    def _quality(self, site: str, state: SiteState, metrics: dict[str, float]) -> None:
        """What a reader needs to judge the SAE: explained variance, L0 and dead latents on
        held-out content tokens, its decoder's column norms, a saturated pool."""
        heldout = state.conditions.get(HELDOUT)
        if heldout is not None and heldout.tokens_content:
            metrics[f"{site}.explained_variance"] = heldout.explained_variance
            metrics[f"{site}.l0"] = heldout.k_sum_content / heldout.tokens_content
        if state.fired is not None:
            dead = int((~state.fired).sum())
            metrics[f"{site}.dead_latents"] = float(dead)
            metrics[f"{site}.dead_fraction"] = dead / state.m
        record = self.provenance.get(site, {})
        if "decoder_norms" in record:
            low, mean, high = record["decoder_norms"]
            metrics[f"{site}.decoder_norm_min"] = low
            metrics[f"{site}.decoder_norm_mean"] = mean
            metrics[f"{site}.decoder_norm_max"] = high
            metrics[f"{site}.decoder_norm_spread"] = (high - low) / mean if mean else math.nan
        if record.get("norm_scaling_factor") is not None:
            metrics[f"{site}.norm_scaling_factor"] = float(record["norm_scaling_factor"])
        P = int(state.pool.sum())
        saturated = P / state.m >= 1.0 - POOL_SATURATION
        metrics[f"{site}.pool_saturated"] = float(saturated)
        if saturated:
            self.notes[f"pool_saturated:{site}"] = (
                f"Saturated pool: P = {P} of m = {state.m} latents (within "
                f"{POOL_SATURATION:.0%} of the dictionary): SSD is then about m and says nothing "
                "about this model's sparsity; a larger or sparser SAE, or pool_top_k, is needed."
            )

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
def _rows(inputs: Any, rows: np.ndarray) -> Any:
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


def _is_causal_lm(adapter: Adapter) -> bool:
    if adapter.backend == "transformer-lens":
        return True  # HookedTransformer and bridged models with logits are causal LMs
    config = getattr(adapter, "config", None)
    if config is None:
        return False
    from geomlens.hooks.nnsight import _is_decoder

    return _is_decoder(config)


def _nanmean(values: list[float]) -> float:
    finite = _finite(values)
    return float(finite.mean()) if len(finite) else math.nan


def _finite(values: list[float]) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    return array[np.isfinite(array)]


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
    ".mean_k_content.", ".auroc_content.", ".mean_k_all.", ".auroc_all.", ".max_k_content.",
    ".max_k_all.", ".pool_size", ".ssd", ".eta", ".epsilon_loss", ".epsilon_loss_shuffled",
    ".bound", ".n_star", ".explained_variance", ".l0", ".dead_fraction",
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
