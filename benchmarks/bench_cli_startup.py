"""How long `geomlens --help` and `geomlens list` take from a fresh interpreter (the CLI
imports torch, transformers and the rest only when a command needs them).

    python benchmarks/bench_cli_startup.py --out benchmarks/results/cli_startup_cpu.json

Each command runs ``--repeats`` times in a new process (``python -m geomlens …``); the median
wall time and the median CPU time (user + system: what the command itself cost, which other
work on a loaded machine does not inflate) are recorded, the runs beside them, with the load
average at the time. Nothing here imports torch, so the numbers are the command's own.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = {"help": ["--help"], "list": ["list"], "run_help": ["run", "--help"]}


def timed(arguments: list[str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one run of ``geomlens ARGUMENTS``."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "COLUMNS": "100"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "geomlens", *arguments],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=None)
    options = parser.parse_args()
    timed(["--help"])  # the first run warms the file system cache; not counted
    runs = {
        name: [timed(arguments) for _ in range(options.repeats)]
        for name, arguments in COMMANDS.items()
    }
    seconds = {name: [round(wall, 3) for wall, _ in done] for name, done in runs.items()}
    cpu = {name: [round(used, 3) for _, used in done] for name, done in runs.items()}
    numbers = {
        "benchmark": "geomlens CLI start-up, fresh interpreter, wall time",
        "commands": {name: "geomlens " + " ".join(args) for name, args in COMMANDS.items()},
        "repeats": options.repeats,
        "median_seconds": {name: statistics.median(walls) for name, walls in seconds.items()},
        "median_cpu_seconds": {name: statistics.median(used) for name, used in cpu.items()},
        "seconds": seconds,
        "cpu_seconds": cpu,
        "machine": {
            "python": platform.python_version(),
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "load_average_1min": os.getloadavg()[0],
        },
        "measured_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    text = json.dumps(numbers, indent=2)
    print(text)
    if options.out:
        path = Path(options.out)
        staging = path.with_suffix(".tmp")
        staging.write_text(text + "\n")
        staging.replace(path)


if __name__ == "__main__":
    main()
