"""Figures of the theory's reference curves, drawn with matplotlib's Agg canvas.

The functions take curves already computed (by `resolution`, `abstraction`, `ssd`) and only
draw them. Each reference figure has three forms:

* ``draw_*(axes, ...)`` draws onto axes you own (a report page, an analysis's own figure);
* ``*_figure(...)`` returns a new :class:`~matplotlib.figure.Figure`;
* ``plot_*(path, ...)`` saves that figure atomically (a temporary file in the destination's
  folder, then a rename), so a reader never sees half a PNG.

Every figure names its parameters in its title and defines its symbols in its legend. Measured
values go on top of any reference figure with ``measured=[Overlay(...)]`` (or
:func:`add_overlays` on axes already drawn); :func:`pareto_point` builds the overlay of a
measured (p_S, p_I). Figures are built as ``Figure`` objects, never through pyplot, so plotting
touches no global backend and leaves no figure open. Import this module lazily; the theory
package itself does not need matplotlib.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from numpy.typing import ArrayLike

from geomlens.atomic_files import atomic_save_figure
from geomlens.theory.resolution import N2_MEANING, PLANE_AXES

Curve = tuple[ArrayLike, ArrayLike]
"""A curve as (p_S values, p_I values)."""

# The n = 2 front's regime boundaries in b (see docs/theory.md and resolution.regime).
_REGIME_SPANS = (
    ("identification regime (b < 1/4)", 0.0, 0.25, "tab:green"),
    ("trade-off regime (1/4 ≤ b ≤ 1/2)", 0.25, 0.5, "tab:orange"),
    ("interference regime (b > 1/2)", 0.5, 1.0, "tab:red"),
)
# Ball measures labelled along the universal front.
_MARKED_B = (0.0, 0.1, 0.25, 0.5, 0.75, 1.0)


@dataclass(frozen=True)
class Overlay:
    """Measured values to draw on a reference figure, in that figure's axis coordinates.

    One point is drawn as a marker, several as a line through markers. ``panel`` picks the
    axes of a figure with several (the collapse figure: 0 = p_S^n, 1 = p_I^n).

    The coordinates of each figure: Pareto front x = p_S, y = p_I (use :func:`pareto_point`);
    collapse x = n, y = p_S^n (panel 0) or p_I^n (panel 1); abstraction x = t, y = α;
    SSD bound x = N, y = U in bits per token.
    """

    x: ArrayLike
    y: ArrayLike
    label: str
    panel: int = 0


def pareto_point(p_s: ArrayLike, p_i: ArrayLike, label: str = "measured") -> Overlay:
    """The overlay of measured (p_S, p_I) (one point, or an empirical curve) on the front."""
    return Overlay(x=p_s, y=p_i, label=label)


def add_overlays(axes: Axes | Sequence[Axes], overlays: Sequence[Overlay]) -> None:
    """Draw measured points or curves on axes already holding a reference figure."""
    panels = [axes] if isinstance(axes, Axes) else list(axes)
    markers = "osD^v*"
    for number, overlay in enumerate(overlays):
        if not 0 <= overlay.panel < len(panels):
            raise ValueError(
                f"Overlay {overlay.label!r} asks for panel {overlay.panel}; this figure has "
                f"panels 0 to {len(panels) - 1}."
            )
        x, y = np.atleast_1d(_array(overlay.x)), np.atleast_1d(_array(overlay.y))
        if x.shape != y.shape:
            raise ValueError(
                f"Overlay {overlay.label!r} has {x.size} x values but {y.size} y values; give "
                "one y per x."
            )
        style = markers[number % len(markers)] + ("-" if x.size > 1 else "")
        panels[overlay.panel].plot(
            x, y, style, color=f"C{(number + 4) % 10}", markersize=7, label=overlay.label
        )
        _legend(panels[overlay.panel])


# -- the p_S / p_I front --------------------------------------------------------------------
def draw_pareto(
    axes: Axes,
    *,
    universal: Curve,
    linear_decay: Curve | None = None,
    noisy: Curve | Mapping[float, Curve] | None = None,
    delta: float = 0.0,
    optimum: tuple[float, float] | None = None,
    universal_b: ArrayLike | None = None,
) -> None:
    """Draw the similarity / identification fronts in the (p_S, p_I) plane onto ``axes``
    (p_S on x, p_I on y, as every figure of that plane in geomlens).

    Args:
        axes: where to draw.
        universal: the universal front of Theorem 1 (Δ = 0), as (p_S, p_I).
        linear_decay: Proposition 1's front for linear-decay similarity on the circle.
        noisy: fronts of Theorem 2, ``{Δ: curve}`` (by convention those of
            ``resolution.NOISE_CURVES``), or one curve for noise ``delta``.
        delta: the noise level of a single ``noisy`` curve, for the title and legend.
        optimum: the (p_S, p_I) point of best similarity accuracy, marked when given.
        universal_b: the ball measure b of each point of ``universal``; when given, the front
            is coloured by regime and labelled with b along it.
    """
    _draw_universal(axes, universal, universal_b)
    fronts = {} if noisy is None else noisy if isinstance(noisy, Mapping) else {delta: noisy}
    for (level, curve), style in zip(sorted(fronts.items()), (":", "-.", (0, (1, 3)), "-")):
        axes.plot(
            _array(curve[0]),
            _array(curve[1]),
            color="grey",
            linestyle=style,
            label=f"front with floor Δ = {level:g} (Theorem 2)",
        )
    if linear_decay is not None:
        axes.plot(
            _array(linear_decay[0]),
            _array(linear_decay[1]),
            linestyle="--",
            color="tab:blue",
            label="linear decay on the circle (Prop. 1)",
        )
    if optimum is not None:
        axes.plot(optimum[0], optimum[1], "k*", markersize=10, label="optimum p_S (b = 1/2)")
    axes.set_xlabel(PLANE_AXES[0])
    axes.set_ylabel(PLANE_AXES[1])
    title = "Semantic resolution, n = 2 candidates"
    axes.set_title(
        title if isinstance(noisy, Mapping) or noisy is None else f"{title}, Δ = {delta:g}"
    )
    _define_symbols(
        axes,
        "p_S: similarity-test accuracy",
        "p_I: identification-test accuracy",
        "b: ball measure (share of stimuli judged alike)",
        N2_MEANING,
        "Δ: similarity outside the ball",
    )


def _draw_universal(axes: Axes, universal: Curve, universal_b: ArrayLike | None) -> None:
    """The universal front: black, or (``universal_b`` given) coloured by regime with a few
    values of b marked along it."""
    p_s, p_i = _array(universal[0]), _array(universal[1])
    if universal_b is None:
        axes.plot(p_s, p_i, color="k", label="universal front (Δ = 0, Theorem 1)")
        return
    b = _array(universal_b)
    for label, low, high, colour in _REGIME_SPANS:
        inside = (b >= low) & (b <= high)
        axes.plot(p_s[inside], p_i[inside], color=colour, linewidth=2.5, label=label)
    axes.plot([], [], " ", label="(coloured: universal front, Δ = 0, Theorem 1)")
    for marked in _MARKED_B:
        at = int(np.argmin(np.abs(b - marked)))
        axes.plot(p_s[at], p_i[at], "k.", markersize=6)
        axes.annotate(
            f"b = {marked:g}",
            (p_s[at], p_i[at]),
            textcoords="offset points",
            xytext=(4, 4),
            fontsize=7,
        )


def pareto_figure(*, measured: Sequence[Overlay] = (), **curves: Any) -> Figure:
    """A new figure of :func:`draw_pareto` (same keyword arguments) with ``measured`` on top."""
    return _one_panel(draw_pareto, measured, curves)


def plot_pareto(
    path: str | os.PathLike[str], *, measured: Sequence[Overlay] = (), **curves: Any
) -> Path:
    """Save the figure of :func:`draw_pareto` (same keyword arguments) to ``path``, the format
    following its suffix, with ``measured`` overlaid."""
    return _save(pareto_figure(measured=measured, **curves), path)


# -- accuracy against the number of candidates -----------------------------------------------
def draw_collapse(
    axes: Sequence[Axes],
    *,
    candidates: ArrayLike,
    curves: Mapping[float, Curve],
    asymptotes: Mapping[float, ArrayLike],
    delta: float = 0.0,
) -> None:
    """Draw p_S^n (``axes[0]``) and p_I^n (``axes[1]``) against the number of candidates n,
    one line per ball measure b, with the 1/(n b) collapse and n = 1/b marked.

    Args:
        axes: two axes, similarity then identification.
        candidates: the numbers of candidates n.
        curves: for each b, the (p_S^n, p_I^n) values at ``candidates``.
        asymptotes: for each b, the large-n collapse of p_I^n (≈ 1/(n b)) at ``candidates``.
        delta: the similarity Δ outside the ball the curves were computed with.
    """
    similarity_axes, identification_axes = axes
    n = _array(candidates)
    for b, (similarity, identification) in curves.items():
        (line,) = similarity_axes.plot(n, _array(similarity), label=f"b = {b:g}")
        identification_axes.plot(n, _array(identification), color=line.get_color())
        identification_axes.plot(n, _array(asymptotes[b]), linestyle=":", color=line.get_color())
        if b > 0 and n.min() <= 1.0 / b <= n.max():
            # Near n ~ 1/b a candidate ball starts to hold another stimulus: p_S^n turns there.
            similarity_axes.axvline(1.0 / b, color=line.get_color(), alpha=0.3, linewidth=0.8)
    similarity_axes.plot(n, 1.0 / n, "k--", label="chance 1/n")
    identification_axes.plot(n, 1.0 / n, "k--", label="chance 1/n")
    identification_axes.plot([], [], "k:", label="collapse 1/(n (b + (1 − b) Δ))")
    similarity_axes.plot([], [], color="grey", alpha=0.3, label="n = 1/b (faint vertical)")
    for panel, name in ((similarity_axes, "p_S^n"), (identification_axes, "p_I^n")):
        panel.set_xscale("log")
        panel.set_yscale("log")
        panel.set_xlabel("candidates n")
        panel.set_ylabel(name)
        # Accuracies are at most 1; the 1/(n b) asymptote is not, at small n.
        panel.set_ylim(top=1.1)
    similarity_axes.set_title(f"similarity test, Δ = {delta:g}")
    identification_axes.set_title(f"identification test, Δ = {delta:g}")
    _define_symbols(
        similarity_axes,
        "p_S^n: similarity-test accuracy, n candidates",
        "b: ball measure (share of stimuli judged alike)",
        N2_MEANING,
        loc="lower left",
    )
    _define_symbols(
        identification_axes,
        "p_I^n: identification-test accuracy, n candidates",
        "Δ: similarity outside the ball",
        loc="lower left",
    )


def collapse_figure(*, measured: Sequence[Overlay] = (), **curves: Any) -> Figure:
    """A new figure of :func:`draw_collapse` (same keyword arguments, less ``axes``) with
    ``measured`` on top (panel 0 or 1)."""
    figure = Figure(figsize=(11, 4.8), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(1, 2)
    draw_collapse(axes, **curves)
    add_overlays(axes, measured)
    return figure


def plot_collapse(
    path: str | os.PathLike[str], *, measured: Sequence[Overlay] = (), **curves: Any
) -> Path:
    """Save the figure of :func:`draw_collapse` (same keyword arguments) to ``path``, the format
    following its suffix, with ``measured`` overlaid."""
    return _save(collapse_figure(measured=measured, **curves), path)


# -- abstraction dynamics ---------------------------------------------------------------------
def draw_abstraction(
    axes: Axes,
    *,
    times: ArrayLike,
    alpha: ArrayLike,
    alpha_terminal: float,
    alpha_max: float,
    parameters: Mapping[str, float] | None = None,
    plateau_level: float = 0.95,
) -> None:
    """Draw the abstraction cosine α(t) on a logarithmic time axis with its landmarks.

    Args:
        axes: where to draw.
        times: training times.
        alpha: α at ``times``.
        alpha_terminal: α_∞, the long-time limit.
        alpha_max: the peak of the trajectory.
        parameters: shown in the title, e.g. ``{"ν_x": 0.5, "ν_y": 0.2, "κ": 1e-3, "γ": 1}``.
        plateau_level: α above this is shaded as the near-perfect plateau.
    """
    t, a = _array(times), _array(alpha)
    axes.plot(t, a, label="α(t)")
    axes.axhline(alpha_terminal, color="k", linestyle="--", label=f"α_∞ = {alpha_terminal:.4f}")
    axes.axhline(alpha_max, color="grey", linestyle=":", label=f"α_max = {alpha_max:.4f}")
    above = t[a >= plateau_level]
    if above.size:
        axes.axvspan(
            above.min(),
            above.max(),
            color="tab:green",
            alpha=0.12,
            label=f"plateau (α ≥ {plateau_level:g})",
        )
    axes.set_xscale("log")
    axes.set_xlabel("training time t")
    axes.set_ylabel("abstraction cosine α")
    axes.set_title("Abstraction of the two-layer linear network" + _parameter_text(parameters))
    _define_symbols(
        axes,
        "α: cosine of the hidden layer's concept directions across contexts",
        "ν_x, ν_y: inverse signal-to-noise of inputs and targets",
        "κ: initial weight scale;  γ: inverse ridge penalty",
    )


def abstraction_figure(*, measured: Sequence[Overlay] = (), **curves: Any) -> Figure:
    """A new figure of :func:`draw_abstraction` (same keyword arguments), ``measured`` on top."""
    return _one_panel(draw_abstraction, measured, curves)


def plot_abstraction(
    path: str | os.PathLike[str], *, measured: Sequence[Overlay] = (), **curves: Any
) -> Path:
    """Save the figure of :func:`draw_abstraction` (same keyword arguments) to ``path``, the format
    following its suffix, with ``measured`` overlaid."""
    return _save(abstraction_figure(measured=measured, **curves), path)


# -- the SSD bound ----------------------------------------------------------------------------
def draw_ssd(
    axes: Axes,
    *,
    sizes: ArrayLike,
    totals: ArrayLike,
    floor: float,
    threshold: float,
    crossing: float,
    evaluated: tuple[float, float] | None = None,
    parameters: Mapping[str, float] | None = None,
) -> None:
    """Draw the bound U against the held-out size N with the vacuity threshold log2 V.

    Args:
        axes: where to draw.
        sizes: held-out sizes N.
        totals: the bound U at ``sizes``.
        floor: the N-independent part C = R̂ + ε̂_loss + B η̂ that U tends to.
        threshold: log2 V.
        crossing: N*, marked when finite.
        evaluated: an (N, U) point to mark, such as the held-out size actually used.
        parameters: shown in the title, e.g. ``{"P": 40, "m": 4096, "V": 50257, "δ": 0.05}``.
    """
    totals = _array(totals)
    axes.plot(_array(sizes), totals, label="bound U(N)")
    if evaluated is not None:
        axes.plot(*evaluated, "o", color="tab:blue", label=f"N = {evaluated[0]:.4g}")
    axes.axhline(threshold, color="k", linestyle="--", label=f"log2 V = {threshold:.4g}")
    axes.axhline(floor, color="grey", linestyle=":", label=f"floor C = {floor:.4g}")
    if np.isfinite(crossing):
        axes.axvline(crossing, color="tab:red", linestyle="-.", label=f"N* = {crossing:.4g}")
    axes.set_xscale("log")
    # U(N) grows like 1/sqrt(N) at small N; show the region around the threshold.
    top = min(totals.max(), 3.0 * max(threshold, floor)) * 1.05
    axes.set_ylim(0.0, top)
    axes.axhspan(threshold, max(top, threshold), color="tab:red", alpha=0.08, label="vacuous")
    axes.set_xlabel("held-out sequences N")
    axes.set_ylabel("bits per token")
    axes.set_title("SSD generalisation bound" + _parameter_text(parameters))
    _define_symbols(
        axes,
        "U: bound on the model's held-out loss",
        "N*: smallest N with U < log2 V",
        "C = R̂ + ε̂_loss + B η̂: risk, loss gap, pool mismatch",
        "P: pool size; m: dictionary size; V: vocabulary",
        "δ: failure probability of the bound",
    )


def ssd_figure(*, measured: Sequence[Overlay] = (), **curves: Any) -> Figure:
    """A new figure of :func:`draw_ssd` (same keyword arguments), ``measured`` on top."""
    return _one_panel(draw_ssd, measured, curves)


def plot_ssd(
    path: str | os.PathLike[str], *, measured: Sequence[Overlay] = (), **curves: Any
) -> Path:
    """Save the figure of :func:`draw_ssd` (same keyword arguments) to ``path``, the format
    following its suffix, with ``measured`` overlaid."""
    return _save(ssd_figure(measured=measured, **curves), path)


# -- shared --------------------------------------------------------------------------------
def _define_symbols(axes: Axes, *definitions: str, loc: str = "outside") -> None:
    """Add each symbol's definition to the legend (an entry without a line); ``"outside"``
    puts the legend right of the axes, clear of the curves."""
    for text in definitions:
        axes.plot([], [], " ", label=text)
    axes._geomlens_legend_loc = loc  # type: ignore[attr-defined]  # overlays redraw it there
    _legend(axes)


def _legend(axes: Axes) -> None:
    loc: Any = getattr(axes, "_geomlens_legend_loc", "best")  # a location matplotlib takes
    if loc == "outside":
        axes.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=7)
    else:
        axes.legend(loc=loc, fontsize=7)


def _parameter_text(parameters: Mapping[str, float] | None) -> str:
    if not parameters:
        return ""
    return "\n" + ", ".join(f"{name} = {value:g}" for name, value in parameters.items())


def _one_panel(
    draw: Callable[..., None], measured: Sequence[Overlay], curves: Mapping[str, Any]
) -> Figure:
    """A new one-panel figure drawn by ``draw(axes, **curves)``, ``measured`` on top."""
    figure, axes = _figure()
    draw(axes, **curves)
    add_overlays(axes, measured)
    return figure


def _figure() -> tuple[Figure, Axes]:
    figure = Figure(figsize=(10, 5), layout="constrained")
    FigureCanvasAgg(figure)
    return figure, figure.subplots()


def _array(values: ArrayLike) -> np.ndarray:
    return np.asarray(values, dtype=float)


def _save(figure: Figure, path: str | os.PathLike[str]) -> Path:
    destination = Path(path)
    image_format = destination.suffix.lstrip(".").lower() or "png"
    return atomic_save_figure(figure, destination, format=image_format, dpi=120)
