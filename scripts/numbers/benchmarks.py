"""The README's benchmark table, generated from ``benchmarks/results/*.json`` (never typed).

Registered for the numbers script (``scripts/regenerate_numbers.py``) under the key
``benchmarks``: the region between ``<!-- numbers:benchmarks -->`` and
``<!-- /numbers:benchmarks -->``. It reads the committed benchmark results, not the analyses'
run, so its function ignores the results it is handed. Each time ratio is printed in process CPU
time as the median per-round ratio with its ~95 % interval (``1.08× (1.03–1.12)``), wall time
beside it, with the rounds run and why they stopped; results written before CPU time was
recorded read "not recorded" there and show their ratio of wall-time medians.

    python scripts/numbers/benchmarks.py            # print the table
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from _results import RESULTS, load_results

#: A table row: what is measured, the ratio, the wall-time ratio, the conditions.
Row = tuple[str, str, str, str]


#: Time ratios: the key a result written before CPU times were recorded used for the same
#: ratio (a ratio of wall-time medians, with ``<key>_spread`` and ``<key>_fastest`` beside it).
LEGACY_KEYS = {
    "geomlens_over_run_with_cache": "geomlens_over_run_with_cache_seconds",
    "sae-features_over_bare_encode": "sae_features_over_bare_encode",
}


def _interval(found: dict[str, float]) -> str:
    return f"{found['median']:.2f}× ({found['low']:.2f}–{found['high']:.2f})"


def _cpu_ratio(numbers: dict[str, Any], key: str) -> str:
    """The CPU-time ratio with its ~95 % interval: ``1.08× (1.03–1.12)``."""
    found = numbers.get(f"{key}_cpu")
    return _interval(found) if isinstance(found, dict) else "not recorded"


def _wall_ratio(numbers: dict[str, Any], key: str) -> str:
    """The wall-time ratio with its interval, or an older result's ratio of medians ± spread."""
    found = numbers.get(f"{key}_wall")
    if isinstance(found, dict):
        return _interval(found)
    legacy = LEGACY_KEYS.get(key, key)
    value = numbers.get(legacy)
    if not isinstance(value, (int, float)):
        return "–"
    spread = numbers.get(f"{legacy}_spread")
    shown = f"{value:.2f}×" if spread is None else f"{value:.2f}× ± {100 * spread:.0f} %"
    return f"{shown} (ratio of medians)"


def _rounds(numbers: dict[str, Any]) -> str:
    """How many interleaved rounds ran and why they stopped."""
    if numbers.get("stopped"):
        return f"{numbers['rounds']} rounds, {numbers['stopped']}"
    rounds = numbers.get("rounds", numbers.get("repeats"))
    return f"{rounds} rounds, stop not recorded" if rounds is not None else "rounds not recorded"


def _where(numbers: dict[str, Any]) -> str:
    parts = [str(numbers.get("model", "?")), str(numbers.get("device", "?"))]
    if "inputs" in numbers:
        parts.append(f"{numbers['inputs']} inputs")
    if "max_length" in numbers:
        parts.append(f"max_length {numbers['max_length']}")
    return ", ".join(parts)


def _overhead_labels(numbers: dict[str, Any]) -> list[str]:
    """The conditions timed against bare, in new (``…_over_bare_cpu``) or old results."""
    labels = {k.removesuffix("_over_bare_cpu") for k in numbers if k.endswith("_over_bare_cpu")}
    labels |= {k.removesuffix("_over_bare") for k in numbers if k.endswith("_over_bare")}
    return sorted(labels)


def _timing_row(what: str, numbers: dict[str, Any], key: str) -> Row:
    where = f"{_where(numbers)}, {_rounds(numbers)}"
    return (what, _cpu_ratio(numbers, key), _wall_ratio(numbers, key), where)


def _overhead_rows(name: str, numbers: dict[str, Any]) -> list[Row]:
    rows = []
    floors = numbers.get("second_passes") or {}
    if floors:  # a floors run: each analysis against its floor, and the floor against bare
        fused = " + ".join(numbers.get("analyses_fused") or ["the analyses"])
        for label in sorted(floors):
            shown = f"{fused} fused" if label == "all" else label
            rows.append(_timing_row(f"{shown} / its floor", numbers, f"{label}_over_floor"))
            rows.append(
                _timing_row(f"{shown}'s floor / bare forward", numbers, f"floor:{label}_over_bare")
            )
        return rows
    for label in _overhead_labels(numbers):
        shown = "every built-in fused" if label == "all" else label
        rows.append(_timing_row(f"{shown} / bare forward", numbers, f"{label}_over_bare"))
    return rows


def _memory_rows(numbers: dict[str, Any]) -> list[Row]:
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
        ):
            if at.get(key) is not None:
                rows.append((what, f"{at[key]:.2f}×", "–", where))
        seconds = at.get("run_with_cache_over_geomlens_seconds")
        if seconds is not None:  # one run each, in fresh processes: wall time only
            rows.append(("run_with_cache time / geomlens time", "–", f"{seconds:.2f}×", where))
        if at.get("peak_growth_smallest_to_largest") is not None:
            growth = 100 * at["peak_growth_smallest_to_largest"]
            rows.append(
                ("geomlens peak growth, fewest → most inputs", f"{growth:+.1f} %", "–", where)
            )
    return rows


def _gb(value: Any) -> str:
    return f"{value / 1e9:.2f} GB" if isinstance(value, (int, float)) else "–"


def _model_resident(at: dict[str, Any]) -> int:
    """The model's own resident size: after its weights were read once (results from before
    that figure was recorded have only the resident size just after loading)."""
    return at.get("rss_weights_read_bytes", at["rss_after_load_bytes"])


def _vocab_rows(numbers: dict[str, Any]) -> list[Row]:
    """sae-features' peak resident memory per model (V), over the model's own."""
    rows = []
    for model, at in numbers.get("by_model", {}).items():
        where = (
            f"{model}, V = {at['vocab_size']:,}, cpu, batch {at['batch_size']}, max_length "
            f"{at['max_length']}, {at['rows']} inputs"
        )
        rows.append(
            (
                "sae-features peak RSS (the model's own)",
                f"{_gb(at['peak_rss_bytes'])} ({_gb(_model_resident(at))})",
                "–",
                where,
            )
        )
    ratio = numbers.get("added_ratio_large_over_small_vocab")
    if ratio is not None:
        rows.append(
            (
                "sae-features memory over the model, V 262k / V 49k",
                f"{ratio:.2f}×",
                "–",
                "equal B·T, same rows count and length",
            )
        )
    return rows


def _run_row(numbers: dict[str, Any]) -> Row:
    """A command run as a user runs it, under /usr/bin/time -v: its peak resident memory."""
    command = " ".join(numbers["command"])
    where = (
        f"`{command}`, cpu, batch {numbers['batch_size']}, max_length {numbers['max_length']}, "
        f"{numbers['wall_seconds'] / 60:.0f} min wall, {numbers['cpu_seconds'] / 60:.0f} min CPU"
    )
    return ("peak RSS of one run at default settings", _gb(numbers["peak_rss_bytes"]), "–", where)


def _gemma_run_sentence(found: dict[str, dict[str, Any]]) -> str:
    numbers = found.get("run_sae_features_gemma_cpu")
    if numbers is None:
        return ""
    return (
        f"`{' '.join(numbers['command'])}` at the default batch size ({numbers['batch_size']}) "
        f"and length ({numbers['max_length']}), its first run (training and caching the "
        f"causal-LM SAE, then its own shipped data), peaked at "
        f"{_gb(numbers['peak_rss_bytes'])} resident under `/usr/bin/time -v` "
        f"(`run_sae_features_gemma_cpu.json`; {numbers['wall_seconds'] / 60:.0f} min of wall "
        f"time and {numbers['cpu_seconds'] / 60:.0f} min of CPU time on a 2-core machine shared "
        "with other work), where before the scores were reduced inside the pass it was killed at "
        "24 GB."
    )


def vocab_memory_prose(folder: Path = RESULTS) -> str:
    """README / docs/scale.md: sae-features' peak memory on SmolLM2 and Gemma 3."""
    found = load_results(folder)
    numbers = found.get("vocab_memory_cpu")
    gemma = _gemma_run_sentence(found)
    if numbers is None:
        return gemma or "_No vocab_memory_cpu.json in benchmarks/results/._"
    parts = []
    for model, at in numbers["by_model"].items():
        parts.append(
            f"{model} (V = {at['vocab_size']:,}) peaks at {_gb(at['peak_rss_bytes'])} resident, "
            f"{_gb(at['peak_rss_bytes'] - _model_resident(at))} over the model's own "
            f"{_gb(_model_resident(at))}"
        )
    first = next(iter(numbers["by_model"].values()))
    given = all(at.get("sae") for at in numbers["by_model"].values())
    text = (
        f"`sae-features` at the default batch size ({first['batch_size']}), "
        f"{first['rows']} inputs of exactly {first['max_length']} tokens each (equal B·T), one "
        f"fresh process per model under `/usr/bin/time -v` (`vocab_memory_cpu.json`"
        + ("; each model's cached SAE given, so no training is in the run" if given else "")
        + "): "
        + "; ".join(parts)
        + "."
    )
    ratio = numbers.get("added_ratio_large_over_small_vocab")
    if ratio is not None:
        small, large = sorted(numbers["by_model"].values(), key=lambda at: at["vocab_size"])
        text += (
            f" What the run adds over the model is {ratio:.2f}× as much at "
            f"V = {large['vocab_size'] // 1000}k as at V = {small['vocab_size'] // 1000}k: the "
            "next-token scores are reduced inside the pass, so nothing of size B·T·V is held "
            "(it was 4.3 GB per pass on Gemma 3)."
        )
        if "rss_weights_read_bytes" in large:
            loaded_ratio = numbers.get("added_over_loaded_ratio_large_over_small_vocab")
            text += (
                " The model's own size is its resident set after every weight was read once: "
                "the weights are memory-mapped from safetensors, a page resident only once "
                "read, and reading them all after loading added "
                f"{_gb(large['rss_weights_read_bytes'] - large['rss_after_load_bytes'])} to "
                f"{large['model']}'s resident set and "
                f"{_gb(small['rss_weights_read_bytes'] - small['rss_after_load_bytes'])} to "
                f"{small['model']}'s. Counted from just after loading, the run would be charged "
                "for the weights it reads first"
                + (f" ({loaded_ratio:.2f}×)." if loaded_ratio is not None else ".")
            )
    return text + (" " + gemma if gemma else "")


def benchmark_table(folder: Path = RESULTS) -> str:
    """A markdown table of every committed benchmark ratio: time ratios in process CPU time with
    their ~95 % interval and in wall time, the rounds run and why they stopped."""
    rows: list[Row] = []
    for name, numbers in load_results(folder).items():
        if name.startswith("overhead"):
            rows += _overhead_rows(name, numbers)
        elif name.startswith("memory"):
            rows += _memory_rows(numbers)
        elif name.startswith("cache_speed"):
            key = "geomlens_over_run_with_cache"
            rows.append(_timing_row("geomlens time / run_with_cache", numbers, key))
        elif name.startswith("vocab_memory"):
            rows += _vocab_rows(numbers)
        elif name.startswith("run_"):
            rows.append(_run_row(numbers))
        elif name.startswith("sae"):
            key = "sae-features_over_bare_encode"
            rows.append(_timing_row("sae-features / bare SAE encode", numbers, key))
    if not rows:
        return "_No benchmark results in benchmarks/results/._"
    lines = [
        "| measure | ratio (times: CPU time, 95 % interval) | wall time | conditions |",
        "|---|---|---|---|",
    ]
    lines += [f"| {what} | {ratio} | {wall} | {where} |" for what, ratio, wall, where in rows]
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
    """docs/scale.md: each built-in alone and all fused against the bare forward pass, in CPU
    time with its interval and in wall time, and why an analysis costs more where it does by
    design."""
    found = load_results(folder)
    numbers = found.get("overhead_each_cpu_minilm")
    if numbers is None:
        return "_No overhead_each_cpu_minilm.json in benchmarks/results/._"
    header = (
        f"{numbers['inputs']} corpus paragraphs ({numbers['tokens']:,} tokens), batch "
        f"{numbers['batch_size']}, max_length {numbers['max_length']}, "
        f"{numbers['machine']['torch_threads']} torch thread(s), conditions interleaved: "
        f"{_rounds(numbers)} (`overhead_each_cpu_minilm.json`). "
    )
    if "stopped" in numbers:
        header += (
            "Each ratio is the median over rounds of the analysis's process CPU time (user + "
            "system, all threads) over the bare pass's in the same round, with a distribution-"
            "free ~95 % interval (order statistics of the per-round ratios); wall time beside it."
        )
    else:
        header += (
            "CPU time was not recorded in this result; wall time is the ratio of medians ± its "
            "spread (the two medians' ~95 % half-widths added)."
        )
    labels = [label for label in _overhead_labels(numbers) if label != "all"] + ["all"]
    floors = found.get("overhead_floors_cpu_minilm") or {}
    passes = floors.get("second_passes") or {}
    if passes:
        header += (
            " An analysis that reruns part of the model has a floor above one pass: the bare "
            "pass plus those reruns (the blocks from the edited layer on, from the same cached "
            "input, with no edit and no analysis). The floors and each analysis over its own, "
            f"round by round, come from a run of their own ({_rounds(floors)}, "
            f"{floors['inputs']} inputs, `overhead_floors_cpu_minilm.json`)."
        )
    rows = ["| analysis at its default sites | CPU time × bare forward (95 % interval) | wall "
            "time × bare | floor × bare | CPU time × its floor | more than one pass because |",
            "|---|---|---|---|---|---|"]  # fmt: skip
    for label in labels:
        shown = "all seven fused" if label == "all" else label
        key = f"{label}_over_bare"
        if label == "all":  # the floors run fuses other analyses than all seven
            floor = over_floor = "–"
        elif label in passes:
            floor = _cpu_ratio(floors, f"floor:{label}_over_bare")
            over_floor = _cpu_ratio(floors, f"{label}_over_floor")
        else:
            floor, over_floor = "1 (one pass)", "as × bare"
        rows.append(
            f"| {shown} | {_cpu_ratio(numbers, key)} | {_wall_ratio(numbers, key)} | {floor} | "
            f"{over_floor} | {EXTRA_WORK.get(label, '–')} |"
        )
    return header + "\n\n" + "\n".join(rows)


def memory_prose(folder: Path = RESULTS) -> str:
    """docs/scale.md: peak memory by inputs and against run_with_cache, at each max_length."""
    numbers = load_results(folder).get("memory_cpu_minilm")
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
    speed = load_results(folder).get("cache_speed_cpu_minilm")
    if speed is not None:
        key = "geomlens_over_run_with_cache"
        took = (
            f"{_cpu_ratio(speed, key)} the CPU time of `run_with_cache` (median per-round ratio, "
            f"~95 % interval) and {_wall_ratio(speed, key)} its wall time"
            if f"{key}_cpu" in speed
            else f"{_wall_ratio(speed, key)} the wall time of `run_with_cache` (CPU time not "
            "recorded)"
        )
        paragraphs.append(
            f"Time, interleaved in one process at {speed['inputs']:,} inputs, max_length "
            f"{speed['max_length']} (`cache_speed_cpu_minilm.json`, {_rounds(speed)}): geomlens "
            f"takes {took}."
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
