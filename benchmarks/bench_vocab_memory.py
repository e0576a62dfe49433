"""Peak resident memory of sae-features against the vocabulary size, at equal B·T.

Each model runs in a fresh child process under ``/usr/bin/time -v`` (its "Maximum resident set
size" is the figure recorded, the kernel's own count). The child loads the model, notes its
resident set once loaded, reads every weight once and notes it again (the baseline: the model's
own size in memory, weights and all; see below), then runs ``sae-features`` at the default
batch size over the same number of rows of exactly ``--max-length`` tokens (corpus text cut
to length with each model's tokenizer), so B·T is equal across models and only the vocabulary V
differs (SmolLM2: 49,152; Gemma 3: 262,144). The SAE is the cached default one (trained first
if missing); the resident set is also sampled every 5 ms during the run alone
(``run_peak_rss_bytes``), which leaves any SAE training out.

What the run adds over the model's own resident size is the figure to compare: before the
next-token scores were reduced inside the pass it grew with B·T·V (4.3 GB per pass of
[32, 128, 262,144] float32 logits on Gemma 3). Why the weights are read before the baseline: a
model loaded from safetensors has its weights memory-mapped, and a page of them becomes resident
only when something first reads it. Just after loading, about half of SmolLM2's weights and most
of Gemma 3's are not resident yet; measured from there, the run's "added" memory would include
the weights themselves (0.5 GB more for Gemma 3, whose weights are twice SmolLM2's), which is the
model's size and not what the vocabulary costs. Both figures are recorded
(``peak_over_loaded_bytes`` and ``peak_over_model_bytes``).

    python benchmarks/bench_vocab_memory.py --out benchmarks/results/vocab_memory_cpu.json
    python benchmarks/bench_vocab_memory.py --sae-for gemma-3-270m=FOLDER ...   # a given SAE
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

try:
    from bench_memory import RssSampler
    from common import machine, write
except ImportError:  # imported as benchmarks.bench_vocab_memory
    from benchmarks.bench_memory import RssSampler
    from benchmarks.common import machine, write

TIME = "/usr/bin/time"
MODELS = ("smollm2-135m-instruct", "gemma-3-270m")


def current_rss_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * 4096


def rows_of_length(tokenizer: Any, rows: int, length: int) -> list[list[int]]:
    """``rows`` token-id rows of exactly ``length`` tokens, cut from the shipped corpus."""
    from geomlens.data.corpus import corpus_split

    ids: list[int] = []
    for text in corpus_split("training", None):
        ids.extend(tokenizer(text, add_special_tokens=False)["input_ids"])
        if len(ids) >= rows * length:
            break
    if len(ids) < rows * length:
        raise ValueError(f"The corpus holds {len(ids)} tokens; {rows} × {length} were asked for.")
    return [ids[i * length : (i + 1) * length] for i in range(rows)]


def child(args: argparse.Namespace) -> None:
    import torch

    import geomlens as gl
    from geomlens.analyses.base import RunContext
    from geomlens.analyses.sae_features import SAEFeatures
    from geomlens.inputs.batches import DEFAULT_BATCH_SIZE

    torch.set_grad_enabled(False)
    adapter = gl.load(args.model)
    loaded = current_rss_bytes()
    parameters = sum(p.numel() * p.element_size() for p in adapter.model.parameters())
    for weight in adapter.model.parameters():  # every mapped page read once: now resident
        weight.sum()
    model_resident = current_rss_bytes()
    rows = rows_of_length(adapter.tokenizer, args.rows, args.max_length)
    half = args.rows // 2
    data = {
        "token_ids": rows,
        "condition": ["calibration"] * half + ["heldout"] * (args.rows - half),
    }
    given = {"sae": args.sae} if args.sae else {}
    analysis = SAEFeatures(**given)
    analysis.setup(RunContext(adapter, len(rows)))  # the SAE loaded (cached, or trained) first
    sae_ready = current_rss_bytes()
    started = time.perf_counter()
    cpu = time.process_time()
    with RssSampler() as sampler:
        result = gl.run("sae-features", adapter, data, progress=False, **given)
    numbers = {
        "model": args.model,
        "vocab_size": int(analysis.vocab_size),
        "batch_size": DEFAULT_BATCH_SIZE,
        "max_length": args.max_length,
        "rows": args.rows,
        "parameter_bytes": parameters,
        "rss_after_load_bytes": loaded,
        "rss_weights_read_bytes": model_resident,
        "sae": args.sae,  # None: the model's default SAE (cached, or trained in the run)
        "rss_with_sae_bytes": sae_ready,
        "run_peak_rss_bytes": sampler.peak,
        "seconds": time.perf_counter() - started,
        "cpu_seconds": time.process_time() - cpu,
        "epsilon_loss": next(
            (v for k, v in result.metrics.items() if k.endswith(".epsilon_loss")), None
        ),
    }
    print(json.dumps(numbers))


def measure(args: argparse.Namespace, model: str) -> dict[str, Any]:
    command = [TIME, "-v", sys.executable, str(Path(__file__).resolve()), "--child",
               "--model", model, "--rows", str(args.rows),
               "--max-length", str(args.max_length)]  # fmt: skip
    if model in args.saes:
        command += ["--sae", args.saes[model]]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    numbers = json.loads(done.stdout.strip().splitlines()[-1])
    peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    if peak is None:
        raise RuntimeError(f"{TIME} -v printed no maximum resident set size:\n{done.stderr}")
    numbers["peak_rss_bytes"] = int(peak.group(1)) * 1024
    numbers["peak_over_loaded_bytes"] = numbers["peak_rss_bytes"] - numbers["rss_after_load_bytes"]
    numbers["peak_over_model_bytes"] = numbers["peak_rss_bytes"] - numbers["rss_weights_read_bytes"]
    return numbers


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--rows", type=int, default=96)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--out", default=None)
    parser.add_argument(
        "--sae-for", action="append", default=[], metavar="MODEL=FOLDER",
        help="An SAE folder for MODEL instead of its default SAE (no training in the run).",
    )  # fmt: skip
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--sae", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.saes = dict(item.split("=", 1) for item in args.sae_for)
    if args.child:
        child(args)
        return {}
    by_model = {}
    for model in args.models:  # one at a time: never two large models in memory at once
        by_model[model] = measure(args, model)
    numbers: dict[str, Any] = {
        "benchmark": "sae-features peak resident memory vs vocabulary size, equal B·T",
        "memory_measure": "/usr/bin/time -v maximum resident set size of the child process",
        "by_model": by_model,
        "machine": machine(),
    }
    if len(by_model) == 2:
        small, large = sorted(by_model.values(), key=lambda n: n["vocab_size"])
        numbers["added_ratio_large_over_small_vocab"] = (
            large["peak_over_model_bytes"] / small["peak_over_model_bytes"]
        )
        numbers["added_over_loaded_ratio_large_over_small_vocab"] = (
            large["peak_over_loaded_bytes"] / small["peak_over_loaded_bytes"]
        )
    return write(numbers, args.out)


if __name__ == "__main__":
    main()
