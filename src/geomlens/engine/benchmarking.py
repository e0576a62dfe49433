"""What the benchmarks and the GPU throughput script share: labelled inputs that every built-in
analysis can read, the bare forward pass geomlens is compared with, and interleaved timing.

Ratios are measured in one process over the same batches with the conditions interleaved
(A B C A B C …), so drift in machine load hits every condition alike. See docs/scale.md.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from geomlens.data.corpus import stdlib_paragraphs
from geomlens.data.dataset import Dataset, as_dataset
from geomlens.inputs.batches import dataset_batches, encoded_batches
from geomlens.models.adapter import Adapter


def corpus_texts(count: int) -> list[str]:
    """``count`` texts of the bundled corpus, cycled when more are asked than it holds."""
    paragraphs = stdlib_paragraphs(min(count, 2000))
    return list(itertools.islice(itertools.cycle(paragraphs), count))


def labelled_corpus(count: int) -> Dataset:
    """Corpus texts with every label column the built-ins read, so that all run fused: a binary
    ``concept`` in four ``context``s, a ``coordinate``, and ``condition`` calibration / heldout
    halves."""
    rows = np.arange(count)
    return as_dataset(
        {
            "text": corpus_texts(count),
            "concept": rows % 2,
            "context": [f"c{i}" for i in (rows // 2) % 4],
            "coordinate": rows % 16,
            "condition": np.where(rows < count // 2, "calibration", "heldout"),
        }
    )


def count_tokens(
    adapter: Adapter, dataset: Dataset, batch_size: int, max_length: int | None
) -> int:
    """Real (non-padding) tokens in ``dataset`` as geomlens batches it."""
    batches = dataset_batches(dataset, batch_size)
    return sum(
        int(inputs.attention_mask.sum())
        for inputs in encoded_batches(adapter, batches, max_length=max_length)
    )


def bare_forward(
    adapter: Adapter, dataset: Dataset, batch_size: int, max_length: int | None
) -> None:
    """The model's own forward (no hooks, no analyses) on the batches geomlens forms, with the
    arguments the nnsight backend gives it."""
    forward_kwargs = getattr(adapter, "_forward_kwargs", None)
    if forward_kwargs is None:
        raise ValueError("The bare-forward baseline needs the nnsight backend (backend='nnsight').")
    with torch.no_grad():
        batches = dataset_batches(dataset, batch_size)
        for inputs in encoded_batches(adapter, batches, max_length=max_length):
            adapter.model(**forward_kwargs(inputs))


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def interleaved(
    conditions: dict[str, Callable[[], Any]], repeats: int, device: torch.device
) -> dict[str, list[float]]:
    """Seconds of each condition, ``repeats`` times, run in the order A B C A B C …"""
    seconds: dict[str, list[float]] = {name: [] for name in conditions}
    for _ in range(repeats):
        for name, run in conditions.items():
            synchronize(device)
            started = time.perf_counter()
            run()
            synchronize(device)
            seconds[name].append(time.perf_counter() - started)
    return seconds


def median_ratio(seconds: dict[str, list[float]], name: str, baseline: str) -> float:
    """Median seconds of ``name`` over the median of ``baseline``."""
    return statistics.median(seconds[name]) / statistics.median(seconds[baseline])


def min_ratio(seconds: dict[str, list[float]], name: str, baseline: str) -> float:
    """Fastest repeat of ``name`` over the fastest of ``baseline``: on a shared machine the
    fastest repeat is the one least slowed by other work, so this is the steadier estimate."""
    return min(seconds[name]) / min(seconds[baseline])


def pin_threads(threads: int | None) -> int:
    """Fix torch's intra-op threads (default: the CPU count) so that repeats and machines
    compare like with like; returns the number used."""
    import os

    count = threads or os.cpu_count() or 1
    torch.set_num_threads(count)
    return count


def median_spread(values: list[float]) -> float:
    """Relative half-width of a distribution-free ~95 % confidence interval of the median:
    (x₍ₖ₎ − x₍ⱼ₎) / (2·median), ranks j, k = n/2 ∓ 0.98·√n (order statistics; the whole range
    for fewer than six values). Shrinks as repeats accumulate, unlike the spread of the values."""
    ordered = sorted(values)
    n = len(ordered)
    middle = statistics.median(ordered)
    if n < 6:
        low, high = ordered[0], ordered[-1]
    else:
        half = 0.98 * n**0.5
        low = ordered[max(int(np.floor(n / 2 - half)) - 1, 0)]
        high = ordered[min(int(np.ceil(n / 2 + 1 + half)) - 1, n - 1)]
    return (high - low) / (2 * middle) if middle > 0 else float("inf")


def steady_interleaved(
    conditions: dict[str, Callable[[], Any]],
    device: torch.device,
    *,
    target_spread: float = 0.05,
    min_repeats: int = 3,
    max_repeats: int = 30,
    warmup: int = 1,
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Interleaved timing (A B C A B C …) after ``warmup`` untimed rounds, repeated until every
    condition's :func:`median_spread` is under ``target_spread`` or ``max_repeats`` rounds ran.
    Returns the seconds and the spread each condition reached."""
    interleaved(conditions, warmup, device)
    seconds: dict[str, list[float]] = {name: [] for name in conditions}
    while True:
        for name, values in interleaved(conditions, 1, device).items():
            seconds[name].extend(values)
        rounds = len(next(iter(seconds.values())))
        spreads = {name: median_spread(values) for name, values in seconds.items()}
        steady = all(spread < target_spread for spread in spreads.values())
        if rounds >= max_repeats or (rounds >= min_repeats and steady):
            return seconds, spreads


def ratio_spread(spreads: dict[str, float], name: str, baseline: str) -> float:
    """Relative spread of median(name) / median(baseline): the two relative spreads added (a
    bound that holds whatever their correlation)."""
    return spreads[name] + spreads[baseline]
