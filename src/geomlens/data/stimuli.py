"""Stimulus sets with coordinates: shipped sets, a template builder, a loader, and metrics.

A stimulus set is a list of texts, each marking its stimulus word with ``[[...]]``, with a
``coordinate`` per row (a number, or a list of numbers for a position in a plane) and a
*metric* that turns two coordinates into a distance:

* ``"absolute"``: |x − y| (years, numbers on a line);
* ``"circular:PERIOD"``: distance around a circle of that circumference (hues: 360, months: 12);
* ``"euclidean"``: ‖x − y‖ for coordinate vectors (grid positions);
* a callable ``metric(x, y) -> float`` of two coordinates.

The shipped sets (years, numbers, a hue circle of colour words and numeric hues, months,
weekdays, chess-board squares) are written by us as package data in ``data/stimuli/`` (see its
README). ``StimulusSet.as_data()`` gives what ``gl.run`` takes as data.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "Metric",
    "StimulusSet",
    "birth_year_prompts",
    "choice_prompts",
    "option_labels",
    "distance_matrix",
    "first_names",
    "grid_positions",
    "hue_circle",
    "load_stimuli",
    "months",
    "numbers",
    "parse_metric",
    "render",
    "templates",
    "weekdays",
    "years",
]

Metric = str | Callable[[Any, Any], float]
METRIC_NAMES = ("absolute", "circular:PERIOD", "euclidean")


# --------------------------------------------------------------------------------------------
# Metrics


def parse_metric(metric: Metric) -> Callable[[np.ndarray], np.ndarray]:
    """A function from coordinates ``[N]`` or ``[N, k]`` to their ``[N, N]`` distance matrix."""
    if callable(metric):
        return lambda coordinates: _pairwise_callable(metric, coordinates)
    if not isinstance(metric, str):
        raise ValueError(f"metric must be one of {METRIC_NAMES} or a callable; got {metric!r}.")
    if metric == "absolute":
        return _absolute
    if metric == "euclidean":
        return _euclidean
    if metric.startswith("circular:"):
        try:
            period = float(metric.split(":", 1)[1])
        except ValueError:
            period = float("nan")
        if not np.isfinite(period) or period <= 0:
            raise ValueError(
                f"metric {metric!r}: the period after 'circular:' must be a positive number, "
                "e.g. 'circular:360' for hue angles or 'circular:12' for months."
            )
        return lambda coordinates: _circular(coordinates, period)
    raise ValueError(
        f"Unknown metric {metric!r}; use 'absolute' (numbers on a line), 'circular:PERIOD' "
        "(e.g. 'circular:360'), 'euclidean' (coordinate vectors) or a callable metric(x, y)."
    )


def distance_matrix(coordinates: Any, metric: Metric = "absolute") -> np.ndarray:
    """The ``[N, N]`` distances between stimuli under ``metric`` (see the module docstring)."""
    return parse_metric(metric)(_coordinate_array(coordinates))


def _coordinate_array(coordinates: Any) -> np.ndarray:
    try:
        # Row by row, so that object arrays of lists (a dataset column) read like lists.
        array = np.asarray([np.asarray(c, dtype=float) for c in coordinates], dtype=float)
    except (TypeError, ValueError) as error:
        raise ValueError(
            "coordinates must be numbers (one per stimulus) or equal-length lists of numbers "
            f"(a position per stimulus); could not read them: {error}"
        ) from None
    if array.ndim not in (1, 2) or array.shape[0] == 0 or not np.all(np.isfinite(array)):
        raise ValueError(
            "coordinates must be finite numbers [N] or vectors [N, k] for at least one "
            f"stimulus; got shape {array.shape}."
        )
    return array


def _scalar_coordinates(coordinates: np.ndarray, metric: str) -> np.ndarray:
    if coordinates.ndim == 2 and coordinates.shape[1] == 1:
        return coordinates[:, 0]
    if coordinates.ndim != 1:
        raise ValueError(
            f"metric {metric!r} needs one number per stimulus, but the coordinates are vectors of "
            f"length {coordinates.shape[1]}; use metric='euclidean' for positions."
        )
    return coordinates


def _absolute(coordinates: np.ndarray) -> np.ndarray:
    x = _scalar_coordinates(coordinates, "absolute")
    return np.abs(np.subtract.outer(x, x))


def _circular(coordinates: np.ndarray, period: float) -> np.ndarray:
    x = _scalar_coordinates(coordinates, f"circular:{period:g}")
    gap = np.mod(np.abs(np.subtract.outer(x, x)), period)
    return np.minimum(gap, period - gap)


def _euclidean(coordinates: np.ndarray) -> np.ndarray:
    x = coordinates[:, None] if coordinates.ndim == 1 else coordinates
    return np.linalg.norm(x[:, None, :] - x[None, :, :], axis=-1)


def _pairwise_callable(metric: Callable[[Any, Any], float], coordinates: np.ndarray) -> np.ndarray:
    size = len(coordinates)
    distances = np.zeros((size, size))
    for i in range(size):
        for j in range(i + 1, size):
            distances[i, j] = distances[j, i] = float(metric(coordinates[i], coordinates[j]))
    if not np.all(np.isfinite(distances)) or np.any(distances < 0):
        raise ValueError("A callable metric must return finite distances >= 0.")
    return distances


# --------------------------------------------------------------------------------------------
# Stimulus sets


@dataclass(frozen=True)
class StimulusSet:
    """Texts with one ``[[marked]]`` stimulus each, their coordinates and the metric."""

    name: str
    texts: list[str]
    coordinates: np.ndarray
    metric: Metric = "absolute"

    def __post_init__(self) -> None:
        coordinates = _coordinate_array(self.coordinates)
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
    names = list(names) if names is not None else _shipped_lines("names.txt")
    texts, rows = [], []
    for template in template_list:
        marked = (
            template if "[[{value}]]" in template else template.replace("{value}", "[[{value}]]")
        )
        for index, value in enumerate(values):
            texts.append(marked.format(value=value, name=names[index % len(names)]))
            rows.append(coordinates[index])
    return StimulusSet(name, texts, _coordinate_array(rows), metric)


@cache
def _shipped_templates() -> dict[str, list[str]]:
    return json.loads(files(__package__).joinpath("stimuli/templates.json").read_text("utf-8"))


def _shipped_lines(filename: str) -> list[str]:
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
    rows = list(csv.DictReader(_shipped_lines("hue_words.csv")))
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
    names = _shipped_lines("months.txt")
    return render(
        templates("months"), names, coordinates=range(12), metric="circular:12", name="months"
    )


def weekdays() -> StimulusSet:
    """The seven weekdays (Monday = 0); metric ``circular:7``."""
    names = _shipped_lines("weekdays.txt")
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


# --------------------------------------------------------------------------------------------
# A user's stimuli


def load_stimuli(path: str | Path, metric: Metric | None = None) -> StimulusSet:
    """Read a user's stimuli from CSV or JSONL.

    Each row has ``text`` (marking the stimulus word with ``[[...]]``, or the whole text is
    pooled) and ``coordinate`` (a number, or a JSON list of numbers); JSONL may also give the
    coordinate as a list directly. An optional ``metric`` column (the same on every row) names
    the metric; the ``metric`` argument overrides it (default: absolute for numbers,
    euclidean for lists).
    """
    path = Path(path)
    if not path.exists():
        raise ValueError(f"Stimulus file {path} does not exist.")
    if path.suffix == ".csv":
        with path.open(newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
    elif path.suffix in (".jsonl", ".json"):
        text = path.read_text(encoding="utf-8")
        rows = (
            json.loads(text)
            if path.suffix == ".json"
            else [json.loads(line) for line in text.splitlines() if line.strip()]
        )
    else:
        raise ValueError(f"Stimulus file {path} must be .csv, .jsonl or .json.")
    if not rows or any("text" not in r or "coordinate" not in r for r in rows):
        raise ValueError(
            f"{path}: every row needs 'text' and 'coordinate' columns (optional 'metric'), e.g. "
            '{"text": "It happened in the year [[1630]].", "coordinate": 1630}.'
        )
    coordinates = [_read_coordinate(r["coordinate"], path) for r in rows]
    named = {r["metric"] for r in rows if r.get("metric") not in (None, "")}
    if len(named) > 1:
        raise ValueError(f"{path}: the 'metric' column must be the same on every row; got {named}.")
    chosen: Metric
    if metric is not None:
        chosen = metric
    elif named:
        chosen = named.pop()
    else:
        chosen = "euclidean" if np.ndim(coordinates[0]) == 1 else "absolute"
    texts = [str(r["text"]) for r in rows]
    return StimulusSet(path.stem, texts, _coordinate_array(coordinates), chosen)


def _read_coordinate(value: Any, path: Path) -> float | list[float]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise ValueError(
                f"{path}: coordinate {value!r} is not a number or a JSON list of numbers."
            ) from None
    if isinstance(value, (list, tuple)):
        return [float(v) for v in value]
    return float(value)


# --------------------------------------------------------------------------------------------
# Multiple-choice prompts (behavioural similarity)


def _spoken_list(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


#: How options can be named in a prompt: by their value (" 1620"), or by a label beside it
#: ("A: 1620", scored on " A") — years are several tokens on tokenizers that split digits
#: (SmolLM2, Gemma: " 1760" is five), and years sharing a first token cannot be scored apart.
LABELS = ("values", "letters", "numbers")
_PLAIN_TEMPLATES = (
    "Which year is closest to {probe}: {options}? Answer:",
    "Which year is {probe}: {options}? Answer:",
)
_LABELLED_TEMPLATES = (
    "Which year is closest to {probe}?\n{options}\nAnswer:",
    "Which year is {probe}?\n{options}\nAnswer:",
)


def option_labels(labels: str, n: int) -> list[str]:
    """The first ``n`` labels of a labelling: ``A, B, C, …`` or ``1, 2, 3, …``."""
    if labels == "letters":
        if n > 26:
            raise ValueError(f"Letter labels name at most 26 options; got {n}. Use 'numbers'.")
        return [chr(ord("A") + k) for k in range(n)]
    if labels == "numbers":
        return [str(k + 1) for k in range(n)]
    raise ValueError(f"labels must be one of {LABELS}; got {labels!r}.")


def choice_prompts(
    values: Sequence[Any],
    *,
    coordinates: Sequence[Any] | None = None,
    metric: Metric = "absolute",
    candidates: Sequence[int] = (2,),
    trials: int = 20,
    similarity_template: str | None = None,
    identification_template: str | None = None,
    option_prefix: str = " ",
    labels: str = "values",
    rotations: bool = False,
    seed: int = 0,
) -> Any:
    """Multiple-choice prompts for ``similarity`` with ``mode="behavioural"``.

    For each n in ``candidates``, ``trials`` similarity prompts (a probe and n other values,
    all distinct; the answer is the option closest to the probe) and ``trials``
    identification prompts (n distinct values, the probe a copy of one of them). The model is
    scored on the next token. With ``labels="values"`` option i is the token of
    ``option_prefix + str(value_i)`` and the options are spoken in a list ("1620 or 1680");
    with ``labels="letters"`` (or ``"numbers"``) each option is a line ``"A: 1620"`` and is
    scored on the label's token ``option_prefix + "A"``. ``rotations`` shows every trial once
    per cyclic rotation of its options, so that each value appears at each position (and
    label) once and a preference for a position cancels in the averages. Templates default
    to year questions ending in "Answer:"; ``{probe}`` and ``{options}`` are filled in.

    Returns a :class:`~geomlens.data.dataset.Dataset` with columns ``coordinate`` (the
    probe's), ``options`` (the scored texts), ``option_coordinates``, ``test``, ``trial`` (the
    drawn trial a prompt shows; rotations share it), ``labels`` and ``metric``.
    """
    from geomlens.data.dataset import Dataset

    values = list(values)
    coordinates = values if coordinates is None else list(coordinates)
    if len(coordinates) != len(values):
        raise ValueError(f"{len(values)} values but {len(coordinates)} coordinates.")
    if not isinstance(metric, str):
        raise ValueError("choice_prompts records the metric by name; pass a metric string.")
    if labels not in LABELS:
        raise ValueError(f"labels must be one of {LABELS}; got {labels!r}.")
    if trials < 1 or not candidates or min(candidates) < 2 or max(candidates) + 1 > len(values):
        raise ValueError(
            f"Need trials >= 1 and 2 <= n <= {len(values) - 1} candidates for {len(values)} "
            f"values; got trials={trials}, candidates={list(candidates)}."
        )
    defaults = _PLAIN_TEMPLATES if labels == "values" else _LABELLED_TEMPLATES
    similarity_template = similarity_template or defaults[0]
    identification_template = identification_template or defaults[1]
    rng = np.random.default_rng(seed)
    rows: dict[str, list[Any]] = {
        k: [] for k in ("text", "coordinate", "options", "option_coordinates", "test", "trial")
    }
    trial = 0
    for n in candidates:
        for test, template, drawn in (
            ("similarity", similarity_template, n + 1),
            ("identification", identification_template, n),
        ):
            for _ in range(trials):
                picked = rng.choice(len(values), drawn, replace=False)
                probe = picked[0] if test == "similarity" else rng.choice(picked)
                options = list(picked[1:] if test == "similarity" else picked)
                for shift in range(n if rotations else 1):
                    shown = options[shift:] + options[:shift]
                    text, scored = _render_options([str(values[i]) for i in shown], labels)
                    rows["text"].append(template.format(probe=values[probe], options=text))
                    rows["coordinate"].append(coordinates[probe])
                    rows["options"].append([option_prefix + s for s in scored])
                    rows["option_coordinates"].append([coordinates[i] for i in shown])
                    rows["test"].append(test)
                    rows["trial"].append(trial)
                trial += 1
    columns = {k: _object_column(v) for k, v in rows.items() if k != "text"}
    columns["test"] = np.asarray(rows["test"])
    columns["trial"] = np.asarray(rows["trial"])
    columns["labels"] = np.asarray([labels] * len(rows["text"]))
    columns["metric"] = np.asarray([metric] * len(rows["text"]))
    return Dataset(texts=rows["text"], columns=columns)


def _render_options(shown: list[str], labels: str) -> tuple[str, list[str]]:
    """The options as the prompt writes them, and the texts whose tokens are scored."""
    if labels == "values":
        return _spoken_list(shown), shown
    names = option_labels(labels, len(shown))
    return "\n".join(f"{name}: {value}" for name, value in zip(names, shown)), names


def first_names() -> list[str]:
    """About 150 common English first names (the people of the birth-year protocol)."""
    return _shipped_lines("first_names.txt")


def birth_year_prompts(
    names: Sequence[str],
    candidates: Sequence[int],
    trials: int,
    *,
    low: int = 800,
    high: int = 1600,
    seed: int = 0,
    similarity_question: str = "Who was born closest to {probe}?",
    identification_question: str = "Who was born in {probe}?",
) -> Any:
    """The birth-year protocol of the resolution paper's LLM experiments, as choice prompts.

    Each prompt lists n people (distinct names from ``names``) with distinct birth years drawn
    uniformly from [low, high), then asks a question; the options are the names (scored as
    ``" " + name``), their coordinates the birth years. Similarity trials ask who was born
    closest to a probe year drawn from [low, high) (never one of the listed years);
    identification trials ask who was born in one of the listed years. ``trials`` prompts per
    test and per n. Returns a Dataset like :func:`choice_prompts`.
    """
    from geomlens.data.dataset import Dataset

    names = list(dict.fromkeys(names))
    if trials < 1 or not candidates or min(candidates) < 2 or max(candidates) > len(names):
        raise ValueError(
            f"Need trials >= 1 and 2 <= n <= {len(names)} (the distinct names given); got "
            f"trials={trials}, candidates={list(candidates)}."
        )
    if high - low < max(candidates) + 1:
        raise ValueError(f"[{low}, {high}) has too few years for {max(candidates)} people.")
    rng = np.random.default_rng(seed)
    rows: dict[str, list[Any]] = {
        k: [] for k in ("text", "coordinate", "options", "option_coordinates", "test")
    }
    for n in candidates:
        for test, question in (
            ("similarity", similarity_question),
            ("identification", identification_question),
        ):
            for _ in range(trials):
                people = [names[i] for i in rng.choice(len(names), n, replace=False)]
                born = (low + rng.choice(high - low, n, replace=False)).tolist()
                if test == "identification":
                    probe = born[rng.integers(n)]
                else:
                    probe = int(rng.integers(low, high))
                    while probe in born:
                        probe = int(rng.integers(low, high))
                listing = "\n".join(f"{p} was born in {y}." for p, y in zip(people, born))
                rows["text"].append(f"{listing}\nQuestion: {question.format(probe=probe)}\nAnswer:")
                rows["coordinate"].append(float(probe))
                rows["options"].append([" " + p for p in people])
                rows["option_coordinates"].append([float(y) for y in born])
                rows["test"].append(test)
    columns = {k: _object_column(v) for k, v in rows.items() if k != "text"}
    columns["coordinate"] = np.asarray(rows["coordinate"])
    columns["test"] = np.asarray(rows["test"])
    columns["metric"] = np.asarray(["absolute"] * len(rows["text"]))
    return Dataset(texts=rows["text"], columns=columns)


def _object_column(values: list[Any]) -> np.ndarray:
    """A column whose entries may be lists of different lengths (one object per row)."""
    column = np.empty(len(values), dtype=object)
    column[:] = [v if not isinstance(v, np.ndarray) else v.tolist() for v in values]
    return column
