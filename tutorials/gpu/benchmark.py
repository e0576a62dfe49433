"""Throughput on a real model: tokens per second of the bare forward pass, of activation-stats
at every block's residual stream, and of every built-in analysis fused in one pass.

The same batches run in every condition, interleaved over ``--repeats`` rounds (see
docs/scale.md). On CUDA it also counts the host synchronisations of one activation-stats pass
(``torch.cuda.set_sync_debug_mode``): the engine's loop and activation-stats make none per
batch; other analyses may (their copies to the CPU show up here).

    python tutorials/gpu/benchmark.py --model gpt2 --device cuda --inputs 2048 --batch-size 64
    python tutorials/gpu/benchmark.py --model meta-llama/Llama-3.2-1B --device cuda --dtype bfloat16

Analyses are set up on one batch before timing (sae-features trains its default SAE on the
bundled corpus the first time, cached after; give ``--option sae-features.sae=release/id`` for
a published one, or ``--skip sae-features``).
"""

from __future__ import annotations

import argparse
import ast
import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

import geomlens as gl
from geomlens.analyses.registry import builtin_analyses
from geomlens.engine import build_analyses, stream
from geomlens.engine.benchmarking import (
    bare_forward,
    count_tokens,
    interleaved,
    labelled_corpus,
)
from geomlens.results import atomic_write_text


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="HF model name or local folder.")
    parser.add_argument("--device", default="cuda", help="cuda, cuda:1, cpu, ...")
    parser.add_argument("--dtype", default=None, help="float32 (default), bfloat16, float16.")
    parser.add_argument("--inputs", type=int, default=1024)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip", nargs="*", default=[], help="Analyses to leave out.")
    parser.add_argument(
        "--option", nargs="*", default=[], help="NAME.KEY=VALUE for one analysis (repeatable)."
    )
    parser.add_argument("--out", type=Path, default=None, help="Write the numbers as JSON here.")
    return parser.parse_args(argv)


def analysis_options(items: list[str]) -> dict[str, dict[str, Any]]:
    options: dict[str, dict[str, Any]] = {}
    for item in items:
        target, _, assignment = item.partition(".")
        key, _, raw = assignment.partition("=")
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            value = raw
        options.setdefault(target, {})[key] = value
    return options


def host_syncs(adapter: gl.Adapter, dataset: Any, batch_size: int, max_length: int) -> int | None:
    """Synchronisations CUDA reports during one activation-stats pass (None off CUDA)."""
    if adapter.device.type != "cuda":
        return None
    analysis = build_analyses("activation-stats", {})[0]
    options = {"batch_size": batch_size, "max_length": max_length, "progress": False}
    stream([analysis], adapter, dataset, rows=np.arange(batch_size), **options)  # set up
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            stream([analysis], adapter, dataset, **options)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message) for w in caught)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_arguments(argv)
    adapter = gl.load(args.model, device=args.device, dtype=args.dtype)
    dataset = labelled_corpus(args.inputs)
    names = [name for name in builtin_analyses() if name not in args.skip]
    overrides = analysis_options(args.option)
    groups = {"activation-stats": ["activation-stats"], "all analyses": names}
    prepared = {
        label: [build_analyses(n, overrides.get(n, {}))[0] for n in selected]
        for label, selected in groups.items()
    }
    options = {"batch_size": args.batch_size, "max_length": args.max_length, "progress": False}
    first = np.arange(min(len(dataset), args.batch_size))
    for built in prepared.values():  # set up (SAE, calibration) and warm up, untimed
        stream(built, adapter, dataset, rows=first, **options)
    bare_forward(adapter, dataset, args.batch_size, args.max_length)

    conditions = {
        "bare forward": lambda: bare_forward(adapter, dataset, args.batch_size, args.max_length)
    }
    for label, built in prepared.items():
        conditions[label] = lambda built=built: stream(built, adapter, dataset, **options)
    seconds = interleaved(conditions, args.repeats, adapter.device).seconds  # wall: GPU time
    tokens = count_tokens(adapter, dataset, args.batch_size, args.max_length)
    throughput = {label: tokens / float(np.median(s)) for label, s in seconds.items()}
    numbers = {
        "model": adapter.model_id,
        "device": str(adapter.device),
        "dtype": str(args.dtype or "float32"),
        "inputs": args.inputs,
        "tokens": tokens,
        "analyses": names,
        "tokens_per_second": throughput,
        "slowdown_vs_bare": {k: throughput["bare forward"] / v for k, v in throughput.items()},
        "seconds": seconds,
        "host_syncs_in_activation_stats_pass": host_syncs(
            adapter, dataset, args.batch_size, args.max_length
        ),
    }
    if adapter.device.type == "cuda":
        numbers["max_memory_allocated_bytes"] = torch.cuda.max_memory_allocated(adapter.device)
    for label, value in throughput.items():
        print(
            f"{label:>18}: {value:12.0f} tokens/s  ({numbers['slowdown_vs_bare'][label]:.2f}× bare)"
        )
    if "max_memory_allocated_bytes" in numbers:
        print(f"max_memory_allocated: {numbers['max_memory_allocated_bytes'] / 2**20:.0f} MiB")
    if args.out is not None:
        atomic_write_text(args.out, json.dumps(numbers, indent=2) + "\n")
        print(f"wrote {args.out}")
    return numbers


if __name__ == "__main__":
    main()
