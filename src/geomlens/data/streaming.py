"""Streamed data: rows that arrive one at a time from a source of unknown length.

A corpus need not fit in memory. ``gl.run`` accepts any iterable of rows — a generator, a file
read line by line (:func:`stream_file`), a Hugging Face ``datasets`` ``Dataset`` or
``IterableDataset`` — and forms batches as the rows arrive. A row is a text, a sequence of token
ids, or a mapping with a ``text`` (or ``token_ids``) field and label fields (``concept``,
``coordinate``, …). Every row must be of the first row's kind and carry the same fields.

Exceptions raised by the source itself reach the caller unchanged: nothing here catches them.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from geomlens.data.dataset import (
    COORDINATE_COLUMN,
    INPUT_FIELDS,
    Dataset,
    check_coordinate,
    check_text,
    normalize_row,
    rows_to_dataset,
)


class EmptySourceError(ValueError):
    """The data source yielded no rows at all."""


class StreamedData:
    """Rows read from ``source`` as they are needed, batched without reading the whole source.

    ``source`` is any iterable of rows. A re-iterable source (a file, a list, a ``datasets``
    object) is read afresh by every pass; a one-shot iterator (a generator) can be read once.
    ``length`` (when known) only sizes the progress bar and tells analyses how many rows to
    expect; ``name`` identifies the source in a result's provenance.
    """

    def __init__(
        self,
        source: Iterable[Any],
        *,
        length: int | None = None,
        name: str | None = None,
        limit: int | None = None,
    ) -> None:
        if limit is not None and limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}.")
        self.source = source
        self.limit = limit
        self.name = name or type(source).__name__
        self._length = length
        self._one_shot = iter(source) is source if hasattr(source, "__next__") else False
        self._started = False
        self._first: dict[str, Any] | None = None
        self._pending: Iterator[Any] | None = None  # the rows after the first, once peeked

    def __repr__(self) -> str:
        return f"StreamedData({self.name!r}, length={self.length})"

    @property
    def length(self) -> int | None:
        """Number of rows when the source knows it, else None."""
        if self._length is None and hasattr(self.source, "__len__"):
            self._length = len(self.source)  # type: ignore[arg-type]
        if self._length is not None and self.limit is not None:
            return min(self._length, self.limit)
        return self._length

    def _raw_rows(self) -> Iterator[Any]:
        if self._one_shot and self._started:
            raise ValueError(
                f"The data source {self.name!r} is a one-shot iterator (a generator) and has "
                "already been read; pass a fresh generator, a list or a file for every run."
            )
        self._started = True
        rows = iter(self.source)
        return itertools.islice(rows, self.limit) if self.limit is not None else rows

    def first_row(self) -> dict[str, Any]:
        """The first row, normalised (read once and kept, so a generator loses nothing)."""
        if self._first is None:
            self._pending = self._raw_rows()
            try:
                raw = next(self._pending)
            except StopIteration:
                raise EmptySourceError(f"The data source {self.name!r} yielded no rows.") from None
            self._first = normalize_row(raw, 0)
        return self._first

    @property
    def columns(self) -> tuple[str, ...]:
        """The label fields of the rows (known from the first row)."""
        return tuple(name for name in self.first_row() if name not in INPUT_FIELDS)

    def rows(self) -> Iterator[dict[str, Any]]:
        """Every row, normalised and checked against the first row's kind and fields."""
        first = self.first_row()
        pending, self._pending = self._pending, None
        if pending is None:  # read again: a re-iterable source restarts (a generator refuses)
            pending = self._raw_rows()
            next(pending, None)  # the first row, which we hold already
        fields = set(first)
        # The coordinate's kind (a number, or a vector of one width) is the first row's for the
        # whole stream, not only within one batch: batches are stacked together at the end.
        width = (
            check_coordinate(first[COORDINATE_COLUMN], "Row 0")
            if COORDINATE_COLUMN in first
            else None
        )
        yield first
        for number, raw in enumerate(pending, start=1):
            row = normalize_row(raw, number)
            if set(row) != fields:
                raise ValueError(
                    f"Row {number} of {self.name!r} has fields {sorted(row)} but the first row "
                    f"has {sorted(fields)}; every row needs the same fields."
                )
            if COORDINATE_COLUMN in row:
                found = check_coordinate(row[COORDINATE_COLUMN], f"Row {number}")
                if found != width:
                    raise ValueError(
                        f"Row {number} of {self.name!r}: coordinate {row[COORDINATE_COLUMN]!r} "
                        f"is {_kind(found)} but the first row's is {_kind(width)}; every row's "
                        "coordinate must be of one kind (a number each, or vectors of one length)."
                    )
            yield row

    def chunks(self, batch_size: int) -> Iterator[Dataset]:
        """Consecutive ``batch_size``-row :class:`Dataset` chunks (the last may be shorter)."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}.")
        rows = self.rows()
        while chunk := list(itertools.islice(rows, batch_size)):
            yield rows_to_dataset(chunk)

    def describe(self) -> dict[str, Any]:
        return {"source": self.name, "length": self.length}


def _kind(width: int | None) -> str:
    return "a number" if width is None else f"a vector of {width}"


class _FileRows:
    """A re-iterable view of a .txt (one text per non-blank line) or .jsonl file (one JSON
    object per non-blank line), reopened for every pass and never read whole."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __iter__(self) -> Iterator[Any]:
        with open(self.path, encoding="utf-8") as handle:
            for line_number, line in enumerate(handle, start=1):
                line = line.strip()
                if not line:
                    continue
                if self.path.suffix == ".txt":
                    yield line
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as error:
                    raise ValueError(
                        f"{self.path}:{line_number} is not valid JSON ({error.msg}); a .jsonl "
                        "file holds one JSON object per line."
                    ) from None
                if isinstance(row, dict):  # name the line, not the row number, in errors
                    where = f"{self.path}:{line_number}"
                    if "text" in row:
                        check_text(row["text"], where)
                    if COORDINATE_COLUMN in row:
                        check_coordinate(row[COORDINATE_COLUMN], where)
                yield row

    def __len__(self) -> int:
        with open(self.path, encoding="utf-8") as handle:
            return sum(1 for line in handle if line.strip())


def stream_file(path: str | os.PathLike[str], *, limit: int | None = None) -> StreamedData:
    """Rows of a .txt file (one text per line) or .jsonl file (objects with a ``text`` field and
    label fields), read line by line. Blank lines are skipped."""
    path = Path(path)
    if path.suffix not in (".txt", ".jsonl"):
        raise ValueError(
            f"Can stream only .txt (one text per line) or .jsonl files; got {path.name!r}."
        )
    if not path.is_file():
        raise ValueError(f"Data file {path} does not exist.")
    return StreamedData(_FileRows(path), name=str(path), limit=limit)


def is_streamed(data: Any) -> bool:
    """Whether ``data`` is read row by row (an iterable that is not an in-memory container)."""
    if isinstance(data, (StreamedData, _FileRows)):
        return True
    in_memory = (Dataset, str, bytes, torch.Tensor, Mapping, Sequence)
    if data is None or isinstance(data, in_memory):
        return False
    if hasattr(data, "to_dict") and hasattr(data, "columns") and not hasattr(data, "features"):
        return False  # a pandas DataFrame (a datasets.Dataset has .features)
    return isinstance(data, Iterable)


def as_stream(data: Any) -> StreamedData:
    """Wrap an iterable of rows (see :func:`is_streamed`) as :class:`StreamedData`."""
    if isinstance(data, StreamedData):
        return data
    if hasattr(data, "readline"):  # an open text file: one text per line, blank lines skipped
        return StreamedData((line.strip() for line in data if line.strip()), name="file")
    return StreamedData(data)
