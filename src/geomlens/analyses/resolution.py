"""resolution: a model's resolution scale ε and its place on the theory's (p_S, p_I) front.

Built on ``similarity`` (same state, same one pass over every site): the measured g(d) is
fitted, normalised so that g(0) = 1, by four families with a floor Δ —

* step:        g = 1 for d < ε, Δ beyond;
* linear:      g = (1 − Δ) max(0, 1 − d/ε) + Δ;
* exponential: g = (1 − Δ) e^(−d/ε) + Δ;
* gaussian:    g = (1 − Δ) e^(−d²/(2ε²)) + Δ —

each as amplitude × shape, so every family has three parameters (ε, Δ and the value g reaches
as d → 0, which the normalisation divides out). The fits are least squares over all stimulus
pairs (each bin's mean weighted by its pair count) and the family with the lowest AIC is
chosen. ε and Δ get percentile bootstrap intervals over stimuli. From the chosen ε the ball
measures b_p(ε) of the stimulus set give ⟨b⟩ and Var(b); the fitted g and the measured
similarity matrix (negative similarities set to 0, as a ReLU does, so that the Luce rule
applies) give the theory's and the empirical (p_S, p_I) through
:func:`geomlens.theory.resolution.evaluate`; the empirical point's distance to the universal
front and its regime are reported. See docs/similarity.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize_scalar

from geomlens.analyses.base import option
from geomlens.analyses.similarity import (
    Similarity,
    SimilarityConfig,
    SiteSimilarity,
    binned_pairs,
    distance_bins,
    g_of_d,
    plot_profiles,
)
from geomlens.results import Result
from geomlens.theory import resolution as theory
from geomlens.theory.balls import finite_ball

FAMILIES = ("step", "linear", "exponential", "gaussian")
# Noise levels whose fronts (Theorem 2) are drawn beside the universal one.
NOISE_CURVES = (0.1, 0.3, 0.5)
_GRID = 160
_RESIDUAL_FLOOR = 1e-10


def family_shape(family: str, distances: np.ndarray, epsilon: float) -> np.ndarray:
    """The part of g that decays from 1 at d = 0 to 0 far away (Δ is added around it)."""
    scaled = np.asarray(distances, dtype=float) / epsilon
    if family == "step":
        return (scaled < 1.0).astype(float)
    if family == "linear":
        return np.clip(1.0 - scaled, 0.0, None)
    if family == "exponential":
        return np.exp(-scaled)
    if family == "gaussian":
        return np.exp(-0.5 * scaled**2)
    raise ValueError(f"Unknown family {family!r}; families are {FAMILIES}.")


# Where each normalised shape falls to 1/2 (so g to (1 + Δ)/2), in units of ε: a width that
# compares across families (ε itself means a different point of each curve).
HALF_WIDTH = {
    "step": 1.0,
    "linear": 0.5,
    "exponential": float(np.log(2.0)),
    "gaussian": float(np.sqrt(2.0 * np.log(2.0))),
}


def normalised_g(family: str, epsilon: float, delta: float) -> Callable[[np.ndarray], np.ndarray]:
    """g(d) = (1 − Δ) shape(d/ε) + Δ, so g(0) = 1."""
    return lambda d: (1.0 - delta) * family_shape(family, d, epsilon) + delta


@dataclass(frozen=True)
class Fit:
    """One family fitted to a binned profile. ``amplitude`` is the fitted g as d → 0."""

    family: str
    epsilon: float
    delta: float
    amplitude: float
    rss: float
    aic: float


def fit_family(
    family: str,
    distances: np.ndarray,
    means: np.ndarray,
    counts: np.ndarray,
    within: float,
) -> Fit:
    """Least squares of amplitude · ((1 − Δ) shape(d/ε) + Δ) to binned means.

    ε and Δ are NaN when the best fit does not fall with distance from a positive value (the
    representation shows no resolution there).

    For a fixed ε the model is linear in (a, c) = (amplitude (1 − Δ), amplitude Δ), solved in
    closed form; ε is found on a log grid then refined (step: thresholds between distances).
    ``within`` is the pairs' squared deviation from their bin means, so the RSS and AIC are
    those of the pair-level fit.
    """
    keep = counts > 0
    d, m, w = distances[keep], means[keep], counts[keep]
    positive = d[d > 0]
    if len(positive) < 2:
        raise ValueError("Fitting g(d) needs pairs at two or more positive distances.")

    def solve(epsilon: np.ndarray | float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        # Weighted least squares of a · shape + c, in closed form for every ε at once.
        shape = family_shape(family, d[None, :], np.atleast_1d(epsilon)[:, None])
        sw, sm, smm = w.sum(), (w * m).sum(), (w * m * m).sum()
        ss, sss, ssm = shape @ w, (shape * shape) @ w, shape @ (w * m)
        det = sss * sw - ss**2
        flat = det <= 1e-12 * sss * sw  # shape constant over the bins: only c is fitted
        safe = np.where(flat, 1.0, det)
        a = np.where(flat, 0.0, (ssm * sw - ss * sm) / safe)
        # A similarity that rises with distance is no resolution: keep a >= 0 (the constrained
        # optimum is then the flat fit a = 0).
        flat = flat | (a < 0)
        a = np.where(flat, 0.0, a)
        c = np.where(flat, sm / sw, (sss * sm - ss * ssm) / safe)
        rss = np.maximum(smm - a * ssm - c * sm, 0.0)
        return rss, a, c

    if family == "step":
        levels = np.unique(d)
        candidates = (levels[1:] + levels[:-1]) / 2
    else:
        candidates = np.geomspace(positive.min() / 4, d.max() * 4, _GRID)
    losses = solve(candidates)[0]
    best = int(np.argmin(losses))
    epsilon = float(candidates[best])
    if family != "step":
        low, high = candidates[max(best - 1, 0)], candidates[min(best + 1, len(candidates) - 1)]
        refined = minimize_scalar(
            lambda log_e: float(solve(np.exp(log_e))[0][0]),
            bounds=(np.log(low), np.log(high)),
            method="bounded",
            options={"xatol": 1e-8},
        )
        if refined.fun <= losses[best]:
            epsilon = float(np.exp(refined.x))
    rss_between, a, c = (float(x[0]) for x in solve(epsilon))
    amplitude = a + c
    if a > 0 and amplitude > 0:
        delta = c / amplitude
    else:
        # g does not fall from a positive value at d = 0: no scale to report (NaN, not a
        # number that looks like one).
        epsilon = delta = float("nan")
    return Fit(
        family, epsilon, float(delta), float(amplitude), *_rss_aic(rss_between, within, w, 3)
    )


def _rss_aic(
    rss_between: float, within: float, counts: np.ndarray, parameters: int
) -> tuple[float, float]:
    """Pair-level RSS and AIC = pairs · log(RSS / pairs) + 2 · parameters."""
    pairs = float(counts.sum())
    rss = rss_between + within
    # Residuals below 1e-10 per pair are rounding, not fit: they all count as that floor, so
    # an exact profile is not "fitted better" by a family that only chases rounding errors.
    floor = pairs * _RESIDUAL_FLOOR**2
    return rss, float(pairs * np.log(max(rss, floor) / pairs) + 2 * parameters)


def fit_flat(means: np.ndarray, counts: np.ndarray, within: float) -> Fit:
    """The no-resolution model: one similarity at every distance (one parameter)."""
    level = float(np.average(means, weights=counts))
    rss_between = float((counts * (means - level) ** 2).sum())
    nan = float("nan")
    return Fit("flat", nan, nan, level, *_rss_aic(rss_between, within, counts, 1))


def fit_profile(
    distances: np.ndarray, similarity: np.ndarray, edges: np.ndarray, pairs: tuple | None = None
) -> list[Fit]:
    """Every family fitted to the pairs' similarity, binned by ``edges``."""
    mean_d, mean_s, squares, count = binned_pairs(distances, similarity, edges, pairs)
    keep = count > 0
    within = float(squares[keep].sum())
    fits = [fit_family(f, mean_d[keep], mean_s[keep], count[keep], within) for f in FAMILIES]
    return [*fits, fit_flat(mean_s[keep], count[keep], within)]


def bootstrap_fits(
    measured: SiteSimilarity, family: str, edges: np.ndarray, samples: int, seed: int
) -> np.ndarray:
    """(samples, 2) ε and Δ of ``family`` refitted on stimuli resampled with replacement.

    A resampled stimulus drawn twice contributes no pair with itself (its distance 0 says
    nothing about g away from 0).
    """
    rng = np.random.default_rng(seed)
    size = len(measured.coordinates)
    out = np.full((samples, 2), np.nan)
    for k in range(samples):
        drawn = np.sort(rng.integers(size, size=size))
        rows, cols = np.triu_indices(size, k=1)
        rows, cols = drawn[rows], drawn[cols]
        different = rows != cols
        try:
            mean_d, mean_s, squares, count = binned_pairs(
                measured.distances, measured.similarity, edges, (rows[different], cols[different])
            )
            keep = count > 0
            fit = fit_family(family, mean_d[keep], mean_s[keep], count[keep], 0.0)
        except ValueError:
            continue
        out[k] = fit.epsilon, fit.delta
    return out


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
        for measured in self.site_similarities():
            site = measured.site
            edges = distance_bins(measured.distances, config.bins)
            profile_rows.extend(
                {"site": site, **row}
                for row in g_of_d(measured.distances, measured.similarity, config.bins)
            )
            fits = fit_profile(measured.distances, measured.similarity, edges)
            chosen = min(fits, key=lambda f: f.aic)
            fit_rows.extend(
                {
                    "site": site,
                    "family": f.family,
                    "epsilon": f.epsilon,
                    "delta": f.delta,
                    "amplitude": f.amplitude,
                    "aic": f.aic,
                    "chosen": f is chosen,
                }
                for f in fits
            )
            # No interval around a scale that is not there.
            resamples = config.bootstrap if np.isfinite(chosen.epsilon) else 0
            boot = bootstrap_fits(measured, chosen.family, edges, resamples, seed)
            # Resamples whose g does not fall give no ε; they are left out of the interval
            # and counted here.
            flat_share = float(np.mean(~np.isfinite(boot[:, 0]))) if len(boot) else float("nan")
            tail = 100 * (1 - config.confidence) / 2
            (eps_low, delta_low), (eps_high, delta_high) = (
                np.nanpercentile(boot, [tail, 100 - tail], axis=0)
                if np.isfinite(boot).all(axis=1).any()
                else np.full((2, 2), np.nan)
            )
            placement = self._placement(measured, chosen, front, seed)
            metrics.update(
                {
                    f"{site}.epsilon": chosen.epsilon,
                    f"{site}.epsilon_ci_low": float(eps_low),
                    f"{site}.epsilon_ci_high": float(eps_high),
                    f"{site}.half_width": chosen.epsilon * HALF_WIDTH.get(chosen.family, np.nan),
                    f"{site}.delta": chosen.delta,
                    f"{site}.delta_ci_low": float(delta_low),
                    f"{site}.delta_ci_high": float(delta_high),
                    f"{site}.bootstrap_without_scale": flat_share,
                    **{f"{site}.{k}": v for k, v in placement.items() if k != "regime"},
                }
            )
            placement_rows.append({"site": site, "family": chosen.family, **placement})
        return Result(
            self.name,
            metrics=metrics,
            tables={
                "g_of_d": profile_rows,
                "fits": fit_rows,
                "placement": placement_rows,
                "metric": self.metric_table(),
            },
        )

    def _placement(
        self, measured: SiteSimilarity, chosen: Fit, front: theory.Front, seed: int
    ) -> dict[str, Any]:
        """⟨b⟩, Var(b), theory and empirical (p_S, p_I), distance to the front, regime."""
        config = self.config
        protocol = {
            "draws": config.draws,
            "choice": config.choice,
            "samples": config.samples,
            "seed": seed,
        }
        if np.isfinite(chosen.epsilon):
            balls = finite_ball(measured.distances, chosen.epsilon)
            shape = normalised_g(chosen.family, chosen.epsilon, min(chosen.delta, 1.0))
            # The Luce rule needs g >= 0: a negative floor (centred cosines of far stimuli)
            # counts as 0, as a ReLU would; the measured matrix below is treated the same way.
            predicted = theory.evaluate(
                measured.distances, lambda d: np.clip(shape(d), 0.0, None), 2, **protocol
            )
            theory_point = (predicted.p_s, predicted.p_i)
            mean_b, var_b = float(balls.mean()), float(balls.var())
        else:  # no resolution scale: nothing for the theory to place
            theory_point = (float("nan"), float("nan"))
            mean_b = var_b = float("nan")
        empirical = theory.evaluate(
            measured.distances, np.clip(measured.similarity, 0.0, None), 2, **protocol
        )
        position = theory.nearest_on_front(empirical.p_s, empirical.p_i, front)
        return {
            "mean_b": mean_b,
            "var_b": var_b,
            "p_similarity_theory": theory_point[0],
            "p_identification_theory": theory_point[1],
            "p_similarity": empirical.p_s,
            "p_identification": empirical.p_i,
            "front_distance": float(position.distance),
            "front_b": float(position.b),
            "front_beyond": float(_beyond_front(empirical.p_s, empirical.p_i)),
            # Where the model sits: the regime of the nearest point of the front.
            "regime": theory.regime(float(np.clip(position.b, 0, 1))),
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
        plot_profiles(
            ax_g, result.tables["g_of_d"], {s: r["amplitude"] for s, r in decaying.items()}
        )
        top = max((r["distance"] for r in result.tables["g_of_d"]), default=1.0)
        grid = np.linspace(0, top, 300)
        for site, fit in decaying.items():
            g = normalised_g(fit["family"], fit["epsilon"], fit["delta"])(grid)
            ax_g.plot(grid, g, color=colours[site], lw=1)
        ax_g.set_ylabel("g(d) / fitted g(0)")
        ax_g.set_title("similarity profile and chosen fit per site", fontsize=9)

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
