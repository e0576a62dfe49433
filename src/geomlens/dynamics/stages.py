"""Stages of a trajectory: where each headline curve peaks, where its plateau ends and where it
settles, per seed and with an interval over seeds; for the exact setup, beside the theory's own
peak time and plateau length.

On one curve (the values at the checkpoints, duplicates left out):

- **peak**: the checkpoint with the largest value (its time and value);
- **plateau**: the stretch around the peak where the value stays at or above a level, the
  peak minus 5 % of the curve's range (for α in the exact setup, the theory's level 0.95, as
  ``theory.abstraction.plateau_length`` uses); ``plateau_end`` is the first checkpoint after the
  peak below the level (None when the curve stays on it to the last checkpoint);
- **settled**: the first checkpoint from which every later value stays within 5 % of the
  curve's range of its last value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats

from geomlens.dynamics.trajectory import followed_metrics

#: The share of a curve's range that counts as "on the plateau" and "settled".
TOLERANCE = 0.05
#: The exact theory's plateau level for α (``theory.abstraction.plateau_length``'s default).
ALPHA_LEVEL = 0.95
STAGE_NAMES = ("peak_time", "peak_value", "plateau_start", "plateau_end", "plateau_length",
               "settled_time")  # fmt: skip


def curve_stages(
    times: Sequence[float], values: Sequence[float], level: float | None = None
) -> dict[str, float | None]:
    """The peak, the plateau's end and where the curve settles (see the module's words)."""
    t, v = np.asarray(times, dtype=float), np.asarray(values, dtype=float)
    if t.size == 0:
        return {name: None for name in (*STAGE_NAMES, "plateau_level")}
    spread = float(v.max() - v.min())
    top = int(np.argmax(v))
    floor = float(v[top] - TOLERANCE * spread) if level is None else level
    on = v[top] >= floor
    start = next((float(t[i]) for i in range(top + 1) if v[i] >= floor), None) if on else None
    below = [i for i in range(top, t.size) if v[i] < floor]
    end = float(t[below[0]]) if below and on else None
    away = np.abs(v - v[-1]) > TOLERANCE * spread
    last_away = int(np.nonzero(away)[0].max()) if away.any() else -1
    return {
        "peak_time": float(t[top]),
        "peak_value": float(v[top]),
        "plateau_level": floor,
        "plateau_start": start,
        "plateau_end": end,
        "plateau_length": end - start if end is not None and start is not None else None,
        "settled_time": float(t[last_away + 1]) if last_away + 1 < t.size else None,
    }


def stage_table(
    rows: Sequence[Mapping[str, Any]], theory: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """One entry per (analysis, site, task, headline metric): each seed's stages, and with
    several seeds the mean and a 95 % t interval of each over seeds (kept within the times the
    checkpoints span); for α in the exact setup the theory's peak time and plateau length."""
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for row in rows:
        headlines = followed_metrics(row["analysis"]) or (row["metric"],)
        if row["value"] is not None and not row.get("duplicate_of") and row["metric"] in headlines:
            key = (row["analysis"], row["site"], row["task"], row["metric"])
            groups.setdefault(key, []).append(row)
    exact = _exact_theory(theory)
    table = []
    for (analysis, site, task, metric), group in groups.items():
        level = ALPHA_LEVEL if metric == "alpha" and exact else None
        seeds = sorted({r["seed"] for r in group}, key=lambda s: -1 if s is None else s)
        per_seed = {}
        for seed in seeds:
            mine = sorted((r for r in group if r["seed"] == seed), key=lambda r: r["time"])
            per_seed[str(seed)] = curve_stages(
                [r["time"] for r in mine], [r["value"] for r in mine], level
            )
        entry: dict[str, Any] = {"analysis": analysis, "site": site, "task": task,
                                 "metric": metric, "seeds": per_seed}  # fmt: skip
        if len(seeds) > 1:
            times = [r["time"] for r in group]
            entry["across_seeds"] = _over_seeds(list(per_seed.values()), min(times), max(times))
        if metric == "alpha" and exact and site == exact["site"]:
            entry["theory"] = {k: v for k, v in exact.items() if k != "site"}
        table.append(entry)
    return table


def _over_seeds(
    per_seed: Sequence[Mapping[str, float | None]], first: float, last: float
) -> dict[str, dict[str, float | int | None]]:
    """Mean and 95 % t interval over seeds of each stage (seeds where it exists)."""
    summary: dict[str, dict[str, float | int | None]] = {}
    for name in STAGE_NAMES:
        values = np.array([s[name] for s in per_seed if s.get(name) is not None], dtype=float)
        if values.size == 0:
            summary[name] = {"mean": None, "ci_low": None, "ci_high": None, "seeds": 0}
            continue
        mean = float(values.mean())
        half = (
            float(stats.t.ppf(0.975, values.size - 1) * values.std(ddof=1) / math.sqrt(values.size))
            if values.size > 1
            else None
        )
        low, high = (first, last) if name != "peak_value" else (-math.inf, math.inf)
        summary[name] = {
            "mean": mean,
            "ci_low": max(mean - half, low) if half is not None else None,
            "ci_high": min(mean + half, high) if half is not None else None,
            "seeds": int(values.size),
        }
    return summary


def _exact_theory(theory: Mapping[str, Any]) -> dict[str, Any] | None:
    """The exact setup's peak time and plateau length (α ≥ 0.95) of its last layer (``site``),
    from sweep.json's theory."""
    block = theory.get("exact")
    if isinstance(block, Mapping) and "alpha_max" not in block:
        block = next((v for v in block.values() if isinstance(v, Mapping)), None)
    if not isinstance(block, Mapping) or "sigma_x" not in block:
        return None
    from geomlens.theory.abstraction import plateau_length

    length = plateau_length(
        block["sigma_x"], block["sigma_y"], block["gamma"], block["kappa"], ALPHA_LEVEL,
        int(block["depth"]),
    )  # fmt: skip
    return {
        "site": (block.get("sites") or [None])[-1],
        "peak_time": float(block["peak_time"]),
        "plateau_level": ALPHA_LEVEL,
        "plateau_length": float(length) if math.isfinite(length) else None,
    }
