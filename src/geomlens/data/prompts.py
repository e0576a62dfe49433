"""Multiple-choice prompts for behavioural similarity: "Which year is closest to 1630: 1620 or
1680? Answer:", with options named by value or by a label, and the birth-year protocol."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from geomlens.data.distances import Metric

__all__ = ["LABELS", "birth_year_prompts", "choice_prompts", "option_labels"]


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
