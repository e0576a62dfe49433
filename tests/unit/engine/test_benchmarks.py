"""Every benchmark script runs on CPU with a tiny model, so only --model and --device differ on a GPU."""

import sys

import numpy as np
import pytest
import torch
from helpers.paths import REPO
from helpers.tiny_models import tiny_gpt2

from geomlens.analyses.example_rows import tiny_sae

sys.path.insert(0, str(REPO / "benchmarks"))

import bench_cache_speed  # noqa: E402
import bench_engine  # noqa: E402
import bench_memory  # noqa: E402
import bench_overhead  # noqa: E402
import bench_sae  # noqa: E402


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
    assert len(numbers["seconds"]["bare"]) == 2
    assert numbers["all_over_bare"] > 0 and numbers["activation-stats_over_bare"] > 0
    assert numbers["tokens"] > 8
    assert set(numbers["finalize_seconds"]) == {"activation-stats", "similarity"}
    assert out.exists()


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
    assert numbers["d_sae"] == 64 and numbers["sae_features_over_bare_encode"] > 0
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


def test_bench_cache_speed_runs_on_a_tiny_model(tmp_path):
    numbers = bench_cache_speed.main(
        ["--model", saved_tiny_gpt2(tmp_path / "tiny"), "--inputs", "12", "--batch-size", "4",
         "--max-length", "8", "--repeats", "2", "--max-repeats", "2"]
    )  # fmt: skip
    assert len(numbers["seconds"]["run_with_cache"]) == 2
    assert numbers["geomlens_over_run_with_cache_seconds_spread"] > 0
    assert numbers["geomlens_over_run_with_cache_seconds"] > 0
    assert numbers["same_statistic"] is True


def test_median_spread_is_the_order_statistic_interval_and_shrinks_with_repeats():
    from geomlens.engine.benchmarking import median_spread

    assert median_spread([1.0, 2.0, 3.0]) == pytest.approx((3 - 1) / (2 * 2))  # under six: range
    rng = np.random.default_rng(0)
    few, many = rng.normal(10, 1, 9), rng.normal(10, 1, 400)
    # For n = 400 the ranks are 180 and 221 (n/2 ∓ 0.98 √n): about ±2 standard errors.
    ordered = np.sort(many)
    assert median_spread(list(many)) == pytest.approx(
        (ordered[220] - ordered[179]) / (2 * np.median(many))
    )
    assert median_spread(list(many)) < median_spread(list(few))


def test_steady_timing_repeats_until_the_spread_is_reached():
    from geomlens.engine.benchmarking import steady_interleaved

    calls = []

    def noisy():  # alternate 1 ms and 3 ms: a spread that never falls under 5 % with few rounds
        calls.append(1)
        import time

        time.sleep(0.001 if len(calls) % 2 else 0.003)

    def steady():
        import time

        time.sleep(0.002)

    seconds, spreads = steady_interleaved(
        {"steady": steady, "noisy": noisy}, torch.device("cpu"), target_spread=0.05,
        min_repeats=3, max_repeats=8, warmup=1,
    )  # fmt: skip
    assert len(seconds["noisy"]) == 8 and len(calls) == 9  # ran to the cap, after one warm-up
    assert spreads["noisy"] >= 0.05


def test_readme_benchmark_table_is_generated_from_the_json(tmp_path):
    import importlib.util
    import json

    path = REPO / "scripts" / "numbers" / "benchmarks.py"
    spec = importlib.util.spec_from_file_location("numbers_benchmarks", path)
    numbers_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(numbers_module)

    (tmp_path / "overhead_cpu_x.json").write_text(json.dumps({
        "model": "m", "device": "cpu", "inputs": 4, "max_length": 8,
        "all_over_bare": 1.234, "all_over_bare_spread": 0.031,
    }))  # fmt: skip
    table = numbers_module.benchmark_table(tmp_path)
    assert (
        "| every built-in fused / bare forward | 1.23× ± 3 % | m, cpu, 4 inputs, max_length 8 |"
        in table
    )
    readme = (REPO / "README.md").read_text()
    region = readme.split("<!-- numbers:benchmarks -->")[1].split("<!-- /numbers:benchmarks -->")[0]
    assert region.strip() == numbers_module.benchmark_table().strip()


def test_run_all_quick_writes_its_results(tmp_path):
    import run_all

    seconds = run_all.main(["--model", saved_tiny_gpt2(tmp_path / "tiny"), "--quick",
                            "--only", "cache_speed", "--out", str(tmp_path / "results")])  # fmt: skip
    assert set(seconds) == {"cache_speed"}
    (written,) = (tmp_path / "results").glob("cache_speed_cpu_*.json")
    assert written.exists()
