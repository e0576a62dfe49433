"""Peak memory against the number of inputs, and geomlens against TransformerLens's
``run_with_cache`` (keep what the analysis needs, compute at the end), each in a fresh process.

For every size in ``--sizes`` a child process runs activation-stats at every block's residual
stream through geomlens (nnsight backend) and reports its peak memory: on CPU the process's
peak resident set size (``ru_maxrss``) and the peak of the resident set sampled every 5 ms
during the run alone (minus the resident set once the model is loaded and warm: what the run
itself adds); on CUDA ``max_memory_allocated``. At the largest size two more children compare,
on the TransformerLens backend, geomlens with the usual way: ``run_with_cache`` per batch with
a names filter, every real token's residual vector kept, statistics computed at the end.

Everything is measured at each of ``--max-lengths`` (default 8 and 128 tokens: short inputs
make activations tiny and favour no one); the top-level numbers are those of the longest, and
``by_max_length`` holds each.

    python benchmarks/bench_memory.py --sizes 1000 4000 16000 --out benchmarks/results/memory_cpu_minilm.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import torch

import geomlens as gl
from geomlens.analyses.activation_stats import ActivationStats
from geomlens.data.dataset import as_dataset
from geomlens.engine import batch_indices
from geomlens.engine.benchmarking import corpus_texts

try:
    from common import machine, peak_rss_bytes, write
except ImportError:  # imported as benchmarks.bench_memory
    from benchmarks.common import machine, peak_rss_bytes, write


def current_rss_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * (4096 if sys.platform != "darwin" else 1)


class RssSampler:
    """The largest resident set seen while the ``with`` block runs (sampled every 5 ms)."""

    def __enter__(self) -> RssSampler:
        self.peak, self._running = current_rss_bytes(), True
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while self._running:
            self.peak = max(self.peak, current_rss_bytes())
            time.sleep(0.005)

    def __exit__(self, *exc: object) -> None:
        self._running = False
        self._thread.join()
        self.peak = max(self.peak, current_rss_bytes())


def residual_sites(adapter: Any) -> list[str]:
    return [s for s in adapter.sites() if s.endswith("hook_resid_post")]


def with_geomlens(adapter: Any, dataset: Any, args: argparse.Namespace) -> dict[str, float]:
    result = gl.run(ActivationStats(), adapter, dataset, batch_size=args.batch_size,
                    max_length=args.max_length, progress=False)  # fmt: skip
    site = residual_sites(adapter)[-1]
    return {"mean_norm_last": result.metrics[f"{site}.mean_norm"]}


def with_run_with_cache(adapter: Any, dataset: Any, args: argparse.Namespace) -> dict[str, float]:
    """What users write today: cache the residual streams per batch, keep every real token's
    vector, compute the statistics at the end."""
    points = adapter.hook_points()
    sites = residual_sites(adapter)
    names = {points[site].name: site for site in sites}
    kept: dict[str, list[torch.Tensor]] = {site: [] for site in sites}
    with torch.no_grad():
        for index in batch_indices(len(dataset), args.batch_size):
            inputs = adapter.encode(dataset, index, max_length=args.max_length)
            mask = inputs.attention_mask
            _, cache = adapter.model.run_with_cache(
                inputs.input_ids,
                attention_mask=mask.long(),
                position_ids=inputs.position_ids,
                names_filter=lambda name: name in names,
            )
            for name, site in names.items():
                kept[site].append(cache[name][mask].clone())
            del cache
    rows = torch.cat(kept[sites[-1]]).double()
    for site in sites:  # the statistics activation-stats reports, computed at the end
        everything = torch.cat(kept[site]).double()
        everything.mean(0), everything.var(0, correction=0), everything.amax(0)
    return {"mean_norm_last": float(rows.norm(dim=1).mean())}


def child(args: argparse.Namespace) -> None:
    device = torch.device(args.device)
    adapter = gl.load(args.model, backend=args.backend, device=device)
    dataset = as_dataset(corpus_texts(args.inputs))
    work = with_run_with_cache if args.mode == "run_with_cache" else with_geomlens
    work(
        adapter, as_dataset(corpus_texts(args.batch_size)), args
    )  # warm-up: lazy wiring, allocator
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    loaded = current_rss_bytes()
    started = time.perf_counter()
    with RssSampler() as sampler:
        check = work(adapter, dataset, args)
    numbers = {
        "mode": args.mode,
        "backend": args.backend,
        "inputs": args.inputs,
        "seconds": time.perf_counter() - started,
        "peak_rss_bytes": peak_rss_bytes(),
        "rss_after_load_bytes": loaded,
        "run_peak_rss_bytes": sampler.peak,
        "run_added_rss_bytes": sampler.peak - loaded,
        **check,
    }
    if device.type == "cuda":
        numbers["max_memory_allocated_bytes"] = torch.cuda.max_memory_allocated(device)
    print(json.dumps(numbers))


def measure(args: argparse.Namespace, mode: str, backend: str, inputs: int) -> dict[str, Any]:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", "--mode", mode,
               "--backend", backend, "--inputs", str(inputs), "--model", args.model,
               "--device", args.device, "--batch-size", str(args.batch_size),
               "--max-length", str(args.max_length)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def at_max_length(args: argparse.Namespace) -> dict[str, Any]:
    """Every size through geomlens, and at the largest geomlens beside run_with_cache."""
    key = "max_memory_allocated_bytes" if args.device.startswith("cuda") else "run_peak_rss_bytes"
    by_size = {size: measure(args, "geomlens", "nnsight", size) for size in args.sizes}
    largest = max(args.sizes)
    ours = measure(args, "geomlens", "transformer-lens", largest)
    cached = measure(args, "run_with_cache", "transformer-lens", largest)
    smallest = min(args.sizes)
    numbers: dict[str, Any] = {
        "benchmark": "peak memory vs inputs; geomlens vs run_with_cache",
        "model": args.model,
        "device": args.device,
        "batch_size": args.batch_size,
        "max_length": args.max_length,
        "memory_measure": key,
        "geomlens_by_inputs": {str(size): value for size, value in by_size.items()},
        "peak_growth_smallest_to_largest": by_size[largest][key] / by_size[smallest][key] - 1,
        "process_peak_growth_smallest_to_largest": by_size[largest]["peak_rss_bytes"]
        / by_size[smallest]["peak_rss_bytes"]
        - 1,
        "at_largest": {"geomlens_transformer_lens": ours, "run_with_cache": cached},
        "run_with_cache_over_geomlens_memory": cached[key] / ours[key],
        "run_with_cache_over_geomlens_added_memory": cached["run_added_rss_bytes"]
        / max(ours["run_added_rss_bytes"], 1)
        if key == "run_peak_rss_bytes"
        else None,
        "run_with_cache_over_geomlens_seconds": cached["seconds"] / ours["seconds"],
        "same_statistic": abs(cached["mean_norm_last"] - ours["mean_norm_last"])
        <= 1e-4 * abs(ours["mean_norm_last"]),
    }
    return numbers


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 4000, 16000])
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-lengths", type=int, nargs="+", default=[8, 128])
    parser.add_argument("--max-length", type=int, default=128, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="geomlens", help=argparse.SUPPRESS)
    parser.add_argument("--backend", default="nnsight", help=argparse.SUPPRESS)
    parser.add_argument("--inputs", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args)
        return {}
    by_max_length = {}
    for max_length in args.max_lengths:
        args.max_length = max_length
        by_max_length[str(max_length)] = at_max_length(args)
    longest = by_max_length[str(max(args.max_lengths))]
    numbers: dict[str, Any] = {
        **longest,
        "max_lengths": args.max_lengths,
        "by_max_length": by_max_length,
        "machine": machine(),
    }
    return write(numbers, args.out)


if __name__ == "__main__":
    main()
