"""Speed of geomlens against TransformerLens ``run_with_cache`` (keep every real token's
residual vectors, compute at the end), interleaved in one process over the same inputs.

bench_memory.py compares their peak memory, which needs a fresh process per run; this compares
their time, which needs both in one process (A B A B …) so that machine load hits both alike.
Reported: ``geomlens_over_run_with_cache_cpu`` (and ``…_wall``) = {"median", "low", "high"}: the
median over rounds of the per-round ratio of process CPU time (wall time), with its ~95 % interval.
Both go through the TransformerLens backend and compute activation-stats' statistics at every
block's residual stream.

    python benchmarks/bench_cache_speed.py --inputs 2000 --out benchmarks/results/cache_speed_cpu_minilm.json
"""

from __future__ import annotations

import argparse
from typing import Any

import torch

import geomlens as gl
from geomlens.data.dataset import as_dataset
from geomlens.engine.benchmarking import corpus_texts

try:
    from bench_memory import with_geomlens, with_run_with_cache
    from common import add_timing_arguments, machine, steady_timing, timing_record, write
except ImportError:  # imported as benchmarks.bench_cache_speed
    from benchmarks.bench_memory import with_geomlens, with_run_with_cache
    from benchmarks.common import (
        add_timing_arguments,
        machine,
        steady_timing,
        timing_record,
        write,
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--inputs", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--max-length", type=int, default=8)
    add_timing_arguments(parser)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)

    device = torch.device(args.device)
    adapter = gl.load(args.model, backend="transformer-lens", device=device)
    dataset = as_dataset(corpus_texts(args.inputs))
    warm = as_dataset(corpus_texts(args.batch_size))
    checks = {"geomlens": with_geomlens(adapter, warm, args)}
    checks["run_with_cache"] = with_run_with_cache(adapter, warm, args)
    timings = steady_timing(
        {
            "geomlens": lambda: checks.update(geomlens=with_geomlens(adapter, dataset, args)),
            "run_with_cache": lambda: checks.update(
                run_with_cache=with_run_with_cache(adapter, dataset, args)
            ),
        },
        device,
        args,
        baseline="run_with_cache",
    )
    numbers = {
        "benchmark": "geomlens vs run_with_cache, time, interleaved",
        "model": adapter.model_id,
        "device": str(device),
        "inputs": args.inputs,
        "batch_size": args.batch_size,
        "max_length": args.max_length,
        **timing_record(args, timings),
        "same_statistic": abs(
            checks["geomlens"]["mean_norm_last"] - checks["run_with_cache"]["mean_norm_last"]
        )
        <= 1e-4 * abs(checks["geomlens"]["mean_norm_last"]),
        "machine": machine(),
    }
    return write(numbers, args.out)


if __name__ == "__main__":
    main()
