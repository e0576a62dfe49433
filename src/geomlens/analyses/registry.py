"""The registry of analyses, in one module: the generic registry (names and aliases, lazy entry
points, errors that list what exists), the built-ins found by walking this package, and
``@register_analysis(name)`` for plugins.

A built-in is a folder ``geomlens/analyses/<name>/`` whose ``__init__`` sets ``ANALYSIS`` to its
class; the class carries its name, aliases, example, metric specs, reading and figure. Walking
the package (:func:`walk_builtins`) finds every such folder, so adding a built-in is adding a
folder. A plugin provides the same pieces on its class and declares it (or a module whose import
registers it) in the ``geomlens.analyses`` entry-point group. Only :class:`Analysis` subclasses
can be registered (anything else is a ``TypeError`` where it is registered). The registry is
modelled on lm-evaluation-harness's ``api/registry.py``.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import pkgutil
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from geomlens.analyses.base import Analysis
from geomlens.formatting import describe_metrics

__all__ = [
    "ANALYSES", "ENTRY_POINT_GROUP", "PluginLoadError", "Registry", "UnknownNameError",
    "analysis_class", "builtin_analyses", "list_analyses", "register_analysis", "walk_builtins",
]  # fmt: skip

ENTRY_POINT_GROUP = "geomlens.analyses"

T = TypeVar("T")


class UnknownNameError(KeyError, ValueError):
    """Lookup of a name nobody registered; the message lists the available names."""

    def __str__(self) -> str:
        return str(self.args[0])


class PluginLoadError(ImportError):
    """A lookup of a name whose plugin is installed but failed to import."""


class Registry(Generic[T]):
    """Maps canonical names (and aliases) to registered objects of one kind.

    An entry is an object, or a lazy ``"module:attribute"`` (:meth:`add_lazy`) imported on its
    first lookup. ``check`` sees every object before it is registered and raises ``TypeError``
    for one of the wrong kind, so a bad registration fails where it is made.
    """

    def __init__(
        self,
        kind: str,
        entry_point_group: str | None = None,
        check: Callable[[T], None] | None = None,
    ) -> None:
        self.kind = kind
        self.entry_point_group = entry_point_group
        self.check = check
        self._entries: dict[str, T] = {}
        self._lazy: dict[str, str] = {}
        self._aliases: dict[str, str] = {}
        self._entry_points_loaded = False
        self.load_errors: dict[str, str] = {}
        #: Entry points whose name an other object holds already, by name (never silently
        #: ignored: the name is refused until one of the two is renamed or uninstalled).
        self.clashes: dict[str, str] = {}

    def register(
        self, name: str, *, aliases: tuple[str, ...] = (), replace: bool = False
    ) -> Callable[[T], T]:
        """Decorator registering an object under ``name`` and its ``aliases``."""

        def decorate(obj: T) -> T:
            self.add(name, obj, aliases=aliases, replace=replace)
            return obj

        return decorate

    def add(
        self, name: str, obj: T, *, aliases: tuple[str, ...] = (), replace: bool = False
    ) -> None:
        if self.check is not None:
            self.check(obj)
        self._check_names(name, aliases, obj, replace)
        self._entries[name] = obj
        self._lazy.pop(name, None)
        for alias in aliases:
            self._aliases[alias] = name

    def add_lazy(self, name: str, target: str, *, aliases: tuple[str, ...] = ()) -> None:
        """Register ``target`` (``"module:attribute"``) under ``name``, imported on first use."""
        module, _, attribute = target.partition(":")
        if not module or not attribute:
            raise ValueError(f"A lazy {self.kind} entry is 'module:attribute'; got {target!r}.")
        self._check_names(name, aliases, target, replace=False)
        self._lazy[name] = target
        for alias in aliases:
            self._aliases[alias] = name

    def _check_names(self, name: str, aliases: tuple[str, ...], obj: object, replace: bool) -> None:
        for key in (name, *aliases):
            if not key or key != key.strip():
                raise ValueError(
                    f"Invalid {self.kind} name {key!r}: use a non-empty name without spaces around it."
                )
            known = key in self._entries or key in self._lazy
            owner = self._aliases.get(key, key if known else None)
            if owner is None or replace:
                continue
            holder = self._entries.get(owner, self._lazy.get(owner))
            if holder is not obj:
                raise ValueError(
                    f"{self.kind.capitalize()} name {key!r} is already registered (by "
                    f"{holder!r}); pick another name or pass replace=True."
                )

    def _load_lazy(self, name: str) -> None:
        module, _, attribute = self._lazy[name].partition(":")
        obj = getattr(importlib.import_module(module), attribute)
        if self.check is not None:
            self.check(obj)
        self._entries[name] = obj
        del self._lazy[name]

    def _load_entry_points(self) -> None:
        if self._entry_points_loaded or self.entry_point_group is None:
            return
        self._entry_points_loaded = True
        for entry_point in importlib.metadata.entry_points(group=self.entry_point_group):
            try:
                loaded = entry_point.load()
            except Exception as error:  # a broken plugin must not break the others
                self.load_errors[entry_point.name] = f"{type(error).__name__}: {error}"
                continue
            # An entry point may name the object itself (not yet registered) or a module whose
            # import registered it; only the former needs adding.
            if isinstance(loaded, type(importlib)):
                continue
            if entry_point.name not in self:
                self.add(entry_point.name, loaded)
            elif self.get_registered(entry_point.name) is not loaded:
                taken = self.get_registered(entry_point.name)
                where = (
                    f"{getattr(taken, '__module__', '?')}.{getattr(taken, '__qualname__', taken)}"
                )
                self.clashes[entry_point.name] = (
                    f"the plugin entry point {entry_point.name} = {entry_point.value} names "
                    f"{self.kind} {entry_point.name!r}, which {where} already is; rename the "
                    "plugin's entry point or uninstall the plugin"
                )
                self.load_errors[entry_point.name] = f"name clash: {self.clashes[entry_point.name]}"

    def names(self) -> list[str]:
        """The usable names (a clashing name is not: see :attr:`clashes`)."""
        self._load_entry_points()
        return sorted(name for name in {*self._entries, *self._lazy} if name not in self.clashes)

    def aliases(self) -> dict[str, str]:
        self._load_entry_points()
        return dict(self._aliases)

    def __contains__(self, name: object) -> bool:
        return name in self._entries or name in self._lazy or name in self._aliases

    def get_registered(self, name: str) -> T | None:
        """What ``name`` (or the alias) is registered as now, without loading plugins (a lazy
        entry is imported)."""
        canonical = self._aliases.get(name, name)
        if canonical in self._lazy:
            self._load_lazy(canonical)
        return self._entries.get(canonical)

    def get(self, name: str) -> T:
        self._load_entry_points()  # once: a plugin may claim a built-in's name (a clash)
        canonical = self._aliases.get(name, name)
        if canonical in self.clashes:
            raise PluginLoadError(
                f"The {self.kind} name {canonical!r} is claimed twice: {self.clashes[canonical]}."
            )
        if canonical in self._lazy:
            self._load_lazy(canonical)
        if canonical in self._entries:
            return self._entries[canonical]
        if name in self.load_errors:
            raise PluginLoadError(
                f"The plugin providing {self.kind} {name!r} failed to load: "
                f"{self.load_errors[name]}. Fix its installation (e.g. install what it imports) "
                "or uninstall it."
            )
        available = self.names() + sorted(self._aliases)
        nearest = difflib.get_close_matches(name, available, n=1)
        hint = f" Did you mean {nearest[0]!r}?" if nearest else ""
        broken = ""
        if self.load_errors:
            broken = " Plugins that failed to load: " + "; ".join(
                f"{n} ({e})" for n, e in sorted(self.load_errors.items())
            )
        raise UnknownNameError(
            f"Unknown {self.kind} {name!r}.{hint} Available: {', '.join(self.names()) or 'none'}."
            + broken
        )


def check_analysis_class(obj: object) -> None:
    """Refuse anything but an :class:`Analysis` subclass, saying what was given; make its metric
    specs known to the number formatting."""
    if not (isinstance(obj, type) and issubclass(obj, Analysis)):
        raise TypeError(
            f"Only Analysis subclasses can be registered as analyses; got {obj!r}. Subclass "
            "geomlens.Analysis (see docs/plugins.md)."
        )
    describe_metrics(obj.metric_specs, getattr(obj, "name", ""))


def walk_builtins(package: str = "geomlens.analyses") -> Iterator[type[Analysis]]:
    """The analysis class of every folder of ``package`` that declares one (``ANALYSIS``), by
    folder name; folders without one (shared machinery) are passed over."""
    root = importlib.import_module(package)
    for info in sorted(pkgutil.iter_modules(root.__path__), key=lambda i: i.name):
        if not info.ispkg:
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        found = getattr(module, "ANALYSIS", None)
        if found is not None:
            yield found


ANALYSES: Registry[type[Analysis]] = Registry("analysis", ENTRY_POINT_GROUP, check_analysis_class)
_BUILTINS: list[str] = []
for _found in walk_builtins():
    ANALYSES.add(_found.name, _found, aliases=_found.aliases)
    _BUILTINS.append(_found.name)

A = TypeVar("A", bound=type[Analysis])


def register_analysis(
    name: str, *, aliases: tuple[str, ...] | None = None, replace: bool = False
) -> Callable[[A], A]:
    """Class decorator: make an :class:`~geomlens.analyses.base.Analysis` runnable by name.

    ``aliases`` default to those the class itself sets (not inherited ones); ``replace=True``
    takes over a name already registered. Third-party packages use the same decorator and
    declare the module (or the class) in the ``geomlens.analyses`` entry-point group so that
    ``gl.list_analyses()`` finds it.
    """

    def decorate(cls: A) -> A:
        check_analysis_class(cls)
        cls.name = name
        describe_metrics(cls.metric_specs, name)  # its own specs, under its registered name
        own = cls.__dict__.get("aliases", ()) if aliases is None else aliases
        ANALYSES.add(name, cls, aliases=own, replace=replace)
        return cls

    return decorate


def analysis_class(name: str) -> type[Analysis]:
    """The analysis class registered under ``name`` (or an alias); errors list what exists."""
    return ANALYSES.get(name)


def list_analyses() -> list[str]:
    """Names of every registered analysis, built-ins and installed plugins."""
    return ANALYSES.names()


def builtin_analyses() -> list[str]:
    """Names of the analyses that ship with geomlens, alphabetical (the report's run order)."""
    return sorted(_BUILTINS)
