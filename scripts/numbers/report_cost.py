"""What the report costs to run, generated from ``benchmarks/results/report_cpu_*.json`` (written
by ``benchmarks/bench_report.py``: the child process's own figures under ``/usr/bin/time -v``).

Registered under ``report-cost`` (README, docs/report.md). It reads the committed benchmark
results, not the analyses' run, so its function ignores the results it is handed.

    python scripts/numbers/report_cost.py            # print the text
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from _results import RESULTS, load_results

#: Result file stem → how the text names that report.
REPORTS = {
    "report_cpu_quick": "`geomlens report --quick`",
    "report_cpu_default": "the full `geomlens report` (MiniLM, then the causal-LM section on "
    "SmolLM2-135M-Instruct)",
    "report_cpu_gemma": "`geomlens report --model gemma-3-270m`",
}


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def _one(name: str, numbers: dict[str, Any]) -> str:
    trained = numbers.get("saes_trained") or []
    if not trained:
        sae = ", its SAEs already cached"
    elif len(trained) == 1:
        sae = ", training the SAE it had not cached"
    else:
        sae = f", training the {len(trained)} SAEs it had not cached"
    after = numbers.get("load_average_after")
    ended = f", {after:.1f} when it ended" if after is not None else ""
    return (
        f"{name} took {_minutes(numbers['wall_seconds'])} of wall time and "
        f"{_minutes(numbers['cpu_seconds'])} of CPU time and peaked at "
        f"{numbers['peak_rss_bytes'] / 1e9:.1f} GB resident{sae} (load average "
        f"{numbers['load_average_before']:.1f} when it started{ended})"
    )


def report_cost(folder: Path = RESULTS) -> str:
    saved = load_results(folder)
    found = {stem: saved[stem] for stem in REPORTS if stem in saved}
    if not found:
        return "_No report_cpu_*.json in benchmarks/results/ (run benchmarks/bench_report.py)._"
    machine = next(iter(found.values()))["machine"]
    where = (
        f"Measured by `benchmarks/bench_report.py` (the child process under `/usr/bin/time -v`) "
        f"on a {machine['cpu_count']}-core CPU machine with "
        f"{machine['memory_bytes'] / 2**30:.0f} GiB of memory, shared with other work (the load "
        "average says how much; wall time grows with it, CPU time and memory much less): "
    )
    return where + "; ".join(_one(REPORTS[stem], numbers) for stem, numbers in found.items()) + "."


SECTIONS: dict[str, Callable[[dict[str, Any]], str]] = {
    "report-cost": lambda results: report_cost(),
}

ANALYSES: tuple[str, ...] = ()

if __name__ == "__main__":
    print(report_cost())
