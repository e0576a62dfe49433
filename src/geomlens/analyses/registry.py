"""The registry of analyses: ``@register_analysis(name)`` and the registry it fills.

Lookup (which loads the built-ins and the plugins first) is in :mod:`geomlens.analyses.catalog`;
this module loads nothing, so that a built-in can import it while the package is importing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from geomlens.registry.registry import Registry

if TYPE_CHECKING:
    from geomlens.analyses.base import Analysis

ENTRY_POINT_GROUP = "geomlens.analyses"
ANALYSES: Registry[type[Analysis]] = Registry("analysis", ENTRY_POINT_GROUP)

A = TypeVar("A", bound="type[Analysis]")


def register_analysis(name: str, *, aliases: tuple[str, ...] = ()) -> Callable[[A], A]:
    """Class decorator: make an :class:`~geomlens.analyses.base.Analysis` runnable by name.

    Third-party packages use the same decorator and declare the module (or the class) in the
    ``geomlens.analyses`` entry-point group so that ``gl.list_analyses()`` finds it.
    """

    def decorate(cls: A) -> A:
        cls.name = name
        ANALYSES.add(name, cls, aliases=aliases)
        return cls

    return decorate
