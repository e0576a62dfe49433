"""The resolution analysis's reading for the report: plain words from its result's public metrics.

Every scale is written through its metric spec (:func:`geomlens.formatting.metric_value`), so a
scale the grid does not resolve reads "< d₁ …" or "> … (search bound)", never as a number, and
every scale names the grid spacing it was measured on."""

from __future__ import annotations

import math

from geomlens.analyses.spec import specs_by_name
from geomlens.analyses.words.guards import digit_split_years, is_null
from geomlens.analyses.words.metric_words import metric_refused, metric_value
from geomlens.analyses.words.metric_words import stimulus_range as range_words
from geomlens.analyses.words.reading_words import (
    across_texts_words,
    as_words,
    count,
    derived_value,
    layer_label,
    metric_interval,
    missing,
    per_site,
    regimes_spanned,
)
from geomlens.results import Result

from .metrics import AS_SHARE, BELOW_ZERO, METRIC_SPECS, MONTE_CARLO_ERROR, SUB_RANGE_HALF_WIDTH

SPECS = specs_by_name(METRIC_SPECS)


def _with_error(result: Result, key: str) -> str:
    """An interval end with its Monte-Carlo error (guarded: "< d₁ …" when censored)."""
    words = metric_value(result, key)
    error = result.metrics.get(f"{key}_mc", math.nan)
    censored = result.metrics.get(f"{key}_censored", 0.0)
    if missing(error) or (censored is not None and censored != 0):
        return words
    return f"{words} ({derived_value(result, f'{key}_mc', error, MONTE_CARLO_ERROR)})"


def _interval(result: Result, key: str) -> str:
    return f"{_with_error(result, key + '_ci_low')} to {_with_error(result, key + '_ci_high')}"


class _SiteWords:
    """One site's metrics read for words: a number (NaN when absent), a metric as shown (a
    censored scale reads as its bound) and an interval with its Monte-Carlo errors."""

    def __init__(self, result: Result, site: str):
        self.result, self.site = result, site

    def metric(self, name: str) -> float:
        value = self.result.metrics.get(f"{self.site}.{name}", math.nan)
        return math.nan if value is None else float(value)

    def shown(self, name: str) -> str:
        return metric_value(self.result, f"{self.site}.{name}")

    def interval(self, name: str) -> str:
        return _interval(self.result, f"{self.site}.{name}")

    def placement(self, key: str) -> object:
        """The site's ``key`` in the placement table (its regime, its method), or None."""
        rows = self.result.tables.get("placement", [])
        return next((r.get(key) for r in rows if r["site"] == self.site), None)


def reading(result: Result) -> list[str]:
    first_distances = per_site(result, "first_distance")
    if not first_distances:
        return []
    site = list(first_distances)[-1]
    words = _SiteWords(result, site)
    family = next(
        (r["family"] for r in result.tables.get("fits", []) if r["site"] == site and r["chosen"]),
        None,
    )
    artefact = digit_split_years(result)
    if artefact is not None:  # g(d) follows the tokenizer's digits, not the model's sense of time
        return [
            f"{artefact} So no resolution is read at {layer_label(site)}: its g(d₁), "
            "half-width, ε and regime would describe the digits (the numbers are in the JSON).",
            *_side_by_side_lines(words),
            *_plane_lines(words),
        ]
    return [
        *_grid_lines(words),
        *_range_lines(words),
        *_fit_lines(words, family),
        *_regime_lines(words, family),
        *_side_by_side_lines(words),
        *_plane_lines(words),
    ]


def _grid_lines(words: _SiteWords) -> list[str]:
    """What the grid resolves whatever the fit: g(d₁), and the measured half-width (or the
    bound the grid gives on it)."""
    metric, shown = words.metric, words.shown
    d1 = shown("first_distance")
    similarity = str(words.result.config.get("similarity", "centred-cosine"))
    resamples = (
        int(metric("bootstrap_resamples")) if not missing(metric("bootstrap_resamples")) else 0
    )
    lines = [
        f"At {layer_label(words.site)} ({similarity}; stimuli on a grid whose first distance is "
        f"d₁ = {d1}) g(0) = 1 falls to g(d₁) = {shown('g_first')} at the first "
        f"distance: a drop of 1 − g(d₁) = {shown('amplitude')}. That much the grid "
        "resolves whatever curve is fitted."
    ]
    width_censored = metric("half_width_censored")
    if width_censored == 0:
        lines.append(
            f"Over {stimulus_range(words.result, words.site)} the measured g is halfway from 1 "
            f"to its far level at d = {shown('half_width')} (interpolated between the bins of the d₁ = {d1} grid; {count(resamples, 'bootstrap resample')} "
            f"give 95 % interval {words.interval('half_width')}, each end with its "
            "Monte-Carlo error)."
        )
    elif width_censored < 0:
        lines.append(
            f"g is below halfway already at d₁: the half-width is {shown('half_width')}; this "
            "grid only bounds it above, and a finer grid would be needed to measure it."
        )
    elif width_censored > 0:
        lines.append(
            f"g does not fall halfway within the stimuli: the half-width is {shown('half_width')}."
        )
    return lines


def stimulus_range(result: Result, site: str) -> str:
    """'1901–2000' (the range the site's scales hold for): its metrics through their specs
    (:func:`~geomlens.analyses.words.metric_words.stimulus_range`); a result written before
    they were reads its ``scale_depends_on`` table; else "these stimuli"."""
    said = range_words(result, site)
    if said is not None:
        return said
    row = next((r for r in result.tables.get("scale_depends_on", []) if r["site"] == site), None)
    if row is None:
        return "these stimuli"
    return _table_range(result, site, row)


def _table_range(result: Result, site: str, row: dict) -> str:
    """'1901–2000' from a table row's coordinates, each end through its metric's spec."""
    low, high = (
        derived_value(result, f"{site}.{name}", row[name], SPECS[name])
        for name in ("coordinate_low", "coordinate_high")
    )
    return f"{low}–{high}"


def _range_lines(words: _SiteWords) -> list[str]:
    """Whether the scale holds beyond the stimulus range it was measured over."""
    depends = words.metric("scale_depends_on_range")
    span = stimulus_range(words.result, words.site)
    if depends == 1:
        rows = [
            r
            for r in words.result.tables.get("range_dependence", [])
            if r["site"] == words.site and r["share_of_range"] < 1
        ]
        key = f"{words.site}.{SUB_RANGE_HALF_WIDTH.name}"
        widths = ", ".join(
            f"{derived_value(words.result, key, r['half_width'], SUB_RANGE_HALF_WIDTH)} over "
            f"{_table_range(words.result, words.site, r)}"
            for r in rows
            if not missing(r["half_width"])
        )
        return [
            f"The scale grows with the range: no single scale over {span} (the central "
            f"sub-ranges give half-widths {widths or 'that are not resolved'}), so the "
            "half-width is this range's, not the model's resolution."
        ]
    if depends == 0:
        return [
            f"The central half and quarter of {span} give the same half-width and ε (within "
            "the interval or 5 %): on these stimuli the scale does not depend on the range."
        ]
    return []


def _fit_lines(words: _SiteWords, family: str | None) -> list[str]:
    """The chosen fit's scales, the same stimulus across texts, and the centring offset."""
    metric, shown = words.metric, words.shown
    lines = []
    if family and family != "flat":
        lines.append(
            f"The lowest-AIC fit ({family} family, with the measured g(0) = 1) gives ε = "
            f"{shown('epsilon')} (95 % interval {words.interval('epsilon')}) and a noise "
            f"floor Δ = {shown('delta')}."
        )
    if family == "power":
        lines.append(
            "The lowest-AIC fit is the power family, (1 + d/ε)^(−β): beyond ε g falls as a "
            "power of distance, which has no characteristic scale, so its half-width follows "
            "the range measured."
        )
    if family == "two-scale":
        lines.append(
            f"One scale does not fit: {_share(words, 'fast_share')} of the fall happens "
            f"on a fast scale ε_fast {_is(shown('epsilon_fast'))}, the rest on ε."
        )
    across = metric("g0_across_texts")
    if not missing(across) and not missing(metric("g_first")):
        lines.append(
            across_texts_words(
                words.result, words.site, metric("g_first"), (f"{words.site}.g_first",)
            )
        )
    offset = metric("offset")
    if not missing(offset) and offset < 0:
        lines.append(
            "The fitted far level sits "
            + derived_value(words.result, f"{words.site}.offset_below_zero", -offset, BELOW_ZERO)
            + " below zero: that is the centring "
            "offset (the stimulus set's mean is subtracted), not noise. ε, the half-width, Δ "
            "and the offset belong to this model, this stimulus range and this centring together."
        )
    return lines


def _grid_step_words(words: _SiteWords) -> str:
    """What one grid step of the half-width does to ⟨b⟩, where it was measured (a result
    written before it was, read back from JSON, has none: nothing is said)."""
    ends = ("low", "high", "step")
    if any(missing(words.metric(f"mean_b_grid_{end}")) for end in ends):
        return ""
    low, high, step = (words.shown(f"mean_b_grid_{end}") for end in ends)
    return (
        f"; one grid step of the half-width moves it between {low} and {high}, so its "
        f"resolution is ± {step}"
    )


def _regime_lines(words: _SiteWords, family: str | None) -> list[str]:
    """⟨b⟩ at the half-width and the regime it gives (none read below d₁), and ⟨b⟩ at both
    scales of a two-scale fit."""
    metric, shown = words.metric, words.shown
    lines = []
    regime = words.placement("regime")
    if regime == "unresolved":
        lines.append(
            f"The regime is unresolved: ⟨b⟩ is {as_words(shown('mean_b'))}, so no regime (and no "
            "bootstrap agreement) is read from it on this grid."
        )
    elif not missing(metric("mean_b")):
        low, high = metric("mean_b_ci_low"), metric("mean_b_ci_high")
        spanned = regimes_spanned(low, high)
        found = (
            f"Within the half-width a stimulus finds on average ⟨b⟩ = {shown('mean_b')} of the "
            f"stimuli (itself included) ({metric_interval(words.result, f'{words.site}.mean_b')}"
            f"{_grid_step_words(words)})"
        )
        if regime == "set by the grid":
            lines.append(
                f"{found}: the regime is set by the grid (one grid step either way changes it), "
                "so none is read."
            )
        elif len(spanned) > 1:
            lines.append(
                f"{found}: the interval spans the {' and '.join(spanned)} regimes, so no regime "
                "is named."
            )
        else:
            lines.append(
                f"{found}: the {regime} regime, which survives one grid step either way and "
                f"{_share(words, 'regime_agreement')} of the bootstrap resamples agree on."
            )
    if family == "two-scale":
        lines.append(
            f"At the two scales' half-widths ⟨b⟩ is {as_words(shown('mean_b_fast'))} (fast) and "
            f"{as_words(shown('mean_b_slow'))} (slow)."
        )
    return lines


def _is(shown: str) -> str:
    """``= value``, or ``is`` and a guard's words ("is below d₁ = 1 year (unresolved …)")."""
    worded = as_words(shown)
    return f"= {shown}" if worded == shown and not is_null(shown) else f"is {worded}"


def _form_words(words: _SiteWords, form: str) -> str:
    """One similarity form's (raw or centred cosine) g(d₁), half-width and (p_S, p_I), each
    through its spec's guards: a form whose tests are at chance shows no half-width."""
    site = words.site
    refused = [
        metric_refused(words.result, f"{site}.{form}_{name}")
        for name in ("p_similarity", "p_identification")
    ]
    head = f"the {form} cosine gives g(d₁) = {words.shown(f'{form}_g_first')}"
    if all(refused):
        return (
            f"{head}, and its similarity and identification tests are at chance (nothing measured)"
        )
    return (
        f"{head}, half-width {as_words(words.shown(f'{form}_half_width'))}, p_S "
        f"{words.shown(f'{form}_p_similarity')} and p_I {words.shown(f'{form}_p_identification')}"
    )


def _side_by_side_lines(words: _SiteWords) -> list[str]:
    """The raw and the centred cosine's numbers side by side, where both were measured."""
    if f"{words.site}.raw_g_first" not in words.result.metrics:
        return []
    return [
        f"Side by side, {_form_words(words, 'raw')}; {_form_words(words, 'centred')}. Neither "
        "is the resolution alone: centring subtracts the stimulus set's mean."
    ]


def _theory_words(words: _SiteWords) -> str:
    """The fitted g's (p_S, p_I): a point, or the range over the fits within ΔAIC 2 where
    that valley is flat (as wide as the bootstrap's interval or the printed 0.001: the
    optimiser would pick the point)."""
    metric = words.metric
    if not missing(metric("p_similarity_theory")):
        return (
            f"; the fitted g predicts ({words.shown('p_similarity_theory')}, "
            f"{words.shown('p_identification_theory')})."
        )
    if metric("p_theory_from_valley") == 1:
        return (
            f"; the fitted g predicts p_S {words.shown('p_similarity_theory_low')} to "
            f"{words.shown('p_similarity_theory_high')} and p_I "
            f"{words.shown('p_identification_theory_low')} to "
            f"{words.shown('p_identification_theory_high')}: every fit within ΔAIC 2 of the "
            "best describes the data as well, so no point is given."
        )
    return "."


def _plane_lines(words: _SiteWords) -> list[str]:
    """The measured (p_S, p_I) with how it was computed, the fitted g's prediction, and the
    distance to the universal front."""
    metric = words.metric
    method = words.placement("method")
    how = (
        f" (Monte Carlo, {count(metric('samples'), 'trial')}"
        if method == "monte_carlo"
        else " (exact enumeration"
    ) + (
        f", standard errors {words.shown('p_similarity_se')} and "
        f"{words.shown('p_identification_se')})"
        if method == "monte_carlo"
        else ")"
    )
    return [
        f"Measured on the stimuli themselves, with no fit, a similarity test is passed with "
        f"probability p_S {_is(words.shown('p_similarity'))} and an identification test with "
        f"p_I {_is(words.shown('p_identification'))}{how} (1/2 is chance for both)"
        + _theory_words(words),
        "The universal front is what an all-or-nothing similarity (alike within ε, unlike "
        "beyond) reaches when every stimulus has a neighbourhood of the same size; graded "
        f"similarities can lie above it. This site sits {words.shown('front_distance')} "
        "from it in the (p_S, p_I) plane (see the theory figure below).",
    ]


def _share(words: _SiteWords, name: str) -> str:
    """A share (``fast_share``, ``regime_agreement``) as a percentage, through its spec."""
    key = f"{words.site}.{name}"
    return derived_value(words.result, key, words.metric(name), AS_SHARE[name])
