"""The resolution analysis's reading for the report: plain words from its result's public metrics."""

from __future__ import annotations

import math

from geomlens.analyses.reading_words import (
    across_texts_words,
    layer_label,
    missing,
    number,
    per_site,
    share_percent,
)
from geomlens.results import Result
from geomlens.theory.resolution import regime


def reading(result: Result) -> list[str]:
    epsilon = per_site(result, "epsilon")
    if not epsilon:
        return []
    site = list(epsilon)[-1]

    def metric(name: str) -> float:
        return result.metrics.get(f"{site}.{name}", math.nan)

    family = next(
        (r["family"] for r in result.tables.get("fits", []) if r["site"] == site and r["chosen"]),
        None,
    )
    lines = [
        f"At {layer_label(site)} the fitted resolution scale is ε = {number(epsilon[site])} "
        f"(95 % interval {number(metric('epsilon_ci_low'))} to "
        f"{number(metric('epsilon_ci_high'))}) with a noise floor Δ = {number(metric('delta'))}"
        + (f", {family} family" if family else "")
        + ": the fit keeps the measured g(0) = 1, so ε describes the measured curve."
    ]
    if family == "two-scale":
        lines.append(
            f"One scale does not fit: {share_percent(metric('fast_share'))} of the fall happens on "
            f"a fast scale ε_fast = {number(metric('epsilon_fast'))}, the rest on ε; the "
            f"similarity lost already at the nearest distance "
            f"({number(metric('first_distance'))}) is {number(metric('amplitude'))}."
        )
    across = metric("g0_across_texts")
    if not missing(across) and not missing(metric("amplitude")):
        lines.append(across_texts_words(across, 1.0 - metric("amplitude")))
    half = metric("half_width")
    if not missing(half):
        below = half < metric("first_distance")
        lines.append(
            f"g is halfway down at d = {number(half)} (interval "
            f"{number(metric('half_width_ci_low'))} to {number(metric('half_width_ci_high'))})"
            + (
                ", inside the first step of the stimulus grid: the data only bound it above."
                if below
                else "."
            )
        )
    offset = metric("offset")
    if not missing(offset) and offset < 0:
        lines.append(
            f"Far pairs sit {number(-offset)} below zero: that is the centring offset (the "
            "stimulus set's mean is subtracted), not noise. ε, the half-width, Δ and the "
            "offset belong to this model, this stimulus range and this centring together."
        )
    mean_b = metric("mean_b")
    if not missing(mean_b):
        lines.append(
            f"Within the half-width a stimulus finds on average ⟨b⟩ = {number(mean_b)} of the "
            "stimuli (itself included) "
            f"(interval {number(metric('mean_b_ci_low'))} to {number(metric('mean_b_ci_high'))})"
            f": the {regime(float(min(max(mean_b, 0.0), 1.0)))} regime, which "
            f"{share_percent(metric('regime_agreement'))} of the bootstrap resamples agree on."
        )
    method = next(
        (r.get("method") for r in result.tables.get("placement", []) if r["site"] == site), None
    )
    how = (
        f" (Monte Carlo, {number(metric('samples'))} trials, standard errors "
        f"{number(metric('p_similarity_se'), 2)} and {number(metric('p_identification_se'), 2)})"
        if method == "monte_carlo"
        else ""
    )
    lines.append(
        f"Measured on the stimuli themselves, a similarity test is passed with probability "
        f"p_S = {number(metric('p_similarity'))} and an identification test with p_I = "
        f"{number(metric('p_identification'))}{how} (1/2 is chance for both)"
        + (
            f"; the fitted g predicts ({number(metric('p_similarity_theory'))}, "
            f"{number(metric('p_identification_theory'))})."
            if not missing(metric("p_similarity_theory"))
            else "."
        )
    )
    lines.append(
        "The universal front is what an all-or-nothing similarity (alike within ε, unlike "
        "beyond) reaches when every stimulus has a neighbourhood of the same size; graded "
        f"similarities can lie above it. This site sits {number(metric('front_distance'))} "
        "from it in the (p_S, p_I) plane (see the theory figure below)."
    )
    return lines
