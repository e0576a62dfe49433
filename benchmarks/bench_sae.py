"""SAE counting (sae-features, no splice) against the bare ``sae.encode`` on the same batches.

``bare``: per batch, capture the SAE's site (the forward stops there) and call ``sae.encode``.
``sae-features``: the analysis with ``fidelity=False`` (no second, spliced forward pass), which
encodes the same activations and keeps the active counts, the pool and the per-input latents.
Reported: ``sae-features_over_bare_encode_cpu`` (and ``…_wall``) = {"median", "low", "high"}: the
median over interleaved rounds of the per-round ratio, with its ~95 % interval.
Both start from the same SAE: the one sae-features uses by default (trained offline on the
bundled corpus and cached), or ``--sae`` (a folder saved by sae-lens or ``release/sae_id``).

    python benchmarks/bench_sae.py --inputs 128 --out benchmarks/results/sae_cpu_minilm.json
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
import torch

import geomlens as gl
from geomlens.analyses.sae_features import SAEFeatures
from geomlens.engine import batch_indices, stream
from geomlens.engine.benchmarking import labelled_corpus

try:
    from common import add_timing_arguments, machine, steady_timing, timing_record, write
except ImportError:  # imported as benchmarks.bench_sae
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
    parser.add_argument("--sae", default=None, help="Default: sae-features' own default SAE.")
    parser.add_argument("--inputs", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=128)
    add_timing_arguments(parser)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)

    device = torch.device(args.device)
    adapter = gl.load(args.model, backend="nnsight", device=device)
    dataset = labelled_corpus(args.inputs)
    options = {"batch_size": args.batch_size, "max_length": args.max_length, "progress": False}
    counting = SAEFeatures(sae=args.sae, fidelity=False)
    first = np.arange(min(len(dataset), args.batch_size))
    stream([counting], adapter, dataset, rows=first, **options)  # set up: load / train the SAE
    ((site, sae),) = counting.saes

    def bare() -> None:
        with torch.no_grad():
            for index in batch_indices(len(dataset), args.batch_size):
                inputs = adapter.encode(dataset, index, max_length=args.max_length)
                sae.encode(adapter.capture(inputs, [site])[site])

    bare()  # warm-up
    timings = steady_timing(
        {
            "bare_encode": bare,
            "sae-features": lambda: stream([counting], adapter, dataset, **options),
        },
        device,
        args,
        baseline="bare_encode",
    )
    numbers = {
        "benchmark": "sae-features counting vs bare sae.encode",
        "model": adapter.model_id,
        "device": str(device),
        "site": site,
        "d_sae": int(sae.cfg.d_sae),
        "inputs": args.inputs,
        "batch_size": args.batch_size,
        "max_length": args.max_length,
        **timing_record(args, timings),
        "machine": machine(),
    }
    return write(numbers, args.out)


if __name__ == "__main__":
    main()
