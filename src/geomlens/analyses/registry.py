"""The registry of analyses, beside :class:`~geomlens.analyses.base.Analysis`: the built-ins,
declared once below, and ``@register_analysis(name)`` for plugins.

Only :class:`Analysis` subclasses can be registered (anything else is a ``TypeError`` where it
is registered). Each built-in is a lazy ``"module:Class"`` entry, imported the first time it
is looked up; lookup is in :mod:`geomlens.analyses.catalog`, which also loads the plugins'
entry points. The report, the benchmarks and the tests read :data:`BUILTINS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from geomlens.analyses.base import Analysis
from geomlens.registry.registry import Registry

ENTRY_POINT_GROUP = "geomlens.analyses"


@dataclass(frozen=True)
class BuiltIn:
    """One analysis that ships with geomlens: its name, ``"module:Class"`` and aliases."""

    name: str
    target: str
    aliases: tuple[str, ...] = ()


#: Every built-in analysis (alphabetical; the report runs them in this order). Adding a built-in:
#: see CONTRIBUTING.md ("Adding an analysis").
BUILTINS: tuple[BuiltIn, ...] = (
    BuiltIn("abstraction", "geomlens.analyses.abstraction:Abstraction"),
    BuiltIn(
        "activation-stats",
        "geomlens.analyses.activation_stats:ActivationStats",
        ("activation_stats", "stats"),
    ),
    BuiltIn("ccgp", "geomlens.analyses.ccgp:CCGP"),
    BuiltIn(
        "linearization-effect",
        "geomlens.analyses.linearization_effect:LinearizationEffect",
        ("linearization_effect",),
    ),
    BuiltIn("resolution", "geomlens.analyses.resolution:Resolution"),
    BuiltIn("sae-features", "geomlens.analyses.sae_features:SAEFeatures", ("sae_features", "ssd")),
    BuiltIn("similarity", "geomlens.analyses.similarity:Similarity"),
)


def check_analysis_class(obj: object) -> None:
    """Refuse anything but an :class:`Analysis` subclass, saying what was given."""
    if not (isinstance(obj, type) and issubclass(obj, Analysis)):
        raise TypeError(
            f"Only Analysis subclasses can be registered as analyses; got {obj!r}. Subclass "
            "geomlens.Analysis (see docs/plugins.md)."
        )


ANALYSES: Registry[type[Analysis]] = Registry("analysis", ENTRY_POINT_GROUP, check_analysis_class)
for _builtin in BUILTINS:
    ANALYSES.add_lazy(_builtin.name, _builtin.target, aliases=_builtin.aliases)

A = TypeVar("A", bound=type[Analysis])


def register_analysis(name: str, *, aliases: tuple[str, ...] = ()) -> Callable[[A], A]:
    """Class decorator: make an :class:`~geomlens.analyses.base.Analysis` runnable by name.

    Third-party packages use the same decorator and declare the module (or the class) in the
    ``geomlens.analyses`` entry-point group so that ``gl.list_analyses()`` finds it.
    """

    def decorate(cls: A) -> A:
        check_analysis_class(cls)
        cls.name = name
        ANALYSES.add(name, cls, aliases=aliases)
        return cls

    return decorate
