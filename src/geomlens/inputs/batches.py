"""The encode-and-capture batch loop: rows of a dataset, cut into batches, encoded for the model,
run forward once each with the sites read.

Everything that walks a model over data goes through here: the engine's run (which adds
sharding, checkpoints and progress around it), linearisation's calibration passes, SAE
training's activation batches, the benchmarks and the experiments. So batches are formed, padded
and truncated one way, and an input longer than the model's positions fails with one message.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import torch

from geomlens.inputs.adapter_protocol import ModelAdapter
from geomlens.inputs.encoding import ModelInputs, PaddingSide
from geomlens.inputs.positions import explain_index_error
from geomlens.run_defaults import DEFAULT_BATCH_SIZE as DEFAULT_BATCH_SIZE  # the loop's default
from geomlens.run_defaults import DEFAULT_MAX_LENGTH

if TYPE_CHECKING:
    from geomlens.data.dataset import Dataset

# Inputs per forward pass (``gl.run``, ``geomlens run`` and every loop here) and tokens kept
# per input (None: every token, the model's own limit still applies): geomlens.run_defaults.


class BatchRows(NamedTuple):
    """One batch to form: rows ``index`` of ``data``; ``numbers`` renumbers them (the global row
    numbers of a streamed chunk, whose own rows start at 0)."""

    data: Dataset
    # A field named like tuple.index, which it shadows: callers read the rows as ``.index``.
    index: np.ndarray  # type: ignore[assignment]
    numbers: np.ndarray | None = None


@dataclass
class CapturedBatch:
    """One forward pass: the encoded inputs and ``{site: activation [B, T, ...]}``."""

    inputs: ModelInputs
    activations: dict[str, torch.Tensor]


def batch_indices(num_examples: int, batch_size: int) -> Iterator[np.ndarray]:
    """Consecutive row indices ``[0, B), [B, 2B), …`` covering ``num_examples`` rows."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}.")
    for start in range(0, num_examples, batch_size):
        yield np.arange(start, min(start + batch_size, num_examples))


def dataset_batches(
    dataset: Dataset, batch_size: int, rows: Sequence[int] | np.ndarray | None = None
) -> Iterator[BatchRows]:
    """Batches of ``rows`` of ``dataset`` (all rows by default), in order."""
    chosen = np.arange(len(dataset)) if rows is None else np.asarray(rows)
    for chunk in batch_indices(len(chosen), batch_size):
        yield BatchRows(dataset, chosen[chunk])


def encoded_batches(
    adapter: ModelAdapter,
    batches: Iterable[BatchRows],
    *,
    padding_side: PaddingSide = "right",
    max_length: int | None = DEFAULT_MAX_LENGTH,
) -> Iterator[ModelInputs]:
    """Each batch encoded for ``adapter`` (padded, truncated, on its device)."""
    check_run_limits(padding_side=padding_side, max_length=max_length)
    for batch in batches:
        inputs = adapter.encode(
            batch.data, batch.index, padding_side=padding_side, max_length=max_length
        )
        if batch.numbers is not None:
            inputs = dataclasses.replace(inputs, index=batch.numbers)
        yield inputs


def capture_batch(
    adapter: ModelAdapter, inputs: ModelInputs, sites: Sequence[str]
) -> CapturedBatch:
    """One forward pass over ``inputs`` reading ``sites``; an input longer than the model's
    position table fails saying so (not with the embedding's bare IndexError)."""
    try:
        activations = adapter.capture(inputs, sites)
    except IndexError as error:
        raise explain_index_error(error, adapter, inputs.attention_mask.shape[-1]) from error
    return CapturedBatch(inputs, activations)


def captured_batches(
    adapter: ModelAdapter,
    batches: Iterable[BatchRows],
    sites: Sequence[str],
    *,
    padding_side: PaddingSide = "right",
    max_length: int | None = DEFAULT_MAX_LENGTH,
) -> Iterator[CapturedBatch]:
    """One forward pass per batch, reading ``sites``: :func:`encoded_batches` then
    :func:`capture_batch` (a caller that must see a batch's inputs before its pass, e.g. to
    hand its mask to a hook, runs those two itself)."""
    for inputs in encoded_batches(
        adapter, batches, padding_side=padding_side, max_length=max_length
    ):
        yield capture_batch(adapter, inputs, sites)


def check_run_limits(
    *,
    batch_size: int | None = None,
    padding_side: PaddingSide = "right",
    max_length: int | None = None,
) -> None:
    """One clear error for a batch size, padding side or length no pass can use."""
    if batch_size is not None and batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}.")
    if max_length is not None and max_length < 1:
        raise ValueError(
            f"max_length must be at least 1 token, got {max_length}; pass None to keep every token."
        )
    if padding_side not in ("left", "right"):
        raise ValueError(f"padding_side must be 'left' or 'right', got {padding_side!r}.")
