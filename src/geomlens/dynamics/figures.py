"""One figure per analysis of a sweep: the headline metric against time at each site with the
theory overlaid (left), and across layers at a few checkpoints with the per-layer law (right);
under them, the training record (loss, learning rate) where the series kept one.

The time axis always shows t = 0: linear when the checkpoints are evenly spread, symmetric-log
(linear near 0) when they span several decades, labelled in the series' own unit (Σ learning
rate, step or epoch). The exact theory is drawn as a curve through ≥ 200 times between the first
and the last checkpoint, so a peak the checkpoints miss is visible, and named in the panel's
title. Several seeds: each seed's line faint, their mean bold, the interval across seeds as a
band. A checkpoint whose weights equal an earlier one's is a hollow mark, not a point of the
line. Legends sit below their panel, never over the data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from geomlens.atomic_files import atomic_save_figure
from geomlens.dynamics.overlay import ExactAbstraction, site_layer
from geomlens.dynamics.trajectory import SUMMARY_SITE, across_seeds, followed_metrics

#: Times at which the exact theory's curve is drawn between the first and last checkpoint.
CURVE_POINTS = 400
MISSED_PEAK = "the checkpoints miss the peak at t = {time:.3g}"
#: The analysis whose λ̂(t) is drawn beside every other analysis's curve on one time axis.
LLC = "llc"


def draw_analysis(
    outcome: Any, analysis: str, path: Path, record: Mapping[str, Any]
) -> Path | None:
    """Draw ``analysis``'s trajectory into ``path``; None when it has no rows."""
    import matplotlib.pyplot as plt

    figure = analysis_figure(outcome, analysis, record)
    if figure is None:
        return None
    atomic_save_figure(figure, path, dpi=110)
    plt.close(figure)
    return path


def analysis_figure(outcome: Any, analysis: str, record: Mapping[str, Any]) -> Any:
    """The matplotlib figure of ``analysis``'s trajectory (None when it has no rows)."""
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
    series = record.get("series", {})
    clock = record.get("time", "auto") != "step" and any(
        "time" in c for c in series.get("checkpoints", [])
    )
    unit = "Σ learning rate (time t)" if clock else str(series.get("step_unit", "training step"))
    trained = _has_training_record(outcome.rows)
    figure = plt.figure(figsize=(11, 6.4 if trained else 4.8), layout="constrained")
    grid = figure.add_gridspec(2 if trained else 1, 2, width_ratios=(3, 2),
                               height_ratios=(3, 1.3) if trained else None)  # fmt: skip
    left, right = figure.add_subplot(grid[0, 0]), figure.add_subplot(grid[0, 1])
    _trajectories(left, rows, sites)
    _stage_marks(left, rows, record)
    _exact_overlay(left, rows, record, metric, sites)
    _time_axis(left, [r["time"] for r in rows], unit)
    left.set_ylabel(metric)
    _legend_below(left)
    if analysis != LLC:
        _llc_beside(left, outcome.rows)
    _right_panel(right, rows, sites, metric, record, unit)
    if trained:
        _training_panel(figure.add_subplot(grid[1, 0], sharex=left), outcome.rows, analysis, unit)
    figure.suptitle(_title(analysis, sites, record), fontsize=10)
    return figure


def _llc_beside(axis: Any, rows: Sequence[Mapping[str, Any]]) -> None:
    """The sweep's λ̂(t) (the llc analysis, mean over seeds at each time, its interval over
    chains as a band) on a right-hand scale of the same time axis, when the sweep measured it."""
    points = [
        r for r in rows if r["analysis"] == LLC and r["metric"] == LLC and r["value"] is not None
    ]
    if not points:
        return
    times = sorted({r["time"] for r in points if not r.get("duplicate_of")})
    at = [[r for r in points if r["time"] == t and not r.get("duplicate_of")] for t in times]
    twin = axis.twinx()
    twin.plot(times, [np.mean([r["value"] for r in rs]) for rs in at], "s--", color="0.35",
              lw=1, ms=3)  # fmt: skip
    if all(r["ci_low"] is not None and r["ci_high"] is not None for rs in at for r in rs):
        twin.fill_between(times, [np.mean([r["ci_low"] for r in rs]) for rs in at],
                          [np.mean([r["ci_high"] for r in rs]) for rs in at], color="0.35",
                          alpha=0.1, lw=0)  # fmt: skip
    twin.set_ylabel("LLC λ̂ (grey squares)", color="0.35")
    axis.set_zorder(twin.get_zorder() + 1)  # the analysis's own curves over λ̂'s band
    axis.patch.set_visible(False)


def _has_training_record(rows: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the table holds a training loss, or a learning rate that changes."""
    rates = {r.get("learning_rate") for r in rows} - {None}
    return any(r.get("train_loss") is not None for r in rows) or len(rates) > 1


def _right_panel(
    axis: Any,
    rows: Sequence[Mapping[str, Any]],
    sites: Sequence[str],
    metric: str,
    record: Mapping[str, Any],
    unit: str,
) -> None:
    toy = record.get("theory", {}).get("toy_front")
    if isinstance(toy, Mapping) and toy.get("points"):
        _front_panel(axis, toy["points"], unit)
    elif len([s for s in sites if site_layer(s) is not None]) < 2 and any(
        r["residual_exact"] is not None for r in rows
    ):
        _residual_panel(axis, rows, unit)
    else:
        _layer_panel(axis, rows, sites, metric, unit)


def _legend_below(axis: Any, columns: int = 3) -> None:
    """The panel's legend under its x axis (outside the data), when it has entries."""
    handles, labels = axis.get_legend_handles_labels()
    if handles:
        axis.legend(
            handles, labels, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2),
            ncol=columns, frameon=False,
        )  # fmt: skip


def _line(rows: Sequence[Mapping[str, Any]], seed: Any) -> tuple[np.ndarray, np.ndarray]:
    """The times and values of one seed's independent points (duplicates left out)."""
    mine = sorted(
        (r for r in rows if r["seed"] == seed and not r.get("duplicate_of")),
        key=lambda r: r["time"],
    )
    return np.array([r["time"] for r in mine]), np.array([r["value"] for r in mine])


def _trajectories(axis: Any, rows: Sequence[Mapping[str, Any]], sites: Sequence[str]) -> None:
    """The metric against time, one colour per site: one line (and its interval where every
    point has one), or with several seeds each seed faint, their mean bold and a band."""
    import matplotlib.pyplot as plt

    seeds = sorted({r["seed"] for r in rows}, key=lambda s: -1 if s is None else s)
    several = len(seeds) > 1
    colours = plt.get_cmap("viridis")(np.linspace(0, 0.9, max(len(sites), 1)))
    for colour, site in zip(colours, sites):
        mine = [r for r in rows if r["site"] == site]
        for seed in seeds:
            times, values = _line(mine, seed)
            axis.plot(times, values, ".-", ms=3, color=colour, lw=0.8 if several else 1.4,
                      alpha=0.3 if several else 1.0, label=None if several else site)  # fmt: skip
            ends = [r for r in mine if r["seed"] == seed and not r.get("duplicate_of")]
            if not several and ends and all(r["ci_low"] is not None for r in ends):
                ends.sort(key=lambda r: r["time"])
                lows, highs = [r["ci_low"] for r in ends], [r["ci_high"] for r in ends]
                axis.fill_between(times, lows, highs, color=colour, alpha=0.15, lw=0)
        if several:
            _seed_mean(axis, mine, colour, site, len(seeds))
        _duplicate_marks(axis, mine, colour)


#: How each stage is marked on its curve: (marker, legend words).
STAGE_MARKS = {
    "peak_time": ("*", "peak"),
    "plateau_end": ("D", "plateau ends"),
    "settled_time": ("s", "settles"),
}


def _stage_marks(axis: Any, rows: Sequence[Mapping[str, Any]], record: Mapping[str, Any]) -> None:
    """Each site's peak, plateau end and settling time (the mean over seeds where there are
    several) as black marks on its curve (``dynamics.stages``)."""
    from geomlens.dynamics.stages import stage_table

    labelled: set[str] = set()
    for entry in stage_table(rows, record.get("theory", {})):
        stages = entry.get("across_seeds") or next(iter(entry["seeds"].values()))
        curve = sorted(
            (r["time"], r["value"]) for r in rows
            if r["site"] == entry["site"] and not r.get("duplicate_of")
        )  # fmt: skip
        times = sorted({t for t, _ in curve})
        means = [np.mean([v for t, v in curve if t == moment]) for moment in times]
        for name, (marker, words) in STAGE_MARKS.items():
            moment = stages[name]["mean"] if "across_seeds" in entry else stages[name]
            if moment is None:
                continue
            axis.plot([moment], [np.interp(moment, times, means)], marker, color="k", ms=5,
                      mfc="white", zorder=5, label=None if words in labelled else words)  # fmt: skip
            labelled.add(words)


def _seed_mean(
    axis: Any, rows: Sequence[Mapping[str, Any]], colour: Any, site: str, count: int
) -> None:
    """The mean over seeds (bold) and the interval across seeds (band, in the metric's range)."""
    summary = sorted(across_seeds(rows), key=lambda r: r["time"])
    times = np.array([r["time"] for r in summary])
    words = f"bold: mean of {count} seeds; faint: each seed"
    if words not in axis.get_legend_handles_labels()[1]:
        axis.plot([], [], "-", color="grey", lw=2.2, label=words)
    axis.plot(times, [r["mean"] for r in summary], "-", color=colour, lw=2.2, label=site)
    banded = [r for r in summary if r["ci_low"] is not None]
    if banded:
        band = "95 % interval across seeds"
        axis.fill_between(
            [r["time"] for r in banded], [r["ci_low"] for r in banded],
            [r["ci_high"] for r in banded], color=colour, alpha=0.2, lw=0,
            label=None if band in axis.get_legend_handles_labels()[1] else band,
        )  # fmt: skip


def _duplicate_marks(axis: Any, rows: Sequence[Mapping[str, Any]], colour: Any) -> None:
    """Checkpoints whose weights equal an earlier one's: hollow marks, outside the line."""
    twins = [r for r in rows if r.get("duplicate_of")]
    if twins:
        labelled = any(t.startswith("same weights") for t in axis.get_legend_handles_labels()[1])
        axis.scatter([r["time"] for r in twins], [r["value"] for r in twins], s=30,
                     facecolors="none", edgecolors=colour, zorder=4,
                     label=None if labelled else "same weights as an earlier checkpoint")  # fmt: skip


def _exact_overlay(
    axis: Any,
    rows: Sequence[Mapping[str, Any]],
    record: Mapping[str, Any],
    metric: str,
    sites: Sequence[str],
) -> None:
    """The exact α(t) as a curve between the first and last checkpoint at every site it
    covers, α_∞ and α_max, and the peak where the checkpoints miss it (marked and named)."""
    block = _exact_block(record)
    if metric != "alpha" or block is None:
        return
    theory = ExactAbstraction.from_parameters(block)
    clocks = _clocks(record)
    pairs = sorted({(clocks.get(r["checkpoint"], r["time"]), r["time"]) for r in rows})
    if len(pairs) < 2:
        return
    moments = np.linspace(pairs[0][0], pairs[-1][0], CURVE_POINTS)
    shown = np.interp(moments, [p[0] for p in pairs], [p[1] for p in pairs])
    for site in sites:
        layer = theory.layer_of(site)
        if layer is not None:
            axis.plot(shown, theory.alpha(moments, layer), "--", color="k", lw=0.8,
                      label="exact theory" if site == sites[-1] else None)  # fmt: skip
    axis.axhline(block["alpha_infinity"], color="grey", ls=":", lw=0.8, label="α∞")
    axis.axhline(block["alpha_max"], color="C3", ls=":", lw=0.8, label="α_max")
    peak = block.get("peak_time")
    if not block.get("peak_resolved") and peak is not None and pairs[0][0] <= peak <= pairs[-1][0]:
        where = float(np.interp(peak, [p[0] for p in pairs], [p[1] for p in pairs]))
        note = MISSED_PEAK.format(time=peak)
        axis.plot([where], [block["alpha_max"]], "v", color="C3", ms=7, label=note)
        axis.set_title(note, fontsize=8, color="C3")


def _exact_block(record: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """sweep.json's exact theory (the first seed's when each seed has its own), or None."""
    exact = record.get("theory", {}).get("exact")
    if not isinstance(exact, Mapping):
        return None
    if "alpha_max" not in exact:
        exact = next((v for v in exact.values() if isinstance(v, Mapping)), {})
    return exact if "sigma_x" in exact and "alpha_max" in exact else None


def _clocks(record: Mapping[str, Any]) -> dict[str, float]:
    """Each checkpoint's time on the theory's clock (Σ lr where recorded, else its step)."""
    return {
        c["label"]: float(c.get("time", c["step"]))
        for c in record.get("series", {}).get("checkpoints", [])
    }


def _title(analysis: str, sites: Sequence[str], record: Mapping[str, Any]) -> str:
    """The figure's title: the analysis, the series, the depth (the declared setup's, else the
    layers measured) and the theory level in words."""
    block = _exact_block(record)
    layers = {site_layer(s) for s in sites if site_layer(s) is not None}
    depth = (
        f" · depth {block['depth']}"
        if block is not None
        else (f" · {len(layers)} layers" if len(layers) > 1 else "")
    )
    level = record.get("theory", {}).get("level", "none")
    statement = {
        "exact": "exact theory of the declared setup",
        "laws": "parameter-free laws (diagnostics; need not hold on a trained model)",
        "none": "no theory",
    }.get(level, level)
    source = Path(str(record.get("series", {}).get("source", ""))).name
    return f"{analysis} across training · {source}{depth} · theory: {statement}"


def _time_axis(axis: Any, times: Sequence[float], unit: str) -> None:
    """Label the x axis, show t = 0, and go symmetric-log when the times span decades."""
    positive = [t for t in times if t > 0]
    axis.set_xlabel(unit)
    if positive and max(positive) / min(positive) > 100:
        axis.set_xscale("symlog", linthresh=min(positive))
    axis.set_xlim(left=0)


def _training_panel(axis: Any, rows: Sequence[Mapping[str, Any]], analysis: str, unit: str) -> None:
    """The training loss (left scale) and learning rate (right scale) at each checkpoint."""
    mine = sorted(
        {r["checkpoint"]: r for r in rows if r["analysis"] == analysis}.values(),
        key=lambda r: (r["seed"] if r["seed"] is not None else -1, r["time"]),
    )
    for seed in dict.fromkeys(r["seed"] for r in mine):
        points = [r for r in mine if r["seed"] == seed and r["train_loss"] is not None]
        axis.plot([r["time"] for r in points], [r["train_loss"] for r in points], ".-",
                  color="C0", lw=0.8, label="training loss" if seed == mine[0]["seed"] else None)  # fmt: skip
    axis.set_ylabel("training loss", color="C0")
    rates = [r for r in mine if r["learning_rate"] is not None]
    if rates:
        twin = axis.twinx()
        twin.plot([r["time"] for r in rates], [r["learning_rate"] for r in rates], "-",
                  color="C1", lw=0.8)  # fmt: skip
        twin.set_ylabel("learning rate", color="C1")
    axis.set_xlabel(unit)


def _residual_panel(axis: Any, rows: Sequence[Mapping[str, Any]], unit: str) -> None:
    """Measured minus exact theory against time (gradient descent's O(lr) gap to the flow)."""
    mine = sorted((r for r in rows if r["residual_exact"] is not None), key=lambda r: r["time"])
    axis.plot([r["time"] for r in mine], [r["residual_exact"] for r in mine], "-", color="C3")
    axis.axhline(0, color="grey", lw=0.5)
    _time_axis(axis, [r["time"] for r in mine], unit)
    axis.set_ylabel("measured − exact")


def _front_panel(axis: Any, points: Sequence[Mapping[str, Any]], unit: str) -> None:
    """(p_S, p_I) of every checkpoint, coloured by step (or epoch), on the linear-decay front,
    and the distance to that front in an inset against the step."""
    from geomlens.theory import resolution

    inset = axis.inset_axes((0.12, 0.62, 0.4, 0.33))
    for seed in dict.fromkeys(p["seed"] for p in points):
        mine = [p for p in points if p["seed"] == seed]
        inset.plot([p["step"] for p in mine], [p["front_distance"] for p in mine], lw=0.8)
    inset.set_title(f"distance to the front, by {unit}", fontsize=7)
    inset.tick_params(labelsize=6)
    inset.set_xlim(left=0)

    front = resolution.linear_decay_front(401)
    axis.plot(front.p_s, front.p_i, "k-", lw=1, label="linear-decay front (Prop. 1)")
    steps = [p["step"] for p in points]
    drawn = axis.scatter(
        [p["p_similarity"] for p in points], [p["p_identification"] for p in points],
        c=steps, cmap="viridis", s=14, zorder=3,
    )  # fmt: skip
    axis.figure.colorbar(drawn, ax=axis, label=unit)
    axis.set_xlabel("p_S (similarity)")
    axis.set_ylabel("p_I (identification)")
    _legend_below(axis, 1)


def _layer_panel(
    axis: Any, rows: Sequence[Mapping[str, Any]], sites: Sequence[str], metric: str, unit: str
) -> None:
    """The metric across layers at the first, middle and last checkpoint (the mean over seeds),
    with the per-layer law's × on dashes where the theory gives one."""
    from matplotlib.ticker import MaxNLocator

    layered = [s for s in sites if site_layer(s) is not None]
    steps = sorted({(r["step"], r["time"]) for r in rows if not r.get("duplicate_of")})
    if len(layered) < 2 or not steps:
        whole = bool(sites) and all(s == SUMMARY_SITE for s in sites)
        words = "a number of the whole model" if whole else "one layer"
        axis.set_axis_off()
        axis.text(0.5, 0.5, f"{words}: no per-layer panel", ha="center", va="center", fontsize=8)
        return
    seeds = {r["seed"] for r in rows}
    picks = dict.fromkeys([steps[0], steps[len(steps) // 2], steps[-1]])
    drawn_law = False
    for colour, (step, moment) in zip(("C0", "C1", "C2"), picks):
        at = [r for r in rows if r["step"] == step and not r.get("duplicate_of")]
        measured = _mean_by_site(at, "value", layered)
        layers = [site_layer(s) for s in measured]
        word = "step" if unit.startswith("Σ") else unit.replace("training ", "")
        axis.plot(layers, list(measured.values()), "o-", color=colour,
                  label=f"{word} {step} (t = {moment:g})")  # fmt: skip
        law = _law_line(_mean_by_site(at, "theory_layer_law", layered), measured, layered)
        if law:
            axis.plot([site_layer(s) for s in law], list(law.values()), "x--", color=colour,
                      lw=0.9, label=None if drawn_law else "× on dashes: per-layer artanh law")  # fmt: skip
            drawn_law = True
    axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axis.set_xlabel("layer" + (f" (mean of {len(seeds)} seeds)" if len(seeds) > 1 else ""))
    axis.set_ylabel(metric)
    _legend_below(axis, 1)


def _mean_by_site(
    rows: Sequence[Mapping[str, Any]], column: str, sites: Sequence[str]
) -> dict[str, float]:
    """``column``'s mean over seeds at each of ``sites`` (in their order) that has one."""
    found: dict[str, float] = {}
    for site in sites:
        values = [r[column] for r in rows if r["site"] == site and r[column] is not None]
        if values:
            found[site] = float(np.mean(values))
    return found


def _law_line(
    law: Mapping[str, float], measured: Mapping[str, float], sites: Sequence[str]
) -> dict[str, float]:
    """The law's points, with the first and last layer's measured α where the law is drawn
    through them (the parameter-free law); empty where the theory gives no law."""
    if not law:
        return {}
    ends = {sites[0], sites[-1]}
    return {
        s: law[s] if s in law else measured[s]
        for s in sites
        if s in law or (s in ends and s in measured)
    }
