"""What the benchmarks and the GPU throughput script share: labelled inputs that every built-in
analysis can read, the bare forward pass geomlens is compared with, and interleaved timing.

Ratios are measured in one process over the same batches with the conditions interleaved
(A B C A B C …), in process CPU time (what the work cost, whatever else the machine runs) and in
wall time. Each ratio is the median of the per-round ratios (condition over the baseline of the
same round, so slow drift in machine load cancels), with a distribution-free ~95 % interval;
rounds are added until every interval is within a target (±5 %) or a cap is reached. See
docs/scale.md.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

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


def _bare_forward_kwargs(adapter: Adapter) -> Callable[[Any], dict[str, Any]]:
    """How the nnsight backend calls the model's own forward on a batch (the bare pass)."""
    forward_kwargs = getattr(adapter, "_forward_kwargs", None)
    if forward_kwargs is None:
        raise ValueError("The bare-forward baseline needs the nnsight backend (backend='nnsight').")
    return forward_kwargs


def bare_forward(
    adapter: Adapter, dataset: Dataset, batch_size: int, max_length: int | None
) -> None:
    """The model's own forward (no hooks, no analyses) on the batches geomlens forms, with the
    arguments the nnsight backend gives it."""
    forward_kwargs = _bare_forward_kwargs(adapter)
    with torch.no_grad():
        batches = dataset_batches(dataset, batch_size)
        for inputs in encoded_batches(adapter, batches, max_length=max_length):
            adapter.model(**forward_kwargs(inputs))


class FloorPasses:
    """The floor of an analysis with second passes, as a timed condition: per batch the bare
    forward, then the model's blocks from each recorded layer on (the second passes the
    analysis ran, from the same cached block inputs; layer 0 is a whole pass), without the
    analysis's own work or edit. ``layers``: every second pass's start layer over one whole run
    (:func:`~geomlens.interventions.resume.recording_second_passes`), in order; they are spread
    over the batches as they came (a pass per batch per edited site, usually)."""

    def __init__(
        self,
        adapter: Adapter,
        dataset: Dataset,
        batch_size: int,
        max_length: int | None,
        layers: list[int],
    ) -> None:
        from geomlens.interventions.resume import resume_site

        self.adapter, self.dataset = adapter, dataset
        self.batch_size, self.max_length = batch_size, max_length
        self.forward_kwargs = _bare_forward_kwargs(adapter)
        self.output = f"blocks.{adapter.n_layers - 1}.hook_resid_post"
        starts = sorted(set(layers) - {0})
        cached: list[dict[int, torch.Tensor]] = []
        with torch.no_grad():  # the blocks' cached inputs, as the first pass leaves them
            for inputs in self._batches():
                captured = adapter.capture(inputs, [resume_site(layer) for layer in starts])
                cached.append({layer: captured[resume_site(layer)] for layer in starts})
        self.cached = cached
        self.per_batch = [
            [int(layer) for layer in chunk]
            for chunk in np.array_split(np.asarray(layers, dtype=int), max(1, len(cached)))
        ]

    def _batches(self) -> Iterator[Any]:
        batches = dataset_batches(self.dataset, self.batch_size)
        return iter(encoded_batches(self.adapter, batches, max_length=self.max_length))

    def __call__(self) -> None:
        from geomlens.interventions.resume import capture_from_layer

        with torch.no_grad():
            for inputs, cached, layers in zip(self._batches(), self.cached, self.per_batch):
                self.adapter.model(**self.forward_kwargs(inputs))
                for layer in layers:
                    resid = cached.get(layer)  # None from layer 0: the whole pass
                    capture_from_layer(self.adapter, inputs, [self.output], layer, resid)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


#: Which clock a ratio reads: process CPU time or wall time.
Clock = Literal["cpu", "wall"]

#: Fewest rounds whose order-statistic interval of the median holds ~95 %: below six the
#: interval is the whole range, which misses the median with probability 2¹⁻ⁿ (12.5 % at n = 4).
MIN_ROUNDS = 6


@dataclass
class Timings:
    """Wall seconds and process CPU seconds of each condition, one entry per round.

    CPU seconds are this process's user + system time (``time.process_time``: every thread,
    so torch's intra-op threads and the tokenizer's count). They are what the work itself cost:
    time the machine gives to other processes is not in them, so they move less than wall time
    on a shared machine (not nothing: an intra-op thread that spins while its peer is
    descheduled still counts, and shared caches slow the work itself). On CUDA they are the host's time only (Python, kernel launches and waiting
    in ``synchronize``), not the GPU's: read the wall-time ratios there.
    """

    seconds: dict[str, list[float]] = field(default_factory=dict)
    cpu_seconds: dict[str, list[float]] = field(default_factory=dict)

    @property
    def rounds(self) -> int:
        return min((len(values) for values in self.seconds.values()), default=0)

    def extend(self, other: Timings) -> None:
        for name in other.seconds:
            self.seconds.setdefault(name, []).extend(other.seconds[name])
            self.cpu_seconds.setdefault(name, []).extend(other.cpu_seconds[name])

    def ratio(self, name: str, baseline: str, clock: Clock = "cpu") -> RatioInterval:
        """Median over rounds of ``name`` / ``baseline`` in the same round, on ``clock``
        (``"cpu"`` or ``"wall"``), with its ~95 % interval (:func:`paired_ratio`)."""
        times = {"cpu": self.cpu_seconds, "wall": self.seconds}[clock]
        return paired_ratio(times[name], times[baseline])


def interleaved(
    conditions: dict[str, Callable[[], Any]],
    repeats: int,
    device: torch.device,
    *,
    wall_clock: Callable[[], float] = time.perf_counter,
    cpu_clock: Callable[[], float] = time.process_time,
) -> Timings:
    """Wall and CPU seconds of each condition (see :class:`Timings`), ``repeats`` rounds, run in
    the order A B C A B C … The clocks are parameters so that tests can plant known costs."""
    timings = Timings({name: [] for name in conditions}, {name: [] for name in conditions})
    for _ in range(repeats):
        for name, run in conditions.items():
            synchronize(device)
            wall, cpu = wall_clock(), cpu_clock()
            run()
            synchronize(device)
            timings.seconds[name].append(wall_clock() - wall)
            timings.cpu_seconds[name].append(cpu_clock() - cpu)
    return timings


def pin_threads(threads: int | None) -> int:
    """Fix torch's intra-op threads (default: the CPU count) so that repeats and machines
    compare like with like; returns the number used."""
    import os

    count = threads or os.cpu_count() or 1
    torch.set_num_threads(count)
    return count


def median_interval(values: list[float]) -> tuple[float, float, float]:
    """The median and a distribution-free 95 % confidence interval for it: the order
    statistics x₍ⱼ₎, x₍ₖ₎ of the exact binomial (sign-test) interval, scipy's
    ``quantile_test(values, p=0.5).confidence_interval(0.95)``, whose coverage is at least 95 %
    whatever the distribution (for large n the ranks are n/2 ∓ 0.98·√n; the whole range for
    fewer than :data:`MIN_ROUNDS` values, where no exact 95 % interval exists). Returns
    (median, low, high)."""
    from scipy.stats import quantile_test

    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        raise ValueError("The median of no values has no interval.")
    middle = statistics.median(ordered)
    if n < MIN_ROUNDS:
        return middle, ordered[0], ordered[-1]
    interval = quantile_test(ordered, q=middle, p=0.5).confidence_interval(0.95)
    low, high = float(interval.low), float(interval.high)
    # NaN only where no pair of order statistics reaches 95 % (n < 6): the whole range then.
    return (
        middle,
        ordered[0] if np.isnan(low) else low,
        ordered[-1] if np.isnan(high) else high,
    )


def median_spread(values: list[float]) -> float:
    """Relative half-width of :func:`median_interval`: (x₍ₖ₎ − x₍ⱼ₎) / (2·median). Shrinks as
    repeats accumulate, unlike the spread of the values."""
    middle, low, high = median_interval(values)
    return (high - low) / (2 * middle) if middle > 0 else float("inf")


@dataclass(frozen=True)
class RatioInterval:
    """A median ratio and its ~95 % interval."""

    median: float
    low: float
    high: float

    def within(self, target: float) -> bool:
        """Whether the interval lies inside ± ``target`` (a fraction) of the median."""
        return (
            self.median > 0
            and self.low >= self.median * (1 - target)
            and self.high <= self.median * (1 + target)
        )

    def as_dict(self) -> dict[str, float]:
        return {"median": self.median, "low": self.low, "high": self.high}


def paired_ratio(values: list[float], baseline: list[float]) -> RatioInterval:
    """The per-round ratios ``values[i] / baseline[i]`` summarised by their median and its
    :func:`median_interval`. Pairing each condition with the baseline of its own round cancels
    drift in machine load that is slow next to a round, which a ratio of two medians keeps."""
    if len(values) != len(baseline):
        raise ValueError(f"Paired ratios need as many rounds: {len(values)} vs {len(baseline)}.")
    ratios = [v / b for v, b in zip(values, baseline, strict=True)]
    return RatioInterval(*median_interval(ratios))


@dataclass
class SteadyTimings(Timings):
    """:class:`Timings` from :func:`steady_interleaved`, with the baseline every ratio is taken
    against and why the rounds stopped."""

    baseline: str = ""
    target: float = 0.05
    stopped: str = ""

    def ratios(self, clock: Clock = "cpu") -> dict[str, RatioInterval]:
        """Every other condition over the baseline, on ``clock``."""
        return {
            name: self.ratio(name, self.baseline, clock)
            for name in self.seconds
            if name != self.baseline
        }

    def record(self) -> dict[str, Any]:
        """What a benchmark's JSON records: per condition ``<name>_over_<baseline>_cpu`` and
        ``…_wall`` as {"median", "low", "high"}, the raw ``cpu_seconds`` and ``seconds``, the
        ``rounds`` run, the ``target`` and how the rounds ``stopped``."""
        numbers: dict[str, Any] = {}
        clocks: tuple[Clock, ...] = ("cpu", "wall")
        for clock in clocks:
            for name, interval in self.ratios(clock).items():
                numbers[f"{name}_over_{self.baseline}_{clock}"] = interval.as_dict()
        return {
            **numbers,
            "rounds": self.rounds,
            "target": self.target,
            "stopped": self.stopped,
            "cpu_seconds": self.cpu_seconds,
            "seconds": self.seconds,
        }


def steady_interleaved(
    conditions: dict[str, Callable[[], Any]],
    device: torch.device,
    *,
    baseline: str,
    target: float = 0.05,
    min_repeats: int = MIN_ROUNDS,
    max_repeats: int = 30,
    warmup: int = 1,
    wall_clock: Callable[[], float] = time.perf_counter,
    cpu_clock: Callable[[], float] = time.process_time,
) -> SteadyTimings:
    """Interleaved rounds (A B C A B C …) after ``warmup`` untimed ones, added one at a time until
    every condition's CPU-time ratio to ``baseline`` (:func:`paired_ratio`) has its ~95 % interval
    inside ± ``target`` of its median, or ``max_repeats`` rounds ran; ``stopped`` says which.
    No earlier than ``min_repeats`` rounds, nor than :data:`MIN_ROUNDS` (a shorter interval is the
    range of a few rounds and holds the median less often than it claims)."""
    if baseline not in conditions or len(conditions) < 2:
        raise ValueError(
            f"Steady timing needs the baseline {baseline!r} and at least one condition to compare "
            f"with it; got {sorted(conditions)}."
        )
    clocks = {"wall_clock": wall_clock, "cpu_clock": cpu_clock}
    interleaved(conditions, warmup, device, **clocks)
    timings = SteadyTimings(baseline=baseline, target=target)
    fewest = max(min_repeats, MIN_ROUNDS)
    while True:
        timings.extend(interleaved(conditions, 1, device, **clocks))
        steady = all(interval.within(target) for interval in timings.ratios("cpu").values())
        if timings.rounds >= fewest and steady:
            timings.stopped = f"interval under ±{100 * target:g} %"
            return timings
        if timings.rounds >= max_repeats:
            timings.stopped = f"cap of {timings.rounds} rounds reached"
            return timings
