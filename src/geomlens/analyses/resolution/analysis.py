"""resolution: a model's resolution scale ε and its place on the theory's (p_S, p_I) front.

Built on ``similarity`` (same state, same one pass over every site). The measured g(d) is
fitted with its own g(0) = 1 (a stimulus with itself; no free amplitude divides out the
first drop) by step, linear, exponential and Gaussian families, a two-scale family (a sharp
first drop and a slow tail) and a flat one (no resolution): see
:mod:`geomlens.analyses.profile_fits`. The lowest AIC wins; ε, the half-width (where g is
halfway from 1 to its far level, the same point of every family's curve), Δ (a noise floor in
[0, 1]) and the centring offset get percentile bootstrap intervals over stimuli. Beside them:
the measured similarity lost within the first bin (``amplitude``) and g at d = 0 across
different texts of the same stimulus (``g0_across_texts``).

⟨b⟩ and Var(b) are the ball measures at the half-width, and the regime is read from ⟨b⟩
(with the share of bootstrap resamples that agree). The fitted g and the measured similarity
matrix (negative similarities set to 0, as a ReLU does, so that the Luce rule applies) give
the theory's and the empirical (p_S, p_I) through :func:`geomlens.theory.finite_sets.evaluate`,
with its method (exact or Monte Carlo), trials and standard errors recorded; the empirical
point's distance to the universal front is reported. Every number describes the model, the
stimulus range and the centring together (table ``scale_depends_on``). See docs/similarity.md.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from geomlens.analyses.base import option
from geomlens.analyses.profile_fits import (
    FAMILIES,
    HALF_WIDTH,
    Fit,
    chosen_fit,
    family_shape,
    fit_binned,
    fit_family,
    fitted_g,
)
from geomlens.analyses.similarity import (
    Similarity,
    SimilarityConfig,
    SiteSimilarity,
    across_text_metrics,
    binned_pairs,
    distance_bins,
    g_of_d,
    plot_profiles,
)
from geomlens.results import Result
from geomlens.theory import resolution as theory
from geomlens.theory.balls import finite_ball
from geomlens.theory.finite_sets import evaluate

from .example import EXAMPLE
from .metrics import METRIC_SPECS
from .reading import reading as read_result

__all__ = [
    "FAMILIES",
    "HALF_WIDTH",
    "Fit",
    "Resolution",
    "ResolutionConfig",
    "bootstrap_fits",
    "family_shape",
    "fit_family",
    "fit_profile",
    "fitted_g",
    "normalised_g",
]

# Noise levels whose fronts (Theorem 2) are drawn beside the universal one: the same in every
# figure of the (p_S, p_I) plane.
NOISE_CURVES = theory.NOISE_CURVES
# What the scale describes: a sentence every result carries (table ``scale_depends_on``).
SCALE_NOTE = (
    "ε, the half-width, Δ and the offset describe this model with this stimulus range and this "
    "similarity (centring) together: centring subtracts the mean of these stimuli, so another "
    "range or another centre gives another curve and other numbers."
)


def normalised_g(family: str, epsilon: float, delta: float) -> Callable[[np.ndarray], np.ndarray]:
    """Deprecated (kept for one release): g = (1 − Δ) shape(d/ε) + Δ; use ``Fit.g()`` or
    :func:`geomlens.analyses.profile_fits.fitted_g`, which also take the two-scale family."""
    warnings.warn(
        "resolution.normalised_g is deprecated; use Fit.g() or profile_fits.fitted_g",
        DeprecationWarning,
        stacklevel=2,
    )
    return fitted_g(family, epsilon, delta)


def fit_profile(
    distances: np.ndarray, similarity: np.ndarray, edges: np.ndarray, pairs: tuple | None = None
) -> list[Fit]:
    """Every family fitted to the pairs' similarity, binned by ``edges``, with g(0) = 1."""
    return fit_binned(*binned_pairs(distances, similarity, edges, pairs))


@dataclass(frozen=True)
class Resampled:
    """The chosen family refitted on resampled stimuli: one entry per resample."""

    epsilon: np.ndarray
    delta: np.ndarray
    offset: np.ndarray
    half_width: np.ndarray


def bootstrap_fits(
    measured: SiteSimilarity, family: str, edges: np.ndarray, samples: int, seed: int
) -> Resampled:
    """``family`` refitted on stimuli resampled with replacement (NaN where g does not fall).

    A resampled stimulus drawn twice contributes no pair with itself (its distance 0 says
    nothing about g away from 0; the anchor g(0) = 1 holds in every resample).
    """
    rng = np.random.default_rng(seed)
    size = len(measured.coordinates)
    out = np.full((samples, 4), np.nan)
    for k in range(samples):
        drawn = np.sort(rng.integers(size, size=size))
        rows, cols = np.triu_indices(size, k=1)
        rows, cols = drawn[rows], drawn[cols]
        different = rows != cols
        try:
            mean_d, mean_s, squares, count = binned_pairs(
                measured.distances, measured.similarity, edges, (rows[different], cols[different])
            )
            fit = fit_family(family, mean_d, mean_s, count, 0.0)
        except ValueError:
            continue
        if np.isfinite(fit.epsilon):
            out[k] = fit.epsilon, fit.delta, fit.offset, fit.half_width
    return Resampled(*out.T)


def _interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    """Percentile interval of the finite values (NaN, NaN when there are none)."""
    kept = values[np.isfinite(values)]
    if not len(kept):
        return float("nan"), float("nan")
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(kept, [tail, 100 - tail])
    return float(low), float(high)


def _number(value: Any) -> float:
    """A float from a JSON value (None → NaN)."""
    return float(value) if value is not None else float("nan")


def _finite(value: Any) -> bool:
    """A number that survived the JSON round trip (NaN is written as null)."""
    return value is not None and bool(np.isfinite(value))


def _beyond_front(p_s: float, p_i: float) -> bool:
    """Whether a point lies outside the universal front (graded similarity can get there,
    e.g. linear decay, Proposition 1; constant similarity cannot)."""
    if p_s >= 0.75:
        return True
    upper = theory.pareto_front(2001)
    branch = upper.b <= 0.5  # p_S rises from 1/2 to 3/4 while p_I falls from 1 to 3/4
    return bool(p_i > np.interp(p_s, upper.p_s[branch], upper.p_i[branch]))


@dataclass
class ResolutionConfig(SimilarityConfig):
    bootstrap: int = option(
        200, "Bootstrap resamples of the stimuli for the ε and Δ intervals.", low=0
    )
    confidence: float = option(0.95, "Coverage of the bootstrap intervals.", low=0, high=1)
    draws: str = option(
        "independent",
        "Trials for the (p_S, p_I) numbers: 'independent' (the theory) or 'distinct' stimuli "
        "(the paper's experiments).",
    )
    choice: str = option(
        "expected", "'expected' Luce accuracy, or 'sampled' choices (seeded Monte Carlo)."
    )
    samples: int = option(200_000, "Monte-Carlo trials when exact enumeration is too large.", low=1)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.mode != "representational":
            raise ValueError(
                "resolution fits representational similarity; for choice-based g(d) run "
                "'similarity' with mode='behavioural'."
            )
        if self.similarity == "negative-distance":
            raise ValueError(
                "resolution needs a similarity with g(0) = 1: use 'centred-cosine' or 'cosine'."
            )
        if self.draws not in ("independent", "distinct") or self.choice not in (
            "expected",
            "sampled",
        ):
            raise ValueError(
                "draws must be 'independent' or 'distinct' and choice 'expected' or 'sampled'; "
                f"got {self.draws!r}, {self.choice!r}."
            )
        if not 0 < self.confidence < 1 or self.bootstrap < 0:
            raise ValueError("confidence must be in (0, 1) and bootstrap >= 0.")


class Resolution(Similarity):
    """Resolution scale ε of g(d) by family and AIC, and the model's place on the (p_S, p_I) front.

    Families: step, linear, exponential, Gaussian; the empirical and the fitted g's (p_S, p_I)
    are placed against the universal front (see the module docstring).
    """

    name = "resolution"
    example = EXAMPLE
    metric_specs = METRIC_SPECS
    reading = staticmethod(read_result)

    Config = ResolutionConfig
    config: ResolutionConfig

    def finalize(self) -> Result:
        config = self.config
        seed = self.context.seed if self.context is not None else 0
        front = theory.pareto_front(2001)
        metrics: dict[str, float] = {}
        profile_rows: list[dict[str, Any]] = []
        fit_rows: list[dict[str, Any]] = []
        placement_rows: list[dict[str, Any]] = []
        scope_rows: list[dict[str, Any]] = []
        for measured in self.site_similarities():
            site = measured.site
            edges = distance_bins(measured.distances, config.bins)
            rows = g_of_d(measured.distances, measured.similarity, config.bins)
            profile_rows.extend({"site": site, **row} for row in rows)
            first = rows[0]  # the nearest bin of distinct stimuli
            fits = fit_profile(measured.distances, measured.similarity, edges)
            chosen = chosen_fit(fits)
            fit_rows.extend(
                {
                    "site": site,
                    "family": f.family,
                    "epsilon": f.epsilon,
                    "half_width": f.half_width,
                    "delta": f.delta,
                    "offset": f.offset,
                    "epsilon_fast": f.epsilon_fast,
                    "fast_share": f.fast_share,
                    # The fraction of g(0) = 1 this fit loses within the first bin.
                    "amplitude": float(1.0 - f.g()(np.array(first["distance"])))
                    if np.isfinite(f.level)
                    else float("nan"),
                    "aic": f.aic,
                    "chosen": f is chosen,
                }
                for f in fits
            )
            # No interval around a scale that is not there.
            resamples = config.bootstrap if np.isfinite(chosen.epsilon) else 0
            boot = bootstrap_fits(measured, chosen.family, edges, resamples, seed)
            # Resamples whose g does not fall give no ε; they are left out of the intervals
            # and counted here.
            flat_share = float(np.mean(~np.isfinite(boot.epsilon))) if resamples else np.nan
            intervals = {
                name: _interval(getattr(boot, name), config.confidence)
                for name in ("epsilon", "delta", "offset", "half_width")
            }
            placement = self._placement(measured, chosen, boot, front, seed)
            metrics.update(
                {
                    f"{site}.epsilon": chosen.epsilon,
                    f"{site}.epsilon_fast": chosen.epsilon_fast,
                    f"{site}.fast_share": chosen.fast_share,
                    f"{site}.half_width": chosen.half_width,
                    f"{site}.delta": chosen.delta,
                    f"{site}.offset": chosen.offset,
                    **{
                        f"{site}.{name}_ci_{end}": value
                        for name, pair in intervals.items()
                        for end, value in zip(("low", "high"), pair)
                    },
                    # The measured similarity lost between a stimulus and its nearest neighbours.
                    f"{site}.amplitude": 1.0 - first["mean"],
                    f"{site}.first_distance": first["distance"],
                    **across_text_metrics(measured),
                    f"{site}.bootstrap_without_scale": flat_share,
                    **{
                        f"{site}.{k}": v
                        for k, v in placement.items()
                        if k not in ("regime", "method")
                    },
                }
            )
            placement_rows.append({"site": site, "family": chosen.family, **placement})
            coordinates = np.asarray(measured.coordinates, dtype=float)
            scope_rows.append(
                {
                    "site": site,
                    "similarity": config.similarity,
                    "centred_on": "mean of these stimuli"
                    if config.similarity == "centred-cosine"
                    else "not centred",
                    "stimuli": len(coordinates),
                    "coordinate_low": float(coordinates.min()),
                    "coordinate_high": float(coordinates.max()),
                    "note": SCALE_NOTE,
                }
            )
        return Result(
            self.name,
            metrics=metrics,
            tables={
                "g_of_d": profile_rows,
                "fits": fit_rows,
                "placement": placement_rows,
                "scale_depends_on": scope_rows,
                "metric": self.metric_table(),
            },
        )

    def _placement(
        self,
        measured: SiteSimilarity,
        chosen: Fit,
        boot: Resampled,
        front: theory.Front,
        seed: int,
    ) -> dict[str, Any]:
        """⟨b⟩ and Var(b) at the half-width, the regime they give (and how often the bootstrap
        gives the same), theory and empirical (p_S, p_I) with how they were computed, and
        the distance to the front."""
        config = self.config
        # Keyword arguments of theory.evaluate (the options were checked against its choices).
        protocol: dict[str, Any] = {
            "draws": config.draws,
            "choice": config.choice,
            "samples": config.samples,
            "seed": seed,
        }
        nan = float("nan")
        if np.isfinite(chosen.epsilon):
            # The half-width means the same point of every family's curve (halfway from 1 to
            # the floor), so ⟨b⟩ compares across layers whichever family won.
            balls = finite_ball(measured.distances, chosen.half_width)
            mean_b, var_b = float(balls.mean()), float(balls.var())
            regime = str(theory.regime(mean_b))
            widths = boot.half_width[np.isfinite(boot.half_width)]
            resampled_b = (
                finite_ball(measured.distances, widths).mean(axis=-1) if len(widths) else []
            )
            b_low, b_high = _interval(np.asarray(resampled_b, dtype=float), config.confidence)
            agreement = (
                float(np.mean([theory.regime(float(b)) == regime for b in resampled_b]))
                if len(widths)
                else nan
            )
            # The theory's g is the fitted curve itself (g(0) = 1, no amplitude divided out),
            # so its point compares with the empirical one. The Luce rule needs g >= 0: a
            # negative fitted g counts as 0, as a ReLU would (the measured matrix likewise).
            fitted = chosen.g()
            predicted = evaluate(
                measured.distances, lambda d: np.clip(fitted(d), 0.0, None), 2, **protocol
            )
        else:  # no resolution scale: nothing for the theory to place
            mean_b = var_b = b_low = b_high = agreement = nan
            regime = "none"
            predicted = None
        empirical = evaluate(
            measured.distances, np.clip(measured.similarity, 0.0, None), 2, **protocol
        )
        position = theory.nearest_on_front(empirical.p_s, empirical.p_i, front)
        return {
            "mean_b": mean_b,
            "mean_b_ci_low": b_low,
            "mean_b_ci_high": b_high,
            "var_b": var_b,
            # The regime of ⟨b⟩ (identification b < 1/4, trade-off to 1/2, interference
            # beyond), and the share of bootstrap resamples whose ⟨b⟩ gives the same one.
            "regime": regime,
            "regime_agreement": agreement,
            "p_similarity_theory": predicted.p_s if predicted else nan,
            "p_identification_theory": predicted.p_i if predicted else nan,
            "p_similarity_theory_se": predicted.se_s if predicted else nan,
            "p_identification_theory_se": predicted.se_i if predicted else nan,
            "p_similarity": empirical.p_s,
            "p_identification": empirical.p_i,
            # Exact enumeration up to ~310 stimuli (N³ trials), Monte Carlo beyond: the
            # method, its number of trials (0 = exact) and the standard errors are recorded.
            "method": empirical.method,
            "samples": float(empirical.samples),
            "p_similarity_se": empirical.se_s,
            "p_identification_se": empirical.se_i,
            "front_distance": float(position.distance),
            "front_b": float(position.b),
            "front_beyond": float(_beyond_front(empirical.p_s, empirical.p_i)),
        }

    @classmethod
    def plot(cls, result: Result, **kwargs: Any) -> Any:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        chosen = {r["site"]: r for r in result.tables.get("fits", []) if r["chosen"]}
        sites = list(chosen)
        colours = dict(zip(sites, plt.cm.viridis(np.linspace(0, 0.9, max(len(sites), 1)))))
        figure, (ax_g, ax_plane) = plt.subplots(1, 2, figsize=(12, 4.6))
        decaying = {s: r for s, r in chosen.items() if _finite(r["epsilon"])}
        plot_profiles(ax_g, result.tables["g_of_d"])
        top = max((r["distance"] for r in result.tables["g_of_d"]), default=1.0)
        grid = np.linspace(0, top, 600)
        for site, fit in decaying.items():
            g = fitted_g(
                fit["family"],
                fit["epsilon"],
                fit["delta"] + fit["offset"],
                _number(fit.get("epsilon_fast")),
                _number(fit.get("fast_share")),
            )(grid)
            ax_g.plot(grid, g, color=colours[site], lw=1)
        for site in sites:  # g(0) = 1 on the diagonal; the same stimulus in another text
            ax_g.plot([0], [1.0], "o", color=colours[site], ms=3)
            across = _number(result.metrics.get(f"{site}.g0_across_texts"))
            if np.isfinite(across):
                ax_g.plot([0], [across], "D", mfc="none", color=colours[site], ms=4)
        ax_g.plot([], [], "kD", mfc="none", ms=4, label="d = 0 across texts")
        ax_g.legend(fontsize=6, ncol=2)
        ax_g.set_ylabel("g(d) (g(0) = 1: a stimulus with itself)")
        ax_g.set_title("similarity profile and chosen fit per site (unscaled)", fontsize=9)

        universal = theory.pareto_front(401)
        ax_plane.plot(universal.p_s, universal.p_i, "k-", lw=1.5, label="universal front (Δ = 0)")
        graded = theory.linear_decay_front(401)
        ax_plane.plot(
            graded.p_s, graded.p_i, color="C3", lw=1, label="linear-decay front (paper, Prop. 1)"
        )
        for delta in NOISE_CURVES:
            noisy = theory.pareto_front(401, delta=delta)
            ax_plane.plot(noisy.p_s, noisy.p_i, "k--", lw=0.7, alpha=0.5)
            ax_plane.annotate(f"Δ={delta}", (noisy.p_s[100], noisy.p_i[100]), fontsize=6, alpha=0.7)
        for row in result.tables.get("placement", []):
            colour = colours.get(row["site"], "C0")
            ax_plane.plot(row["p_similarity"], row["p_identification"], "o", color=colour)
            if _finite(row["p_similarity_theory"]):
                ax_plane.plot(
                    row["p_similarity_theory"], row["p_identification_theory"], "x", color=colour
                )
        ax_plane.plot([], [], "ko", label="measured (per site)")
        ax_plane.plot([], [], "kx", label="fitted g (per site)")
        ax_plane.set_xlabel("p_S (similarity test, n = 2)")
        ax_plane.set_ylabel("p_I (identification test, n = 2)")
        ax_plane.legend(fontsize=7)
        figure.suptitle(f"resolution · {result.provenance.get('model_id', '')}")
        figure.tight_layout()
        return figure
