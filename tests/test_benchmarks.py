"""Every benchmark script runs on CPU with a tiny model, so only --model and --device differ on a GPU."""

import sys
from pathlib import Path

import pytest
from helpers.recipes import tiny_sae
from helpers.tiny_models import tiny_gpt2

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

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
         "--max-length", "16", "--repeats", "2", "--analyses", "activation-stats", "similarity",
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
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tutorials" / "gpu"))
    import benchmark

    model = saved_tiny_gpt2(tmp_path / "tiny")
    sae = tiny_sae()["sae"]
    sae.save_model(tmp_path / "sae")
    numbers = bench_sae.main(["--model", model, "--sae", str(tmp_path / "sae"), "--inputs", "8",
                              "--batch-size", "4", "--max-length", "16", "--repeats", "1"])  # fmt: skip
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
         "--max-length", "8", "--repeats", "2"]
    )  # fmt: skip
    assert len(numbers["seconds"]["run_with_cache"]) == 2
    assert numbers["geomlens_over_run_with_cache_seconds"] > 0
    assert numbers["same_statistic"] is True
