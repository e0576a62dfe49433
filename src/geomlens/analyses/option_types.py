"""Type-check an analysis config against its annotations, so a wrong option fails at once.

``--option dead_threshold=abc`` used to reach the first batch and fail there with a
tensor/str comparison that never named the option. Every analysis config is a dataclass with
annotated fields; checking the values against those annotations when the analysis is built
gives one error that names the option, the type it takes and what was given, before any model
runs. Integers are accepted (and stored as floats) where a float is expected, as Python does.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any


class OptionTypeError(TypeError, ValueError):
    """An analysis option whose value does not have the type its config declares."""


class OptionValueError(ValueError):
    """An analysis option outside the range (or the choices) its config declares."""


def _describe(annotation: Any) -> str:
    """Plain words for a type annotation ('a float', 'a string or a list of strings', ...)."""
    origin = typing.get_origin(annotation)
    if annotation is type(None):
        return "None"
    if annotation is Any:
        return "anything"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(arg) for arg in typing.get_args(annotation))
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(v) for v in typing.get_args(annotation))
    if origin in (list, tuple, set, frozenset):
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        inner = f" of {_describe(args[0]).removeprefix('a ').removeprefix('an ')}s" if args else ""
        return f"a {origin.__name__}{inner}"
    if origin is dict:
        return "a dict"
    names = {
        bool: "a bool (True/False)",
        int: "an int",
        float: "a float (a number)",
        str: "a string",
    }
    return names.get(annotation, f"a {getattr(annotation, '__name__', annotation)}")


def _matches(value: Any, annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if annotation is Any or isinstance(annotation, typing.TypeVar):
        return True
    if annotation is type(None):
        return value is None
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, arg) for arg in typing.get_args(annotation))
    if origin is typing.Literal:
        return value in typing.get_args(annotation)
    if origin in (list, tuple, set, frozenset):
        if not isinstance(value, (list, tuple, set, frozenset)):
            return False
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        return not args or all(_matches(item, args[0]) for item in value)
    if origin is dict:
        return isinstance(value, dict)
    if annotation is float:
        # bool is an int subclass but True is not a number anyone means as a threshold.
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(annotation, type):
        return isinstance(value, annotation)
    return True  # an annotation we cannot check (a string forward reference, a Protocol, ...)


def check_option_types(analysis_name: str, config: Any) -> None:
    """Raise :class:`OptionTypeError` naming the first field of ``config`` whose value does not
    match its annotation; store integers given for float fields as floats."""
    try:
        hints = typing.get_type_hints(type(config))
    except Exception:  # an unresolvable annotation: leave the config unchecked rather than fail
        return
    for config_field in dataclasses.fields(config):
        annotation = hints.get(config_field.name, Any)
        value = getattr(config, config_field.name)
        if not _matches(value, annotation):
            raise OptionTypeError(
                f"Option {config_field.name!r} of analysis {analysis_name!r} must be "
                f"{_describe(annotation)}; got {value!r} ({type(value).__name__})."
            )
        if annotation is float and isinstance(value, int):
            object.__setattr__(config, config_field.name, float(value))
        _check_range(analysis_name, config_field, value)
        if config_field.name == "site":
            _check_site_list(analysis_name, value)


def _check_site_list(analysis_name: str, value: Any) -> None:
    """A list of sites names each site once (a repeat would count every token twice) and at
    least one site."""
    if not isinstance(value, (list, tuple)):
        return
    name = f"Option 'site' of analysis {analysis_name!r}"
    if not value:
        raise OptionValueError(
            f"{name} is an empty list, which names no site; give a site (see `geomlens sites`) "
            "or leave the option out for the analysis's default."
        )
    repeated = sorted({str(s) for s in value if list(value).count(s) > 1})
    if repeated:
        raise OptionValueError(
            f"{name} names {', '.join(map(repr, repeated))} more than once; each site is read "
            "once, so give each one once."
        )


def _check_range(analysis_name: str, config_field: dataclasses.Field, value: Any) -> None:
    """The bounds and choices an ``option(..., low=, high=, choices=)`` declared."""
    low, high = config_field.metadata.get("low"), config_field.metadata.get("high")
    choices = config_field.metadata.get("choices")
    name = f"Option {config_field.name!r} of analysis {analysis_name!r}"
    if choices is not None and value not in choices:
        raise OptionValueError(
            f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}."
        )
    numbers = value if isinstance(value, (list, tuple)) else [value]
    for number in numbers:
        if not isinstance(number, (int, float)) or isinstance(number, bool):
            continue  # None and non-numbers: the type check above has judged them
        if (low is not None and number < low) or (high is not None and number > high):
            bounds = (
                f"between {low:g} and {high:g}"
                if low is not None and high is not None
                else (f"at least {low:g}" if low is not None else f"at most {high:g}")
            )
            raise OptionValueError(f"{name} must be {bounds}; got {number!r}.")
