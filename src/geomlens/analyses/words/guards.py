"""Reusable guards for metric specs: the checks a number must pass before a reading uses it.

A guard (see :data:`geomlens.analyses.spec.Guard`) gets the result and the metric's key
``<site>.<name>`` and returns ``None`` when the number may be read, or the words that replace
it. Attach them to a :class:`~geomlens.analyses.spec.MetricSpec`::

    MetricSpec("p_similarity", words="similarity accuracy p_S",
               guards=(at_chance(0.5),))

Every constructor reads only the result's public metrics and provenance, so a result loaded
back from JSON is guarded exactly as the live one. The words each guard returns name what the
number is ("at chance: nothing measured here", "unresolved: …", "measurement failure: …") and
never the number as a finding. :func:`is_null` tells whether
the words are such a null.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from geomlens.formatting import number, quantity, split_metric

__all__ = [
    "AT_THE_CEILING",
    "a_cosine",
    "AT_CHANCE",
    "MEASUREMENT_FAILURE",
    "UNRESOLVED",
    "at_chance",
    "chance_interval",
    "below_uniform_loss",
    "digit_split_years",
    "enough",
    "guard_words",
    "is_null",
    "probe_at_chance",
    "probe_chance_half_width",
    "profile_grid",
    "profile_span",
    "resolved_scale",
    "within",
]

Guard: TypeAlias = Callable[[Any, str], "str | None"]

#: The words of a number whose interval contains chance.
AT_CHANCE = "at chance: nothing measured here"
#: How the words of an unresolved scale begin.
UNRESOLVED = "unresolved"
#: How the words of a number outside its possible range begin.
MEASUREMENT_FAILURE = "measurement failure"


def _site_and_name(result: Any, key: str) -> tuple[str, str]:
    sites = (getattr(result, "provenance", None) or {}).get("sites")
    return split_metric(key, sites)


def _sibling(result: Any, key: str, name: str) -> float:
    """The metric ``name`` at the same site as ``key`` (NaN when absent)."""
    site, _ = _site_and_name(result, key)
    full = f"{site}.{name}" if site else name
    value = result.metrics.get(full, math.nan)
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _value(result: Any, key: str) -> float:
    value = result.metrics.get(key, math.nan)
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


#: z of a two-sided 95 % interval from a standard error.
Z95 = 1.959964
#: How near chance a value with no interval (and no standard error) must be to count as chance.
CHANCE_TOLERANCE = 0.005


def chance_interval(
    result: Any,
    key: str,
    *,
    low: str = "_ci_low",
    high: str = "_ci_high",
    se: str = "_se",
    tolerance: float = CHANCE_TOLERANCE,
) -> tuple[float, float]:
    """The 95 % interval of metric ``key``: ``<key><low>`` to ``<key><high>`` when both are
    there, else the value ± 1.96 standard errors (``<key><se>``, when positive), else the value
    ± ``tolerance`` (:data:`CHANCE_TOLERANCE`); (NaN, NaN) for a missing value."""
    lo, hi = _value(result, key + low), _value(result, key + high)
    if math.isfinite(lo) and math.isfinite(hi):
        return lo, hi
    value = _value(result, key)
    if not math.isfinite(value):
        return math.nan, math.nan
    error = _value(result, key + se)
    half = Z95 * error if math.isfinite(error) and error > 0 else tolerance
    return value - half, value + half


def at_chance(
    chance: float | Callable[[Any, str], float],
    *,
    low: str = "_ci_low",
    high: str = "_ci_high",
    se: str = "_se",
    above: bool = False,
    tolerance: float = CHANCE_TOLERANCE,
) -> Guard:
    """Refuse an accuracy whose 95 % interval contains ``chance`` (a number, or
    ``chance(result, key)``): "at chance: nothing measured here". The interval is
    :func:`chance_interval`'s (the metrics ``<key><low>`` and ``<key><high>``, or ± 1.96
    standard errors ``<key><se>``, or ± :data:`CHANCE_TOLERANCE`). ``above``: read the number
    only when its interval lies above chance (an interval wholly below it is refused too: a
    model choosing against the right option measures nothing the reading describes)."""

    def guard(result: Any, key: str) -> str | None:
        level = chance(result, key) if callable(chance) else float(chance)
        lo, hi = chance_interval(result, key, low=low, high=high, se=se, tolerance=tolerance)
        if not math.isfinite(lo):
            return None
        return AT_CHANCE if lo <= level and (above or level <= hi) else None

    return guard


def within(low: float, high: float, what: str) -> Guard:
    """Refuse a value outside [``low``, ``high``] (a share outside [0, 1], a cosine outside
    [−1, 1]) as a failure of the measurement: ``what`` names the quantity ("a share")."""

    def guard(result: Any, key: str) -> str | None:
        value = _value(result, key)
        if math.isfinite(value) and not low <= value <= high:
            # The impossible value itself is not written (it is in the JSON): no page shows a
            # share over 100 % or a cosine past 1, even as the reason for refusing one.
            lowest, highest = (number(end).replace("-", "−") for end in (low, high))
            return (
                f"{MEASUREMENT_FAILURE}: the estimate lies outside {lowest} to {highest}, where "
                f"{what} lies; not read"
            )
        return None

    return guard


#: The words of a cosine estimate past ±1 whose 95 % interval still holds ±1 (they begin so).
AT_THE_CEILING = "at a cosine's ceiling"


def _interval_ends(result: Any, key: str) -> tuple[float, float]:
    """The 95 % interval of ``key``: ``<key>_ci_low/high``, or for a condition-qualified name
    (``alpha_corrected_base``) ``<stem>_ci_low_<condition>``; NaN ends when it has none."""
    candidates = [(f"{key}_ci_low", f"{key}_ci_high")]
    for condition in ("_base", "_linearized"):
        if key.endswith(condition):
            stem = key[: -len(condition)]
            candidates.append((f"{stem}_ci_low{condition}", f"{stem}_ci_high{condition}"))
    for low, high in candidates:
        if low in result.metrics and high in result.metrics:
            return _value(result, low), _value(result, high)
    return math.nan, math.nan


def a_cosine(result: Any, key: str) -> str | None:
    """A cosine estimate (a disattenuated one may pass ±1): never printed past ±1. When its 95 %
    interval holds that end, it is past it by noise and reads as at the ceiling (as parallel as
    the data can tell); when the whole interval lies past it, or there is no interval to say
    which, it is not read."""
    value = _value(result, key)
    if not (math.isfinite(value) and abs(value) > 1.0):
        return None
    end = math.copysign(1.0, value)
    low, high = _interval_ends(result, key)
    side = "above 1" if end > 0 else "below −1"
    if math.isfinite(low) and math.isfinite(high) and low <= end <= high:
        return (
            f"{AT_THE_CEILING} (the estimate lies {side}, where no cosine lies, but its 95 % "
            f"interval holds {'1' if end > 0 else '−1'}: the directions are as parallel as this "
            "data can tell)"
        )
    if math.isfinite(low) and math.isfinite(high):
        return (
            "not read: the estimate and its whole 95 % interval lie outside −1 to 1, where a "
            "cosine lies (the noise correction overshoots on these rows)"
        )
    return (
        f"not read: the estimate lies {side}, where no cosine lies, and no interval says "
        "whether by noise"
    )


#: A range end or grid spacing: a number, a metric name, or ``f(result, key)``.
Bound: TypeAlias = "str | float | Callable[[Any, str], float] | None"


def resolved_scale(
    range_low: Bound,
    range_high: Bound,
    grid: Bound = None,
    unit: Callable[[Any], str] | None = None,
) -> Guard:
    """Refuse a scale outside the stimulus range or below its grid spacing: "unresolved" with
    the range. ``range_low``, ``range_high`` and ``grid`` are numbers, metric names read at the
    key's site (or at no site), or ``f(result, key)``; ``unit(result)`` gives the range's
    unit."""

    def read(result: Any, key: str, source: Bound) -> float:
        if source is None:
            return math.nan
        if callable(source):
            return float(source(result, key))
        if isinstance(source, str):
            value = _sibling(result, key, source)
            return value if math.isfinite(value) else _value(result, source)
        return float(source)

    def guard(result: Any, key: str) -> str | None:
        value = _value(result, key)
        lo, hi = read(result, key, range_low), read(result, key, range_high)
        spacing = read(result, key, grid)
        where = unit(result) if unit is not None else ""
        span = (
            f"the range is {quantity(lo, where)} to {quantity(hi, where)}"
            if math.isfinite(lo) and math.isfinite(hi)
            else "the range is unknown"
        )
        if not math.isfinite(value):
            return f"{UNRESOLVED} ({span})"
        if math.isfinite(hi) and math.isfinite(lo) and not 0 <= value <= hi - lo:
            return f"{UNRESOLVED}: outside the range ({span})"
        if math.isfinite(spacing) and value < spacing:
            return f"{UNRESOLVED}: below the grid spacing of {quantity(spacing, where)} ({span})"
        return None

    return guard


def below_uniform_loss(vocab: Bound, unit: str = "nats") -> Guard:
    """Refuse a loss above the loss of a uniform guess over the vocabulary (log V in ``unit``,
    "nats" or "bits"; ``vocab``, the vocabulary's size V: a number, a metric name read at the
    key's site or at none, or ``f(result, key)``) as a measurement failure."""

    def guard(result: Any, key: str) -> str | None:
        if callable(vocab):
            size = float(vocab(result, key))
        elif isinstance(vocab, str):
            size = _sibling(result, key, vocab)
            size = size if math.isfinite(size) else _value(result, vocab)
        else:
            size = float(vocab) if vocab is not None else math.nan
        value = _value(result, key)
        if not (math.isfinite(size) and size > 1 and math.isfinite(value)):
            return None
        uniform = math.log2(size) if unit == "bits" else math.log(size)
        if value > uniform:
            return (
                f"{MEASUREMENT_FAILURE}: {quantity(value, unit)} is worse than a uniform guess "
                f"over {number(size)} tokens ({quantity(uniform, unit)}); not read"
            )
        return None

    return guard


def enough(count: str | Callable[[Any, str], float], minimum: int, what: str = "pairs") -> Guard:
    """Refuse a statistic from fewer than ``minimum`` ``what`` (``count``: a metric name read at
    the key's site, or ``count(result, key)``): the words give the count."""

    def guard(result: Any, key: str) -> str | None:
        n = count(result, key) if callable(count) else _sibling(result, key, count)
        if math.isfinite(n) and n < minimum:
            return f"from only {quantity(n, what)} (fewer than {minimum}); not read"
        return None

    return guard


def _profile_distances(result: Any, key: str, table: str = "g_of_d") -> list[float]:
    site, _ = _site_and_name(result, key)
    rows = (getattr(result, "tables", None) or {}).get(table) or []
    return sorted({float(r["distance"]) for r in rows if r.get("site", site) == site})


def profile_span(result: Any, key: str) -> float:
    """The largest distance of the key's site's measured g(d) (the stimuli's span), or NaN."""
    distances = _profile_distances(result, key)
    return distances[-1] if distances else math.nan


def profile_grid(result: Any, key: str) -> float:
    """The smallest spacing of the key's site's measured g(d) distances, or NaN."""
    distances = _profile_distances(result, key)
    if len(distances) < 2:
        return math.nan
    return min(b - a for a, b in zip(distances, distances[1:]))


#: Tokenizers known to split a year into single digits (one token per digit).
DIGIT_SPLITTING_TOKENIZERS = ("smollm", "llama", "gemma", "mistral", "qwen")


def digit_split_years(result: Any) -> str | None:
    """The words naming a tokenizer artefact, when the stimuli are years and the model's
    tokenizer writes a year as separate digits (``provenance["years_digit_tokens"]`` true, or
    a model whose family is known to): g(d) then jumps where the leading digits change (every
    100 years). None when it does not apply."""
    provenance = getattr(result, "provenance", None) or {}
    described = " ".join(str(provenance.get(k, "")) for k in ("data", "data_source")).lower()
    if "year" not in described:
        return None
    flagged = provenance.get("years_digit_tokens")
    if flagged is None:
        model = str((provenance.get("model") or {}).get("model_id") or provenance.get("model_id"))
        flagged = any(name in model.lower() for name in DIGIT_SPLITTING_TOKENIZERS)
    if not flagged:
        return None
    return (
        "Tokenizer artefact: this model's tokenizer writes a year as separate digits, so two "
        "years that share their leading digits share tokens; g(d) swings where a shared digit "
        "changes (every 10 years for the tens, every 100 for the hundreds), and those swings "
        "are not the model's sense of time."
    )


def guard_words(specs: Sequence[Any], result: Any, key: str) -> str | None:
    """The words of the first guard of the spec for ``key`` that refuses it, or None."""
    _, name = _site_and_name(result, key)
    for spec in specs:
        if spec.name == name:
            return spec.blocked(result, key)
    return None


def is_null(words: str | None) -> bool:
    """Whether a guard's words (or a reading's) say the number is not a finding."""
    if words is None:
        return False
    return words.startswith((AT_CHANCE, UNRESOLVED, MEASUREMENT_FAILURE)) or "not read" in words


def _probe_test_counts(result: Any, site: str, condition: str | None) -> dict[str, float]:
    """Test predictions per task of the probes at ``site`` (the ``splits`` table's ``n_test``
    summed over a task's held-out splits; ``condition``: that column's value, when given)."""
    counts: dict[str, float] = {}
    for row in (getattr(result, "tables", None) or {}).get("splits") or []:
        if row.get("site") != site or (condition and row.get("condition") != condition):
            continue
        n = row.get("n_test")
        if isinstance(n, (int, float)) and math.isfinite(n):
            counts[str(row.get("task"))] = counts.get(str(row.get("task")), 0.0) + float(n)
    return counts


def probe_chance_half_width(result: Any, key: str, condition: str | None = None) -> float:
    """Half-width of the 95 % range a probe accuracy averaged over tasks (CCGP) takes by chance:
    1.96 · √(Σₜ ¼ / nₜ) / T for T tasks of nₜ test predictions each (coin flips); NaN when
    the result has no ``splits`` table for the key's site."""
    site, _ = _site_and_name(result, key)
    counts = [n for n in _probe_test_counts(result, site, condition).values() if n > 0]
    if not counts:
        return math.nan
    return Z95 * math.sqrt(sum(0.25 / n for n in counts)) / len(counts)


def probe_at_chance(condition: str | None = None) -> Guard:
    """Refuse a two-class probe accuracy averaged over tasks (CCGP) that lies within the 95 %
    range of coin flips on the same test predictions (:func:`probe_chance_half_width`):
    "at chance: nothing measured here (…)". Without a ``splits`` table it falls back to
    :func:`at_chance` with :data:`CHANCE_TOLERANCE`."""

    def guard(result: Any, key: str) -> str | None:
        value = _value(result, key)
        if not math.isfinite(value):
            return None
        half = probe_chance_half_width(result, key, condition)
        if not math.isfinite(half):
            return at_chance(0.5)(result, key)
        if abs(value - 0.5) <= half:
            return (
                f"{AT_CHANCE} ({number(value)}, within the ±{number(half, 2)} of 0.5 that "
                "coin flips reach on these test rows)"
            )
        return None

    return guard
