"""What an analysis is before anything runs: its declaration, read without importing torch.

Every analysis folder's ``__init__.py`` holds one :class:`Declaration`: the name (the folder's,
``_`` written ``-``) and its aliases, a one-line summary, its options (a dataclass of
:func:`option` fields: types, defaults, help, limits), its default data in words, its metric
specs (words, unit, headline or not, guards), the metrics a training sweep follows, the cheaper
options of a ``--quick`` report, and lazy ``"module:attribute"`` pointers to its class, its
example and its reading. ``geomlens list``, ``geomlens run NAME --help``, the report's plan, a
sweep's columns and the metric words read declarations only; the class (and torch) is imported
when the analysis runs. A plugin's entry point names a declaration too (or a class, from which
:meth:`Declaration.of_class` reads one).

A pointer that starts with ``.`` is relative to the package that declares it, so a folder
copied under a new name keeps pointing at its own modules.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from geomlens.analyses.spec import Example, MetricSpec, headline_names, specs_by_name
from geomlens.data.corpus import DEFAULT_CORPUS_SIZE
from geomlens.formatting import plain_words

#: An analysis class (``geomlens.analyses.base.Analysis``, which imports this module: named
#: here without importing it, so the declarations stay free of torch).
AnalysisClass = Any

__all__ = [
    "BUNDLED_CORPUS",
    "AnalysisConfig",
    "Declaration",
    "first_paragraph",
    "folder_name",
    "option",
    "option_lines",
]

#: The words for the default data of an analysis that ships none of its own (the base class's
#: ``default_data``: :func:`geomlens.data.corpus.corpus_dataset` at its default size).
BUNDLED_CORPUS = (
    f"The bundled English corpus: {DEFAULT_CORPUS_SIZE} paragraphs of Python standard-library "
    "docstrings."
)


def option(
    default: Any,
    help: str,
    *,
    low: float | None = None,
    high: float | None = None,
    choices: tuple[Any, ...] | None = None,
    **kwargs: Any,
) -> Any:
    """A config field with a description (shown by ``geomlens list --verbose`` and in docs).

    ``low`` / ``high`` (inclusive) and ``choices`` are checked, with the type the field is
    annotated with, when the analysis is built, so a bad value fails there naming the option.
    """
    metadata = {"help": help, "low": low, "high": high, "choices": choices}
    if isinstance(default, (list, dict, set)):
        return field(default_factory=lambda: type(default)(default), metadata=metadata, **kwargs)
    return field(default=default, metadata=metadata, **kwargs)


@dataclass
class AnalysisConfig:
    """Base class of every analysis config. Subclasses add fields made with :func:`option`."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def field_help(cls) -> dict[str, str]:
        return {f.name: f.metadata.get("help", "") for f in dataclasses.fields(cls)}


def folder_name(name: str) -> str:
    """The folder (and module) spelling of an analysis name: ``sae-features`` → ``sae_features``."""
    return name.replace("-", "_")


@dataclass(frozen=True)
class Declaration:
    """One analysis as everything but its run sees it (see the module docstring).

    ``analysis``, ``example`` and ``reading`` are ``"module:attribute"`` pointers (relative to
    ``package`` when they start with ``.``); ``example`` and ``reading`` may also be the objects
    themselves. ``sweep_metrics``: the metrics a training sweep follows (empty: every numeric
    one). ``quick``: options a ``--quick`` report sets cheaper. ``requires``: modules the
    analysis imports when it runs that geomlens does not install by default, and ``install``
    what ``pip install`` takes to bring them (``"geomlens[devinterp]"``; listing it imports
    none of them).
    ``report``: False leaves it out of the default report (named with ``--analysis`` it runs).
    """

    name: str
    summary: str
    analysis: str
    config: type[AnalysisConfig] = AnalysisConfig
    default_data: str = BUNDLED_CORPUS
    metrics: tuple[MetricSpec, ...] = ()
    example: str | Example | None = None
    reading: str | Callable[[Any], Any] | None = None
    aliases: tuple[str, ...] = ()
    sweep_metrics: tuple[str, ...] = ()
    quick: Mapping[str, Any] = field(default_factory=dict)
    requires: tuple[str, ...] = ()
    install: str = ""
    report: bool = True
    #: The package relative pointers resolve in (set where the declaration is found).
    package: str = ""

    def __post_init__(self) -> None:
        if not self.name or self.name != self.name.strip():
            raise ValueError(f"An analysis declaration needs a name; got {self.name!r}.")
        if not (isinstance(self.config, type) and dataclasses.is_dataclass(self.config)):
            raise TypeError(
                f"Analysis {self.name!r}: config must be an AnalysisConfig dataclass; got "
                f"{self.config!r}."
            )
        unknown = sorted(set(self.quick) - set(self.option_names()))
        if unknown:
            raise ValueError(
                f"Analysis {self.name!r}: quick options {unknown} are not options of "
                f"{self.config.__name__} ({', '.join(self.option_names())})."
            )

    # -- read without importing the analysis ----------------------------------------------
    def option_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(self.config))

    def headlines(self) -> tuple[str, ...]:
        """The headline metrics, in the order of the specs."""
        return headline_names(self.metrics)

    def spec(self, metric: str) -> MetricSpec | None:
        return specs_by_name(self.metrics).get(metric)

    def missing(self) -> tuple[str, ...]:
        """The modules of ``requires`` that cannot be imported here (found without importing
        them)."""
        return tuple(name for name in self.requires if importlib.util.find_spec(name) is None)

    def check_installed(self) -> None:
        """Raise ``ImportError`` (one line, naming what to install) when a module of
        ``requires`` is missing."""
        missing = self.missing()
        if missing:
            install = (
                f'pip install "{self.install}"'
                if self.install
                else ("pip install " + " ".join(missing))
            )
            raise ImportError(
                f"Analysis {self.name!r} needs {', '.join(missing)}, which is not installed: "
                f"{install}."
            )

    def in_package(self, package: str) -> Declaration:
        """This declaration with its relative pointers resolved in ``package``."""
        return self if self.package == package else dataclasses.replace(self, package=package)

    # -- what is imported only when needed ------------------------------------------------
    def load_class(self) -> AnalysisClass:
        cls = self._resolve(self.analysis, "analysis")
        return cls

    def load_example(self) -> Example | None:
        if self.example is None or isinstance(self.example, Example):
            return self.example
        return self._resolve(self.example, "example")

    def load_reading(self) -> Callable[[Any], Any] | None:
        if self.reading is None or callable(self.reading):
            return self.reading
        return self._resolve(self.reading, "reading")

    def _resolve(self, pointer: str, what: str) -> Any:
        module, _, attribute = pointer.partition(":")
        if not module or not attribute:
            raise ValueError(
                f"Analysis {self.name!r}: its {what} is given as 'module:attribute' (e.g. "
                f"'.analysis:MyAnalysis'); got {pointer!r}."
            )
        if module.startswith(".") and not self.package:
            raise ValueError(
                f"Analysis {self.name!r}: the relative {what} pointer {pointer!r} needs the "
                "package it is relative to; give an absolute 'package.module:attribute'."
            )
        loaded = importlib.import_module(module, self.package or None)
        try:
            return getattr(loaded, attribute)
        except AttributeError:
            raise AttributeError(
                f"Analysis {self.name!r}: its {what} pointer {pointer!r} names nothing "
                f"({loaded.__name__} has no {attribute!r})."
            ) from None

    @classmethod
    def of_class(cls, analysis: AnalysisClass, name: str | None = None) -> Declaration:
        """The declaration of a class registered without one (a plugin's
        ``@register_analysis``): everything read off the class itself."""
        own = analysis.__dict__.get("declaration")
        if isinstance(own, Declaration) and (name is None or own.name == name):
            return own
        return cls(
            name=name or analysis.name,
            summary=_first_line(analysis.__doc__),
            analysis=f"{analysis.__module__}:{analysis.__qualname__}",
            config=analysis.Config,
            default_data=_default_data_words(analysis),
            metrics=tuple(analysis.metric_specs),
            example=analysis.example,
            reading=getattr(analysis, "reading", None),
            aliases=tuple(analysis.__dict__.get("aliases", ())),
        )


def _first_line(text: str | None) -> str:
    return plain_words((text or "").strip().splitlines()[0]) if text and text.strip() else ""


def first_paragraph(function: Any) -> str:
    """The first paragraph of ``function``'s docstring, on one line, without Sphinx markup ('' without
    one): it is shown to users (``geomlens list``, the page)."""
    return plain_words(" ".join((function.__doc__ or "").strip().split("\n\n")[0].split()))


def _default_data_words(analysis: AnalysisClass) -> str:
    """A class's default data in words: the first paragraph of its ``default_data`` docstring
    (the bundled corpus when it keeps the base class's)."""
    method = analysis.default_data
    if method.__qualname__ == "Analysis.default_data":  # the base class's: the bundled corpus
        return BUNDLED_CORPUS
    return first_paragraph(method) or "Its own shipped data (see its documentation)."


def option_lines(config: type[AnalysisConfig]) -> list[str]:
    """One line per option of ``config``: ``name = default: help [limits]``."""
    lines = []
    for option_field in dataclasses.fields(config):
        # Mutable defaults ({} / []) live in default_factory, not default.
        default = (
            option_field.default_factory()
            if option_field.default is dataclasses.MISSING
            and option_field.default_factory is not dataclasses.MISSING
            else option_field.default
        )
        limits = _declared_limits(option_field.metadata)
        lines.append(
            f"{option_field.name} = {default!r}: {option_field.metadata.get('help', '')}{limits}"
        )
    return lines


def _declared_limits(metadata: Mapping[str, Any]) -> str:
    """`` [≥ 2]`` / `` [0 … 1]`` / `` [one of 'a', 'b']`` from an option's declared range."""
    low, high, choices = metadata.get("low"), metadata.get("high"), metadata.get("choices")
    if choices is not None:
        return f" [one of {', '.join(map(repr, choices))}]"
    if low is not None and high is not None:
        return f" [{low:g} … {high:g}]"
    if low is not None:
        return f" [≥ {low:g}]"
    if high is not None:
        return f" [≤ {high:g}]"
    return ""
