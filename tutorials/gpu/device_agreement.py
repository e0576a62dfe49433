"""Do the analyses give the same numbers on your accelerator as on the CPU?

Runs every built-in analysis on small shipped data twice with the same weights — once with the
model on the CPU, once on ``--device`` — and prints, per analysis, the largest relative
difference over its metrics. In float32 the two should agree to rounding (matmul kernels and
reduction order differ between devices); a large gap points at a device-specific bug. With
``--dtype bfloat16`` the device run is in half precision and the gap shows what that costs.

    python tutorials/gpu/device_agreement.py --model gpt2 --device cuda
    python tutorials/gpu/device_agreement.py --model PATH --device cpu     # the suite's run

The SAE for ``sae-features`` is a seeded random sae-lens SAE at the middle block (counting,
pool and fidelity only need *an* SAE to agree across devices). Writes ``--out`` as JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from typing import Any

import torch

import geomlens as gl
from geomlens.atomic_files import atomic_write_text
from geomlens.data import concepts, stimuli
from geomlens.data.corpus import stdlib_paragraphs


def random_sae(d_in: int, site: str, seed: int = 0) -> Any:
    """A seeded sae-lens SAE of width 4 d_in reading ``site``."""
    from sae_lens.saes.sae import SAEMetadata
    from sae_lens.saes.standard_sae import StandardSAE, StandardSAEConfig

    torch.manual_seed(seed)
    sae = StandardSAE(
        StandardSAEConfig(d_in=d_in, d_sae=4 * d_in, metadata=SAEMetadata(hook_name=site))
    )
    with torch.no_grad():
        for parameter in sae.parameters():
            parameter.normal_(0.0, 1.0 / math.sqrt(d_in))
    return sae.eval()


def analysis_runs(adapter: gl.Adapter, rows: int) -> dict[str, tuple[list[str], Any, dict]]:
    """name → (analyses fused, data, options) for small shipped data sets."""
    middle = adapter.n_layers // 2
    site = f"blocks.{middle}.hook_resid_post"
    width = adapter.capture(
        adapter.encode(gl.Dataset(texts=["a"]), torch.arange(1).numpy()), [site]
    )[site].shape[-1]
    english = concepts.english_concepts(["gender", "number"])
    corpus = stdlib_paragraphs(rows)
    condition = ["calibration"] * (rows // 2) + ["heldout"] * (rows - rows // 2)
    return {
        "activation-stats": (["activation-stats"], corpus, {}),
        "similarity+resolution": (
            ["similarity", "resolution"],
            stimuli.numbers(0, 60, 3).as_data(),
            {"bootstrap": 20, "similarity": "cosine"},  # centring may null a tiny model's rows
        ),
        "abstraction+ccgp": (
            ["abstraction", "ccgp"],
            english,
            {"n_bootstrap": 20, "n_shuffles": 10},
        ),
        "linearization-effect": (
            ["linearization-effect"],
            english,
            {"n_bootstrap": 20, "n_shuffles": 10},
        ),
        "sae-features": (
            ["sae-features"],
            {"text": corpus, "condition": condition},
            {"sae": random_sae(int(width), site)},
        ),
    }


def largest_gap(reference: gl.Result, other: gl.Result) -> tuple[float, str]:
    """The largest |a − b| / max(1, |a|) over the metrics both hold, and its metric's name."""
    worst, where = 0.0, ""
    for name, a in reference.metrics.items():
        b = other.metrics.get(name, math.nan)
        if math.isnan(a) and math.isnan(b):
            continue
        gap = abs(a - b) / max(1.0, abs(a)) if math.isfinite(a) else float(a != b)
        if not math.isfinite(gap) or gap > worst:
            worst, where = gap, name
    return worst, where


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="HF name or local folder.")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="float32", help="dtype of the device run.")
    parser.add_argument("--backend", default="nnsight")
    parser.add_argument("--rows", type=int, default=24, help="corpus rows for the text runs.")
    parser.add_argument("--max-length", type=int, default=128, help="truncate inputs (tokens).")
    parser.add_argument("--out", default="device_agreement.json")
    args = parser.parse_args(argv)

    torch.backends.cuda.matmul.allow_tf32 = False  # compare float32 with float32
    torch.backends.cudnn.allow_tf32 = False
    cpu = gl.load(args.model, backend=args.backend, device="cpu")
    device = gl.load(args.model, backend=args.backend, device=args.device, dtype=args.dtype)
    report: dict[str, Any] = {"model": args.model, "device": args.device, "dtype": args.dtype}
    print(f"{'analyses':<24} {'largest relative gap':>22}  {'at metric':<48} device s / cpu s")
    for names, data, options in analysis_runs(cpu, args.rows).values():
        timings = []
        results = []
        for adapter in (cpu, device):
            started = time.perf_counter()
            results.append(
                gl.run(names, adapter, data, max_length=args.max_length, progress=False, **options)
            )
            timings.append(time.perf_counter() - started)
        for name in names:
            gap, where = largest_gap(results[0][name], results[1][name])
            report[name] = {"largest_gap": gap, "metric": where, "seconds": timings}
            print(f"{name:<24} {gap:>22.2e}  {where:<48} {timings[1]:.2f} / {timings[0]:.2f}")
    if device.device.type == "cuda":
        report["max_memory_allocated_bytes"] = torch.cuda.max_memory_allocated(device.device)
        print(f"max_memory_allocated: {report['max_memory_allocated_bytes'] / 2**20:.0f} MiB")
    atomic_write_text(args.out, json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    main()
