"""Offline SAE training with sae-lens on MiniLM, the cache, and `geomlens sae train`.

Training is kept tiny (a few hundred tokens, 32 latents): what is checked is the path (engine
stream -> sae-lens trainer -> saved with sae-lens -> reloaded from the cache, not retrained),
not the quality of the SAE.
"""

import json

import torch
from sae_lens import SAE
from typer.testing import CliRunner

import geomlens as gl
from geomlens.cli import app
from geomlens.sae.cache import CACHE_ENV, sae_cache_dir
from geomlens.sae.config import TrainingConfig
from geomlens.sae.loading import load_sae
from geomlens.sae.training import activation_batches, cached_sae

SITE = "blocks.1.hook_resid_post"
TINY = TrainingConfig(d_sae=32, tokens=512, batch_tokens=128, rows_per_chunk=8, max_length=32)
TEXTS = gl.data.as_dataset(
    [
        "The quick brown fox jumps over the lazy dog near the river bank.",
        "Return a new list containing all items from the iterable in ascending order.",
        "A context manager that changes the current working directory for a while.",
        "Open the file and return a stream; raise an error if it cannot be opened.",
    ]
    * 6
)


def test_activation_batches_come_from_the_engine_pass(minilm):
    batches = activation_batches(minilm, SITE, TEXTS, batch_tokens=64, rows_per_chunk=4)
    first, second = next(batches), next(batches)
    assert first.shape == (64, 384) and second.shape == (64, 384)
    assert not torch.equal(first, second)
    # Every vector is a real token's activation at SITE: its norm is that of MiniLM's residual
    # stream, never a zero padding row.
    assert (first.norm(dim=-1) > 1.0).all()


def test_trained_once_then_reloaded_from_the_cache(minilm, tmp_path):
    trained = cached_sae(
        minilm, SITE, corpus="test-texts", data=TEXTS, config=TINY, cache_dir=tmp_path
    )
    assert not trained.reused
    assert {p.name for p in trained.path.iterdir()} >= {
        "cfg.json",
        "sae_weights.safetensors",
        "geomlens_training.json",
    }
    record = json.loads((trained.path / "geomlens_training.json").read_text())
    assert record["site"] == SITE and record["config"]["d_sae"] == 32
    assert trained.sae.cfg.metadata.hook_name == SITE
    assert (trained.sae.cfg.d_in, trained.sae.cfg.d_sae) == (384, 32)
    stamps = {p.name: p.stat().st_mtime_ns for p in trained.path.iterdir()}

    again = cached_sae(
        minilm, SITE, corpus="test-texts", data=TEXTS, config=TINY, cache_dir=tmp_path
    )
    assert again.reused and again.path == trained.path
    assert {p.name: p.stat().st_mtime_ns for p in again.path.iterdir()} == stamps
    x = torch.randn(5, 384)
    assert torch.equal(again.sae.encode(x), trained.sae.encode(x))
    # The folder is an ordinary sae-lens SAE, loadable without geomlens.
    plain = SAE.load_from_disk(str(trained.path))
    assert torch.equal(plain.encode(x), trained.sae.encode(x))
    assert isinstance(load_sae(str(trained.path)), SAE)


def test_cache_key_and_folder(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "elsewhere"))
    assert sae_cache_dir() == tmp_path / "elsewhere"
    assert sae_cache_dir(tmp_path / "given") == tmp_path / "given"
    from geomlens.sae.cache import cache_entry

    key = {"model": "m", "site": SITE, "corpus": "c", "config": TINY.to_dict()}
    other = {**key, "config": {**TINY.to_dict(), "d_sae": 64}}
    assert cache_entry(key) != cache_entry(other)
    assert cache_entry(key) == cache_entry(dict(reversed(list(key.items()))))
    assert cache_entry(key).parent == tmp_path / "elsewhere"


def test_cli_trains_then_reuses(tmp_path):
    data = tmp_path / "texts.txt"
    data.write_text("\n".join(TEXTS.texts))
    arguments = [
        "sae", "train", "--site", SITE, "--d-sae", "16", "--tokens", "256",
        "--batch-tokens", "128", "--data", str(data), "--cache-dir", str(tmp_path / "cache"),
    ]  # fmt: skip
    first = CliRunner().invoke(app, arguments)
    assert first.exit_code == 0, first.output
    assert "trained and cached" in first.output
    # Progress goes to standard error even when it is not a terminal (a log of a long training).
    assert f"SAE at {SITE} …" in first.output
    second = CliRunner().invoke(app, arguments)
    assert second.exit_code == 0 and "reused cached" in second.output
    bad = CliRunner().invoke(app, [*arguments[:3], "blocks.99.hook_resid_post"])
    assert bad.exit_code == 2 and "Unknown site 'blocks.99.hook_resid_post'" in bad.output


def test_sae_features_without_an_sae_trains_once_then_reuses(minilm, tmp_path, monkeypatch):
    from geomlens.data.ood import feature_explosion_data

    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    data = feature_explosion_data(
        minilm.tokenizer, calibration_rows=4, heldout_rows=4, max_tokens=16
    )
    training = {"d_sae": 16, "tokens": 256, "batch_tokens": 128, "rows_per_chunk": 16}

    def run():
        return gl.run("sae-features", minilm, data, site=SITE, training=training, batch_size=8)

    first, second = run(), run()
    notes = [{n["item"]: n["note"] for n in r.tables["notes"]} for r in (first, second)]
    assert notes[0]["sae"].startswith("trained " + str(tmp_path))
    assert notes[1]["sae"].startswith("reused " + str(tmp_path))
    assert len(list(tmp_path.iterdir())) == 1
    assert second.metrics == first.metrics
    assert notes[0]["loss_kind"] == "final_hidden_cosine_distance"  # MiniLM is an encoder
    assert f"{SITE}.bound" not in first.metrics


def test_training_bar_moves_every_step_and_ends_at_its_total(minilm, capsys):
    """sae-lens moves its bar every 100 steps, so a short run sat at 0 % and ended short of
    100 %; the bar now moves each step and ends exactly at the number of training samples."""
    from geomlens.sae.training import train_sae

    config = TrainingConfig(d_sae=32, tokens=640, batch_tokens=128, rows_per_chunk=8, passes=1)
    train_sae(minilm, SITE, TEXTS, config)
    bar = capsys.readouterr().err.replace("\r", "\n").splitlines()
    counts = [line for line in bar if "Training SAE" in line and "/640" in line]
    shown = [int(line.split("/640")[0].split()[-1]) for line in counts]
    assert shown[-1] == 640, counts[-3:]  # the bar closes at its total, not short of it
    assert max(shown) == 640  # and never passes it
