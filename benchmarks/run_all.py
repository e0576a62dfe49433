"""Every benchmark at the sizes the README quotes, one after another, results in
``benchmarks/results/`` (then ``python scripts/regenerate_numbers.py`` rewrites the README table).

Run on a quiet machine: the time ratios are medians of per-round ratios of process CPU time
over interleaved rounds, added until every ~95 % interval is within ±5 % of its median or the
cap is reached (each result says which), but other work still skews them through shared caches.

    python benchmarks/run_all.py                      # full size (hours on 2 CPU cores; see README)
    python benchmarks/run_all.py --quick --out /tmp/b # a smoke test at tiny sizes, minutes
    python benchmarks/run_all.py --model gpt2 --device cuda
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_cache_speed  # noqa: E402
import bench_memory  # noqa: E402
import bench_overhead  # noqa: E402
import bench_sae  # noqa: E402

#: (script, result file stem, arguments at full size, arguments with --quick)
PLAN = [
    (bench_overhead, "overhead_each", ["--each", "--inputs", "256", "--max-repeats", "30"],
     ["--each", "--inputs", "8", "--batch-size", "4", "--max-length", "16", "--repeats", "2",
      "--max-repeats", "3"]),
    (bench_overhead, "overhead_floors", ["--each", "--floors", "--analyses", "linearization-effect",
                                         "sae-features", "--inputs", "128", "--max-repeats", "15"],
     ["--each", "--floors", "--analyses", "linearization-effect", "sae-features", "--inputs", "8",
      "--batch-size", "4", "--max-length", "16", "--repeats", "2", "--max-repeats", "3"]),
    (bench_memory, "memory", ["--sizes", "1000", "4000", "16000", "--max-lengths", "8", "128"],
     ["--sizes", "8", "16", "--max-lengths", "8", "16", "--batch-size", "4"]),
    (bench_cache_speed, "cache_speed", ["--inputs", "1000", "--max-length", "128",
                                        "--max-repeats", "15"],
     ["--inputs", "8", "--batch-size", "4", "--repeats", "2", "--max-repeats", "8"]),
    (bench_sae, "sae", ["--inputs", "256", "--max-repeats", "30"],
     ["--inputs", "8", "--batch-size", "4", "--max-length", "16", "--repeats", "1",
      "--max-repeats", "8"]),
]  # fmt: skip


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--quick", action="store_true", help="Tiny sizes: a smoke test only.")
    parser.add_argument("--only", nargs="*", default=None, help="Result stems to run.")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--extra", nargs="*", default=[], help="STEM:--flag=value for a script.")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    machine = "cpu" if args.device == "cpu" else args.device.split(":")[0]
    model = Path(args.model).name.lower().replace("all-minilm-l6-v2", "minilm")
    seconds: dict[str, float] = {}
    for script, stem, full, quick in PLAN:
        if args.only is not None and stem not in args.only:
            continue
        extra = [e.split(":", 1)[1] for e in args.extra if e.startswith(stem + ":")]
        out = args.out / f"{stem}_{machine}_{model}.json"
        command = ["--model", args.model, "--device", args.device, *(quick if args.quick else full)]
        started = time.perf_counter()
        script.main([*command, *extra, "--out", str(out)])
        seconds[stem] = time.perf_counter() - started
        print(f"{stem}: {seconds[stem]:.0f} s → {out}", file=sys.stderr)
    return seconds


if __name__ == "__main__":
    main()
