"""Distances between stimulus coordinates, by a named metric or a callable.

* ``"absolute"``: |x − y| (years, numbers on a line);
* ``"circular:PERIOD"``: distance around a circle of that circumference (hues: 360, months: 12);
* ``"euclidean"``: ‖x − y‖ for coordinate vectors (grid positions);
* a callable ``metric(x, y) -> float`` of two coordinates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["METRIC_NAMES", "Metric", "coordinate_array", "distance_matrix", "parse_metric"]

Metric = str | Callable[[Any, Any], float]
METRIC_NAMES = ("absolute", "circular:PERIOD", "euclidean")


def parse_metric(metric: Metric) -> Callable[[np.ndarray], np.ndarray]:
    """A function from coordinates ``[N]`` or ``[N, k]`` to their ``[N, N]`` distance matrix."""
    if callable(metric):
        return lambda coordinates: _pairwise_callable(metric, coordinates)
    if not isinstance(metric, str):
        raise ValueError(f"metric must be one of {METRIC_NAMES} or a callable; got {metric!r}.")
    if metric == "absolute":
        return _absolute
    if metric == "euclidean":
        return _euclidean
    if metric.startswith("circular:"):
        try:
            period = float(metric.split(":", 1)[1])
        except ValueError:
            period = float("nan")
        if not np.isfinite(period) or period <= 0:
            raise ValueError(
                f"metric {metric!r}: the period after 'circular:' must be a positive number, "
                "e.g. 'circular:360' for hue angles or 'circular:12' for months."
            )
        return lambda coordinates: _circular(coordinates, period)
    raise ValueError(
        f"Unknown metric {metric!r}; use 'absolute' (numbers on a line), 'circular:PERIOD' "
        "(e.g. 'circular:360'), 'euclidean' (coordinate vectors) or a callable metric(x, y)."
    )


def distance_matrix(coordinates: Any, metric: Metric = "absolute") -> np.ndarray:
    """The ``[N, N]`` distances between stimuli under ``metric`` (see the module docstring)."""
    return parse_metric(metric)(coordinate_array(coordinates))


def coordinate_array(coordinates: Any) -> np.ndarray:
    try:
        # Row by row, so that object arrays of lists (a dataset column) read like lists.
        array = np.asarray([np.asarray(c, dtype=float) for c in coordinates], dtype=float)
    except (TypeError, ValueError) as error:
        raise ValueError(
            "coordinates must be numbers (one per stimulus) or equal-length lists of numbers "
            f"(a position per stimulus); could not read them: {error}"
        ) from None
    if array.ndim not in (1, 2) or array.shape[0] == 0 or not np.all(np.isfinite(array)):
        raise ValueError(
            "coordinates must be finite numbers [N] or vectors [N, k] for at least one "
            f"stimulus; got shape {array.shape}."
        )
    return array


def _scalar_coordinates(coordinates: np.ndarray, metric: str) -> np.ndarray:
    if coordinates.ndim == 2 and coordinates.shape[1] == 1:
        return coordinates[:, 0]
    if coordinates.ndim != 1:
        raise ValueError(
            f"metric {metric!r} needs one number per stimulus, but the coordinates are vectors of "
            f"length {coordinates.shape[1]}; use metric='euclidean' for positions."
        )
    return coordinates


def _absolute(coordinates: np.ndarray) -> np.ndarray:
    x = _scalar_coordinates(coordinates, "absolute")
    return np.abs(np.subtract.outer(x, x))


def _circular(coordinates: np.ndarray, period: float) -> np.ndarray:
    x = _scalar_coordinates(coordinates, f"circular:{period:g}")
    gap = np.mod(np.abs(np.subtract.outer(x, x)), period)
    return np.minimum(gap, period - gap)


def _euclidean(coordinates: np.ndarray) -> np.ndarray:
    x = coordinates[:, None] if coordinates.ndim == 1 else coordinates
    return np.linalg.norm(x[:, None, :] - x[None, :, :], axis=-1)


def _pairwise_callable(metric: Callable[[Any, Any], float], coordinates: np.ndarray) -> np.ndarray:
    size = len(coordinates)
    distances = np.zeros((size, size))
    for i in range(size):
        for j in range(i + 1, size):
            distances[i, j] = distances[j, i] = float(metric(coordinates[i], coordinates[j]))
    if not np.all(np.isfinite(distances)) or np.any(distances < 0):
        raise ValueError("A callable metric must return finite distances >= 0.")
    return distances
