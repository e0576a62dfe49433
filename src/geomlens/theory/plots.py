"""Figures of the theory's reference curves, drawn with matplotlib's Agg canvas.

The functions take curves already computed (by `resolution`, `abstraction`, `ssd`) and only
draw them. They build `Figure` objects directly rather than through pyplot, so that plotting
never touches a global backend or leaves figures open. Every figure is written atomically: to
a temporary file in the destination's folder, then renamed over the destination, so a reader
never sees half a PNG. Import this module lazily; the theory package itself does not need
matplotlib.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from numpy.typing import ArrayLike

Curve = tuple[ArrayLike, ArrayLike]
"""A curve as (p_S values, p_I values)."""


def plot_pareto(
    path: str | os.PathLike[str],
    *,
    universal: Curve,
    linear_decay: Curve,
    noisy: Curve | None = None,
    delta: float = 0.0,
    optimum: tuple[float, float] | None = None,
) -> Path:
    """Draw the similarity / identification fronts in the (p_I, p_S) plane and save them.

    Args:
        path: destination image; the format follows its suffix.
        universal: the universal front of Theorem 1 (Δ = 0).
        linear_decay: Proposition 1's front for linear-decay similarity on the circle.
        noisy: the front of Theorem 2 for noise ``delta``, drawn when given.
        delta: the noise level of ``noisy``, for the legend.
        optimum: the (p_S, p_I) point of best similarity accuracy, marked when given.
    """
    figure, axes = _figure()
    axes.plot(_array(universal[1]), _array(universal[0]), label="universal front (Δ = 0)")
    if noisy is not None:
        axes.plot(_array(noisy[1]), _array(noisy[0]), label=f"front with Δ = {delta:g}")
    axes.plot(
        _array(linear_decay[1]),
        _array(linear_decay[0]),
        linestyle="--",
        label="linear decay on the circle (Prop. 1)",
    )
    if optimum is not None:
        axes.plot(optimum[1], optimum[0], "k*", markersize=10, label="optimum p_S")
    axes.set_xlabel("identification accuracy p_I")
    axes.set_ylabel("similarity accuracy p_S")
    axes.set_title("Semantic resolution: the p_S / p_I trade-off")
    axes.legend(loc="best")
    return _save_atomically(figure, path)


def plot_collapse(
    path: str | os.PathLike[str],
    *,
    candidates: ArrayLike,
    curves: Mapping[float, Curve],
    asymptotes: Mapping[float, ArrayLike],
) -> Path:
    """Draw p_S^n and p_I^n against the number of candidates n, one line per ball measure b.

    Args:
        path: destination image; the format follows its suffix.
        candidates: the numbers of candidates n.
        curves: for each b, the (p_S^n, p_I^n) values at ``candidates``.
        asymptotes: for each b, the large-n collapse of p_I^n (≈ 1/(n b)) at ``candidates``.
    """
    n = _array(candidates)
    figure = Figure(figsize=(11, 4.5), layout="constrained")
    FigureCanvasAgg(figure)
    similarity_axes, identification_axes = figure.subplots(1, 2)
    for b, (similarity, identification) in curves.items():
        (line,) = similarity_axes.plot(n, _array(similarity), label=f"b = {b:g}")
        identification_axes.plot(n, _array(identification), color=line.get_color())
        identification_axes.plot(n, _array(asymptotes[b]), linestyle=":", color=line.get_color())
    similarity_axes.plot(n, 1.0 / n, "k--", label="chance 1/n")
    identification_axes.plot(n, 1.0 / n, "k--")
    for axes, name in ((similarity_axes, "p_S^n"), (identification_axes, "p_I^n")):
        axes.set_xscale("log")
        axes.set_yscale("log")
        axes.set_xlabel("candidates n")
        axes.set_ylabel(name)
        # Accuracies are at most 1; the 1/(n b) asymptote is not, at small n.
        axes.set_ylim(top=1.1)
    similarity_axes.set_title("similarity test")
    identification_axes.set_title("identification test (dotted: 1/(n b))")
    similarity_axes.legend(loc="lower left")
    return _save_atomically(figure, path)


def plot_abstraction(
    path: str | os.PathLike[str],
    *,
    times: ArrayLike,
    alpha: ArrayLike,
    alpha_terminal: float,
    alpha_max: float,
) -> Path:
    """Draw the abstraction cosine α(t) on a logarithmic time axis with its landmarks.

    Args:
        path: destination image; the format follows its suffix.
        times: training times.
        alpha: α at ``times``.
        alpha_terminal: α_∞, the long-time limit.
        alpha_max: the peak of the trajectory.
    """
    figure, axes = _figure()
    axes.plot(_array(times), _array(alpha), label="α(t)")
    axes.axhline(alpha_terminal, color="k", linestyle="--", label=f"α_∞ = {alpha_terminal:.4f}")
    axes.axhline(alpha_max, color="grey", linestyle=":", label=f"α_max = {alpha_max:.4f}")
    axes.set_xscale("log")
    axes.set_xlabel("training time t")
    axes.set_ylabel("abstraction cosine α")
    axes.set_title("Abstraction dynamics of the two-layer linear network")
    axes.legend(loc="best")
    return _save_atomically(figure, path)


def plot_ssd(
    path: str | os.PathLike[str],
    *,
    sizes: ArrayLike,
    totals: ArrayLike,
    floor: float,
    threshold: float,
    crossing: float,
    evaluated: tuple[float, float] | None = None,
) -> Path:
    """Draw the bound U against the held-out size N with the vacuity threshold log2 V.

    Args:
        path: destination image; the format follows its suffix.
        sizes: held-out sizes N.
        totals: the bound U at ``sizes``.
        floor: the N-independent part C = R̂ + ε̂_loss + B η̂ that U tends to.
        threshold: log2 V.
        crossing: N*, marked when finite.
        evaluated: an (N, U) point to mark, such as the held-out size actually used.
    """
    figure, axes = _figure()
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
    axes.set_ylim(0.0, min(totals.max(), 3.0 * max(threshold, floor)) * 1.05)
    axes.set_xlabel("held-out sequences N")
    axes.set_ylabel("bits per token")
    axes.set_title("SSD generalisation bound")
    axes.legend(loc="best")
    return _save_atomically(figure, path)


def _figure() -> tuple[Figure, Axes]:
    figure = Figure(figsize=(6.5, 4.5), layout="constrained")
    FigureCanvasAgg(figure)
    return figure, figure.subplots()


def _array(values: ArrayLike) -> np.ndarray:
    return np.asarray(values, dtype=float)


def _save_atomically(figure: Figure, path: str | os.PathLike[str]) -> Path:
    destination = Path(path)
    image_format = destination.suffix.lstrip(".").lower() or "png"
    destination.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(
        dir=destination.parent, prefix=f".{destination.name}.", suffix=".tmp"
    )
    try:
        with os.fdopen(descriptor, "wb") as handle:
            figure.savefig(handle, format=image_format, dpi=120)
        # mkstemp makes owner-only files; give the figure a plain open()'s mode (0o666 − umask).
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, destination)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
        raise
    return destination
