"""Whether a site's resolution scale depends on the stimulus range it was measured over.

The same quantities (the measured half-width and the chosen family's ε) are measured again on
the stimuli of the middle half of the range: the same similarity matrix, its pairs within the
sub-range binned and fitted on their own. A scale that is g's comes back within its interval;
one that grows with the range (a similarity without one characteristic scale: the far level
and the fall both keep moving as farther pairs are added) does not. The similarity is not
re-centred on the sub-range, so the flag is about the shape of g; what centring on another
range does on top is the ``scale_depends_on`` note and the raw/centred side by side. ``<site>.scale_depends_on_range`` is 1 when the sub-range's half-width or ε lies outside
the full range's 95 % interval *and* differs from the full range's by more than 5 %, 0 when
neither does, NaN when the sub-range holds too few stimuli or either value is unresolved.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from geomlens.analyses.resolution.profile_fits import Fit, fit_binned, measured_half_width
from geomlens.analyses.similarity.analysis import (
    SiteSimilarity,
    binned_pairs,
    distance_bins,
)

#: A sub-range with fewer stimuli than this is too small to measure a scale on.
MIN_STIMULI = 10
#: A sub-range's scale must differ from the full range's by more than this share as well.
TOLERANCE = 0.05
#: The sub-ranges measured, as the share of the full range kept around its centre.
SHARES = (0.5, 0.25)


@dataclass(frozen=True)
class Scales:
    """A range's half-width and ε, each with its 95 % interval (NaN ends: open)."""

    half_width: float
    epsilon: float
    half_width_interval: tuple[float, float] = (float("nan"), float("nan"))
    epsilon_interval: tuple[float, float] = (float("nan"), float("nan"))


def central(coordinates: np.ndarray, share: float) -> np.ndarray | None:
    """Indices of the stimuli within the central ``share`` of a line's range (None for
    coordinates that are not on a line)."""
    x = np.asarray(coordinates, dtype=float)
    if x.ndim != 1:
        return None
    low, high = float(x.min()), float(x.max())
    margin = (high - low) * (1 - share) / 2
    return np.flatnonzero((x >= low + margin - 1e-9) & (x <= high - margin + 1e-9))


def sub_range_scales(
    measured: SiteSimilarity, keep: np.ndarray, family: str, bins: int | None
) -> Scales:
    """The half-width and ``family``'s ε on the pairs of the stimuli ``keep``."""
    nan = float("nan")
    distances = measured.distances[np.ix_(keep, keep)]
    similarity = measured.similarity[np.ix_(keep, keep)]
    try:
        mean_d, mean_s, squares, count = binned_pairs(
            distances, similarity, distance_bins(distances, bins)
        )
        fit = next(f for f in fit_binned(mean_d, mean_s, squares, count) if f.family == family)
    except ValueError:
        return Scales(nan, nan)
    if not np.isfinite(fit.epsilon):
        return Scales(nan, nan)
    first = float(distances[distances > 0].min())
    filled = count > 0
    width = measured_half_width(mean_d[filled], mean_s[filled], fit.level)
    epsilon = nan if fit.at_bound or fit.epsilon < first else fit.epsilon
    return Scales(width if np.isfinite(width) and width >= first else nan, epsilon)


def _differs(full: float, interval: tuple[float, float], sub: float) -> float:
    """1 when ``sub`` lies outside ``interval`` and more than 5 % from ``full``; NaN when
    either value is missing."""
    if not (np.isfinite(full) and np.isfinite(sub)):
        return float("nan")
    low, high = (v if np.isfinite(v) else s for v, s in zip(interval, (-np.inf, np.inf)))
    outside = sub < low or sub > high
    return float(outside and abs(sub / full - 1) > TOLERANCE)


def range_dependence(
    measured: SiteSimilarity,
    chosen: Fit,
    full: Scales,
    bins: int | None,
) -> tuple[float, list[dict[str, Any]]]:
    """``scale_depends_on_range`` of one site and its rows of the ``range_dependence`` table
    (the full range and each central sub-range, with both values)."""
    x = np.asarray(measured.coordinates, dtype=float)
    rows: list[dict[str, Any]] = [_row(measured.site, x, 1.0, full, float("nan"))]
    flags = []
    for share in SHARES:
        keep = central(x, share)
        if keep is None or len(keep) < MIN_STIMULI or not np.isfinite(chosen.epsilon):
            flag = float("nan")
            sub = Scales(float("nan"), float("nan"))
            rows.append(_row(measured.site, x[keep] if keep is not None else x, share, sub, flag))
            flags.append(flag)
            continue
        sub = sub_range_scales(measured, keep, chosen.family, bins)
        checks = [
            _differs(full.half_width, full.half_width_interval, sub.half_width),
            _differs(full.epsilon, full.epsilon_interval, sub.epsilon),
        ]
        flag = 1.0 if 1.0 in checks else 0.0 if any(c == 0 for c in checks) else float("nan")
        rows.append(_row(measured.site, x[keep], share, sub, flag))
        flags.append(flag)
    overall = 1.0 if 1.0 in flags else 0.0 if flags and all(f == 0 for f in flags) else np.nan
    return float(overall), rows


def _row(site: str, x: np.ndarray, share: float, scales: Scales, flag: float) -> dict[str, Any]:
    return {
        "site": site,
        "share_of_range": share,
        "coordinate_low": float(x.min()),
        "coordinate_high": float(x.max()),
        "stimuli": len(x),
        "half_width": scales.half_width,
        "epsilon": scales.epsilon,
        "differs": flag,
    }
