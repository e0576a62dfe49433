"""Stimulus sets with coordinates: the shipped sets and the template builder.

A stimulus set is a list of texts, each marking its stimulus word with ``[[...]]``, with a
``coordinate`` per row (a number, or a list of numbers for a position in a plane) and a
*metric* that turns two coordinates into a distance (:mod:`geomlens.data.distances`).

The shipped sets (years, numbers, a hue circle of colour words and numeric hues, months,
weekdays, chess-board squares) are written by us as package data in ``data/stimuli/`` (see its
README). ``StimulusSet.as_data()`` gives what ``gl.run`` takes as data. A user's own file is
read by :func:`geomlens.data.stimulus_files.load_stimuli`; choice prompts are
:mod:`geomlens.data.prompts`.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Any

import numpy as np

from geomlens.data.distances import Metric, coordinate_array, distance_matrix, parse_metric

__all__ = [
    "StimulusSet",
    "first_names",
    "grid_positions",
    "hue_circle",
    "months",
    "numbers",
    "render",
    "shipped_lines",
    "templates",
    "weekdays",
    "years",
]


@dataclass(frozen=True)
class StimulusSet:
    """Texts with one ``[[marked]]`` stimulus each, their coordinates and the metric."""

    name: str
    texts: list[str]
    coordinates: np.ndarray
    metric: Metric = "absolute"

    def __post_init__(self) -> None:
        coordinates = coordinate_array(self.coordinates)
        if len(coordinates) != len(self.texts):
            raise ValueError(
                f"Stimulus set {self.name!r} has {len(self.texts)} texts but "
                f"{len(coordinates)} coordinates; give one coordinate per text."
            )
        parse_metric(self.metric)  # fail now on a bad metric, not at the end of a run
        object.__setattr__(self, "coordinates", coordinates)

    def __len__(self) -> int:
        return len(self.texts)

    def distances(self) -> np.ndarray:
        return distance_matrix(self.coordinates, self.metric)

    def as_data(self) -> dict[str, Any]:
        """``{"text", "coordinate"[, "metric"]}`` columns for ``gl.run``; the metric column
        (one name repeated) lets the analyses pick the right metric unless told otherwise."""
        coordinate = (
            list(self.coordinates) if self.coordinates.ndim == 1 else self.coordinates.tolist()
        )
        data: dict[str, Any] = {"text": list(self.texts), "coordinate": coordinate}
        if isinstance(self.metric, str):
            data["metric"] = [self.metric] * len(self.texts)
        return data


def render(
    template_list: str | Sequence[str],
    values: Sequence[Any],
    *,
    coordinates: Sequence[Any] | None = None,
    metric: Metric = "absolute",
    names: Sequence[str] | None = None,
    name: str = "custom",
) -> StimulusSet:
    """Every template × every value: the value is written in place of ``{value}`` and marked
    as the stimulus word (``[[value]]``, unless the template marks it itself).

    ``coordinates`` (one per value) default to the values; ``{name}`` in a template takes a
    first name from ``names`` (the shipped list by default), cycling with the value's index so
    that a value keeps its name across runs.
    """
    template_list = [template_list] if isinstance(template_list, str) else list(template_list)
    if not template_list or not all("{value}" in t for t in template_list):
        raise ValueError(
            "Every template needs a '{value}' placeholder, e.g. 'It happened in the year {value}.'"
        )
    values = list(values)
    if not values:
        raise ValueError("render needs at least one value.")
    coordinates = values if coordinates is None else list(coordinates)
    if len(coordinates) != len(values):
        raise ValueError(
            f"{len(values)} values but {len(coordinates)} coordinates; give one per value."
        )
    names = list(names) if names is not None else shipped_lines("names.txt")
    texts, rows = [], []
    for template in template_list:
        marked = (
            template if "[[{value}]]" in template else template.replace("{value}", "[[{value}]]")
        )
        for index, value in enumerate(values):
            texts.append(marked.format(value=value, name=names[index % len(names)]))
            rows.append(coordinates[index])
    return StimulusSet(name, texts, coordinate_array(rows), metric)


@cache
def _shipped_templates() -> dict[str, list[str]]:
    return json.loads(files(__package__).joinpath("stimuli/templates.json").read_text("utf-8"))


def shipped_lines(filename: str) -> list[str]:
    text = files(__package__).joinpath(f"stimuli/{filename}").read_text("utf-8")
    return [line.strip() for line in text.splitlines() if line.strip()]


def templates(stimulus_set: str) -> list[str]:
    """The shipped templates of a set: years, numbers, hue_numeric, hue_words, months,
    weekdays, grid."""
    shipped = _shipped_templates()
    if stimulus_set not in shipped:
        raise ValueError(f"No shipped templates {stimulus_set!r}; there are {sorted(shipped)}.")
    return list(shipped[stimulus_set])


def years(
    start: int = 1500, stop: int = 2000, step: int = 10, template_list: Sequence[str] | None = None
) -> StimulusSet:
    """Years ``start..stop`` (inclusive) every ``step`` in three templates; metric absolute.

    The default (1500–2000 every 10 years, 51 years × 3 templates = 153 texts) keeps
    ``geomlens run resolution`` on the bundled MiniLM to well under a minute of CPU.
    """
    if step <= 0 or stop < start:
        raise ValueError(f"years needs start <= stop and step > 0; got {start}, {stop}, {step}.")
    values = list(range(start, stop + 1, step))
    return render(template_list or templates("years"), values, name="years")


#: The default years of ``similarity`` and ``resolution`` (see :func:`default_years`).
DEFAULT_YEARS = (1901, 2000)
#: Seed of the first names given to the default years (a fixed draw: the same every run).
NAMES_SEED = 20251201


def default_years(
    start: int = DEFAULT_YEARS[0],
    stop: int = DEFAULT_YEARS[1],
    template_list: Sequence[str] | None = None,
) -> StimulusSet:
    """Every year ``start..stop`` (default 1901–2000) in the three years templates (100 years
    × 3 = 300 texts by default).

    The default stimulus set of ``similarity`` and ``resolution``. Every year of the range, so
    the distances include 1–9 years (the grid's first distance d₁ is 1 year) and every last
    digit occurs equally often: two years share their last digit only at d = 10, 20, … and
    every such pair is compared with its neighbours at d ± 1. One century, so every year is
    written "19xx" (2000 aside) and no pair is alike because its century name recurs. The
    first name of the ``{name}`` template is drawn at random per year (seed ``NAMES_SEED``),
    not cycled with the year's index, so that sharing a name is not tied to the distance.
    """
    if stop <= start:
        raise ValueError(f"default_years needs start < stop; got {start}, {stop}.")
    values = list(range(start, stop + 1))
    shipped = shipped_lines("names.txt")
    draw = np.random.default_rng(NAMES_SEED).integers(len(shipped), size=len(values))
    return render(
        template_list or templates("years"),
        values,
        names=[shipped[int(k)] for k in draw],
        name="years",
    )


def numbers(
    start: int = 0, stop: int = 100, step: int = 2, template_list: Sequence[str] | None = None
) -> StimulusSet:
    """Integers on a line ``start..stop`` every ``step``; metric absolute."""
    if step <= 0 or stop < start:
        raise ValueError(f"numbers needs start <= stop and step > 0; got {start}, {stop}, {step}.")
    return render(
        template_list or templates("numbers"), range(start, stop + 1, step), name="numbers"
    )


def hue_circle(step: int = 15, words: bool = True) -> StimulusSet:
    """Hues on the colour circle: numeric hues every ``step`` degrees and (with ``words``) the
    twelve colour words at their hue angles; metric ``circular:360``.

    The analyses treat rows with the same coordinate as one stimulus, so with ``words`` the
    word "red" and "a hue of 0 degrees" are averaged into the stimulus at 0°; pass
    ``words=False`` (or build the words alone with :func:`render`) to keep them apart.
    """
    if step <= 0 or 360 % step:
        raise ValueError(f"step must be a positive divisor of 360; got {step}.")
    numeric = render(templates("hue_numeric"), range(0, 360, step), metric="circular:360")
    if not words:
        return StimulusSet("hue_circle", numeric.texts, numeric.coordinates, "circular:360")
    rows = list(csv.DictReader(shipped_lines("hue_words.csv")))
    worded = render(
        templates("hue_words"),
        [row["word"] for row in rows],
        coordinates=[float(row["hue"]) for row in rows],
        metric="circular:360",
    )
    return StimulusSet(
        "hue_circle",
        numeric.texts + worded.texts,
        np.concatenate([numeric.coordinates, worded.coordinates]),
        "circular:360",
    )


def months() -> StimulusSet:
    """The twelve months at positions 0..11; metric ``circular:12``."""
    names = shipped_lines("months.txt")
    return render(
        templates("months"), names, coordinates=range(12), metric="circular:12", name="months"
    )


def weekdays() -> StimulusSet:
    """The seven weekdays (Monday = 0); metric ``circular:7``."""
    names = shipped_lines("weekdays.txt")
    return render(
        templates("weekdays"), names, coordinates=range(7), metric="circular:7", name="weekdays"
    )


def grid_positions(size: int = 8) -> StimulusSet:
    """Squares of a ``size`` × ``size`` board in chess notation (a1 …), coordinate
    (file, rank); metric euclidean."""
    if not 1 <= size <= 26:
        raise ValueError(f"size must be between 1 and 26 (letters a-z for files); got {size}.")
    squares = [(f, r) for f in range(size) for r in range(size)]
    labels = [f"{chr(ord('a') + f)}{r + 1}" for f, r in squares]
    return render(templates("grid"), labels, coordinates=squares, metric="euclidean", name="grid")


def first_names() -> list[str]:
    """About 150 common English first names (the people of the birth-year protocol)."""
    return shipped_lines("first_names.txt")
