"""tutorials/gpu/sae_feature_explosion.py runs on CPU with a tiny GPT-2 and a tiny SAE, both
saved to folders the way a user would have them (save_pretrained, sae-lens save_model)."""

import importlib.util

import pytest
import torch
from helpers.paths import REPO
from helpers.tiny_models import tiny_gpt2
from sae_lens.saes.sae import SAEMetadata
from sae_lens.saes.standard_sae import StandardSAE, StandardSAEConfig

SCRIPT = REPO / "tutorials" / "gpu" / "sae_feature_explosion.py"
SITE = "blocks.1.hook_resid_pre"


def _load_script():
    spec = importlib.util.spec_from_file_location("sae_feature_explosion", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tutorial_runs_on_cpu(tmp_path, capsys):
    model, tokenizer = tiny_gpt2()
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    torch.manual_seed(0)
    sae = StandardSAE(StandardSAEConfig(d_in=32, d_sae=64, metadata=SAEMetadata(hook_name=SITE)))
    sae.save_model(tmp_path / "sae")
    out = tmp_path / "out"
    returned = _load_script().main(
        [
            "--model", str(tmp_path / "model"), "--sae", str(tmp_path / "sae"),
            "--device", "cpu", "--backend", "transformer-lens", "--calibration-rows", "6", "--heldout-rows", "6",
            "--max-tokens", "20", "--batch-size", "8", "--out", str(out),
        ]
    )  # fmt: skip
    printed = capsys.readouterr().out
    result = returned["result"]
    for condition in ("calibration", "heldout", "random_tokens", "replaced_15pct", "python_source"):
        assert f"{SITE}.mean_k.{condition}" in result.metrics
        assert condition in printed
    assert f"{SITE}.auroc.random_tokens" in result.metrics
    assert "pool form: U =" in printed and "released form: U =" in printed
    assert result.metrics[f"{SITE}.bound.pool"] > 0
    assert (out / "sae_features.json").exists()
    assert (out / "sae_features.png").stat().st_size > 5_000


def test_tutorial_trains_its_own_sae_when_none_is_published(tmp_path, capsys, monkeypatch):
    """Seed 004's protocol on a model without a published SAE (SmolLM2, Gemma 3): --sae train
    trains one on the model's own activations (cached), then reports k both ways, the AUROC
    intervals, the SAE's quality and both bounds with N*."""
    monkeypatch.setenv("GEOMLENS_SAE_CACHE", str(tmp_path / "cache"))
    model, tokenizer = tiny_gpt2()
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    returned = _load_script().main(
        [
            "--model", str(tmp_path / "model"), "--sae", "train", "--backend", "nnsight",
            "--device", "cpu", "--train-tokens", "512", "--train-d-sae", "64",
            "--train-passes", "1", "--calibration-rows", "6", "--heldout-rows", "6",
            "--max-tokens", "20", "--batch-size", "8",
            "--out", str(tmp_path / "out"),
        ]
    )  # fmt: skip
    printed = capsys.readouterr().out
    result = returned["result"]
    site = "blocks.1.hook_resid_post"  # the middle of 2 blocks
    assert result.metrics[f"{site}.dictionary_size"] == 64
    for name in ("explained_variance", "l0", "dead_fraction", "decoder_norm_spread", "n_star"):
        assert f"{site}.{name}" in result.metrics, name
    assert f"{site}.auroc_content_ci_low.random_tokens" in result.metrics
    assert "trained SAE" in printed and "explained variance" in printed
    assert "pool form: U =" in printed and "released form: U =" in printed
    assert (tmp_path / "cache").is_dir()


def test_an_offline_model_with_the_hooked_transformer_backend_is_refused_in_one_line(capsys):
    """smollm2-135m-instruct loads only through gl.load: the HookedTransformer path says so
    before any loading, instead of asking the hub."""
    with pytest.raises(SystemExit) as exit:
        _load_script().main(
            [
                "--model",
                "smollm2-135m-instruct",
                "--sae",
                "any/sae",
                "--backend",
                "hooked-transformer",
            ]
        )
    assert exit.value.code == 2
    assert "--backend nnsight or transformer-lens" in capsys.readouterr().err
