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
        from geomlens.results import atomic_write_text

        atomic_write_text(out, text + "\n")
    return numbers
