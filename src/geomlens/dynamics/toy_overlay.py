"""The toy network's (p_S, p_I) per checkpoint against the front of its linear-decay
proposition (``theory.resolution.linear_decay_front``), the exact level for that experiment."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from geomlens.theory import resolution

#: Points on the front (the theory tests use 2,001).
FRONT_POINTS = 2001


def front_distances(p_s: Sequence[float], p_i: Sequence[float]) -> np.ndarray:
    """Distance of each (p_S, p_I) to the linear-decay front."""
    front = resolution.linear_decay_front(FRONT_POINTS)
    return np.asarray(
        resolution.nearest_on_front(np.asarray(p_s), np.asarray(p_i), front).distance, dtype=float
    )


def toy_points(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """(checkpoint, step, seed, site, p_S, p_I, distance to the front) from trajectory rows."""
    points: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        if row["metric"] not in ("p_similarity", "p_identification") or row["value"] is None:
            continue
        key = (row["seed"], row["step"], row["checkpoint"], row["site"])
        points.setdefault(key, {})[row["metric"]] = row["value"]
    found = []
    for (seed, step, label, site), values in sorted(
        points.items(), key=lambda i: (i[0][0] or -1, i[0][1])
    ):
        if len(values) == 2:
            found.append(
                {"checkpoint": label, "step": step, "seed": seed, "site": site,
                 "p_similarity": values["p_similarity"], "p_identification": values["p_identification"]}
            )  # fmt: skip
    if found:
        distances = front_distances(
            [p["p_similarity"] for p in found], [p["p_identification"] for p in found]
        )
        for point, distance in zip(found, distances):
            point["front_distance"] = float(distance)
    return found


def front_identification(p_s: Sequence[float]) -> np.ndarray:
    """The best p_I on the linear-decay front at each p_S: the curve rises to its largest p_S
    and falls back, so each of its two branches is interpolated and the higher p_I kept (NaN
    beyond the front's largest p_S)."""
    front = resolution.linear_decay_front(FRONT_POINTS)
    peak = int(np.argmax(front.p_s))
    wanted = np.asarray(p_s, dtype=float)
    best = np.full(wanted.shape, np.nan)
    for branch in (slice(0, peak + 1), slice(peak, None)):
        xs, ys = front.p_s[branch], front.p_i[branch]
        order = np.argsort(xs)
        inside = (wanted >= xs.min()) & (wanted <= xs.max())
        values = np.interp(wanted, xs[order], ys[order])
        best = np.where(inside & ~(values <= best), values, best)
    return best


def add_front_columns(rows: Sequence[dict[str, Any]]) -> None:
    """For each p_identification row, ``theory_exact`` = the front's p_I at the checkpoint's
    measured p_S, and ``residual_exact`` the measured p_I minus it."""
    p_s = {
        (r["checkpoint"], r["site"], r["task"]): r["value"]
        for r in rows
        if r["metric"] == "p_similarity" and r["value"] is not None
    }
    for row in rows:
        key = (row["checkpoint"], row["site"], row["task"])
        if row["metric"] == "p_identification" and key in p_s and row["value"] is not None:
            front = float(front_identification([p_s[key]])[0])
            if np.isfinite(front):
                row["theory_exact"] = front
                row["residual_exact"] = row["value"] - front


def toy_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    points = toy_points(rows)
    return {
        "front": "linear-decay front (Proposition 1)",
        "points": points,
        "first_distance": points[0]["front_distance"] if points else None,
    }
