"""Engine benchmark: fused analyses vs separate runs, and memory vs the number of inputs.

Ratios are measured against a baseline in the same run, so they mean the same on any machine:
- fused_over_separate: time of one fused run of two analyses / time of two separate runs. Both
  read the last block, so fusing saves one whole forward pass per batch: expect about 0.5 when
  the forward dominates;
- peak_memory_ratio_4x_inputs: peak memory of a run over 4× the inputs / of the baseline run
  (streaming: expect about 1). On CUDA this is max_memory_allocated; on CPU it is tracemalloc's
  peak, which sees Python objects but not torch's CPU tensor allocator.

    python benchmarks/bench_engine.py --model all-MiniLM-L6-v2 --device cpu --inputs 64
    python benchmarks/bench_engine.py --model gpt2 --device cuda --inputs 2048 --batch-size 64
"""

from __future__ import annotations

import argparse
import json
import time
import tracemalloc
from collections.abc import Callable

import torch

import geomlens as gl
from geomlens.analyses.activation_stats import ActivationStats
from geomlens.data.corpus import stdlib_paragraphs


class SecondStats(ActivationStats):
    """A second analysis over a different site, so fusing has something to share."""

    name = "second-stats"


def measure(fn: Callable[[], object], device: torch.device) -> tuple[float, float]:
    """Seconds and peak memory (bytes) of one call."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    else:
        tracemalloc.start()
    started = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        peak = float(torch.cuda.max_memory_allocated(device))
    else:
        peak = float(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    return time.perf_counter() - started, peak


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--backend", default="nnsight")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--inputs", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--out", default=None, help="Write the numbers as JSON here.")
    args = parser.parse_args(argv)

    device = torch.device(args.device)
    adapter = gl.load(args.model, backend=args.backend, device=device)
    last_block = adapter.n_layers - 1
    first = adapter.resolve_site(f"blocks.{last_block}.hook_resid_post")
    last = adapter.resolve_site(f"blocks.{last_block}.hook_resid_pre")
    texts = stdlib_paragraphs(4 * args.inputs)
    options = {"batch_size": args.batch_size, "max_length": args.max_length, "progress": False}

    def separate(texts: list[str]) -> None:
        gl.run(ActivationStats(site=first), adapter, texts, **options)
        gl.run(SecondStats(site=last), adapter, texts, **options)

    def fused(texts: list[str]) -> None:
        gl.run([ActivationStats(site=first), SecondStats(site=last)], adapter, texts, **options)

    base = texts[: args.inputs]
    fused(base[: args.batch_size])  # warm-up
    separate_time, _ = measure(lambda: separate(base), device)
    fused_time, base_peak = measure(lambda: fused(base), device)
    _, large_peak = measure(lambda: fused(texts), device)
    numbers = {
        "inputs": float(len(base)),
        "separate_seconds": separate_time,
        "fused_seconds": fused_time,
        "fused_over_separate": fused_time / separate_time,
        "peak_memory_ratio_4x_inputs": large_peak / base_peak,
    }
    print(json.dumps(numbers, indent=2))
    if args.out:
        from geomlens.atomic_files import atomic_write_text

        atomic_write_text(args.out, json.dumps(numbers, indent=2))
    return numbers


if __name__ == "__main__":
    main()
