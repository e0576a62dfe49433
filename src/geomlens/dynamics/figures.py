"""One figure per analysis of a sweep: the headline metric against time at each site with the
theory overlaid (left), and across layers at a few checkpoints with the per-layer law (right).

The time axis always shows t = 0: linear when the checkpoints are evenly spread, symmetric-log
(linear near 0) when they span several decades. The title states the depth and the theory level.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from geomlens.atomic_files import atomic_save_figure
from geomlens.dynamics.overlay import site_layer
from geomlens.dynamics.trajectory import followed_metrics


def draw_analysis(
    outcome: Any, analysis: str, path: Path, record: Mapping[str, Any]
) -> Path | None:
    """Draw ``analysis``'s trajectory into ``path``; None when it has no rows."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    rows = [r for r in outcome.rows if r["analysis"] == analysis and r["value"] is not None]
    if not rows:
        return None
    present = {r["metric"] for r in rows}
    metric = next((m for m in followed_metrics(analysis) if m in present), rows[0]["metric"])
    task = next(r["task"] for r in rows if r["metric"] == metric)
    rows = [r for r in rows if r["metric"] == metric and r["task"] == task]
    sites = sorted({r["site"] for r in rows}, key=lambda s: (site_layer(s) or -1, s))
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), width_ratios=(3, 2))
    _trajectories(left, rows, sites)
    theory = record.get("theory", {})
    exact_summary = theory.get("exact")
    if isinstance(exact_summary, Mapping) and "alpha_max" in exact_summary and metric == "alpha":
        left.axhline(exact_summary["alpha_infinity"], color="grey", ls=":", lw=0.8, label="α∞")
        if exact_summary.get("peak_resolved"):
            left.axhline(exact_summary["alpha_max"], color="C3", ls=":", lw=0.8, label="α_max")
    clock = record.get("time", "auto") != "step" and any(
        "time" in c for c in record.get("series", {}).get("checkpoints", [])
    )
    _time_axis(left, [r["time"] for r in rows], clock)
    left.set_ylabel(metric)
    left.legend(fontsize=7, loc="best")
    toy = theory.get("toy_front")
    if isinstance(toy, Mapping) and toy.get("points"):
        _front_panel(right, toy["points"])
    elif len([s for s in sites if site_layer(s) is not None]) < 2 and any(
        r["residual_exact"] is not None for r in rows
    ):
        _residual_panel(right, rows, clock)
    else:
        _layer_panel(right, rows, sites, metric)
    figure.suptitle(_title(analysis, sites, record), fontsize=10)
    figure.tight_layout()
    atomic_save_figure(figure, path, dpi=110)
    plt.close(figure)
    return path


def _trajectories(axis: Any, rows: Sequence[Mapping[str, Any]], sites: Sequence[str]) -> None:
    """The metric against time, one colour per site and one line per seed, with its interval
    where every point has one and the exact theory (dashed, once per site) where it is known."""
    import matplotlib.pyplot as plt

    seeds = sorted({r["seed"] for r in rows}, key=lambda s: -1 if s is None else s)
    colours = plt.get_cmap("viridis")(np.linspace(0, 0.9, max(len(sites), 1)))
    for colour, site in zip(colours, sites):
        for index, seed in enumerate(seeds):
            mine = sorted(
                (r for r in rows if r["site"] == site and r["seed"] == seed),
                key=lambda r: r["time"],
            )
            times = np.array([r["time"] for r in mine])
            values = np.array([r["value"] for r in mine])
            axis.plot(times, values, "-", color=colour, lw=1.2, label=site if index == 0 else None)
            lows = [r["ci_low"] for r in mine]
            if all(v is not None for v in lows) and mine:
                highs = [r["ci_high"] for r in mine]
                axis.fill_between(times, lows, highs, color=colour, alpha=0.15, lw=0)
            exact = [r["theory_exact"] for r in mine]
            if index == 0 and all(v is not None for v in exact) and mine:
                label = "exact theory" if site == sites[-1] else None
                axis.plot(times, exact, "--", color="k", lw=0.8, label=label)


def _title(analysis: str, sites: Sequence[str], record: Mapping[str, Any]) -> str:
    """The figure's title: the analysis, the series, the depth and the theory level in words."""
    depth = len({site_layer(s) for s in sites if site_layer(s) is not None}) or len(sites)
    level = record.get("theory", {}).get("level", "none")
    statement = {
        "exact": "exact theory of the declared setup",
        "laws": "parameter-free laws (diagnostics; need not hold on a trained model)",
        "none": "no theory",
    }.get(level, level)
    source = record.get("series", {}).get("source", "")
    return f"{analysis} across training · {Path(str(source)).name} · depth {depth} · theory: {statement}"


def _time_axis(axis: Any, times: Sequence[float], clock: bool) -> None:
    """Label the x axis, show t = 0, and go symmetric-log when the times span decades."""
    positive = [t for t in times if t > 0]
    axis.set_xlabel("Σ learning rate (time t)" if clock else "training step")
    if positive and max(positive) / min(positive) > 100:
        axis.set_xscale("symlog", linthresh=min(positive))
    axis.set_xlim(left=0)


def _residual_panel(axis: Any, rows: Sequence[Mapping[str, Any]], clock: bool) -> None:
    """Measured minus exact theory against time (gradient descent's O(lr) gap to the flow)."""
    mine = sorted((r for r in rows if r["residual_exact"] is not None), key=lambda r: r["time"])
    axis.plot([r["time"] for r in mine], [r["residual_exact"] for r in mine], "-", color="C3")
    axis.axhline(0, color="grey", lw=0.5)
    _time_axis(axis, [r["time"] for r in mine], clock)
    axis.set_ylabel("measured − exact")


def _front_panel(axis: Any, points: Sequence[Mapping[str, Any]]) -> None:
    """(p_S, p_I) of every checkpoint, coloured by step, on the linear-decay front, and the
    distance to that front in an inset against the step."""
    from geomlens.theory import resolution

    inset = axis.inset_axes((0.12, 0.62, 0.4, 0.33))
    for seed in dict.fromkeys(p["seed"] for p in points):
        mine = [p for p in points if p["seed"] == seed]
        inset.plot([p["step"] for p in mine], [p["front_distance"] for p in mine], lw=0.8)
    inset.set_title("distance to the front", fontsize=7)
    inset.tick_params(labelsize=6)
    inset.set_xlim(left=0)

    front = resolution.linear_decay_front(401)
    axis.plot(front.p_s, front.p_i, "k-", lw=1, label="linear-decay front (Prop. 1)")
    steps = [p["step"] for p in points]
    drawn = axis.scatter(
        [p["p_similarity"] for p in points], [p["p_identification"] for p in points],
        c=steps, cmap="viridis", s=14, zorder=3,
    )  # fmt: skip
    axis.figure.colorbar(drawn, ax=axis, label="step")
    axis.set_xlabel("p_S (similarity)")
    axis.set_ylabel("p_I (identification)")
    axis.legend(fontsize=7, loc="lower left")


def _layer_panel(
    axis: Any, rows: Sequence[Mapping[str, Any]], sites: Sequence[str], metric: str
) -> None:
    layered = [s for s in sites if site_layer(s) is not None]
    labels = sorted({(r["time"], r["checkpoint"]) for r in rows if r["seed"] == rows[0]["seed"]})
    if len(layered) < 2 or not labels:
        axis.set_axis_off()
        axis.text(0.5, 0.5, "one layer: no per-layer panel", ha="center", va="center", fontsize=8)
        return
    picks = [labels[0], labels[len(labels) // 2], labels[-1]]
    for colour, (moment, label) in zip(("C0", "C1", "C2"), dict.fromkeys(picks)):
        mine = {r["site"]: r for r in rows if r["checkpoint"] == label}
        layers = [site_layer(s) for s in layered if s in mine]
        values = [mine[s]["value"] for s in layered if s in mine]
        axis.plot(layers, values, "o-", color=colour, label=f"{label} (t = {moment:g})")
        law = [mine[s]["theory_layer_law"] for s in layered if s in mine]
        law_layers = [lay for lay, v in zip(layers, law) if v is not None]
        if law_layers:
            axis.plot(law_layers, [v for v in law if v is not None], "x--", color=colour, lw=0.8)
    axis.set_xlabel("layer (× and dashes: per-layer artanh law)")
    axis.set_ylabel(metric)
    axis.legend(fontsize=7)
