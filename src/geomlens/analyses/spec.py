"""What an analysis folder declares besides its class: its metrics and its example.

Every analysis (a built-in folder ``geomlens/analyses/<name>/`` or a plugin's class) carries
these as class attributes, so that the report, the formatting of numbers, the benchmarks and the
contract checks read one declaration:

- ``metric_specs``: a tuple of :class:`MetricSpec`, one per metric name (the part of
  ``<site>.<name>`` after the site): its words, its unit, whether it is a headline, how to
  format it, and the guards that must pass before it is read;
- ``example``: an :class:`Example`, small rows and options that every contract check
  (:mod:`geomlens.testing`) runs the analysis on;
- ``reading``: a static method ``reading(result) -> list[str]`` (plain-words paragraphs);
- ``plot``: the class method drawing its figure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Example", "Guard", "MetricSpec", "headline_names", "interval_ends", "specs_by_name"]

#: A guard: a check that must pass before a number is read. It gets the result and the metric's
#: key (``<site>.<name>``) and returns ``None`` when the number may be read, or the words that
#: replace it when it may not (e.g. "at chance" when the accuracy's interval contains chance,
#: "unresolved" when the scale lies below the grid's spacing). No guard is attached yet: a spec's
#: ``guards`` default to none, and :meth:`MetricSpec.blocked` runs them in order.
Guard = Callable[[Any, str], "str | None"]


@dataclass(frozen=True)
class MetricSpec:
    """One metric of an analysis, named as it appears after the site in ``<site>.<name>``.

    ``words``: the metric in words (``"abstraction α"``); ``unit``: the unit of its value (``""``
    for a ratio, a probability or a cosine; ``"distance"`` for the stimuli's coordinate unit);
    ``headline``: whether the report shows it for every site and the printed summary leads with
    it (headlines keep the order of the specs); ``format``: writes a value (default
    :func:`geomlens.formatting.number`); ``guards``: see :data:`Guard`; ``caveat``: a headline
    whose guard's words, when a guard speaks, qualify every other number of its site (the
    scale "grows with the range: no single scale over 1901–2000"), so the printed summary
    line says them even when the metric is not among its first headlines.
    """

    name: str
    words: str = ""
    unit: str = ""
    headline: bool = False
    format: Callable[[Any], str] | None = None
    guards: tuple[Guard, ...] = field(default=())
    caveat: bool = False

    def blocked(self, result: Any, key: str) -> str | None:
        """The words of the first guard that refuses ``key`` of ``result``, or None."""
        for guard in self.guards:
            reason = guard(result, key)
            if reason is not None:
                return reason
        return None


def interval_ends(
    name: str, words: str = "", unit: str = "", **fields: Any
) -> tuple[MetricSpec, ...]:
    """The specs of ``<name>_ci_low`` and ``<name>_ci_high``, the ends of metric ``name``'s
    95 % interval: alike but for the name, and for ``words`` (when given) followed by
    ", 95 % interval low" or "high"."""
    return tuple(
        MetricSpec(
            f"{name}_ci_{end}", f"{words}, 95 % interval {end}" if words else "", unit, **fields
        )
        for end in ("low", "high")
    )


def specs_by_name(specs: Sequence[MetricSpec]) -> dict[str, MetricSpec]:
    return {spec.name: spec for spec in specs}


def headline_names(specs: Sequence[MetricSpec]) -> tuple[str, ...]:
    return tuple(spec.name for spec in specs if spec.headline)


@dataclass(frozen=True)
class Example:
    """Small rows and options of an analysis that every contract check runs it on.

    ``rows`` builds plain mappings (so a check can hand them over as a list, a generator, a
    .jsonl file or a ``datasets`` dataset); ``built_options`` builds options afresh for each run
    (objects such as an SAE), merged over ``options``; ``site`` is one site the analysis reads on
    the checks' tiny GPT-2 (the fault checks break that site's hook); ``known_failures`` maps
    a check's name to why this analysis is not expected to pass it on this example (run under
    pytest, such a check is an expected failure carrying that reason, as scikit-learn's
    ``_xfail_checks``).
    """

    rows: Callable[[], list[dict[str, Any]]]
    options: Mapping[str, Any] = field(default_factory=dict)
    batch_size: int = 4
    built_options: Callable[[], dict[str, Any]] | None = None
    site: str = "blocks.1.hook_resid_post"
    known_failures: Mapping[str, str] = field(default_factory=dict)

    def analysis_options(self) -> dict[str, Any]:
        """Every option of the analysis (the built ones fresh), without ``batch_size``."""
        extra = self.built_options() if self.built_options is not None else {}
        return {**self.options, **extra}

    def run_options(self) -> dict[str, Any]:
        """``batch_size`` and every option of the analysis, ready for ``gl.run``."""
        return {"batch_size": self.batch_size, **self.analysis_options()}
