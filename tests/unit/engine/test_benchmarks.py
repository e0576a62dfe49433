"""Every benchmark script runs on CPU with a tiny model, so only --model and --device differ on a GPU."""

import sys

import numpy as np
import pytest
import scipy.stats
import torch
from helpers.paths import REPO
from helpers.tiny_models import tiny_gpt2

from geomlens.analyses.example_rows import tiny_sae
from geomlens.engine.benchmarking import median_interval, median_spread

sys.path.insert(0, str(REPO / "benchmarks"))

import bench_cache_speed  # noqa: E402
import bench_engine  # noqa: E402
import bench_memory  # noqa: E402
import bench_overhead  # noqa: E402
import bench_sae  # noqa: E402
import bench_vocab_memory  # noqa: E402


def test_bench_engine_runs_on_a_tiny_model(tmp_path):
    model, tokenizer = tiny_gpt2()
    model.save_pretrained(tmp_path / "tiny")
    tokenizer.save_pretrained(tmp_path / "tiny")
    out = tmp_path / "bench.json"
    numbers = bench_engine.main(
        ["--model", str(tmp_path / "tiny"), "--device", "cpu", "--inputs", "8", "--batch-size", "4",
         "--out", str(out)]
    )  # fmt: skip
    assert numbers["inputs"] == 8.0
    assert numbers["fused_seconds"] > 0 and numbers["separate_seconds"] > 0
    assert out.exists()


def saved_tiny_gpt2(folder):
    model, tokenizer = tiny_gpt2()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def test_bench_overhead_runs_on_a_tiny_model(tmp_path):
    out = tmp_path / "overhead.json"
    numbers = bench_overhead.main(
        ["--model", saved_tiny_gpt2(tmp_path / "tiny"), "--inputs", "8", "--batch-size", "4",
         "--max-length", "16", "--repeats", "2", "--max-repeats", "2",
         "--analyses", "activation-stats", "similarity",
         "--out", str(out)]
    )  # fmt: skip
    assert len(numbers["seconds"]["bare"]) == len(numbers["cpu_seconds"]["bare"]) == 2
    assert numbers["rounds"] == 2 and numbers["stopped"] == "cap of 2 rounds reached"
    for key in ("all_over_bare", "activation-stats_over_bare"):
        for clock in ("cpu", "wall"):
            ratio = numbers[f"{key}_{clock}"]
            assert 0 < ratio["low"] <= ratio["median"] <= ratio["high"]
    assert numbers["tokens"] > 8
    assert set(numbers["finalize_seconds"]) == {"activation-stats", "similarity"}
    assert out.exists()


def test_the_floor_reruns_what_the_analysis_reran(tmp_path):
    """--floors: linearization-effect's second passes are recorded where they start (its first
    linearised block, once per batch), the floor condition reruns exactly those, and the
    analysis is timed against its floor."""
    from geomlens.engine.benchmarking import FloorPasses, labelled_corpus
    from geomlens.interventions.resume import recording_second_passes

    model = saved_tiny_gpt2(tmp_path / "tiny")
    numbers = bench_overhead.main(
        ["--model", model, "--inputs", "8", "--batch-size", "4", "--max-length", "16",
         "--repeats", "2", "--max-repeats", "2", "--analyses", "linearization-effect", "--each",
         "--floors"]
    )  # fmt: skip
    passes = numbers["second_passes"]
    assert set(passes) == {"linearization-effect", "all"}  # activation-stats reruns nothing
    assert len(passes["linearization-effect"]) == 2, "one rerun per batch of 4, 8 inputs"
    assert len(set(passes["linearization-effect"])) == 1
    for key in ("linearization-effect_over_floor", "floor:linearization-effect_over_bare"):
        ratio = numbers[f"{key}_cpu"]
        assert 0 < ratio["low"] <= ratio["median"] <= ratio["high"]
    assert numbers["floor:linearization-effect_over_bare_cpu"]["median"] > 1  # more than bare

    import geomlens as gl

    adapter = gl.load(model, backend="nnsight")
    floor = FloorPasses(adapter, labelled_corpus(8), 4, 16, [1, 0, 1])  # 2 batches: 2 + 1
    with recording_second_passes() as reran:
        floor()
    assert reran == [1, 0, 1], "every recorded rerun, from the same layer (0: a whole pass)"
    assert floor.per_batch == [[1, 0], [1]]
    with recording_second_passes() as outer:  # nested: each open recorder hears every pass
        with recording_second_passes() as inner:
            floor()
        floor()
    assert inner == [1, 0, 1] and outer == [1, 0, 1] * 2


def test_bench_memory_child_measures_both_ways(tmp_path, capsys):
    import json

    model = saved_tiny_gpt2(tmp_path / "tiny")
    measured = {}
    for mode, backend in (("geomlens", "nnsight"), ("run_with_cache", "transformer-lens")):
        bench_memory.main(["--child", "--mode", mode, "--backend", backend, "--inputs", "12",
                           "--model", model, "--batch-size", "4", "--max-length", "8"])  # fmt: skip
        measured[mode] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    for numbers in measured.values():
        assert numbers["run_peak_rss_bytes"] >= numbers["rss_after_load_bytes"] > 0
    # The two ways compute the same statistic: the mean token norm at the last block.
    assert measured["geomlens"]["mean_norm_last"] == pytest.approx(
        measured["run_with_cache"]["mean_norm_last"], rel=1e-5
    )


def test_bench_sae_and_the_gpu_benchmark_run_on_a_tiny_model(tmp_path):
    sys.path.insert(0, str(REPO / "tutorials" / "gpu"))
    import benchmark

    model = saved_tiny_gpt2(tmp_path / "tiny")
    sae = tiny_sae()["sae"]
    sae.save_model(tmp_path / "sae")
    numbers = bench_sae.main(["--model", model, "--sae", str(tmp_path / "sae"), "--inputs", "8",
                              "--batch-size", "4", "--max-length", "16", "--repeats", "1",
                              "--max-repeats", "1"])  # fmt: skip
    assert numbers["d_sae"] == 64 and numbers["sae-features_over_bare_encode_cpu"]["median"] > 0
    out = tmp_path / "gpu.json"
    numbers = benchmark.main(
        ["--model", model, "--device", "cpu", "--inputs", "8", "--batch-size", "4",
         "--max-length", "16", "--repeats", "1", "--out", str(out),
         "--option", f"sae-features.sae={tmp_path / 'sae'}", "abstraction.n_bootstrap=10",
         "abstraction.n_shuffles=5", "linearization-effect.n_bootstrap=10",
         "linearization-effect.n_shuffles=5", "resolution.bootstrap=10"]
    )  # fmt: skip
    assert set(numbers["tokens_per_second"]) == {"bare forward", "activation-stats", "all analyses"}
    assert all(value > 0 for value in numbers["tokens_per_second"].values())
    assert numbers["host_syncs_in_activation_stats_pass"] is None  # counted on CUDA only
    assert set(numbers["analyses"]) >= {"activation-stats", "sae-features", "ccgp"}
    assert out.exists()


def test_bench_vocab_memory_runs_on_a_tiny_model(tmp_path):
    """The vocabulary benchmark's child under /usr/bin/time on a tiny GPT-2 with a given SAE:
    equal-length rows, the kernel's peak, the model's own resident size beside it."""
    from transformers import AutoTokenizer

    model = saved_tiny_gpt2(tmp_path / "tiny")
    tiny_sae()["sae"].save_model(tmp_path / "sae")
    out = tmp_path / "vocab.json"
    numbers = bench_vocab_memory.main(
        ["--models", model, "--sae-for", f"{model}={tmp_path / 'sae'}", "--rows", "8",
         "--max-length", "8", "--out", str(out)]
    )  # fmt: skip
    measured = numbers["by_model"][model]
    assert measured["vocab_size"] == len(AutoTokenizer.from_pretrained(model))
    assert measured["sae"] == str(tmp_path / "sae")
    assert measured["peak_rss_bytes"] >= measured["rss_weights_read_bytes"] > 0
    assert measured["rss_weights_read_bytes"] >= measured["rss_after_load_bytes"] > 0
    assert measured["peak_over_model_bytes"] > 0 and np.isfinite(measured["epsilon_loss"])
    assert out.exists()


def test_bench_cache_speed_runs_on_a_tiny_model(tmp_path):
    numbers = bench_cache_speed.main(
        ["--model", saved_tiny_gpt2(tmp_path / "tiny"), "--inputs", "12", "--batch-size", "4",
         "--max-length", "8", "--repeats", "2", "--max-repeats", "2"]
    )  # fmt: skip
    assert len(numbers["cpu_seconds"]["run_with_cache"]) == 2
    ratio = numbers["geomlens_over_run_with_cache_cpu"]
    assert 0 < ratio["low"] <= ratio["median"] <= ratio["high"]
    assert numbers["geomlens_over_run_with_cache_wall"]["median"] > 0
    assert numbers["same_statistic"] is True


def test_median_spread_is_the_order_statistic_interval_and_shrinks_with_repeats():
    assert median_spread([1.0, 2.0, 3.0]) == pytest.approx((3 - 1) / (2 * 2))  # under six: range
    rng = np.random.default_rng(0)
    few, many = rng.normal(10, 1, 9), rng.normal(10, 1, 400)
    # For n = 400 the ranks are 180 and 221 (n/2 ∓ 0.98 √n): about ±2 standard errors.
    ordered = np.sort(many)
    assert median_spread(list(many)) == pytest.approx(
        (ordered[220] - ordered[179]) / (2 * np.median(many))
    )
    assert median_spread(list(many)) < median_spread(list(few))
    assert median_interval(list(many)) == (np.median(many), ordered[179], ordered[220])


def test_median_interval_is_scipys_exact_quantile_interval():
    rng = np.random.default_rng(1)
    for n in (6, 9, 20, 51, 400):
        values = list(rng.lognormal(0, 1, n))
        exact = scipy.stats.quantile_test(values, p=0.5).confidence_interval(0.95)
        assert median_interval(values) == (np.median(values), exact.low, exact.high)
    # Under MIN_ROUNDS no two order statistics cover 95 %: the whole range.
    assert median_interval([3.0, 1.0, 2.0, 5.0, 4.0]) == (3.0, 1.0, 5.0)


class PlantedClock:
    """A fake clock pair: each condition advances CPU time by its planted cost times a per-round
    machine factor and its own noise, and wall time by that plus time lost to other work."""

    def __init__(self):
        self.cpu = 0.0
        self.wall = 0.0

    def condition(self, cost, load, noise, stolen):
        def run():
            spent = cost * load() * noise()
            self.cpu += spent
            self.wall += spent + stolen()

        return run


def planted_steady(costs, noise_sd, rounds_cap, seed=0, target=0.05):
    """Steady interleaved timing of conditions with planted CPU costs under a machine whose
    speed drifts between rounds (×0.6 to ×1.6), each call with lognormal noise of ``noise_sd``
    and wall time stolen by other work."""
    from geomlens.engine.benchmarking import steady_interleaved

    rng = np.random.default_rng(seed)
    clock = PlantedClock()
    drift = {"factor": 1.0, "calls": 0}

    def load():  # one factor per round: it changes after every condition has run once
        if drift["calls"] % len(costs) == 0:
            drift["factor"] = rng.uniform(0.6, 1.6)
        drift["calls"] += 1
        return drift["factor"]

    conditions = {
        name: clock.condition(
            cost,
            load,
            lambda name=name: float(np.exp(rng.normal(0.0, noise_sd[name]))),
            lambda: float(rng.exponential(0.5)),
        )
        for name, cost in costs.items()
    }
    return steady_interleaved(
        conditions, torch.device("cpu"), baseline="bare", target=target, max_repeats=rounds_cap,
        wall_clock=lambda: clock.wall, cpu_clock=lambda: clock.cpu,
    )  # fmt: skip


def test_paired_cpu_ratio_covers_the_planted_cost_and_stops_once_the_interval_is_under_target():
    timings = planted_steady(
        {"bare": 1.0, "analysis": 1.08}, {"bare": 0.005, "analysis": 0.005}, rounds_cap=40
    )
    # Each round's ratio is 1.08 up to 0.7 % noise, so the first round the rule may stop at, the
    # sixth, already has its interval well within ±5 %: the drift of ±60 % between rounds cancels.
    assert timings.rounds == 6 and timings.stopped == "interval under ±5 %"
    ratio = timings.ratio("analysis", "bare")
    assert ratio.low <= 1.08 <= ratio.high and ratio.within(0.05)
    assert ratio.median == pytest.approx(1.08, rel=0.01)
    # Unpaired, the same rounds would give no answer: the medians each move with the drift.
    assert median_spread(timings.cpu_seconds["bare"]) > 0.1
    # Wall time carries the stolen time too: its interval is wider than the CPU one.
    wall = timings.ratio("analysis", "bare", "wall")
    assert wall.high - wall.low > ratio.high - ratio.low
    numbers = timings.record()
    assert numbers["analysis_over_bare_cpu"] == ratio.as_dict()
    assert numbers["analysis_over_bare_wall"] == wall.as_dict()
    assert numbers["rounds"] == 6 and len(numbers["cpu_seconds"]["analysis"]) == 6


def test_steady_timing_runs_to_the_cap_and_says_so_when_the_interval_stays_wide():
    timings = planted_steady(
        {"bare": 1.0, "steady": 1.5, "noisy": 2.0},
        {"bare": 0.005, "steady": 0.005, "noisy": 0.3},
        rounds_cap=12,
    )
    assert timings.rounds == 12 and timings.stopped == "cap of 12 rounds reached"
    assert timings.ratio("steady", "bare").within(0.05)
    noisy = timings.ratio("noisy", "bare")
    assert not noisy.within(0.05) and noisy.low <= 2.0 <= noisy.high


def test_the_ratio_interval_holds_the_planted_median_ratio_about_95_percent_of_the_time():
    from geomlens.engine.benchmarking import paired_ratio

    rng = np.random.default_rng(1)
    covered = 0
    trials = 400
    for _ in range(trials):
        load = rng.uniform(0.6, 1.6, 25)
        bare = load * np.exp(rng.normal(0, 0.1, 25))
        analysis = 1.2 * load * np.exp(rng.normal(0, 0.1, 25))
        ratio = paired_ratio(list(analysis), list(bare))
        covered += ratio.low <= 1.2 <= ratio.high  # the per-round ratios' median is 1.2
    # n = 25: the exact interval takes ranks 8 and 18, P(8 ≤ Binomial(25, ½) ≤ 17) = 95.7 %;
    # 400 trials put the share within ±3.5 standard errors (±0.035) of it.
    assert 0.92 <= covered / trials <= 0.99


def test_cpu_time_counts_the_work_and_not_the_waiting():
    """Real clocks: a busy loop twice as long costs twice the CPU time; sleeping adds wall time
    only."""
    import time

    from geomlens.engine.benchmarking import steady_interleaved

    def spin(iterations):
        total = 0
        for i in range(iterations):
            total += i & 7
        return total

    # Tens of milliseconds of work per call: a CI worker's other threads (pytest-xdist's I/O
    # thread) and the clock's tick add a few milliseconds of CPU time now and then, which on a
    # few-ms loop pulled the measured ratio to 1.6.
    timings = steady_interleaved(
        {"bare": lambda: spin(1_000_000), "double": lambda: (spin(2_000_000), time.sleep(0.1))},
        torch.device("cpu"), baseline="bare", target=0.05, max_repeats=20,
    )  # fmt: skip
    cpu = timings.ratio("double", "bare")
    wall = timings.ratio("double", "bare", "wall")
    assert cpu.median == pytest.approx(2.0, rel=0.15)
    assert wall.median > cpu.median + 0.5  # 100 ms of sleep on a loop of tens of ms
    assert timings.stopped in ("interval under ±5 %", "cap of 20 rounds reached")


def _renderer():
    import importlib.util
    import sys

    folder = REPO / "scripts" / "numbers"
    if str(folder) not in sys.path:  # as scripts/regenerate_numbers.py does: shared helpers
        sys.path.insert(0, str(folder))
    path = folder / "benchmarks.py"
    spec = importlib.util.spec_from_file_location("numbers_benchmarks", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_benchmark_table_is_generated_from_the_json(tmp_path):
    import json

    numbers_module = _renderer()
    (tmp_path / "overhead_cpu_x.json").write_text(json.dumps({
        "model": "m", "device": "cpu", "inputs": 4, "max_length": 8, "rounds": 14,
        "stopped": "interval under ±5 %",
        "all_over_bare_cpu": {"median": 1.084, "low": 1.031, "high": 1.122},
        "all_over_bare_wall": {"median": 1.2, "low": 0.9, "high": 1.5},
    }))  # fmt: skip
    (tmp_path / "sae_cpu_x.json").write_text(json.dumps({  # written before CPU time was kept
        "model": "m", "device": "cpu", "inputs": 4, "repeats": 10,
        "sae_features_over_bare_encode": 1.234, "sae_features_over_bare_encode_spread": 0.31,
    }))  # fmt: skip
    table = numbers_module.benchmark_table(tmp_path)
    assert (
        "| every built-in fused / bare forward | 1.08× (1.03–1.12) | 1.20× (0.90–1.50) | m, cpu, "
        "4 inputs, max_length 8, 14 rounds, interval under ±5 % |" in table
    )
    assert (
        "| sae-features / bare SAE encode | not recorded | 1.23× ± 31 % (ratio of medians) | m, "
        "cpu, 4 inputs, 10 rounds, stop not recorded |" in table
    )
    readme = (REPO / "README.md").read_text()
    region = readme.split("<!-- numbers:benchmarks -->")[1].split("<!-- /numbers:benchmarks -->")[0]
    assert region.strip() == numbers_module.benchmark_table().strip()


def test_docs_overhead_table_renders_new_and_old_results(tmp_path):
    import json

    numbers_module = _renderer()
    common = {
        "inputs": 4, "tokens": 40, "batch_size": 2, "max_length": 8,
        "machine": {"torch_threads": 2}, "seconds": {"bare": [1.0] * 3},
    }  # fmt: skip
    path = tmp_path / "overhead_each_cpu_minilm.json"
    path.write_text(json.dumps({
        **common, "rounds": 30, "stopped": "cap of 30 rounds reached",
        "all_over_bare_cpu": {"median": 2.0, "low": 1.9, "high": 2.1},
        "all_over_bare_wall": {"median": 2.1, "low": 1.8, "high": 2.4},
        "ccgp_over_bare_cpu": {"median": 1.01, "low": 0.99, "high": 1.04},
        "ccgp_over_bare_wall": {"median": 1.0, "low": 0.9, "high": 1.1},
    }))  # fmt: skip
    table = numbers_module.overhead_table(tmp_path)
    assert "30 rounds, cap of 30 rounds reached" in table
    assert (
        "| ccgp | 1.01× (0.99–1.04) | 1.00× (0.90–1.10) | 1 (one pass) | as × bare | – |" in table
    )
    assert table.splitlines()[-1].startswith("| all seven fused | 2.00× (1.90–2.10) |")
    # a floors run beside it: the two-pass analysis's floor and its ratio to it in its row
    (tmp_path / "overhead_floors_cpu_minilm.json").write_text(json.dumps({
        **common, "rounds": 12, "stopped": "every interval within ±5 %",
        "second_passes": {"ccgp": [3, 3], "all": [3, 3]},
        "floor:ccgp_over_bare_cpu": {"median": 1.5, "low": 1.45, "high": 1.55},
        "ccgp_over_floor_cpu": {"median": 1.1, "low": 1.05, "high": 1.15},
    }))  # fmt: skip
    floored = numbers_module.overhead_table(tmp_path)
    assert (
        "| ccgp | 1.01× (0.99–1.04) | 1.00× (0.90–1.10) | 1.50× (1.45–1.55) | 1.10× (1.05–1.15) |"
        in floored
    )
    assert "12 rounds, every interval within ±5 %" in floored
    (tmp_path / "overhead_floors_cpu_minilm.json").unlink()
    path.write_text(json.dumps({**common, "repeats": 3, "ccgp_over_bare": 0.95}))
    old = numbers_module.overhead_table(tmp_path)
    assert (
        "| ccgp | not recorded | 0.95× (ratio of medians) | 1 (one pass) | as × bare | – |" in old
    )
    assert "CPU time was not recorded" in old


def test_run_all_quick_writes_its_results(tmp_path):
    import run_all

    seconds = run_all.main(["--model", saved_tiny_gpt2(tmp_path / "tiny"), "--quick",
                            "--only", "cache_speed", "--out", str(tmp_path / "results")])  # fmt: skip
    assert set(seconds) == {"cache_speed"}
    (written,) = (tmp_path / "results").glob("cache_speed_cpu_*.json")
    assert written.exists()
