"""How the report, the readings, figures, progress lines and the CLI write numbers and names.

One place decides how a number looks, so the page, the plain-words readings and the printed
summary agree:

* :func:`number`: significant digits, thousands separators (``1,506``, never ``1.51e+03``),
  and no exponent notation for magnitudes from 10⁻⁴ up to 10⁶ (beyond that ``2.5 × 10⁷``);
* :func:`quantity`: a number with its unit (``166 years``, ``1,506 tokens``, ``12.3 s``);
* :func:`metric_value`: a metric (``<site>.<name>``) with the unit its name implies
  (:data:`METRIC_UNITS`, the stimuli's coordinate unit for distances);
* :func:`human_name` / :func:`metric_label`: condition and metric identifiers in words
  (``random_tokens`` → "random tokens", ``replaced_15pct`` → "15 % of tokens replaced");
* :func:`duration`: seconds as ``55 s`` or ``5 min 30 s``.

The readings of each analysis call these, e.g.
``quantity(eps, distance_unit(result))`` or ``metric_value(result, f"{site}.pool_size")``.
"""

from __future__ import annotations

import math
import re
from typing import Any

#: Magnitudes at or above this are written as ``m × 10ⁿ`` (below it never with an exponent).
EXPONENT_FROM = 1e6
#: Nonzero magnitudes below this are written as ``m × 10⁻ⁿ`` (fixed-point would be unreadable).
EXPONENT_BELOW = 1e-4
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def number(value: Any, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits, with thousands separators.

    Values of ``digits`` or more integer digits are rounded to whole units and written in full
    (``1,506``, ``123,457``); smaller ones keep ``digits`` significant digits without trailing
    zeros (``0.0843``, ``16.6``, ``1.5``).
    NaN and None read "undefined"; infinities "∞" / "−∞".
    """
    if value is None:
        return "undefined"
    if isinstance(value, bool):
        return str(value).lower()
    try:
        value = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(value):
        return "undefined"
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= EXPONENT_FROM or magnitude < EXPONENT_BELOW:
        mantissa, exponent = f"{value:.{max(digits - 1, 0)}e}".split("e")
        mantissa = mantissa.rstrip("0").rstrip(".") if "." in mantissa else mantissa
        return f"{mantissa} × 10{str(int(exponent)).translate(_SUPERSCRIPT)}"
    if magnitude >= 10 ** (digits - 1):  # whole units: all the integer digits, no rounding away
        return f"{round(value):,}"
    # Round to significant digits, then write in fixed point (never the 'g' exponent form).
    decimals = max(digits - 1 - math.floor(math.log10(magnitude)), 0)
    text = f"{round(value, decimals):,.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def quantity(value: Any, unit: str = "", digits: int = 3) -> str:
    """``value`` with its ``unit``: ``166 years``, ``1,506 tokens``, ``0.5 s``; no unit: the number.

    A count of one takes the singular (``1 token``) for units ending in "s" other than "s".
    """
    text = number(value, digits)
    if not unit or text == "undefined":
        return text
    if unit == "%":
        return f"{text} %"
    if text == "1" and unit.endswith("s") and len(unit) > 1 and " " not in unit:
        unit = unit[:-1]
    return f"{text} {unit}"


def percent(fraction: Any, digits: int = 3) -> str:
    """A fraction as a percentage: ``0.981`` → ``98.1 %``."""
    if fraction is None or (isinstance(fraction, float) and math.isnan(fraction)):
        return "undefined"
    return f"{number(100 * float(fraction), digits)} %"


def duration(seconds: Any) -> str:
    """``55 s``, ``0.4 s``, ``5 min 30 s``, ``1 h 2 min``."""
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "undefined"
    seconds = float(seconds)
    if seconds < 60:
        return f"{number(seconds, 2 if seconds < 10 else 3)} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


#: Condition, data and option identifiers in words. Patterns (``replaced_15pct``) are handled by
#: :func:`human_name`.
HUMAN_NAMES: dict[str, str] = {
    "random_tokens": "random tokens",
    "python_source": "Python source code",
    "heldout": "held-out English",
    "calibration": "calibration text",
    "base": "original model",
    "linearized": "linearised MLP",
    "final_hidden_cosine_distance": "cosine distance between the final hidden states",
    "smoothed_bits_per_token": "smoothed bits per token",
    "centred-cosine": "centred cosine",
    "hook_resid_post": "residual stream after the block",
    "hook_resid_pre": "residual stream before the block",
    "hook_mlp_out": "MLP output",
    "hook_attn_out": "attention output",
    "hook_resid_mid": "residual stream between attention and MLP",
    "mlp.hook_post": "MLP activation",
    "mlp.hook_pre": "MLP pre-activation",
    "hook_embed": "token embedding",
    "logits": "output logits",
}

#: Metric names (the part after the site) in words that no one analysis owns; each analysis's
#: own metrics are described by its metric specs (``metric_specs``), added by
#: :func:`describe_metrics` when the analysis is registered.
METRIC_NAMES: dict[str, str] = {
    "stimuli": "stimuli",
    "rows": "rows",
}
#: Words and units from the registered analyses' metric specs (see :func:`describe_metrics`).
_SPEC_WORDS: dict[str, str] = {}
_SPEC_UNITS: dict[str, str] = {}
_SPECS: dict[str, Any] = {}


#: Each analysis's own specs by metric name (two analyses may both have a ``p_similarity`` with
#: different guards): read first by :func:`metric_value` for a result of that analysis.
_SPECS_OF: dict[str, dict[str, Any]] = {}


def describe_metrics(specs: Any, analysis: str = "") -> None:
    """Make ``specs`` (an analysis's :class:`~geomlens.analyses.spec.MetricSpec` tuple) known to
    :func:`metric_name`, :func:`metric_unit` and :func:`metric_value` (``analysis``: its
    registered name, so a result of it is guarded by its own specs). The registry calls this
    for every analysis it registers (built-ins and plugins alike)."""
    if analysis:
        _SPECS_OF[analysis] = {spec.name: spec for spec in specs}
    for spec in specs:
        if spec.words:
            _SPEC_WORDS.setdefault(spec.name, spec.words)
        if spec.unit:
            _SPEC_UNITS.setdefault(spec.name, spec.unit)
        _SPECS.setdefault(spec.name, spec)


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

#: The unit of metrics no one analysis owns, by metric name (the part after the site; for names
#: with a condition such as ``mean_k.heldout``, the part before the condition); each analysis's
#: own are in its metric specs. ``"distance"``: the stimuli's coordinate unit, see
#: :func:`distance_unit`.
METRIC_UNITS: dict[str, str] = {
    "num_tokens": "tokens",
    "stimuli": "stimuli",
    "rows": "rows",
}

#: Words in a data description → the unit of its coordinate (see :func:`distance_unit`).
COORDINATE_UNITS: dict[str, str] = {
    "year": "years",
    "month": "months",
    "weekday": "days",
    "hue": "degrees",
}

_REPLACED = re.compile(r"replaced_(\d+)pct")
_SITE = re.compile(r"blocks\.(\d+)\.(.+)")


def human_name(identifier: str) -> str:
    """A condition, data or option identifier in words (unknown ones: underscores → spaces)."""
    if identifier in HUMAN_NAMES:
        return HUMAN_NAMES[identifier]
    replaced = _REPLACED.fullmatch(identifier)
    if replaced:
        return f"{int(replaced.group(1))} % of tokens replaced"
    return identifier.replace("_", " ")


_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")


def plain_words(text: str) -> str:
    """``text`` without Sphinx markup (a role such as ``:func:`name``` → its target, double
    backticks dropped): docstrings read out in the CLI or on the page show no markup."""
    return _LITERAL.sub(r"\1", _ROLE.sub(r"\1", text))


def layer_label(site: str) -> str:
    """``blocks.3.hook_resid_post`` → ``layer 3, residual stream after the block`` (the hook in
    words, :func:`site_words`); other names in words; a pair of sites ``a~b`` (a metric of two
    sites) → ``layer 1, … and layer 4, …``. The raw site name stays in the JSON."""
    if "~" in site:
        return " and ".join(layer_label(part) for part in site.split("~"))
    match = _SITE.fullmatch(site)
    return f"layer {match.group(1)}, {site_words(match.group(2))}" if match else site_words(site)


def site_words(hook: str) -> str:
    """A hook name (the part after ``blocks.N.``) or a model-level site in words: known ones
    from :data:`HUMAN_NAMES`, others with ``hook_`` dropped and ``_`` / ``.`` as spaces."""
    if hook in HUMAN_NAMES:
        return HUMAN_NAMES[hook]
    return hook.replace("hook_", "").replace("_", " ").replace(".", " ").strip()


def split_metric(key: str, sites: Any = None) -> tuple[str, str]:
    """``<site>.<name>`` → ``(site, name)``. Sites contain dots, so the known ``sites`` (or the
    ``blocks.N.hook`` pattern, or the first dotted part) decide where the site ends."""
    for site in sorted(sites or (), key=len, reverse=True):
        if key.startswith(site + "."):
            return site, key[len(site) + 1 :]
    match = re.match(r"(blocks\.\d+\.\w+(?:~blocks\.\d+\.\w+)?)\.(.+)", key)
    if match:
        return match.group(1), match.group(2)
    site, _, name = key.partition(".")
    return (site, name) if name else ("", key)


def metric_name(name: str) -> str:
    """A metric name (after the site) in words: ``alpha_ci_low`` → "abstraction α, 95 %
    interval, low end"; ``mean_k.random_tokens`` → "mean active latents k, random tokens"."""
    if name in METRIC_NAMES or name in _SPEC_WORDS:
        return METRIC_NAMES.get(name) or _SPEC_WORDS[name]
    head, _, condition = name.partition(".")
    if condition:
        return f"{metric_name(head)}, {human_name(condition)}"
    for suffix in sorted(METRIC_SUFFIXES, key=len, reverse=True):
        # alpha_ci_high_base: the condition ending first, then the qualifier before it
        if head.endswith(suffix) and len(head) > len(suffix):
            return f"{metric_name(head[: -len(suffix)])}, {METRIC_SUFFIXES[suffix]}"
    return head.replace("_", " ")


def metric_label(key: str, sites: Any = None) -> str:
    """A metric key in words: ``blocks.3.hook_resid_post.auroc.random_tokens`` →
    ``layer 3, residual stream after the block: AUROC, random tokens``."""
    site, name = split_metric(key, sites)
    words = metric_name(name)
    return f"{layer_label(site)}: {words}" if site else words


def distance_unit(result: Any) -> str:
    """The unit of the stimuli's coordinate (so of ε and of the distance d), or ``""``.

    Read from ``result.provenance["coordinate_unit"]`` when an analysis or the report runner
    recorded one, else from a known word in the data's description (``provenance["data"]`` or
    ``["data_source"]``: "Years 1500–2000 …" → ``years``).
    """
    provenance = getattr(result, "provenance", None) or {}
    if provenance.get("coordinate_unit"):
        return str(provenance["coordinate_unit"])
    described = " ".join(str(provenance.get(k, "")) for k in ("data", "data_source")).lower()
    for word, unit in COORDINATE_UNITS.items():
        if word in described:
            return unit
    return ""


def metric_unit(key: str, result: Any = None, sites: Any = None) -> str:
    """The unit of metric ``key`` (``""`` for a ratio, a probability or a cosine)."""
    _, name = split_metric(key, sites)
    head = name.partition(".")[0]
    for suffix in ("_base", "_linearized"):
        head = head.removesuffix(suffix)
    units = {**_SPEC_UNITS, **METRIC_UNITS}
    unit = units.get(name) or units.get(head, "")
    if unit == "distance":
        return distance_unit(result) if result is not None else ""
    if name.endswith("_seconds"):
        return "s"
    return unit


def metric_value(result: Any, key: str, digits: int = 3) -> str:
    """The value of metric ``key`` of ``result`` with its unit (``166 years``, ``930 latents``),
    as its metric spec's ``format`` writes it; when a guard of the spec refuses the number, the
    guard's words ("at chance") instead."""
    sites = (getattr(result, "provenance", None) or {}).get("sites")
    value = result.metrics.get(key, math.nan)
    name = split_metric(key, sites)[1]
    spec = _SPECS_OF.get(str(getattr(result, "analysis", "")), {}).get(name) or _SPECS.get(name)
    if spec is not None:
        refused = spec.blocked(result, key)  # a guard that fails: its words, not the number
        if refused is not None:
            return refused
        if spec.format is not None:  # the metric's spec says how it is written
            return str(spec.format(value))
    return quantity(value, metric_unit(key, result, sites), digits)
