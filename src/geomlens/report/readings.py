"""Plain-words readings of results: what a number means for a reader who has not read the papers.

A reading is written from a result's public metric names only (the names each analysis
documents), never from its internals, so it reads a result loaded back from JSON as well as a
fresh one. Each analysis (a plugin too) supplies its own reading, ``reading(result)`` returning a
string or a list of paragraphs (a built-in's is in its folder's ``reading.py``); for an analysis
with none, a plain list of its main metrics. Headlines are the metrics whose specs say
``headline=True``.
"""

from __future__ import annotations

from geomlens.analyses.declaration import Declaration
from geomlens.analyses.words.metric_words import (
    metric_interval,
    metric_label,
    metric_name,
    metric_refused,
    metric_spec,
    metric_value,
    stimulus_range,
)
from geomlens.analyses.words.reading_words import per_site
from geomlens.formatting import layer_label
from geomlens.results import Result

__all__ = ["headline", "headline_names", "layer_label", "per_site", "read"]

#: Metrics shown by the fallback reading.
FALLBACK_METRICS = 6
#: Headline metrics of an analysis whose metric specs name none.
FALLBACK_HEADLINES = 4
#: Headline metrics in the printed summary line.
SUMMARY_HEADLINES = 3


def fallback_reading(result: Result) -> list[str]:
    shown = list(result.metrics.items())[:FALLBACK_METRICS]
    if not shown:
        return ["This analysis reported no metrics; see its tables in its JSON file."]
    more = len(result.metrics) - len(shown)
    sites = result_sites(result)
    # The metric in its spec's words with its unit (or a guard's words), never its raw key.
    text = "; ".join(
        f"{metric_label(key, sites)} = {metric_value(result, key)}" for key, _ in shown
    )
    return [f"Main metrics: {text}" + (f" (and {more} more in its JSON file)." if more else ".")]


def read(result: Result, analysis: type | None = None) -> list[str]:
    """Paragraphs reading ``result`` in plain words (see the module docstring): the reading of
    ``analysis`` when given, else the one its declaration names."""
    if analysis is not None:
        own = getattr(analysis, "reading", None)
    else:
        declared = declaration_of(result)
        own = declared.load_reading() if declared is not None else None
    paragraphs: list[str] = []
    if callable(own):
        text = own(result)
        paragraphs = [text] if isinstance(text, str) else list(text)
    return paragraphs or fallback_reading(result)


def declaration_of(result: Result) -> Declaration | None:
    """The declaration of the analysis that wrote ``result``, or None when it is not installed
    here (nothing is imported but the declaration)."""
    from geomlens.analyses.registry import declaration

    try:
        return declaration(result.analysis)
    except (KeyError, ImportError):
        return None


def headline_names(result: Result) -> tuple[str, ...] | None:
    """The headline metric names its analysis's specs declare, or None when they declare none."""
    declared = declaration_of(result)
    names = declared.headlines() if declared is not None else ()
    return names or None


def result_sites(result: Result) -> list[str]:
    """The sites a result has metrics for, in the model's order (from its provenance)."""
    from geomlens.formatting import split_metric

    provenance = result.provenance or {}
    known = provenance.get("analysis_sites") or provenance.get("sites")
    if not known:  # a result made by hand: the sites its metric names spell out
        known = dict.fromkeys(split_metric(key)[0] for key in result.metrics)
        known = [site for site in known if site.startswith("blocks.")]
    return [site for site in known if any(k.startswith(site + ".") for k in result.metrics)]


def headline_metrics(result: Result) -> list[str]:
    """The names (after the site) of ``result``'s headline metrics that it has."""
    from geomlens.formatting import split_metric

    sites = result_sites(result)
    present = {split_metric(key, sites)[1] for key in result.metrics if split_metric(key, sites)[0]}
    wanted = headline_names(result)
    if wanted is None:
        ordered = dict.fromkeys(split_metric(key, sites)[1] for key in result.metrics)
        wanted = tuple(name for name in ordered if name in present)[:FALLBACK_HEADLINES]
    return [name for name in wanted if name in present]


def headline(result: Result) -> str:
    """A short line for the printed summary: the first headline metrics at the last site, with
    their units, the stimulus range they hold for ("at layer 5, over 1901–2000") and the words
    of any caveat of that site (a headline spec with ``caveat=True`` whose guard speaks: "grows
    with the range: no single scale over 1901–2000"); or the result's first summary metrics."""
    sites = result_sites(result)
    names = headline_metrics(result)
    if sites and names:
        site = next(s for s in reversed(sites) if any(f"{s}.{n}" in result.metrics for n in names))
        parts = []
        caveats = _caveats(result, site, names)
        for name in names:
            key = f"{site}.{name}"
            if key not in result.metrics or "_ci_" in name or _nan(result.metrics[key]):
                continue
            if _is_caveat(result, name):  # said after the range, in its own words
                continue
            text = f"{metric_name(name)} {metric_value(result, key)}"
            interval = metric_interval(result, key)  # refused with the metric, never alone
            if interval.startswith("95 %"):
                text += f" ({interval})"
            parts.append(text)
        span = stimulus_range(result, site)
        where = f" at {layer_label(site)}" + (f", over {span}" if span else "")
        return "; ".join(parts[:SUMMARY_HEADLINES]) + where + "".join(f"; {c}" for c in caveats)
    summary = [k for k in result.metrics if k.startswith("summary.")]
    shown = [k for k in summary or list(result.metrics) if "_ci_" not in k]
    shown = [k for k in shown if not _nan(result.metrics[k])]
    # Each in its spec's words through its guards, never its key ("logits.p_identification_n2").
    return (
        "; ".join(f"{metric_label(key, sites)} {metric_value(result, key)}" for key in shown[:3])
        or "no metrics"
    )


def _is_caveat(result: Result, name: str) -> bool:
    spec = metric_spec(name, result.analysis)
    return spec is not None and spec.caveat


def _caveats(result: Result, site: str, names: list[str]) -> list[str]:
    """The words of the site's caveats that apply (see :func:`headline`)."""
    keys = [f"{site}.{name}" for name in names if _is_caveat(result, name)]
    said = [metric_refused(result, key) for key in keys if key in result.metrics]
    return [words for words in said if words is not None]


def _nan(value: object) -> bool:
    return isinstance(value, float) and value != value
