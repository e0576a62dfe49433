"""The registry of analyses: ``@register_analysis(name)``, lookup, and plugin discovery."""

from __future__ import annotations

import importlib
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


def _load_builtins() -> None:
    importlib.import_module("geomlens.analyses")


def analysis_class(name: str) -> type[Analysis]:
    """The analysis class registered under ``name`` (or an alias); errors list what exists."""
    _load_builtins()
    return ANALYSES.get(name)


def list_analyses() -> list[str]:
    """Names of every registered analysis, built-ins and installed plugins."""
    _load_builtins()
    return ANALYSES.names()
