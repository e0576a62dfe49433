"""Wall time, CPU time and peak resident memory of ``geomlens report`` as a user runs it.

The command runs in a child process under ``/usr/bin/time -v`` (the kernel's own count of the
child's maximum resident set size, user and system CPU seconds); nothing in geomlens is timed
from inside. The machine's load average before and after is recorded beside the times, since
on a shared machine wall time says as much about the others as about geomlens (CPU time and
memory much less so). The SAEs the run trained (new folders in the SAE cache) are recorded too:
a first report trains its SAEs (minutes), later ones reuse them.

    python benchmarks/bench_report.py --name default --out benchmarks/results/report_cpu_default.json
    python benchmarks/bench_report.py --name quick --out benchmarks/results/report_cpu_quick.json -- --quick
    python benchmarks/bench_report.py --name gemma --out benchmarks/results/report_cpu_gemma.json \\
        -- --model gemma-3-270m
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

try:
    from common import machine, write
except ImportError:  # imported as benchmarks.bench_report
    from benchmarks.common import machine, write

TIME = "/usr/bin/time"

#: What ``/usr/bin/time -v`` prints, and the key each is recorded under.
FIELDS = {
    "Maximum resident set size (kbytes)": "peak_rss_bytes",
    "User time (seconds)": "user_cpu_seconds",
    "System time (seconds)": "system_cpu_seconds",
}


def parse_time_output(text: str) -> dict[str, float]:
    """The figures of ``/usr/bin/time -v`` that this benchmark records (resident set in bytes)."""
    found: dict[str, float] = {}
    for label, key in FIELDS.items():
        match = re.search(re.escape(label) + r":\s*([\d.]+)", text)
        if match is None:
            raise ValueError(f"{TIME} -v printed no {label!r}:\n{text[-2000:]}")
        value = float(match.group(1))
        found[key] = value * 1024 if key == "peak_rss_bytes" else value
    return found


def _entries(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir() if p.is_dir()} if folder.is_dir() else set()


def measure(report_arguments: list[str], out_folder: Path) -> dict[str, Any]:
    """Run ``geomlens report --out OUT_FOLDER ARGS…`` in a child under ``/usr/bin/time -v``."""
    command = [TIME, "-v", sys.executable, "-m", "geomlens", "report", "--out", str(out_folder),
               *report_arguments]  # fmt: skip
    from geomlens.sae.cache import sae_cache_dir

    cached_before = _entries(sae_cache_dir())
    load_before = os.getloadavg()
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    figures = parse_time_output(done.stderr)
    return {
        "command": ["geomlens", "report", *report_arguments],
        "wall_seconds": wall,
        **figures,
        "cpu_seconds": figures["user_cpu_seconds"] + figures["system_cpu_seconds"],
        "load_average_before": load_before[0],
        "load_average_after": os.getloadavg()[0],
        "saes_trained": sorted(_entries(sae_cache_dir()) - cached_before),
        "last_lines": done.stdout.strip().splitlines()[-3:],
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True, help="What this report is (default, quick, …).")
    parser.add_argument("--out", default=None, help="Where the JSON goes.")
    parser.add_argument("--report-folder", default=None, help="Keep the report here.")
    parser.add_argument("report_arguments", nargs="*", help="After --: geomlens report's flags.")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(args.report_folder or Path(scratch) / "report")
        numbers = {
            "benchmark": "geomlens report: wall time, CPU time, peak resident memory",
            "name": args.name,
            "memory_measure": "/usr/bin/time -v maximum resident set size of the child process",
            **measure(list(args.report_arguments), folder),
            "machine": {**machine(), "memory_bytes": os.sysconf("SC_PHYS_PAGES") * 4096},
        }
    return write(numbers, args.out)


if __name__ == "__main__":
    main()
