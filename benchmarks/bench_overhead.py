"""Overhead of geomlens over the bare forward pass of the same model, on the same batches.

Conditions, interleaved (bare, one analysis, …, all fused, bare, …) after a warm-up round, in
rounds added until every condition's CPU-time ratio to bare has its ~95 % interval within
± ``--target`` (5 %) of its median or ``--max-repeats`` rounds ran; torch threads pinned:
- ``bare``: tokenise each batch and run the model's own forward (no hooks, no analyses);
- ``activation-stats``: activation-stats at its default sites (every block's residual stream);
- each built-in analysis alone at its default sites (``--each``);
- ``all``: every built-in analysis fused in one pass at its default sites.
Reported: ``<condition>_over_bare_cpu`` = {"median", "low", "high"}, the median over rounds of
the condition's process CPU time over bare's in the same round with its interval, the same in
wall time (``…_wall``), the raw ``cpu_seconds`` and ``seconds``, ``rounds`` and ``stopped``.
Analyses are set up (SAE loaded or trained, linearisation calibrated) on one batch before
timing; one more ordinary fused run after it reports ``finalize_seconds`` separately.

``--floors``: an analysis that reruns part of the model (linearization-effect under its
linearised MLP, sae-features with the SAE spliced in) cannot cost less than the bare pass plus
those reruns. One untimed run of each condition records where its second passes start
(``second_passes``: the layer of each, over the whole run); the condition ``floor:<name>`` runs
the bare pass and the same reruns, from the same cached block inputs, with no edit and no
analysis, and ``<name>_over_floor_cpu`` is the analysis over its floor, round by round.

    python benchmarks/bench_overhead.py --inputs 128 --out benchmarks/results/overhead_cpu_minilm.json
    python benchmarks/bench_overhead.py --model gpt2 --device cuda --inputs 2048 --batch-size 64
"""

from __future__ import annotations

import argparse
import ast
import time
from typing import Any

import numpy as np
import torch

import geomlens as gl
from geomlens.analyses.registry import report_analyses
from geomlens.engine import build_analyses, stream
from geomlens.engine.benchmarking import (
    FloorPasses,
    bare_forward,
    count_tokens,
    labelled_corpus,
)
from geomlens.interventions.resume import recording_second_passes

try:
    from common import add_timing_arguments, machine, steady_timing, timing_record, write
except ImportError:  # imported as benchmarks.bench_overhead
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
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--inputs", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=128)
    add_timing_arguments(parser)
    parser.add_argument("--each", action="store_true", help="Also time each analysis alone.")
    parser.add_argument("--analyses", nargs="*", default=None, help="Default: every built-in.")
    parser.add_argument("--option", nargs="*", default=[], help="NAME.KEY=VALUE for one analysis.")
    parser.add_argument(
        "--floors", action="store_true",
        help="Also time each condition's floor: the bare pass plus the second passes it runs.",
    )  # fmt: skip
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)

    device = torch.device(args.device)
    adapter = gl.load(args.model, backend="nnsight", device=device, dtype=args.dtype)
    dataset = labelled_corpus(args.inputs)
    names = args.analyses or report_analyses()  # what the default report runs (llc: not on MiniLM)
    overrides: dict[str, dict[str, Any]] = {}
    for item in args.option:
        target, assignment = item.split(".", 1)
        key, value = assignment.split("=", 1)
        try:
            overrides.setdefault(target, {})[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            overrides.setdefault(target, {})[key] = value

    def analyses(selected: list[str]) -> list[gl.Analysis]:
        return [build_analyses(n, overrides.get(n, {}))[0] for n in selected]

    groups = {"activation-stats": ["activation-stats"], "all": names}
    if args.each:
        groups.update({name: [name] for name in names if name != "activation-stats"})
    prepared = {label: analyses(selected) for label, selected in groups.items()}
    options = {"batch_size": args.batch_size, "max_length": args.max_length, "progress": False}
    setup_seconds = {}
    for label, built in prepared.items():  # set up and warm up outside the timing
        started = time.perf_counter()
        stream(
            built, adapter, dataset, rows=np.arange(min(len(dataset), args.batch_size)), **options
        )
        setup_seconds[label] = time.perf_counter() - started
    bare_forward(adapter, dataset, args.batch_size, args.max_length)

    conditions = {"bare": lambda: bare_forward(adapter, dataset, args.batch_size, args.max_length)}
    for label, built in prepared.items():
        conditions[label] = lambda built=built: stream(built, adapter, dataset, **options)
    second_passes: dict[str, list[int]] = {}
    if args.floors:  # one untimed run each records where its second passes start
        for label in prepared:
            with recording_second_passes() as layers:
                stream(analyses(groups[label]), adapter, dataset, **options)
            if layers:
                second_passes[label] = list(layers)
                conditions[f"floor:{label}"] = FloorPasses(
                    adapter, dataset, args.batch_size, args.max_length, list(layers)
                )
    timings = steady_timing(conditions, device, args, baseline="bare")
    over_floor = {
        f"{label}_over_floor_{clock}": timings.ratio(label, f"floor:{label}", clock).as_dict()
        for label in second_passes
        for clock in ("cpu", "wall")
    }
    # The timed instances saw the data several times; one more, ordinary run finalises.
    fused = gl.run(analyses(names), adapter, dataset, **options)
    finalize_seconds = {n: r.provenance["finalize_seconds"] for n, r in fused.items()}
    numbers: dict[str, Any] = {
        "benchmark": "overhead over the bare forward pass",
        "model": adapter.model_id,
        "device": str(device),
        "dtype": args.dtype,
        "inputs": args.inputs,
        "batch_size": args.batch_size,
        "max_length": args.max_length,
        **timing_record(args, timings),
        **over_floor,
        "second_passes": second_passes,
        "tokens": count_tokens(adapter, dataset, args.batch_size, args.max_length),
        "analyses_fused": names,
        "sites_fused": sorted(
            {adapter.resolve_site(s) for a in prepared["all"] for s in a.sites(adapter)}
        ),
        "setup_and_warmup_seconds": setup_seconds,
        "finalize_seconds": finalize_seconds,
        "machine": machine(),
    }
    return write(numbers, args.out)


if __name__ == "__main__":
    main()
