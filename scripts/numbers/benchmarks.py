"""The README's benchmark table, generated from ``benchmarks/results/*.json`` (never typed).

Registered for the numbers script (``scripts/regenerate_numbers.py``) under the key
``benchmarks``: the region between ``<!-- numbers:benchmarks -->`` and
``<!-- /numbers:benchmarks -->``. It reads the committed benchmark results, not the analyses'
run, so its function ignores the results it is handed. Each ratio is printed with the spread the
benchmark reached (``±`` the relative spread of the ratio of medians) where the JSON holds one;
older results without a spread say so.

    python scripts/numbers/benchmarks.py            # print the table
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def _load(folder: Path) -> dict[str, dict[str, Any]]:
    return {path.stem: json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))}


def _ratio(numbers: dict[str, Any], key: str) -> str:
    value = numbers.get(key)
    if value is None:
        return "–"
    spread = numbers.get(f"{key}_spread")
    shown = f"{value:.2f}×"
    return (
        f"{shown} ± {100 * spread:.0f} %"
        if spread is not None
        else f"{shown} (spread not recorded)"
    )


def _where(numbers: dict[str, Any]) -> str:
    parts = [str(numbers.get("model", "?")), str(numbers.get("device", "?"))]
    if "inputs" in numbers:
        parts.append(f"{numbers['inputs']} inputs")
    if "max_length" in numbers:
        parts.append(f"max_length {numbers['max_length']}")
    return ", ".join(parts)


def _overhead_rows(name: str, numbers: dict[str, Any]) -> list[tuple[str, str, str]]:
    rows = []
    for key in sorted(k for k in numbers if k.endswith("_over_bare")):
        label = key.removesuffix("_over_bare")
        shown = "every built-in fused" if label == "all" else label
        rows.append((f"{shown} / bare forward", _ratio(numbers, key), _where(numbers)))
    return rows


def _memory_rows(numbers: dict[str, Any]) -> list[tuple[str, str, str]]:
    rows = []
    layers = numbers.get("by_max_length") or {str(numbers.get("max_length")): numbers}
    for length, at in layers.items():
        where = f"{at.get('model')}, {at.get('device')}, max_length {length}"
        largest = max((int(k) for k in at.get("geomlens_by_inputs", {})), default=None)
        if largest is not None:
            where += f", {largest} inputs"
        for key, what in (
            ("run_with_cache_over_geomlens_memory", "run_with_cache peak / geomlens peak"),
            ("run_with_cache_over_geomlens_added_memory", "same, memory the run adds"),
            ("run_with_cache_over_geomlens_seconds", "run_with_cache time / geomlens time"),
        ):
            if at.get(key) is not None:
                rows.append((what, f"{at[key]:.2f}×", where))
        if at.get("peak_growth_smallest_to_largest") is not None:
            growth = 100 * at["peak_growth_smallest_to_largest"]
            rows.append(("geomlens peak growth, fewest → most inputs", f"{growth:+.1f} %", where))
    return rows


def _gb(value: Any) -> str:
    return f"{value / 1e9:.2f} GB" if isinstance(value, (int, float)) else "–"


def _vocab_rows(numbers: dict[str, Any]) -> list[tuple[str, str, str]]:
    """sae-features' peak resident memory per model (V), over the loaded model's own."""
    rows = []
    for model, at in numbers.get("by_model", {}).items():
        where = (
            f"{model}, V = {at['vocab_size']:,}, cpu, batch {at['batch_size']}, max_length "
            f"{at['max_length']}, {at['rows']} inputs"
        )
        rows.append(
            (
                "sae-features peak RSS (loaded model)",
                f"{_gb(at['peak_rss_bytes'])} ({_gb(at['rss_after_load_bytes'])})",
                where,
            )
        )
    ratio = numbers.get("added_ratio_large_over_small_vocab")
    if ratio is not None:
        rows.append(
            (
                "sae-features memory over the model, V 262k / V 49k",
                f"{ratio:.2f}×",
                "equal B·T, same rows count and length",
            )
        )
    return rows


def vocab_memory_prose(folder: Path = RESULTS) -> str:
    """README / docs/scale.md: sae-features' peak memory on SmolLM2 and Gemma 3."""
    numbers = _load(folder).get("vocab_memory_cpu")
    if numbers is None:
        return "_No vocab_memory_cpu.json in benchmarks/results/._"
    parts = []
    for model, at in numbers["by_model"].items():
        parts.append(
            f"{model} (V = {at['vocab_size']:,}) peaks at {_gb(at['peak_rss_bytes'])} resident, "
            f"{_gb(at['peak_over_loaded_bytes'])} over the loaded model's "
            f"{_gb(at['rss_after_load_bytes'])}"
        )
    first = next(iter(numbers["by_model"].values()))
    text = (
        f"`sae-features` at the default batch size ({first['batch_size']}), "
        f"{first['rows']} inputs of exactly {first['max_length']} tokens each (equal B·T), one "
        f"fresh process per model under `/usr/bin/time -v` (`vocab_memory_cpu.json`): "
        + "; ".join(parts)
        + "."
    )
    ratio = numbers.get("added_ratio_large_over_small_vocab")
    if ratio is not None:
        text += (
            f" What the run adds over the model is {ratio:.2f}× as much at V = 262k as at "
            "V = 49k: the next-token scores are reduced inside the pass, so nothing of size "
            "B·T·V is held."
        )
    return text


def benchmark_table(folder: Path = RESULTS) -> str:
    """A markdown table of every committed benchmark ratio, with its spread and conditions."""
    rows: list[tuple[str, str, str]] = []
    for name, numbers in _load(folder).items():
        if name.startswith("overhead"):
            rows += _overhead_rows(name, numbers)
        elif name.startswith("memory"):
            rows += _memory_rows(numbers)
        elif name.startswith("cache_speed"):
            key = "geomlens_over_run_with_cache_seconds"
            rows.append(("geomlens time / run_with_cache", _ratio(numbers, key), _where(numbers)))
        elif name.startswith("vocab_memory"):
            rows += _vocab_rows(numbers)
        elif name.startswith("sae"):
            key = "sae_features_over_bare_encode"
            rows.append(("sae-features / bare SAE encode", _ratio(numbers, key), _where(numbers)))
    if not rows:
        return "_No benchmark results in benchmarks/results/._"
    lines = ["| measure | ratio | conditions |", "|---|---|---|"]
    lines += [f"| {what} | {ratio} | {where} |" for what, ratio, where in rows]
    return "\n".join(lines)


#: Why an analysis costs more than one forward pass, where it does by design (facts about the
#: code, not measurements: the measured ratio sits beside each in the docs table).
EXTRA_WORK = {
    "linearization-effect": "a second pass under the linearised MLP, from the edited layer on",
    "sae-features": "the SAE's encode and decode per token, and a second pass with the "
    "reconstruction spliced in (from the SAE's site on) for ε̂_loss",
    "all": "every analysis's own work in one pass, plus the two second passes above",
}


def _mb(value: Any) -> str:
    return f"{value / 1e6:,.0f} MB" if isinstance(value, (int, float)) else "–"


def overhead_table(folder: Path = RESULTS) -> str:
    """docs/scale.md: each built-in alone and all fused against the bare forward pass, with the
    spread reached, and why an analysis costs more where it does by design."""
    found = _load(folder)
    numbers = found.get("overhead_each_cpu_minilm")
    if numbers is None:
        return "_No overhead_each_cpu_minilm.json in benchmarks/results/._"
    header = (
        f"{numbers['inputs']} corpus paragraphs ({numbers['tokens']:,} tokens), batch "
        f"{numbers['batch_size']}, max_length {numbers['max_length']}, "
        f"{numbers['machine']['torch_threads']} torch thread(s), conditions interleaved over "
        f"{len(numbers['seconds']['bare'])} rounds (`overhead_each_cpu_minilm.json`). Ratio of "
        "medians ± its spread (the two medians' ~95 % half-widths added); fastest-repeat ratio "
        "beside it."
    )
    labels = sorted(k.removesuffix("_over_bare") for k in numbers if k.endswith("_over_bare"))
    labels = [label for label in labels if label != "all"] + ["all"]
    rows = ["| analysis at its default sites | × bare forward | fastest repeats | more than "
            "one pass because |", "|---|---|---|---|"]  # fmt: skip
    for label in labels:
        shown = "all seven fused" if label == "all" else label
        fastest = numbers.get(f"{label}_over_bare_fastest")
        rows.append(
            f"| {shown} | {_ratio(numbers, f'{label}_over_bare')} | "
            f"{'–' if fastest is None else f'{fastest:.2f}×'} | {EXTRA_WORK.get(label, '–')} |"
        )
    return header + "\n\n" + "\n".join(rows)


def memory_prose(folder: Path = RESULTS) -> str:
    """docs/scale.md: peak memory by inputs and against run_with_cache, at each max_length."""
    numbers = _load(folder).get("memory_cpu_minilm")
    if numbers is None:
        return "_No memory_cpu_minilm.json in benchmarks/results/._"
    paragraphs = []
    layers = numbers.get("by_max_length") or {str(numbers.get("max_length")): numbers}
    for length, at in layers.items():
        by_inputs = at["geomlens_by_inputs"]
        sizes = sorted(by_inputs, key=int)
        peaks = ", ".join(f"{_mb(by_inputs[s]['run_peak_rss_bytes'])} at {int(s):,}" for s in sizes)
        largest = at["at_largest"]
        ours, cached = largest["geomlens_transformer_lens"], largest["run_with_cache"]
        paragraphs.append(
            f"At max_length {length} (batch {at['batch_size']}; one fresh process per run): "
            f"geomlens's peak resident set during activation-stats at the 6 residual sites is "
            f"{peaks} inputs ({100 * at['peak_growth_smallest_to_largest']:+.1f} % from fewest "
            f"to most). At {int(sizes[-1]):,} inputs through the TransformerLens backend, geomlens "
            f"peaks at {_mb(ours['run_peak_rss_bytes'])} and `run_with_cache` keeping every real "
            f"token's residual vectors at {_mb(cached['run_peak_rss_bytes'])}: "
            f"{at['run_with_cache_over_geomlens_memory']:.1f}× less in total (the loaded model "
            f"and libraries, {_mb(ours['rss_after_load_bytes'])}, are in both) and "
            f"{at['run_with_cache_over_geomlens_added_memory']:.1f}× less memory added by the "
            f"run ({_mb(ours['run_added_rss_bytes'])} vs {_mb(cached['run_added_rss_bytes'])}); "
            f"run_with_cache takes {at['run_with_cache_over_geomlens_seconds']:.2f}× geomlens's "
            f"time ({cached['seconds']:.0f} s vs {ours['seconds']:.0f} s); the same mean token "
            f"norm either way: {'yes' if at['same_statistic'] else 'NO'}."
        )
    speed = _load(folder).get("cache_speed_cpu_minilm")
    if speed is not None:
        paragraphs.append(
            f"Time, interleaved in one process at {speed['inputs']:,} inputs, max_length "
            f"{speed['max_length']} (`cache_speed_cpu_minilm.json`): geomlens takes "
            f"{_ratio(speed, 'geomlens_over_run_with_cache_seconds')} the time of "
            f"`run_with_cache` (fastest repeats: "
            f"{speed['geomlens_over_run_with_cache_seconds_fastest']:.2f}×)."
        )
    return "\n\n".join(paragraphs)


#: No analysis run is needed: the tables read the committed benchmark results.
ANALYSES: tuple[str, ...] = ()

SECTIONS: dict[str, Callable[[dict[str, Any]], str]] = {
    "benchmarks": lambda results: benchmark_table(),
    "benchmarks-overhead": lambda results: overhead_table(),
    "benchmarks-memory": lambda results: memory_prose(),
    "benchmarks-vocab": lambda results: vocab_memory_prose(),
}


if __name__ == "__main__":
    print(benchmark_table())
