"""A user's stimuli read from a CSV, JSONL or JSON file into a :class:`~geomlens.data.stimuli.StimulusSet`."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np

from geomlens.data.distances import Metric, coordinate_array
from geomlens.data.stimuli import StimulusSet

__all__ = ["load_stimuli"]


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
    return StimulusSet(path.stem, texts, coordinate_array(coordinates), chosen)


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
