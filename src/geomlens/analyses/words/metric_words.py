"""A metric in words, with its unit, through its guards: read from the analyses' declarations.

Every metric is ``<site>.<name>`` (or a bare ``<name>``). Its words, unit, format and guards
belong to the metric spec in its analysis's declaration (see
:mod:`geomlens.analyses.declaration`); this module only reads them, so a new analysis's metrics
are written in words the moment its folder exists, and nothing here lists any analysis's
metrics. What no single spec says: the endings that qualify a base metric
(``alpha_ci_low``, ``ccgp_base``, ``mean_k.random_tokens``) and timings (``*_seconds``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from geomlens.analyses.spec import MetricSpec
from geomlens.formatting import distance_unit, human_name, layer_label, quantity, split_metric

__all__ = ["METRIC_SUFFIXES", "NOT_MEASURED", "RANGE_METRICS", "derived_value", "interval_keys",
           "metric_interval", "metric_label", "metric_name", "metric_refused", "metric_spec",
           "metric_unit", "metric_value", "shared_stimulus_range", "stimulus_range"]  # fmt: skip

#: Endings of metric names that qualify a base metric (``alpha_ci_low``, ``ccgp_base``), in words.
METRIC_SUFFIXES: dict[str, str] = {
    "_ci_low": "95 % interval, low end",
    "_ci_high": "95 % interval, high end",
    "_null_p95": "shuffled-label null, 95th percentile",
    "_null": "shuffled-label null",
    "_theory": "theory's value",
    "_base": "original model",
    "_linearized": "MLP linearised",
}


def _declared_specs(analysis: str = "") -> list[MetricSpec]:
    """The specs of ``analysis`` first (two analyses may both have a ``p_similarity`` with
    different guards), then every registered analysis's in name order."""
    from geomlens.analyses.registry import declaration, declarations

    own: list[MetricSpec] = []
    if analysis:
        try:
            own = list(declaration(analysis).metrics)
        except (KeyError, ImportError):  # not installed here: the others' words still serve
            own = []
    return own + [spec for declared in declarations() for spec in declared.metrics]


def metric_spec(name: str, analysis: str = "") -> MetricSpec | None:
    """The spec of metric ``name`` (after the site): ``analysis``'s own, else the first
    registered analysis's of that name."""
    return next((spec for spec in _declared_specs(analysis) if spec.name == name), None)


def _declared(name: str, attribute: str, analysis: str = "") -> str:
    """The first non-empty ``words`` / ``unit`` a spec of ``name`` declares."""
    specs = _declared_specs(analysis)
    return next(
        (getattr(s, attribute) for s in specs if s.name == name and getattr(s, attribute)), ""
    )


def metric_name(name: str, analysis: str = "") -> str:
    """A metric name (after the site) in words: ``alpha_ci_low`` → "abstraction α, 95 %
    interval, low end"; ``mean_k.random_tokens`` → "mean active latents k, random tokens"."""
    words = _declared(name, "words", analysis)
    if words:
        return words
    head, _, condition = name.partition(".")
    if condition:
        return f"{metric_name(head, analysis)}, {human_name(condition)}"
    for suffix in sorted(METRIC_SUFFIXES, key=len, reverse=True):
        # alpha_ci_high_base: the condition ending first, then the qualifier before it
        if head.endswith(suffix) and len(head) > len(suffix):
            return f"{metric_name(head[: -len(suffix)], analysis)}, {METRIC_SUFFIXES[suffix]}"
    return head.replace("_", " ")


def metric_label(key: str, sites: Any = None, analysis: str = "") -> str:
    """A metric key in words: ``blocks.3.hook_resid_post.auroc.random_tokens`` →
    ``layer 3, residual stream after the block: AUROC, random tokens``."""
    site, name = split_metric(key, sites)
    words = metric_name(name, analysis)
    return f"{layer_label(site)}: {words}" if site else words


def metric_unit(key: str, result: Any = None, sites: Any = None) -> str:
    """The unit of metric ``key`` (``""`` for a ratio, a probability or a cosine)."""
    _, name = split_metric(key, sites)
    head = name.partition(".")[0]
    for suffix in ("_base", "_linearized"):
        head = head.removesuffix(suffix)
    analysis = str(getattr(result, "analysis", "") or "")
    unit = _declared(name, "unit", analysis) or _declared(head, "unit", analysis)
    if unit == "distance":
        return distance_unit(result) if result is not None else ""
    if name.endswith("_seconds"):
        return "s"
    return unit


def metric_value(result: Any, key: str, digits: int = 3, *, unit: bool = True) -> str:
    """The value of metric ``key`` of ``result`` with its unit (``166 years``, ``930 latents``;
    ``unit=False``: without it, for a table whose header names it), as its metric spec's
    ``format`` writes it; when a guard of the spec refuses the number, the guard's words ("at
    chance") instead."""
    refused = metric_refused(result, key)  # a guard that fails: its words, not the number
    if refused is not None:
        return refused
    value = result.metrics.get(key, math.nan)
    if _missing(value):  # never "undefined" or "nan" on a page
        return NOT_MEASURED
    return _written(result, key, value, digits, unit=unit)


#: The words of a metric the result does not hold, or holds as NaN.
NOT_MEASURED = "not measured"

#: The words of an interval a result does not hold (or holds with a NaN end).
NO_INTERVAL = "no interval"


def metric_interval(result: Any, key: str) -> str:
    """ "95 % interval a to b" of metric ``key`` (its ends ``<key>_ci_low`` / ``_ci_high``), each
    end written as the metric itself is (its spec's format and unit); "no interval" when an end
    is missing; when a guard refuses the metric, its interval is not read either ("no interval,
    not read: …")."""
    refused = metric_refused(result, key)
    if refused is not None:
        return f"{NO_INTERVAL}, {refused}"
    ends = [result.metrics.get(end_key, math.nan) for end_key in interval_keys(result, key)]
    if any(_missing(end) for end in ends):
        return NO_INTERVAL
    low, high = (_written(result, key, float(end)) for end in ends)
    return f"95 % interval {low} to {high}"


def interval_keys(result: Any, key: str) -> tuple[str, str]:
    """The keys of the ends of metric ``key``'s 95 % interval: ``<key>_ci_low`` / ``_ci_high``,
    or for a name with a condition, ``<site>.<base>_ci_low.<condition>`` (``auroc_ci_low.
    random_tokens``), whichever the result holds."""
    plain = (f"{key}_ci_low", f"{key}_ci_high")
    sites = (getattr(result, "provenance", None) or {}).get("sites")
    site, name = split_metric(key, sites)
    head, _, condition = name.partition(".")
    if not condition or plain[0] in result.metrics:
        return plain
    prefix = f"{site}." if site else ""
    low, high = (f"{prefix}{head}_ci_{end}.{condition}" for end in ("low", "high"))
    return low, high


def _written(result: Any, key: str, value: Any, digits: int = 3, *, unit: bool = True) -> str:
    """``value`` written as metric ``key`` is written: its spec's format, else the number with
    its unit (``unit=False``: without)."""
    spec = _spec_of(result, key)
    if spec is not None and spec.format is not None:
        return str(spec.format(value))
    sites = (getattr(result, "provenance", None) or {}).get("sites")
    return quantity(value, metric_unit(key, result, sites) if unit else "", digits)


#: The metrics (after the site) of the stimulus range a site's numbers hold for: an analysis
#: whose stimuli lie on a line reports its lowest and highest coordinate under these names,
#: and every headline of the site (the printed summary, the report's tables) names the range.
RANGE_METRICS = ("coordinate_low", "coordinate_high")


def stimulus_range(result: Any, site: str) -> str | None:
    """'1901–2000': the stimulus range ``site``'s numbers hold for, each end written through
    its metric spec (:data:`RANGE_METRICS`); None when the result does not report one (or a
    guard refuses an end)."""
    keys = [f"{site}.{name}" for name in RANGE_METRICS]
    if any(_missing(result.metrics.get(key, math.nan)) for key in keys):
        return None
    if any(metric_refused(result, key) is not None for key in keys):
        return None
    low, high = (metric_value(result, key) for key in keys)
    if low == high:
        return low
    return f"{low} to {high}" if low.startswith(("-", "−")) else f"{low}–{high}"


def shared_stimulus_range(result: Any, sites: Any) -> str | None:
    """The :func:`stimulus_range` every one of ``sites`` holds for, or None when they differ
    (or none reports one)."""
    said = {stimulus_range(result, site) for site in sites}
    return next(iter(said)) if len(said) == 1 else None


def _missing(value: Any) -> bool:
    try:
        return value is None or math.isnan(float(value))
    except (TypeError, ValueError):
        return False


def metric_refused(result: Any, key: str) -> str | None:
    """The words of the first guard of ``key``'s metric spec that refuses it, or None (a key
    with no spec, or one every guard passes)."""
    spec = _spec_of(result, key)
    return spec.blocked(result, key) if spec is not None else None


def _spec_of(result: Any, key: str) -> MetricSpec | None:
    """The spec of metric ``key`` of ``result``: its name's own, else, for a name with a
    condition (``bound.pool``, ``mean_k.random_tokens``), the base metric's, whose guards and
    format hold for each condition of it (a bound from a saturated pool is refused in every
    form)."""
    sites = (getattr(result, "provenance", None) or {}).get("sites")
    name = split_metric(key, sites)[1]
    analysis = str(getattr(result, "analysis", "") or "")
    spec = metric_spec(name, analysis)
    if spec is None and "." in name:
        spec = metric_spec(name.partition(".")[0], analysis)
    return spec


@dataclass(frozen=True)
class _WithDerived:
    """A result seen with one derived quantity added to its metrics (what guards read)."""

    analysis: str
    metrics: dict[str, Any]
    tables: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)


def derived_value(
    result: Any, key: str, value: float, spec: MetricSpec, sources: tuple[str, ...] = ()
) -> str:
    """A quantity derived from metrics of ``result`` (a share, a difference, a ratio), written
    as a metric is: through ``spec``'s format, unit and guards (``key``: the name it would
    have, ``<site>.<spec.name>``). It inherits the verdict of the metrics it is derived from:
    when a guard refuses one of ``sources``, those words (naming that metric) replace it."""
    sites = (getattr(result, "provenance", None) or {}).get("sites")
    for source in sources:
        refused = metric_refused(result, source)
        if refused is not None:
            name = metric_name(split_metric(source, sites)[1], str(result.analysis or ""))
            return f"not read ({name}: {refused})"
    view = _WithDerived(
        str(getattr(result, "analysis", "") or ""),
        {**result.metrics, key: value},
        getattr(result, "tables", None) or {},
        getattr(result, "provenance", None) or {},
        getattr(result, "config", None) or {},
    )
    refused = spec.blocked(view, key)
    if refused is not None:
        return refused
    if spec.format is not None:
        return str(spec.format(value))
    unit = distance_unit(result) if spec.unit == "distance" else spec.unit
    return quantity(value, unit)
