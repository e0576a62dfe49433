"""How the report, the readings, figures, progress lines and the CLI write numbers and names.

One place decides how a number looks, so the page, the plain-words readings and the printed
summary agree:

* :func:`number`: significant digits, thousands separators (``1,506``, never ``1.51e+03``),
  and no exponent notation for magnitudes from 10⁻⁴ up to 10⁶ (beyond that ``2.5 × 10⁷``);
* :func:`quantity`: a number with its unit (``166 years``, ``1,506 tokens``, ``12.3 s``);
* :func:`human_name` / :func:`layer_label`: condition and site identifiers in words
  (``random_tokens`` → "random tokens", ``replaced_15pct`` → "15 % of tokens replaced");
* :func:`duration`: seconds as ``55 s`` or ``5 min 30 s``.

A metric's words, unit and guards belong to its analysis's declaration: they are written by
:mod:`geomlens.analyses.words.metric_words`, which calls these for the numbers.
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


def coordinate(value: Any) -> str:
    """A stimulus coordinate as its axis writes it: a whole number in full with no separator
    (the year ``1901``, never ``1,901``), any other value as :func:`number` writes it."""
    try:
        as_float = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isfinite(as_float) and as_float == round(as_float) and abs(as_float) < 1e15:
        return str(int(as_float))
    return number(as_float)


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
