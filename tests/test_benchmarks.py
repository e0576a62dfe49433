"""Every benchmark script runs on CPU with a tiny model, so only --model and --device differ on a GPU."""

import sys
from pathlib import Path

from helpers.tiny_models import tiny_gpt2

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_engine  # noqa: E402


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
