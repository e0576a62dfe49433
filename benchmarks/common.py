"""Shared pieces of the benchmarks: peak memory, the machine, writing results.

Inputs, the bare forward pass and interleaved timing live in :mod:`geomlens.engine.benchmarking`
(the GPU throughput script uses them too).
"""

from __future__ import annotations

import json
import platform
import resource
import sys
from typing import Any

import torch


def peak_rss_bytes() -> int:
    """This process's peak resident set size so far (ru_maxrss: KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def machine() -> dict[str, Any]:
    import os

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }


def write(numbers: dict[str, Any], out: str | None) -> dict[str, Any]:
    """Print ``numbers`` as JSON and write them atomically to ``out`` when given."""
    text = json.dumps(numbers, indent=2)
    print(text)
    if out:
        from geomlens.atomic_files import atomic_write_text

        atomic_write_text(out, text + "\n")
    return numbers


def add_timing_arguments(parser: Any, repeats: int = 6) -> None:
    """The flags every timing benchmark shares: fewest and most rounds, the interval to reach,
    torch threads."""
    parser.add_argument(
        "--repeats", type=int, default=repeats, help="Fewest timed rounds (six at least count)."
    )
    parser.add_argument("--max-repeats", type=int, default=30, help="The cap on timed rounds.")
    parser.add_argument(
        "--target",
        "--target-spread",
        dest="target",
        type=float,
        default=0.05,
        help="Stop once every CPU-time ratio's ~95 %% interval is within ± this of its median.",
    )
    parser.add_argument("--threads", type=int, default=None, help="Default: the CPU count.")


def steady_timing(conditions: dict[str, Any], device: Any, args: Any, baseline: str) -> Any:
    """Threads pinned, a warm-up round, then interleaved rounds until every CPU-time ratio to
    ``baseline`` has its ~95 % interval within ± ``--target`` of its median, or ``--max-repeats``
    rounds ran; returns the :class:`~geomlens.engine.benchmarking.SteadyTimings`."""
    from geomlens.engine.benchmarking import pin_threads, steady_interleaved

    args.threads = pin_threads(args.threads)
    return steady_interleaved(
        conditions,
        device,
        baseline=baseline,
        target=args.target,
        min_repeats=args.repeats,
        max_repeats=max(args.max_repeats, args.repeats),
    )


def timing_record(args: Any, timings: Any) -> dict:
    """What every timing result records: the CPU-time and wall-time ratios with their
    intervals, the raw seconds, the rounds run and why they stopped, the torch threads."""
    return {**timings.record(), "threads": args.threads}
