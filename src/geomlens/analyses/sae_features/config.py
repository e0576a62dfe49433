"""sae-features' options, its condition names and default data sizes, and their checks."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from geomlens.analyses.declaration import AnalysisConfig, option
from geomlens.run_defaults import SINK_NORM_RATIO

#: What ``geomlens.analyses.sae_features`` re-exports from here (the checks stay internal).
__all__ = [
    "CALIBRATION",
    "COSINE_FIDELITY",
    "DEFAULT_CALIBRATION_ROWS",
    "DEFAULT_HELDOUT_ROWS",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_OOD_ROWS",
    "HELDOUT",
    "POOL_SATURATION",
    "SMOOTHED_BITS",
    "SAEFeaturesConfig",
]

CALIBRATION = "calibration"
HELDOUT = "heldout"
#: Loss names recorded in the result.
SMOOTHED_BITS = "smoothed_bits_per_token"
COSINE_FIDELITY = "final_hidden_cosine_distance"
#: Default data sizes (rows) and truncation of ``default_data``.
DEFAULT_CALIBRATION_ROWS = 128
DEFAULT_HELDOUT_ROWS = 64
#: Each OOD set has as many rows as the held-out set (row for row, so lengths match).
DEFAULT_OOD_ROWS = DEFAULT_HELDOUT_ROWS
DEFAULT_MAX_TOKENS = 64
#: A pool within this fraction of the dictionary size is saturated (SSD ≈ m says nothing).
POOL_SATURATION = 0.05


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
    bootstrap: int = option(
        1000,
        "Not read: the AUROC intervals are Newcombe score intervals, which need no resamples "
        "(kept so that older configs load).",
    )
    confidence: float = option(
        0.95, "Coverage of the AUROC score intervals (Newcombe's, docs/sae.md).", low=0, high=1
    )
    training: dict = option(
        {}, "With sae=None: overrides of geomlens.sae.config.TrainingConfig (d_sae, tokens, ...)."
    )

    def to_dict(self) -> dict[str, Any]:
        """Plain data: an SAE object is recorded by its description, not its weights."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        values["sae"] = describe_sae_spec(self.sae)
        return values


def describe_sae_spec(spec: Any) -> Any:
    if spec is None or isinstance(spec, (str, int, float)):
        return spec
    if isinstance(spec, dict):
        return {str(k): describe_sae_spec(v) for k, v in spec.items()}
    if isinstance(spec, (list, tuple)):
        return [describe_sae_spec(v) for v in spec]
    cfg = getattr(spec, "cfg", None)
    if cfg is not None:
        return (
            f"{type(spec).__name__}(d_in={cfg.d_in}, d_sae={cfg.d_sae}, "
            f"hook_name={cfg.metadata.get('hook_name')!r})"
        )
    return str(spec)


def check_latents(name: str, latents: list[int] | None, m: int) -> None:
    if latents is not None and not all(0 <= j < m for j in latents):
        bad = next(j for j in latents if not 0 <= j < m)
        raise ValueError(
            f"sae-features option {name} lists latent {bad}, but the SAE has latents 0..{m - 1}."
        )


def check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(
            f"sae-features option {name}={value!r} is not one of {', '.join(map(repr, choices))}."
        )
