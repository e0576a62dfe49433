"""The similarity analysis's reading for the report: plain words from its result's public metrics."""

from __future__ import annotations

import math

from geomlens.analyses.spec import specs_by_name
from geomlens.analyses.words.guards import digit_split_years
from geomlens.analyses.words.reading_words import (
    across_texts_words,
    derived_value,
    layer_label,
    metric_refused,
    metric_value,
    missing,
)
from geomlens.results import Result

from .metrics import AT_CHANCE_N2, MEASURED_DISTANCE, METRIC_SPECS

_SPECS = specs_by_name(METRIC_SPECS)


def reading(result: Result) -> list[str]:
    table = result.tables.get("g_of_d", [])
    if not table:
        return []
    sites = list(dict.fromkeys(row["site"] for row in table))
    site = sites[-1]
    rows = sorted((r for r in table if r["site"] == site), key=lambda r: r["distance"])
    nearest, farthest = rows[0], rows[-1]
    chance = [
        AT_CHANCE_N2(result, f"{site}.{name}") for name in ("p_similarity", "p_identification")
    ]
    if all(chance) and f"{site}.p_similarity" in result.metrics:
        return [
            f"At {layer_label(site)} the model's choices are at chance on both tests (with two "
            "candidates, neither 95 % interval of p_S and p_I lies above 1/2): nothing measured "
            "here. g(d) from these choices is not read."
        ]
    artefact = digit_split_years(result)
    if artefact is not None:
        return [
            f"{artefact} So g(d) at {layer_label(site)} is not read as the model's similarity of "
            "the stimuli (its values are in the JSON)."
        ]
    crossing = next((r["distance"] for r in rows if (r.get("mean") or 0.0) < 0.0), None)
    at = {
        end: derived_value(result, f"{site}.{spec.name}", row["distance"], spec)
        for (end, spec), row in zip(MEASURED_DISTANCE.items(), (nearest, farthest), strict=True)
    }
    lines = [
        f"g(d) is the mean similarity of two stimuli at distance d; a stimulus with itself has "
        f"g(0) = 1. At {layer_label(site)} g falls to {_g_at(result, site, 'nearest', nearest)} "
        f"already at the nearest distance d = {at['nearest']}, and "
        + _farthest_words(result, site, farthest, at["farthest"])
        + "."
    ]
    across = result.metrics.get(f"{site}.g0_across_texts", math.nan)
    if not missing(across):
        lines.append(across_texts_words(result, site, nearest["mean"], (f"{site}.g_nearest",)))
    if crossing is not None:
        lines.append(
            f"It first drops below zero near d = {_crossing(result, site, crossing)}: stimuli "
            "farther apart than "
            "that look less alike than two random ones (with the centred cosine this is partly "
            "the centring: it makes the mean similarity of all pairs about 0)."
        )
    lines.append(
        "A g that falls with d means the model represents the stimuli's metric; how fast it "
        "falls is the resolution (see the resolution analysis)."
    )
    return lines


def _g_at(result: Result, site: str, end: str, row: dict) -> str:
    """g at the nearest or farthest distance (``<site>.g_nearest``)."""
    return _metric_or_row(result, f"{site}.g_{end}", float(row.get("mean", math.nan)))


def _farthest_words(result: Result, site: str, row: dict, distance: str) -> str:
    """ "to g(d) at d = D", or, when its guard refuses the farthest bin, why it is not read."""
    refused = metric_refused(result, f"{site}.g_farthest")
    if refused is not None:
        return (
            f"its farthest bin, d = {distance}, is {refused.removeprefix('not read: ')}: not read"
        )
    return f"to {_g_at(result, site, 'farthest', row)} at d = {distance}"


def _crossing(result: Result, site: str, distance: float) -> str:
    """The first distance where g < 0 (``<site>.zero_crossing``)."""
    return _metric_or_row(result, f"{site}.zero_crossing", distance)


def _metric_or_row(result: Result, key: str, from_table: float) -> str:
    """Metric ``key`` through its spec and guards; a result saved without it (an older one) is
    read from its table's value through the same spec."""
    if not missing(result.metrics.get(key)):
        return metric_value(result, key)
    spec = _SPECS[key.rsplit(".", 1)[1]]
    return derived_value(result, key, from_table, spec)
