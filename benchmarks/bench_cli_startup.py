"""How long `geomlens --help` and `geomlens list` take from a fresh interpreter (the CLI
imports torch, transformers and the rest only when a command needs them).

    python benchmarks/bench_cli_startup.py --out benchmarks/results/cli_startup_cpu.json

Each command runs ``--repeats`` times in a new process (``python -m geomlens …``); the median
wall time is the number quoted, the runs beside it. Nothing here imports torch, so the numbers
are the command's own.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = {"help": ["--help"], "list": ["list"], "run_help": ["run", "--help"]}


def timed(arguments: list[str]) -> float:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "COLUMNS": "100"}
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "geomlens", *arguments],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=None)
    options = parser.parse_args()
    timed(["--help"])  # the first run warms the file system cache; not counted
    seconds = {
        name: [round(timed(arguments), 3) for _ in range(options.repeats)]
        for name, arguments in COMMANDS.items()
    }
    numbers = {
        "benchmark": "geomlens CLI start-up, fresh interpreter, wall time",
        "commands": {name: "geomlens " + " ".join(args) for name, args in COMMANDS.items()},
        "repeats": options.repeats,
        "median_seconds": {name: statistics.median(runs) for name, runs in seconds.items()},
        "seconds": seconds,
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
