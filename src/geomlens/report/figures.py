"""The report's figures: each analysis's own plot, and the theory's curves with the model's points.

Analysis figures come from the analysis's ``plot(result)`` (the report draws through the
analysis; the result itself is data). Theory figures compute their reference curves with
``geomlens.theory`` and mark what the model measured, read from the results' public metric
names. Every figure is saved atomically and closed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from geomlens.analyses.spec import MetricSpec
from geomlens.analyses.words.guards import AT_CHANCE, at_chance, within
from geomlens.analyses.words.reading_words import (
    derived_value,
    metric_interval,
    metric_refused,
    metric_value,
    regimes_spanned,
)
from geomlens.atomic_files import atomic_save_figure
from geomlens.formatting import percent
from geomlens.report.readings import layer_label, per_site
from geomlens.results import Result

if TYPE_CHECKING:
    from geomlens.analyses.base import Analysis

#: Resolution of the saved figures.
FIGURE_DPI = 110

#: Quantities the theory figures derive from the results, each written through its own spec
#: (units, digits, guards), as a metric is.
FRONT_NEAREST_B = MetricSpec(
    "front_nearest_b",
    "ball measure b of the front's nearest point",
    guards=(within(0.0, 1.0, "a ball measure"),),
)
FRONT_NEAREST_DISTANCE = MetricSpec("front_nearest_distance", "distance to the front")
REGIME_AGREEMENT = MetricSpec(
    "regime_agreement_share",
    "share of bootstrap resamples that read the same regime",
    format=lambda value: percent(value, 2),
    guards=(within(0.0, 1.0, "a share"),),
)
DEPTH_LAW_GAP = MetricSpec("depth_law_gap", "largest departure of α from the depth law")
MEAN_INTERVAL_WIDTH = MetricSpec(
    "alpha_mean_interval_width", "mean width of α's 95 % intervals over the layers"
)
CROSSING_SIZE = MetricSpec(
    "n_star_pool", "held-out sequences at which the bound reaches log2 V", "sequences"
)


@dataclass
class TheoryFigure:
    """A reference figure with the model's points on it, and what it shows in words."""

    title: str
    file: str
    reading: list[str]
    #: Why the figure could not be drawn (a failure of the report), or None.
    error: str | None = None


def save_figure(figure, path: Path) -> Path:
    """Save atomically at the report's resolution and release the figure's memory."""
    import matplotlib.pyplot as plt

    try:
        atomic_save_figure(figure, path, dpi=FIGURE_DPI, bbox_inches="tight")
    finally:
        plt.close(figure)
    return path


def analysis_figure(analysis: type[Analysis], result: Result, path: Path) -> Path | None:
    """Draw ``result`` through its analysis's ``plot``; None when the analysis has no plot.

    The result is first put through a JSON round trip, so the figure shows only what a reader
    of the saved JSON could draw too; a figure with nothing drawn raises
    :class:`~geomlens.analyses.plotting.FigureNotDrawn` (the same path as the contract check
    ``plot-from-json``).
    """
    from geomlens.analyses.plotting import has_plot, plot_from_json

    if not has_plot(analysis):
        return None
    try:
        figure = plot_from_json(analysis, result)
    except NotImplementedError:
        return None
    return save_figure(figure, path)


def _axes(title: str):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.5, 4.6), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots()
    axes.set_title(title)
    return figure, axes


def _colours(count: int):
    import matplotlib

    return matplotlib.colormaps["viridis"](np.linspace(0.0, 0.9, max(count, 1)))


def pareto_with_model(results: dict[str, Result], path: Path) -> TheoryFigure | None:
    """The (p_S, p_I) plane (p_S on x, as every figure of it): universal front, Proposition 1's curve, the model's sites."""
    source = next(
        (
            r
            for r in results.values()
            if per_site(r, "p_similarity") and per_site(r, "p_identification")
        ),
        None,
    )
    if source is None:
        return None
    from geomlens.theory import resolution

    p_s = per_site(source, "p_similarity")
    p_i = per_site(source, "p_identification")
    sites = [s for s in p_s if s in p_i and not (math.isnan(p_s[s]) or math.isnan(p_i[s]))]
    figure, axes = _axes("Semantic resolution: where the model sits (n = 2 candidates)")
    front = resolution.pareto_front(401)
    _draw_plane_curves(axes, front)
    _draw_plane_sites(axes, source, sites, p_s, p_i)
    save_figure(figure, path)
    words = _plane_words(source, sites, p_s, p_i, front)
    return TheoryFigure("Resolution against the universal front", path.name, words)


def _draw_plane_curves(axes, front) -> None:
    """The theory's curves on the plane: the universal front, the fronts with a noise floor Δ,
    and Proposition 1's linear decay on a circle."""
    from geomlens.theory import resolution

    axes.plot(front.p_s, front.p_i, color="k", label="universal front (Δ = 0, Theorem 1)")
    for delta, style in zip(resolution.NOISE_CURVES, (":", "-.", (0, (1, 3)))):
        noisy = resolution.pareto_front(401, delta=delta)
        axes.plot(
            noisy.p_s, noisy.p_i, color="grey", linestyle=style, label=f"front with Δ = {delta}"
        )
    b = np.linspace(0.0, 1.0, 401)
    decay_s, decay_i = resolution.linear_decay_circle(b)
    axes.plot(decay_s, decay_i, linestyle="--", label="linear decay on a circle (Prop. 1)")


def _draw_plane_sites(
    axes, source: Result, sites: list[str], p_s: dict[str, float], p_i: dict[str, float]
) -> None:
    """The model's sites on the plane (each with its fitted g's point beside it), the chance
    line, the axes and the legend."""
    from geomlens.theory import resolution

    theory_s = per_site(source, "p_similarity_theory")
    theory_i = per_site(source, "p_identification_theory")
    for colour, site in zip(_colours(len(sites)), sites):
        axes.plot(p_s[site], p_i[site], "o", color=colour, label=layer_label(site))
        predicted = theory_s.get(site, math.nan), theory_i.get(site, math.nan)
        if not any(math.isnan(v) for v in predicted):  # the fitted g's own point
            axes.plot(*predicted, "x", color=colour)
    if theory_s:
        axes.plot([], [], "kx", label="fitted g (same unscaled g)")
    axes.axvline(0.5, color="lightgrey", linewidth=0.8)
    axes.set_xlabel(resolution.PLANE_AXES[0])
    axes.set_ylabel(resolution.PLANE_AXES[1])
    axes.plot([], [], " ", label=resolution.N2_MEANING)
    axes.legend(fontsize=7, loc="lower left")


def _plane_words(
    source: Result, sites: list[str], p_s: dict[str, float], p_i: dict[str, float], front
) -> list[str]:
    """What the plane shows, then where the last site sits: at chance (no place read), or its
    nearest point of the front and the regime read from ⟨b⟩."""
    from geomlens.theory import resolution

    intro = (
        "Each dot is one site of the model: its similarity and identification accuracies "
        "measured on the stimuli. The black curve is what an all-or-nothing similarity "
        "reaches when every stimulus has a neighbourhood of the same size b (the fraction "
        "of stimuli it treats as alike); Δ is a floor of similarity between unlike stimuli. "
        "Graded similarities can do better: the dashed curve is linear decay on a circle. "
        "n = 2: each test trial offers two candidates (chance is 1/2)."
    )
    if not sites:
        return ["The analysis gave no finite (p_S, p_I) point to place."]
    last = sites[-1]
    chance = at_chance(0.5)
    if all(chance(source, f"{last}.{n}") for n in ("p_similarity", "p_identification")):
        return [
            intro,
            f"The last site, {layer_label(last)}, is at chance on both tests (each 95 % "
            f"interval of p_S and p_I contains 1/2): {AT_CHANCE}. Its place on the front and a "
            "regime are not read.",
        ]
    position = resolution.nearest_on_front(p_s[last], p_i[last], front)
    words = [
        intro,
        f"The last site, {layer_label(last)}, is nearest to the front's point with "
        f"b = {derived_value(source, f'{last}.front_nearest_b', float(position.b), FRONT_NEAREST_B)} "
        f"(in the {resolution.regime(float(position.b))} part of the front), at distance "
        + derived_value(
            source,
            f"{last}.front_nearest_distance",
            float(position.distance),
            FRONT_NEAREST_DISTANCE,
        )
        + ".",
    ]
    mean_b = source.metrics.get(f"{last}.mean_b", math.nan)
    mean_b_words = f"⟨b⟩ = {metric_value(source, f'{last}.mean_b')} at the fitted half-width "
    mean_b_words += f"({metric_interval(source, f'{last}.mean_b')})"
    if not math.isnan(mean_b):
        low = source.metrics.get(f"{last}.mean_b_ci_low", math.nan)
        high = source.metrics.get(f"{last}.mean_b_ci_high", math.nan)
        spanned = regimes_spanned(low, high)
        if len(spanned) > 1:
            words.append(
                f"Its {mean_b_words} spans the {' and '.join(spanned)} regimes, so no regime is "
                "named."
            )
            return words
        agreement = source.metrics.get(f"{last}.regime_agreement", math.nan)
        share = derived_value(source, f"{last}.regime_agreement_share", agreement, REGIME_AGREEMENT)
        sure = "" if math.isnan(agreement) else f"; {share} of the bootstrap resamples agree"
        words.append(
            f"Its regime is read from {mean_b_words}: "
            f"{resolution.regime(min(max(mean_b, 0.0), 1.0))}{sure}."
        )
    return words


def abstraction_with_depth_law(results: dict[str, Result], path: Path) -> TheoryFigure | None:
    """α per layer with the deep-linear-network law through its first and last layers."""
    source = next((r for r in results.values() if per_site(r, "alpha")), None)
    if source is None:
        return None
    from geomlens.theory import abstraction

    alpha = {s: v for s, v in per_site(source, "alpha").items() if not math.isnan(v)}
    if len(alpha) < 3 or any(abs(v) >= 1 for v in alpha.values()):
        return None
    sites = list(alpha)
    depth = len(sites) - 1
    law = abstraction.depth_per_layer(alpha[sites[0]], alpha[sites[-1]], depth)
    figure, axes = _axes("Abstraction across depth")
    positions = np.arange(len(sites))
    low = [source.metrics.get(f"{s}.alpha_ci_low", math.nan) for s in sites]
    high = [source.metrics.get(f"{s}.alpha_ci_high", math.nan) for s in sites]
    axes.plot(positions, [alpha[s] for s in sites], "o-", label="measured α (mean over concepts)")
    axes.fill_between(positions, low, high, alpha=0.2, label="95 % interval of that mean")
    axes.plot(positions, law, "k--", label="balanced deep linear network through the end points")
    axes.set_xticks(positions, [layer_label(s) for s in sites], rotation=45, ha="right", fontsize=7)
    axes.set_ylabel("abstraction cosine α")
    axes.legend(fontsize=8)
    save_figure(figure, path)
    gap = float(np.max(np.abs(np.asarray([alpha[s] for s in sites]) - law)))
    widths = [h - lo for lo, h in zip(low, high) if not (math.isnan(lo) or math.isnan(h))]
    tasks = next((r.get("tasks") for r in source.tables.get("sites", [])), None)
    words = [
        "For a balanced deep linear network the theory says artanh α moves linearly from the "
        "first layer to the last (dashed line, drawn through the model's own end points).",
        "The model departs from that line by at most "
        f"{derived_value(source, f'{sites[-1]}.depth_law_gap', gap, DEPTH_LAW_GAP)}: the "
        "departure is what the "
        "nonlinearities and training of a real network add to the linear picture.",
    ]
    if tasks:
        words.append(f"Each point is the mean α over {tasks}.")
    if widths:
        mean_width = float(np.mean(widths))
        sure = "larger" if gap > mean_width / 2 else "no larger"
        words.append(
            "Its 95 % intervals (tasks and contexts resampled) are "
            + derived_value(
                source, f"{sites[-1]}.alpha_mean_interval_width", mean_width, MEAN_INTERVAL_WIDTH
            )
            + " wide "
            f"on average, so the departure is {sure} than the uncertainty of the points."
        )
    return TheoryFigure("Abstraction against the depth law", path.name, words)


def ssd_bound_with_model(results: dict[str, Result], path: Path) -> TheoryFigure | None:
    """The bound U(N) for the model's measured pool, risk and mismatch, with the N used."""
    source = next((r for r in results.values() if per_site(r, "pool_size")), None)
    if source is None:
        return None
    from geomlens.theory import ssd

    site = list(per_site(source, "pool_size"))[-1]
    metrics = source.metrics
    threshold = metrics.get(f"{site}.vacuity_threshold")
    needed = {
        "P": metrics.get(f"{site}.pool_size"),
        "m": metrics.get(f"{site}.dictionary_size"),
        "V": 2.0**threshold if threshold is not None else None,
        "risk": metrics.get(f"{site}.risk"),
        "N": metrics.get(f"{site}.heldout_sequences"),
    }
    # Only the pool form of the bound is U(N) = C + A/sqrt(N) in these terms; encoders have none.
    if source.config.get("bound_form", "pool") != "pool" or any(
        v is None or math.isnan(v) for v in needed.values()
    ):
        return None
    known: dict[str, float] = {k: v for k, v in needed.items() if v is not None}  # all, above
    eps_loss = metrics.get(f"{site}.epsilon_loss", 0.0)
    eta = metrics.get(f"{site}.eta", 0.0)
    common = {k: known[k] for k in ("P", "m", "V", "risk")}
    common.update(delta=source.config.get("delta", 0.05), a=source.config.get("smoothing", 0.5))
    sizes = np.geomspace(10, max(1e6, known["N"] * 100), 200)
    totals = [ssd.bound(**common, N=n, eps_loss=eps_loss, eta=eta).total for n in sizes]
    crossing = ssd.crossing_size(**common, eps_loss=eps_loss, eta=eta)
    used = ssd.bound(**common, N=known["N"], eps_loss=eps_loss, eta=eta).total
    figure, axes = _axes(f"SSD bound at {layer_label(site)}")
    axes.plot(sizes, totals, label="bound U(N)")
    held_out = metric_value(source, f"{site}.heldout_sequences")
    n_star = derived_value(
        source, f"{site}.n_star_pool", crossing, CROSSING_SIZE, (f"{site}.bound",)
    )
    axes.plot(known["N"], used, "o", label=f"this run, N = {held_out}")
    axes.axhline(math.log2(known["V"]), color="k", linestyle="--", label="log2 V (guessing)")
    if math.isfinite(crossing):
        axes.axvline(crossing, color="tab:red", linestyle="-.", label=f"N* = {n_star}")
    axes.set_xscale("log")
    axes.set_xlabel("held-out sequences N")
    axes.set_ylabel("bits per token")
    axes.legend(fontsize=8)
    save_figure(figure, path)
    saturated = metric_refused(source, f"{site}.bound")
    reached = (
        f"With this run's pool and losses it reaches that line at N* = {n_star}; this run used "
        f"N = {held_out}."
        if saturated is None
        else "This run's pool is saturated, so the curve drawn from it (and its N*) says "
        "nothing about the model and is not read."
    )
    words = [
        "The bound certifies the model's loss on new text from its sparse proxy; it shrinks like "
        "1/√N with the number of held-out sequences N and is useful once below log2 V.",
        reached,
    ]
    return TheoryFigure("Sparse semantic dimension bound", path.name, words)


#: The theory figures' titles by file, for the page when one could not be drawn.
THEORY_TITLES = {
    "theory-resolution.png": "Semantic resolution against the universal front",
    "theory-abstraction.png": "Abstraction against the depth law",
    "theory-ssd.png": "Sparse semantic dimension bound",
}

THEORY_FIGURES: tuple[tuple[str, Callable[[dict[str, Result], Path], TheoryFigure | None]], ...] = (
    ("theory-resolution.png", pareto_with_model),
    ("theory-abstraction.png", abstraction_with_depth_law),
    ("theory-ssd.png", ssd_bound_with_model),
)


def theory_figures(results: dict[str, Result], folder: Path) -> list[TheoryFigure]:
    """Every theory figure the results allow, saved in ``folder``; one that fails to draw is
    kept with its ``error`` (the page shows it, and the report fails)."""
    drawn = []
    for file, draw in THEORY_FIGURES:
        try:
            figure = draw(results, folder / file)
        except Exception as error:  # shown on the page and failing the report, not lost
            title = THEORY_TITLES.get(file, file)
            drawn.append(TheoryFigure(title, file, [], error=f"{type(error).__name__}: {error}"))
            continue
        if figure is not None:
            drawn.append(figure)
    return drawn
