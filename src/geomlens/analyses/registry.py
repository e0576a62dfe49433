"""The registry of analyses, in one module: the generic registry (names and aliases, lazy entry
points, errors that list what exists), the built-ins' declarations found by walking this
package, and ``@register_analysis(name)`` for plugins.

A built-in is a folder ``geomlens/analyses/<name>/`` whose ``__init__`` holds ``DECLARATION``
(a :class:`~geomlens.analyses.declaration.Declaration`, read without importing torch); walking
the package (:func:`walk_builtins`) finds every such folder, so adding a built-in is adding a
folder. Everything that only describes analyses (``geomlens list``, ``run NAME --help``, the
report's plan, a sweep's columns, the metric words) reads :func:`declaration` /
:func:`declarations`; :func:`analysis_class` imports a class when its analysis runs. A plugin's
entry point in the ``geomlens.analyses`` group names a declaration, a class, or a module whose
import registers one (``@register_analysis``). Only :class:`Analysis` subclasses can be
registered (anything else is a ``TypeError`` where it is registered). The registry is modelled
on lm-evaluation-harness's ``api/registry.py``.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import importlib.util
import pkgutil
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from geomlens.analyses.declaration import Declaration, folder_name

if TYPE_CHECKING:
    from geomlens.analyses.base import Analysis

__all__ = [
    "ANALYSES", "ENTRY_POINT_GROUP", "PluginLoadError", "Registry", "UnknownNameError",
    "analysis_class", "builtin_analyses", "declaration", "declarations", "list_analyses",
    "register_analysis", "register_declaration", "walk_builtins",
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
            # An entry point may name the object itself (not yet registered), a module whose
            # import registered it, or what a subclass takes itself (a declaration).
            if isinstance(loaded, type(importlib)):
                continue
            try:
                if self._take_entry_point(entry_point, loaded):
                    continue
            except Exception as error:
                self.load_errors[entry_point.name] = f"{type(error).__name__}: {error}"
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

    def remove(self, name: str) -> None:
        """Forget ``name`` and its aliases (tests that register a throwaway entry)."""
        self._entries.pop(name, None)
        self._lazy.pop(name, None)
        for alias in [a for a, target in self._aliases.items() if target == name]:
            del self._aliases[alias]

    def _take_entry_point(self, entry_point: Any, loaded: Any) -> bool:
        """Whether a subclass registered ``loaded`` itself (the generic registry: never)."""
        return False

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
    """Refuse anything but an :class:`Analysis` subclass, saying what was given."""
    from geomlens.analyses.base import Analysis

    if not (isinstance(obj, type) and issubclass(obj, Analysis)):
        raise TypeError(
            f"Only Analysis subclasses can be registered as analyses; got {obj!r}. Subclass "
            "geomlens.Analysis (see docs/plugins.md)."
        )


def walk_builtins(package: str = "geomlens.analyses") -> Iterator[Declaration]:
    """The declaration of every folder of ``package`` that holds one (``DECLARATION``), by
    folder name, each resolved in its folder; folders without one are passed over. A
    declaration whose name is not its folder's is refused: the folder is the analysis."""
    root = importlib.import_module(package)
    for info in sorted(pkgutil.iter_modules(root.__path__), key=lambda i: i.name):
        if not info.ispkg:
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        found = getattr(module, "DECLARATION", None)
        if not isinstance(found, Declaration):
            continue
        if folder_name(found.name) != info.name:
            raise ValueError(
                f"The analysis folder {info.name!r} declares the name {found.name!r}; a "
                f"built-in's name is its folder's ({info.name.replace('_', '-')!r}): rename one."
            )
        yield found.in_package(module.__name__)


class AnalysisRegistry(Registry["type[Analysis]"]):
    """The analyses' registry: classes (lazy for declared analyses) and their declarations."""

    def __init__(self) -> None:
        super().__init__("analysis", ENTRY_POINT_GROUP, check_analysis_class)
        self.declarations: dict[str, Declaration] = {}

    def declare(self, declared: Declaration) -> None:
        """Register an analysis by its declaration; its class is imported on first use."""
        module, _, attribute = declared.analysis.partition(":")
        if module.startswith("."):
            module = importlib.util.resolve_name(module, declared.package)
        self.add_lazy(declared.name, f"{module}:{attribute}", aliases=declared.aliases)
        self.declarations[declared.name] = declared

    def add(
        self, name: str, obj: Any, *, aliases: tuple[str, ...] = (), replace: bool = False
    ) -> None:
        super().add(name, obj, aliases=aliases, replace=replace)
        self.declarations[name] = Declaration.of_class(obj, name)

    def _take_entry_point(self, entry_point: Any, loaded: Any) -> bool:
        if not isinstance(loaded, Declaration):
            return False
        module = importlib.import_module(entry_point.module)
        declared = loaded.in_package(module.__package__ or "")
        if declared.name != entry_point.name:
            raise ValueError(
                f"The entry point {entry_point.name} = {entry_point.value} names the "
                f"declaration of {declared.name!r}; give the entry point that name."
            )
        if declared.name in self:
            self.clashes[declared.name] = (
                f"the plugin entry point {entry_point.name} = {entry_point.value} names "
                f"analysis {declared.name!r}, which is already registered; rename the "
                "plugin's entry point or uninstall the plugin"
            )
            self.load_errors[declared.name] = f"name clash: {self.clashes[declared.name]}"
            return True
        self.declare(declared)
        return True

    def remove(self, name: str) -> None:
        super().remove(name)
        self.declarations.pop(name, None)

    def declaration(self, name: str) -> Declaration:
        """The declaration of ``name`` (or an alias); errors list what exists."""
        self._load_entry_points()
        canonical = self._aliases.get(name, name)
        if canonical in self.declarations and canonical not in self.clashes:
            return self.declarations[canonical]
        self.get(name)  # raises the registry's error, naming what exists
        return self.declarations[canonical]


ANALYSES = AnalysisRegistry()
for _declared in walk_builtins():
    ANALYSES.declare(_declared)
_BUILTINS: tuple[str, ...] = tuple(sorted(ANALYSES.declarations))

A = TypeVar("A", bound="type[Analysis]")


def register_analysis(
    name: str, *, aliases: tuple[str, ...] | None = None, replace: bool = False
) -> Callable[[A], A]:
    """Class decorator: make an :class:`~geomlens.analyses.base.Analysis` runnable by name.

    ``aliases`` default to those the class itself sets (not inherited ones); ``replace=True``
    takes over a name already registered. Third-party packages use the same decorator and
    declare the module (or the class) in the ``geomlens.analyses`` entry-point group so that
    ``gl.list_analyses()`` finds it; a declaration (see
    :class:`~geomlens.analyses.declaration.Declaration`) is listed without importing the class.
    """

    def decorate(cls: A) -> A:
        check_analysis_class(cls)
        cls.name = name
        own = cls.__dict__.get("aliases", ()) if aliases is None else aliases
        ANALYSES.add(name, cls, aliases=own, replace=replace)
        return cls

    return decorate


def register_declaration(declared: Declaration) -> None:
    """Register an analysis by its declaration (absolute pointers), its class imported when it
    runs: what an entry point naming a declaration does, for code that registers in Python."""
    ANALYSES.declare(declared)


def analysis_class(name: str) -> type[Analysis]:
    """The analysis class registered under ``name`` (or an alias); errors list what exists."""
    return ANALYSES.get(name)


def declaration(name: str) -> Declaration:
    """The declaration of analysis ``name`` (or an alias), without importing its class."""
    return ANALYSES.declaration(name)


def declarations() -> list[Declaration]:
    """Every registered analysis's declaration (built-ins and plugins), by name."""
    return [
        ANALYSES.declarations[name] for name in ANALYSES.names() if name in ANALYSES.declarations
    ]


def list_analyses() -> list[str]:
    """Names of every registered analysis, built-ins and installed plugins."""
    return ANALYSES.names()


def builtin_analyses() -> list[str]:
    """Names of the analyses that ship with geomlens, alphabetical."""
    return list(_BUILTINS)


def report_analyses() -> list[str]:
    """The built-ins the default report runs, alphabetical (its run order): those whose
    declaration does not leave the report (``report=False``: named with ``--analysis``, they
    run)."""
    return [name for name in _BUILTINS if ANALYSES.declarations[name].report]
