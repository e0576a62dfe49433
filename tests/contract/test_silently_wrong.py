"""Inputs that used to give wrong numbers with exit 0: each is now either
counted right or refused with one clear line."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from helpers.tiny_models import tiny_gpt2

import geomlens as gl
from geomlens.analyses.registry import analysis_class
from geomlens.testing import first_difference

SITE = "blocks.1.hook_resid_post"
BACKENDS = ("nnsight", "transformer-lens")
PADDED_ANALYSES = ("activation-stats", "similarity", "abstraction")


def _adapter(backend: str):
    model, tokenizer = tiny_gpt2()
    return gl.attach(model, tokenizer=tokenizer, backend=backend)


def _options(name: str) -> dict:
    example = analysis_class(name).example
    return {**example.run_options(), "site": SITE, "batch_size": 4}


def _assert_same_metrics(got: gl.Result, expected: gl.Result) -> None:
    problem = first_difference(got, expected, tolerance=1e-9)
    assert problem is None, problem


# --- 2. A NaN or Inf at a padded position never reaches a statistic ---------------------------


@pytest.mark.parametrize(
    ("backend", "name", "poison"),
    [(backend, name, math.nan) for backend in BACKENDS for name in PADDED_ANALYSES]
    + [("nnsight", "activation-stats", math.inf), ("transformer-lens", "similarity", -math.inf)],
)
def test_a_non_finite_value_at_padded_positions_changes_no_metric(backend, name, poison):
    adapter = _adapter(backend)
    rows = analysis_class(name).example.rows()
    half = len(rows) // 2  # interleave the halves so that batches mix texts of other lengths
    rows = [row for pair in zip(rows[:half], rows[half:]) for row in pair] + rows[2 * half :]
    clean = gl.run(name, adapter, rows, **_options(name))
    masks: list[torch.Tensor] = []
    encode = adapter.encode

    def recording_encode(*args, **kwargs):  # observes the padding of each batch
        inputs = encode(*args, **kwargs)
        masks.append(inputs.attention_mask)
        return inputs

    adapter.encode = recording_encode

    def poison_padding(activation: torch.Tensor) -> torch.Tensor:
        real = masks[-1].to(activation.device).bool()[..., None]
        return torch.where(real, activation, torch.full_like(activation, poison))

    try:
        with adapter.intervene(SITE, poison_padding):
            poisoned = gl.run(name, adapter, rows, **_options(name))
    finally:
        del adapter.encode
    assert any(not bool(m.bool().all()) for m in masks), "some rows must be padded"
    _assert_same_metrics(poisoned, clean)
    assert all(
        math.isfinite(v) or math.isnan(clean.metrics[k]) for k, v in poisoned.metrics.items()
    )


@pytest.mark.parametrize("pooling", [None, "mean", "last", "first"])
def test_recorded_activations_with_nan_under_their_mask_give_the_unpadded_statistics(pooling):
    generator = np.random.default_rng(0)
    values = generator.normal(size=(6, 5, 4))
    mask = np.ones((6, 5), dtype=bool)
    mask[::2, 3:] = False  # every other row has two padded positions
    poisoned = values.copy()
    poisoned[~mask] = np.nan
    clean = gl.run("activation-stats", gl.attach({"x": values}, attention_mask=mask),
                   pooling=pooling)  # fmt: skip
    got = gl.run("activation-stats", gl.attach({"x": poisoned}, attention_mask=mask),
                 pooling=pooling)  # fmt: skip
    _assert_same_metrics(got, clean)


# --- 4. A checkpoint is tied to the weights, not only to the model's path ----------------------


def test_resume_after_the_weights_changed_in_the_same_folder_is_refused(tmp_path):
    from helpers.saved_models import saved_model

    folder = saved_model(tmp_path / "model", tiny_gpt2)
    rows = [{"text": row["text"]} for row in analysis_class("activation-stats").example.rows()]

    def then_stop(items):
        for number, row in enumerate(items):
            if number == 9:
                raise KeyboardInterrupt
            yield row

    checkpoint = tmp_path / "ckpt"
    with pytest.raises(KeyboardInterrupt):
        gl.run("activation-stats", gl.load(folder), then_stop(rows), batch_size=4,
               checkpoint=checkpoint, checkpoint_every=1)  # fmt: skip
    saved_model(folder, lambda: tiny_gpt2(seed=1))  # retrained into the same folder
    with pytest.raises(ValueError, match="model_weights_fingerprint"):
        gl.run("activation-stats", gl.load(folder), iter(rows), batch_size=4,
               checkpoint=checkpoint)  # fmt: skip
    # The same weights still resume.
    saved_model(folder, tiny_gpt2)
    resumed = gl.run("activation-stats", gl.load(folder), iter(rows), batch_size=4,
                     checkpoint=checkpoint)  # fmt: skip
    fresh = gl.run("activation-stats", gl.load(folder), rows, batch_size=4)
    _assert_same_metrics(resumed, fresh)


def test_the_weights_fingerprint_sees_a_permutation_of_rows():
    from geomlens.models.fingerprint import weights_fingerprint

    model, tokenizer = tiny_gpt2()
    adapter = gl.attach(model, tokenizer=tokenizer)
    before = weights_fingerprint(adapter)
    assert weights_fingerprint(adapter) == before
    with torch.no_grad():
        weight = model.transformer.wte.weight
        weight.copy_(
            weight[torch.randperm(weight.shape[0], generator=torch.Generator().manual_seed(0))]
        )
    assert weights_fingerprint(adapter) != before


# --- 11. Overwriting a result keeps the file's mode ---------------------------------------------


def test_overwriting_a_private_result_keeps_it_private(tmp_path):
    import os
    import stat

    path = tmp_path / "r.json"
    path.write_text("{}")
    os.chmod(path, 0o600)
    gl.Result("x", metrics={"a": 1.0}).to_json(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert gl.Result.from_json(path).metrics == {"a": 1.0}
    fresh = tmp_path / "new.json"
    gl.Result("x").to_json(fresh)
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~umask


# --- 15. A cached SAE is checked against the key it was made for ------------------------------


@pytest.fixture(scope="module")
def trained_entry(tmp_path_factory):
    """One small SAE trained on the tiny GPT-2 into a fresh cache, and how to ask for it."""
    from geomlens.sae.config import TrainingConfig
    from geomlens.sae.training import cached_sae

    model, tokenizer = tiny_gpt2()
    adapter = gl.attach(model, tokenizer=tokenizer)
    config = TrainingConfig(d_sae=16, tokens=256, batch_tokens=128, rows_per_chunk=8, max_length=16)
    texts = [row["text"] for row in analysis_class("activation-stats").example.rows()] * 3
    cache = tmp_path_factory.mktemp("sae-cache")

    def ask(cache_dir=cache, on=adapter):
        return cached_sae(on, SITE, corpus="test", data=texts, config=config, cache_dir=cache_dir)

    first = ask()
    assert not first.reused
    return ask, first.path, cache


def _copy_cache(cache, tmp_path):
    import shutil

    return shutil.copytree(cache, tmp_path / "cache")


def test_a_cached_sae_is_reused_only_for_its_own_key(trained_entry, tmp_path):
    ask, entry, cache = trained_entry
    assert ask().reused
    copy = _copy_cache(cache, tmp_path)
    key_file = copy / entry.name / "geomlens_cache_key.json"
    import json

    recorded = json.loads(key_file.read_text())
    key_file.write_text(json.dumps({**recorded, "site": "blocks.0.hook_resid_post"}))
    with pytest.raises(ValueError, match=rf"{copy / entry.name}.* another key .*site"):
        ask(copy)
    key_file.unlink()
    with pytest.raises(ValueError, match=rf"{copy / entry.name} records no key"):
        ask(copy)


def test_a_truncated_cached_sae_is_refused_with_its_path(trained_entry, tmp_path):
    ask, entry, cache = trained_entry
    weights = _copy_cache(cache, tmp_path) / entry.name / "sae_weights.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(
        ValueError, match=rf"SAE folder {weights.parent} cannot be read.*safetensors"
    ):
        ask(tmp_path / "cache")


def test_other_weights_under_the_same_model_name_get_their_own_entry(trained_entry):
    ask, entry, _ = trained_entry
    model, tokenizer = tiny_gpt2(seed=1)
    other = ask(on=gl.attach(model, tokenizer=tokenizer))
    assert other.path != entry and not other.reused


# --- 8. A plugin that claims a built-in's name is reported, never silently ignored ----------------


def _clashing_plugin(folder):
    """An installed distribution (a .dist-info, as pip writes) whose entry point names a class
    under the built-in name activation-stats."""
    (folder / "clash_plugin.py").write_text(
        "import geomlens as gl\n\nclass Clash(gl.Analysis):\n    name = 'activation-stats'\n"
    )
    info = folder / "clash_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: clash-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[geomlens.analyses]\nactivation-stats = clash_plugin:Clash\n"
    )
    return folder


def _geomlens(folder, *args):
    import os
    import subprocess
    import sys

    path = os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "geomlens", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
        timeout=300,
    )


def test_a_plugin_clashing_with_a_built_in_name_is_reported_by_list_and_run(tmp_path):
    folder = _clashing_plugin(tmp_path)
    listing = _geomlens(folder, "list")
    assert listing.returncode == 1
    assert "activation-stats" in listing.stdout and "clash_plugin:Clash" in listing.stdout
    data = tmp_path / "texts.txt"
    data.write_text("the cat\n")
    ran = _geomlens(folder, "run", "activation-stats", "--data", str(data),
                    "--out", str(tmp_path / "r.json"))  # fmt: skip
    assert ran.returncode == 2, ran.stderr
    errors = [line for line in ran.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "name 'activation-stats' is claimed twice" in errors[0]
    assert "clash_plugin:Clash" in errors[0] and not (tmp_path / "r.json").exists()
