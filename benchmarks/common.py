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


def add_timing_arguments(parser: Any, repeats: int = 3) -> None:
    """The flags every timing benchmark shares: fewest and most rounds, the spread to reach,
    torch threads."""
    parser.add_argument("--repeats", type=int, default=repeats, help="Fewest timed rounds.")
    parser.add_argument("--max-repeats", type=int, default=30)
    parser.add_argument("--target-spread", type=float, default=0.05)
    parser.add_argument("--threads", type=int, default=None, help="Default: the CPU count.")


def steady_timing(conditions: dict[str, Any], device: Any, args: Any) -> tuple[dict, dict]:
    """Threads pinned, a warm-up round, interleaved rounds until every median's spread is under
    ``--target-spread`` (or ``--max-repeats``); returns (seconds, spreads)."""
    from geomlens.engine.benchmarking import pin_threads, steady_interleaved

    args.threads = pin_threads(args.threads)
    return steady_interleaved(
        conditions,
        device,
        target_spread=args.target_spread,
        min_repeats=args.repeats,
        max_repeats=max(args.max_repeats, args.repeats),
    )


def timing_record(args: Any, seconds: dict[str, list[float]], spreads: dict[str, float]) -> dict:
    """What every timing result records about its repeats."""
    return {
        "repeats": len(next(iter(seconds.values()))),
        "threads": args.threads,
        "target_spread": args.target_spread,
        "median_spread": spreads,
        "seconds": seconds,
    }
