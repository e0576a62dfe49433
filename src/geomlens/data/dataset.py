"""The data an analysis runs over: texts or token ids, plus per-example columns (labels, coordinates)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from geomlens.data.named_inputs import INPUT_KEYS, check_named_inputs, named_inputs_of, take_rows

#: The column of positions on a stimulus scale (a number per row, or a vector of numbers).
COORDINATE_COLUMN = "coordinate"


def check_text(value: Any, where: str) -> str:
    """``value`` if it is a string; otherwise one sentence naming ``where`` (a row, a line).
    (``str(None)`` would run the text "None", a list its repr.)"""
    if isinstance(value, str):
        return value
    raise ValueError(
        f"{where}: 'text' must be a string; got {value!r} ({type(value).__name__}). Give every "
        "row its text as a string, or leave the row out."
    )


def _numbers(value: Any) -> np.ndarray | None:
    """``value`` as a float array of rank 0 or 1 when it is a number or a flat list of numbers
    (bools and strings are not numbers here), else None."""
    items = list(value) if isinstance(value, (list, tuple, np.ndarray)) else [value]
    if any(isinstance(v, (str, bytes, bool, np.bool_)) for v in items):
        return None
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return None
    if array.ndim > 1 or (array.ndim == 1 and array.size == 0):
        return None
    return array


def check_coordinate(value: Any, where: str) -> int | None:
    """Refuse a coordinate that is not a finite number or a vector of finite numbers;
    return its width (None for a number)."""
    array = _numbers(value)
    if array is None:
        raise ValueError(
            f"{where}: coordinate {value!r} is not a number or a list of numbers; the "
            f"'{COORDINATE_COLUMN}' column holds a number per row (or a vector for a position)."
        )
    found = None if array.ndim == 0 else int(array.size)
    if not np.all(np.isfinite(array)):
        raise ValueError(
            f"{where}: coordinate {value!r} is not finite; a NaN or infinite position has no "
            "distance to the others. Give a finite number or drop the row."
        )
    return found


def check_coordinates(values: Any, first_row: int = 0) -> None:
    """Every row of a coordinate column (see :func:`check_coordinate`)."""
    widths: set[int | None] = set()
    for number, value in enumerate(values, start=first_row):
        width = check_coordinate(value, f"Row {number}")
        if widths and width not in widths:
            first = widths.pop()
            raise ValueError(
                f"Row {number}: coordinate {value!r} has {width or 'no'} entries where the first "
                f"row's has {first or 'none (a number)'}; every row's coordinate needs the same "
                "length (a number each, or vectors of one length)."
            )
        widths.add(width)


@dataclass
class Dataset:
    """Examples for one run: exactly one of ``texts`` / ``token_ids`` / ``num_rows`` set.

    ``columns`` hold per-example metadata (a concept label, a context, a year) as arrays of
    length N; analyses read them from each batch. ``num_rows`` alone stands for recorded
    activations, where the rows of the recorded arrays are the examples.
    """

    texts: list[str] | None = None
    token_ids: list[list[int]] | None = None
    num_rows: int | None = None
    #: Named model inputs, one entry per example ({"pixel_values": array}, {"images": paths}),
    #: alone or beside texts (a VLM prompt); see geomlens.data.named_inputs.
    inputs: dict[str, Any] | None = None
    columns: dict[str, np.ndarray] = field(default_factory=dict)
    #: Where the examples came from (a file, a bundled corpus, an in-memory list), for provenance.
    source: str = ""

    def __post_init__(self) -> None:
        given = [x is not None for x in (self.texts, self.token_ids, self.num_rows)]
        if self.inputs is not None:
            examples = self.texts or self.token_ids or []
            self.inputs = check_named_inputs(self.inputs, rows=len(examples) or None)
        if sum(given) != 1 and not (self.inputs and sum(given) == 0):
            raise ValueError(
                "A Dataset needs exactly one of texts, token_ids or num_rows (named model "
                "inputs may come alone or beside texts / token ids)."
            )
        n = len(self)
        if n == 0:
            raise ValueError("The dataset is empty; give at least one example.")
        if self.texts is not None:
            for number, text in enumerate(self.texts):
                check_text(text, f"Row {number}")
        if COORDINATE_COLUMN in self.columns:
            check_coordinates(self.columns[COORDINATE_COLUMN])
        for name, values in list(self.columns.items()):
            values = np.asarray(values)
            if values.shape[0] != n:
                raise ValueError(
                    f"Column {name!r} has {values.shape[0]} entries but the dataset has {n} "
                    "examples; every column needs one entry per example."
                )
            self.columns[name] = values

    def __len__(self) -> int:
        if self.texts is not None:
            return len(self.texts)
        if self.token_ids is not None:
            return len(self.token_ids)
        if self.inputs and self.num_rows is None:
            return len(next(iter(self.inputs.values())))
        return int(self.num_rows or 0)

    def describe_source(self) -> str:
        """Where the examples came from, for a result's provenance."""
        if self.source:
            return self.source
        if self.texts is not None:
            return f"in-memory list of {len(self)} texts"
        if self.token_ids is not None:
            return f"in-memory list of {len(self)} token-id sequences"
        if self.inputs:
            return f"in-memory model inputs {sorted(self.inputs)} for {len(self)} examples"
        return f"{len(self)} rows of recorded activations"

    def column_batch(self, index: np.ndarray) -> dict[str, np.ndarray]:
        return {name: values[index] for name, values in self.columns.items()}


def select_rows(dataset: Dataset, rows: Sequence[int] | np.ndarray, *, source: str = "") -> Dataset:
    """Rows ``rows`` of ``dataset``, in that order: its texts or token ids, its named model
    inputs and every column. ``source`` describes the selection (default: from the content).

    The one way geomlens slices a dataset (``geomlens run --limit``, the report's quick
    subsets), so that no part of a row, named inputs included, is left behind."""
    index = np.asarray(rows, dtype=int)
    inputs = None
    if dataset.inputs:
        inputs = {name: take_rows(values, index) for name, values in dataset.inputs.items()}
    return Dataset(
        texts=[dataset.texts[i] for i in index] if dataset.texts is not None else None,
        token_ids=[dataset.token_ids[i] for i in index] if dataset.token_ids is not None else None,
        num_rows=len(index) if dataset.num_rows is not None else None,
        inputs=inputs,
        columns={name: np.asarray(values)[index] for name, values in dataset.columns.items()},
        source=source,
    )


def as_dataset(data: Any, *, num_rows: int | None = None) -> Dataset:
    """Normalise what a user passes as data.

    Accepted: a :class:`Dataset`; a list of strings; a ``[N, T]`` LongTensor or a list of token-id
    lists; a mapping or pandas DataFrame with a ``"text"`` (or ``"token_ids"``) column and other
    columns as metadata; ``None`` for recorded activations (``num_rows`` then says how many).
    """
    if isinstance(data, Dataset):
        return data
    if data is None:
        if num_rows is None:
            raise ValueError(
                "No data given. Pass a list of strings, token ids, or a mapping with a 'text' "
                "column (data=None works only for recorded activations)."
            )
        return Dataset(num_rows=num_rows)
    if isinstance(data, str):
        raise ValueError("data is a single string; pass a list of strings, e.g. [text].")
    if isinstance(data, torch.Tensor):
        if data.dim() != 2 or data.is_floating_point():
            raise ValueError(
                f"A tensor given as data must hold token ids [N, T] (integers); got dtype "
                f"{data.dtype} and shape {tuple(data.shape)}. For activations use gl.attach({{site: array}})."
            )
        return Dataset(token_ids=data.tolist())
    if hasattr(data, "to_dict") and hasattr(data, "columns"):  # pandas DataFrame
        data = {name: data[name].to_numpy() for name in data.columns}
    if isinstance(data, Mapping):
        inputs = named_inputs_of(data)
        skip = ("text", "token_ids", *INPUT_KEYS)
        if COORDINATE_COLUMN in data:  # before np.asarray, which would fail on ragged rows
            check_coordinates(data[COORDINATE_COLUMN])
        columns = {k: np.asarray(v) for k, v in data.items() if k not in skip}
        if "text" in data:
            texts = [check_text(t, f"Row {n}") for n, t in enumerate(data["text"])]
            return Dataset(texts=texts, inputs=inputs, columns=columns)
        if "token_ids" in data:
            return Dataset(
                token_ids=[list(map(int, t)) for t in data["token_ids"]],
                inputs=inputs,
                columns=columns,
            )
        if inputs:
            return Dataset(inputs=inputs, columns=columns)
        if num_rows is not None:
            return Dataset(num_rows=num_rows, columns=columns)
        raise ValueError(
            f"A mapping given as data needs a 'text' or 'token_ids' column; got columns {sorted(data)}."
        )
    if isinstance(data, Sequence) and len(data) == 0:
        raise ValueError("The data is empty; give at least one example (e.g. a list of texts).")
    if isinstance(data, Sequence) and len(data) > 0:
        if all(isinstance(x, str) for x in data):
            return Dataset(texts=list(data))
        if all(isinstance(x, Sequence) and not isinstance(x, str) for x in data):
            return Dataset(token_ids=[list(map(int, x)) for x in data])
        if all(isinstance(x, Mapping) for x in data):  # rows: [{"text": ..., "concept": ...}]
            return rows_to_dataset([normalize_row(row, n) for n, row in enumerate(data)])
    if isinstance(data, Iterator):
        raise ValueError(
            f"Cannot use a {type(data).__name__} here: these data are needed whole (sized), and "
            "a generator or iterator is read once as it streams, which only gl.run does. Pass "
            "a list (e.g. list(rows)), token ids [N, T], a mapping/DataFrame with a 'text' "
            "column, or a geomlens Dataset."
        )
    raise ValueError(
        f"Cannot use {type(data).__name__} as data. Pass a list of strings, token ids [N, T], a "
        "mapping/DataFrame with a 'text' column, a list of row mappings, any iterable of rows "
        "(a generator, geomlens.data.streaming.stream_file(path), a datasets Dataset), or a "
        "geomlens Dataset."
    )


#: Field names that carry the model input of a row (the rest are label columns).
INPUT_FIELDS = ("text", "token_ids")


def _token_ids(value: Any) -> list[int] | None:
    """``value`` as a list of token ids, or None when it is not a sequence of integers."""
    if isinstance(value, torch.Tensor):
        if value.dim() == 1 and not value.is_floating_point():
            return value.tolist()
        return None
    if isinstance(value, np.ndarray):
        if value.ndim == 1 and np.issubdtype(value.dtype, np.integer):
            return value.tolist()
        return None
    integers = (
        isinstance(value, Sequence)
        and not isinstance(value, (str, bytes))
        and all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in value)
    )
    return [int(x) for x in value] if integers else None


def normalize_row(row: Any, number: int) -> dict[str, Any]:
    """One row as ``{"text" | "token_ids": ..., label: value, ...}``; ``number`` names the row in
    errors (0-based position in the stream)."""
    if isinstance(row, str):
        return {"text": row}
    if isinstance(row, Mapping):
        if COORDINATE_COLUMN in row:
            check_coordinate(row[COORDINATE_COLUMN], f"Row {number}")
        if "text" in row:
            return {**row, "text": check_text(row["text"], f"Row {number}")}
        if "token_ids" in row:
            ids = _token_ids(row["token_ids"])
            if ids is None:
                raise ValueError(
                    f"Row {number}: 'token_ids' must be a sequence of integers; got "
                    f"{type(row['token_ids']).__name__}."
                )
            return {**row, "token_ids": ids}
        raise ValueError(
            f"Row {number} is a mapping without a 'text' or 'token_ids' field (fields: "
            f"{sorted(map(str, row))}); give each row a 'text' (or 'token_ids') field."
        )
    ids = _token_ids(row)
    if ids is not None:
        return {"token_ids": ids}
    raise ValueError(
        f"Row {number} is a {type(row).__name__}; a streamed row must be a text, a sequence of "
        "token ids, or a mapping with a 'text' field and label fields."
    )


def rows_to_dataset(rows: Sequence[Mapping[str, Any]]) -> Dataset:
    """A sized :class:`Dataset` from normalised rows of one kind and one set of fields."""
    if len(rows) == 0:
        raise ValueError("The data is empty; give at least one example.")
    first = rows[0]
    kind = "text" if "text" in first else "token_ids"
    fields = set(first)
    for number, row in enumerate(rows):
        if set(row) != fields:
            raise ValueError(
                f"Row {number} has fields {sorted(row)} but the first row has {sorted(fields)}; "
                "every row needs the same fields."
            )
    if COORDINATE_COLUMN in first:  # before np.asarray, which would fail on ragged rows
        check_coordinates([row[COORDINATE_COLUMN] for row in rows])
    columns = {
        name: np.asarray([row[name] for row in rows]) for name in first if name not in INPUT_FIELDS
    }
    values = [row[kind] for row in rows]
    if kind == "text":
        return Dataset(texts=values, columns=columns)
    return Dataset(token_ids=values, columns=columns)
