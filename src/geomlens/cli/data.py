"""The ``--data`` file of a command (``.txt``, ``.jsonl``, ``.json``) and ``--limit``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from geomlens.cli.errors import (
    fail,
)


def _rows_from_json(path: Path, text: str) -> Any:
    """A .json file holds a list of strings, a list of objects with a 'text' field, or one
    object of equal-length columns ({"text": [...], "concept": [...]})."""
    try:
        rows = json.loads(text)
    except json.JSONDecodeError as error:
        raise fail(f"{path} is not valid JSON ({error}).") from error
    if isinstance(rows, dict):
        if "text" not in rows and "token_ids" not in rows:
            raise fail(f"{path} holds an object without a 'text' column; {JSON_FORMS}")
        return rows
    if not isinstance(rows, list):
        raise fail(f"{path} holds a {type(rows).__name__}; {JSON_FORMS}")
    return rows


JSON_FORMS = (
    "a .json data file must hold a list of strings, a list of objects with a 'text' field, or "
    'an object of columns such as {"text": [...], "concept": [...]}.'
)


def _streamed_file(path: Path, limit: int | None) -> Any:
    """A .txt / .jsonl file read line by line; its first row is checked now, before any model
    is loaded (a later bad line stops the run with the line named)."""
    from geomlens.data.streaming import EmptySourceError, stream_file

    data = stream_file(path, limit=limit)
    try:
        data.first_row()
    except EmptySourceError:
        raise fail(f"data file {path} holds no inputs; give at least one text.") from None
    except ValueError as error:
        raise fail(f"{path}: {error}") from error
    return data


def load_data(path: Path, limit: int | None) -> Any:
    """The inputs in ``path``, its source recorded.

    ``.txt``: one text per line (blank lines skipped). ``.jsonl``: one object per line with a
    'text' field and optional label columns. Both are streamed: read line by line as the run
    goes, so a corpus of any size fits. ``.json``: a list of strings, a list of such objects,
    or one object of columns, read whole into a Dataset.
    """
    from geomlens.data.dataset import as_dataset

    if not path.exists():
        raise fail(f"data file {path} does not exist.")
    if path.is_dir():
        raise fail(f"--data {path} is a directory; give a .txt, .jsonl or .json file.")
    if path.suffix not in (".txt", ".jsonl", ".json"):
        raise fail(f"data file {path} must be .txt (one text per line), .jsonl or .json.")
    if path.suffix in (".txt", ".jsonl"):
        return _streamed_file(path, limit)
    rows = _rows_from_json(path, path.read_text(encoding="utf-8"))
    if isinstance(rows, dict):
        rows = {key: list(values)[:limit] if limit else values for key, values in rows.items()}
    else:
        rows = rows[:limit] if limit else rows
        if not rows:
            raise fail(f"data file {path} holds no inputs; give at least one text.")
        if all(isinstance(row, dict) for row in rows):
            if not all("text" in row for row in rows):
                raise fail(
                    f"every object in {path} needs a 'text' field (plus optional label fields)."
                )
            rows = {key: [row.get(key) for row in rows] for key in rows[0]}
        elif not all(isinstance(row, str) for row in rows):
            raise fail(f"{path} mixes texts with other values; {JSON_FORMS}")
    try:
        dataset = as_dataset(rows)
    except ValueError as error:
        raise fail(f"{path}: {error}") from error
    dataset.source = f"file {path} ({len(dataset)} inputs)"
    return dataset


def first_rows(data: Any, limit: int | None) -> Any:
    """``data`` as a Dataset cut to its first ``limit`` rows (all when ``limit`` is None)."""
    from geomlens.data.dataset import as_dataset, select_rows

    dataset = as_dataset(data)
    if limit is None or limit >= len(dataset):
        return dataset
    source = f"{dataset.describe_source()}, first {limit}"
    return select_rows(dataset, range(limit), source=source)
