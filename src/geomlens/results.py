"""What an analysis returns: flat metrics, tables, the config used and provenance.

A Result round-trips through JSON (written atomically: a temporary file in the same folder,
then ``os.replace``) so a crash never leaves a half-written file where a result was expected.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from geomlens.atomic_files import atomic_write_text
from geomlens.plain_state import state_class

__all__ = ["Result", "plain", "set_drawer"]

SCHEMA_VERSION = 1


class Drawer(Protocol):
    """Draws a result's figure (``gl.plot``): what :meth:`Result.plot` hands itself to."""

    def __call__(
        self, result: Result, path: str | os.PathLike[str] | None = None, **kwargs: Any
    ) -> Any: ...


_drawer: Drawer | None = None


def set_drawer(drawer: Drawer) -> None:
    """Install what :meth:`Result.plot` calls (done once, by ``geomlens/__init__.py``)."""
    global _drawer
    _drawer = drawer


def plain(value: Any, *, array: Callable[[np.ndarray], Any] | None = None) -> Any:
    """``value`` as JSON-ready Python values: numpy / torch scalars and arrays, mappings,
    sequences, paths and objects with ``to_dict()`` (a config); a NaN float is ``None`` and an
    infinite one ``"inf"`` / ``"-inf"`` (JSON has neither). ``array``: how an array is written
    (default: nested lists; a sweep writes its options' arrays as content digests)."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        if array is not None:
            return array(value)
        return plain(value.tolist() if value.ndim else value.item())
    if isinstance(value, np.generic):
        return plain(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, Mapping):
        return {str(k): plain(v, array=array) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v, array=array) for v in value]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "to_dict"):
        return plain(value.to_dict(), array=array)
    return value


_NON_FINITE = {None: math.nan, "inf": math.inf, "-inf": -math.inf}


def _metric_value(name: str, value: Any) -> float:
    """A metric as JSON holds it (null for NaN, "inf"/"-inf") as a float; anything else is not
    a metric."""
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:  # an integer beyond a float's range (about 1.8e308)
            digits = len(str(abs(value)))
            raise ValueError(
                f"Not a geomlens result: metric {name!r} is an integer of {digits} digits, beyond "
                "the range of a float (about 1.8e308); a metric is a float-sized number (null "
                'for NaN, "inf" or "-inf").'
            ) from None
    if isinstance(value, float):
        return value
    if value is None or value in ("inf", "-inf"):
        return _NON_FINITE[value]
    raise ValueError(
        f"Not a geomlens result: metric {name!r} is {value!r}; a metric is a number (null for "
        'NaN, "inf" or "-inf").'
    )


def check_not_an_input(flag: str, output: str | os.PathLike[str], inputs: dict[str, Any]) -> None:
    """Refuse an output path that is one of the run's inputs, or lies inside an input folder
    (a model, an SAE, a checkpoint): writing the result there would destroy what was read.
    ``inputs`` maps a flag to a path (or None, or a name that is no path)."""
    target = Path(output).expanduser().resolve()
    for name, given in inputs.items():
        if given is None or not isinstance(given, (str, os.PathLike)):
            continue
        source = Path(given).expanduser().resolve()
        if not source.exists() and name != "--checkpoint":
            continue  # a hub name or a release id, not a file
        if target == source or source in target.parents:
            raise ValueError(
                f"{flag} {output} would overwrite {'a file in ' if target != source else ''}"
                f"the input given by {name} ({given}); write the result elsewhere."
            )


@state_class  # rank 0 sends results to the other ranks as plain state
@dataclass(repr=False)
class Result:
    """The outcome of one analysis run.

    ``metrics`` is flat (name → number); ``tables`` map a name to a list of rows (dicts);
    ``provenance`` holds model id, backend, sites, seed, library versions and timing.
    """

    analysis: str
    metrics: dict[str, float] = field(default_factory=dict)
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, metric: str) -> float:
        try:
            return self.metrics[metric]
        except KeyError:
            raise KeyError(
                f"Result of {self.analysis!r} has no metric {metric!r}; it has "
                f"{sorted(self.metrics)}."
            ) from None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "analysis": self.analysis,
            "metrics": plain(self.metrics),
            "tables": plain(self.tables),
            "config": plain(self.config),
            "provenance": plain(self.provenance),
        }

    def to_json(self, path: str | os.PathLike[str] | None = None, *, indent: int = 2) -> str:
        """Serialise; with ``path``, also write the file atomically. Returns the JSON text."""
        text = json.dumps(self.to_dict(), indent=indent, allow_nan=False)
        if path is not None:
            atomic_write_text(path, text + "\n")
        return text

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        """A result from its JSON form; a field of the wrong shape is refused by name."""
        if not isinstance(data, dict):
            raise ValueError(
                f"Not a geomlens result: a {type(data).__name__}, not an object with "
                "'analysis', 'metrics' and 'tables'."
            )
        if "analysis" not in data:
            raise ValueError("Not a geomlens result: the JSON has no 'analysis' field.")
        version = data.get("schema_version", SCHEMA_VERSION)
        if not isinstance(version, int) or isinstance(version, bool):
            raise ValueError(
                f"Not a geomlens result: 'schema_version' must be an integer; got {version!r}."
            )
        if version > SCHEMA_VERSION:
            raise ValueError(
                f"This result was written by a newer geomlens (schema {version}); upgrade geomlens "
                f"to read it (this one reads schema ≤ {SCHEMA_VERSION})."
            )
        parts = {}
        for name in ("metrics", "tables", "config", "provenance"):
            value = data.get(name, {})
            if not isinstance(value, dict):
                raise ValueError(
                    f"Not a geomlens result: {name!r} must be an object (name → value); got "
                    f"{type(value).__name__ if value is not None else 'null'}."
                )
            parts[name] = value
        return cls(
            analysis=str(data["analysis"]),
            metrics={k: _metric_value(k, v) for k, v in parts["metrics"].items()},
            tables=parts["tables"],
            config=parts["config"],
            provenance=parts["provenance"],
        )

    @classmethod
    def from_json(cls, path_or_text: str | os.PathLike[str]) -> Result:
        """Read a result from a file path (or from JSON text)."""
        text = str(path_or_text)
        source = "the text given"
        if not text.lstrip().startswith("{"):
            source = str(path_or_text)
            try:
                text = Path(path_or_text).read_text(encoding="utf-8")
            except UnicodeDecodeError as error:
                raise ValueError(
                    f"{source} is not a geomlens result: not UTF-8 JSON text ({error.reason} at "
                    f"byte {error.start}). A result file is what Result.to_json or `geomlens run "
                    "--out` wrote."
                ) from None
        try:
            data = json.loads(text)
        except RecursionError:
            raise ValueError(
                f"{source} is not a geomlens result: its JSON is nested too deeply to read. A "
                "result file is what Result.to_json or `geomlens run --out` wrote."
            ) from None
        except json.JSONDecodeError as error:
            raise ValueError(
                f"{source} is not a geomlens result: not valid JSON ({error}). A result file is "
                "what Result.to_json or `geomlens run --out` wrote."
            ) from error
        except ValueError as error:  # an integer longer than Python reads (4300 digits)
            raise ValueError(
                f"{source} is not a geomlens result: it holds a number too long to read "
                f"({str(error).split(';')[0]}); a metric is a float-sized number. A result file "
                "is what Result.to_json or `geomlens run --out` wrote."
            ) from None
        if not isinstance(data, dict):
            raise ValueError(
                f"{source} is not a geomlens result: it holds a JSON {type(data).__name__}, "
                "not an object with 'analysis', 'metrics' and 'tables'."
            )
        return cls.from_dict(data)

    def to_frame(self, table: str | None = None) -> Any:
        """A pandas DataFrame: the metrics (one row per metric) or the named table."""
        import pandas as pd

        if table is None:
            return pd.DataFrame(
                {"metric": list(self.metrics), "value": list(self.metrics.values())}
            )
        if table not in self.tables:
            raise KeyError(f"Result has no table {table!r}; tables: {sorted(self.tables)}.")
        return pd.DataFrame(self.tables[table])

    def plot(self, path: str | os.PathLike[str] | None = None, **kwargs: Any) -> Any:
        """Draw the analysis's figure; save atomically if ``path``. Same as ``gl.plot(self)``.

        The drawing belongs to the analysis (see :mod:`geomlens.analyses.plotting`); a result is
        data and imports nothing of the analyses or their registry: the package's front door
        (``geomlens/__init__.py``) installs the drawer with :func:`set_drawer`.
        """
        if _drawer is None:
            raise RuntimeError("No drawer is installed; import geomlens to draw results.")
        return _drawer(self, path, **kwargs)

    def __repr__(self) -> str:
        """A short summary; the full content is in ``metrics``, ``tables`` and ``to_json()``."""
        shown = list(self.metrics.items())[:3]
        metric_text = ", ".join(f"{k}={v:.4g}" for k, v in shown)
        more = (
            f", … {len(self.metrics) - len(shown)} more" if len(self.metrics) > len(shown) else ""
        )
        tables = ", ".join(f"{name} ({len(rows)} rows)" for name, rows in self.tables.items())
        model = self.provenance.get("model_id")
        return (
            f"Result({self.analysis!r}"
            + (f", model={model!r}" if model else "")
            + f", {len(self.metrics)} metrics{': ' + metric_text + more if shown else ''}"
            + (f"; tables: {tables}" if tables else "")
            + ")"
        )
