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


def toy_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    points = toy_points(rows)
    return {
        "front": "linear-decay front (Proposition 1)",
        "points": points,
        "first_distance": points[0]["front_distance"] if points else None,
    }
