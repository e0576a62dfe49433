"""Fault injection: every built-in analysis on both model backends, hit by an exception inside
``update`` at a random batch, by a data source that raises, and by a KeyboardInterrupt in the
middle of a forward pass. Each leaves no hook of ours, every parameter and buffer bitwise
unchanged, every module's train/eval mode as it was, and no file behind."""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers.saved_models import saved_model
from helpers.tiny_models import tiny_gpt2, tiny_hooked_transformer, tiny_tokenizer
from typer.testing import CliRunner

import geomlens as gl
from geomlens.analyses.registry import builtin_analyses
from geomlens.models.adapter import count_torch_hooks

SITE = "blocks.1.hook_resid_post"
WORDS = ["king", "queen", "man", "woman", "cat", "dog", "boy", "girl"]
ROWS = 8
BATCH = 2


def rows() -> list[dict]:
    """Eight rows with every column a built-in analysis reads (text, concept, context,
    coordinate, condition)."""
    return [
        {
            "text": f"the {WORDS[i]} sat on the mat in {1630 + 10 * i}",
            "concept": "royal" if i % 2 else "common",
            "context": "first" if i < ROWS // 2 else "second",
            "coordinate": float(i),
            "condition": "calibration" if i < ROWS // 2 else "heldout",
        }
        for i in range(ROWS)
    ]


def options(name: str) -> dict:
    """The analysis's example options, at the site the example names (the faults stop every run
    before its finalise, so the example's small settings serve)."""
    cls = gl.analysis_class(name)
    chosen = cls.example.analysis_options()
    if "site" in {f.name for f in dataclasses.fields(cls.Config)}:
        chosen["site"] = cls.example.site
    return chosen


def make_model(backend: str) -> tuple[gl.Adapter, torch.nn.Module]:
    """(adapter, the user's model) on each backend; the user left the model in train mode."""
    if backend == "hooked-transformer":
        model = tiny_hooked_transformer()
        adapter = gl.attach(model, tokenizer=tiny_tokenizer())
        model.train()
        model.blocks[0].eval()  # modes mixed on purpose: each must come back as it was
        return adapter, model
    model, tokenizer = tiny_gpt2()
    model.train()
    model.transformer.h[0].eval()
    if backend == "nnsight":
        return gl.attach(model, tokenizer=tokenizer), model
    adapter = gl.attach(model, tokenizer=tokenizer, backend="transformer-lens")
    # The TransformerBridge wires capture hooks of its own on its first forward and keeps them;
    # those are the bridge's, not ours: a clean run first.
    gl.run("activation-stats", adapter, ["the cat"], site=SITE, progress=False)
    return adapter, model


def snapshot(adapter: gl.Adapter, model: torch.nn.Module) -> dict:
    """State, modes and hooks of the user's model and of the module the adapter runs (nnsight
    runs a weight-sharing twin; TransformerLens the user's own HookedTransformer)."""
    modules = {"user's": model, "running": adapter.model}
    return {
        "state": {
            (which, k): v.detach().clone()
            for which, module in modules.items()
            for k, v in module.state_dict().items()
        },
        "modes": {
            (which, name): m.training
            for which, module in modules.items()
            for name, m in module.named_modules()
        },
        "hooks": {which: count_torch_hooks(module) for which, module in modules.items()},
        "grad": torch.is_grad_enabled(),
    }


def assert_untouched(adapter: gl.Adapter, model: torch.nn.Module, before: dict) -> None:
    after = snapshot(adapter, model)
    assert adapter.hook_count() == 0
    assert after["hooks"] == before["hooks"]
    assert after["modes"] == before["modes"]
    assert after["grad"] == before["grad"]
    assert after["state"].keys() == before["state"].keys()
    for key, value in before["state"].items():
        assert torch.equal(after["state"][key], value), key  # bitwise: same values, same dtype


def exploding(analysis: gl.Analysis, at_batch: int, after_update: bool) -> gl.Analysis:
    """``analysis`` whose ``update`` raises at batch ``at_batch`` (before or after its own
    update ran on that batch, so a half-updated state is covered too)."""
    seen = [0]
    original = analysis.update

    def update(batch):
        if after_update:
            original(batch)
        if seen[0] == at_batch:
            raise RuntimeError(f"injected failure in update at batch {at_batch}")
        seen[0] += 1
        if not after_update:
            original(batch)

    analysis.update = update  # type: ignore[method-assign]
    return analysis


def failing_rows(at_row: int) -> Iterator[dict]:
    for number, row in enumerate(rows()):
        if number == at_row:
            raise OSError(f"injected failure of the data source at row {at_row}")
        yield row


def interrupt_on_forward(model: torch.nn.Module, at_call: int):
    """A forward hook deep in the model raising KeyboardInterrupt on its ``at_call``-th call
    (mid-forward: inside the engine's capture, or inside an analysis's own extra pass)."""
    block = model.get_submodule(
        "transformer.h.1.mlp" if hasattr(model, "transformer") else "blocks.1.mlp"
    )
    calls = [0]

    def hook(*_):
        calls[0] += 1
        if calls[0] == at_call:
            raise KeyboardInterrupt

    return block.register_forward_hook(hook)


ANALYSES = builtin_analyses()
# TransformerLens both ways: its own HookedTransformer, and a Hugging Face model bridged.
BACKENDS = ("nnsight", "hooked-transformer", "bridge")
FAULTS = ("update", "source", "interrupt")


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ANALYSES)
def test_a_fault_leaves_the_model_untouched(name, backend, fault, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # any stray file would land here
    chooser = random.Random(f"{name}/{backend}/{fault}")
    adapter, model = make_model(backend)
    analysis = gl.analysis_class(name)(**options(name))
    data: object = rows()
    handle = None
    if fault == "update":
        analysis = exploding(analysis, chooser.randrange(ROWS // BATCH), chooser.random() < 0.5)
        expected: type[BaseException] = RuntimeError
    elif fault == "source":
        data = failing_rows(chooser.randrange(1, ROWS))
        expected = OSError
    else:
        handle = interrupt_on_forward(adapter.model, chooser.randrange(1, ROWS // BATCH + 1))
        expected = KeyboardInterrupt
    before = snapshot(adapter, model)
    if handle is not None:  # the test's own interrupting hook (removed below) is not ours
        before["hooks"] = {k: v - (k == "running") for k, v in before["hooks"].items()}
        if adapter.model is model:
            before["hooks"]["user's"] -= 1
    try:
        with pytest.raises(expected):
            gl.run(analysis, adapter, data, batch_size=BATCH)
    finally:
        if handle is not None:
            handle.remove()
    assert_untouched(adapter, model, before)
    assert list(tmp_path.iterdir()) == []


# -- through the CLI: a failed run leaves no result file --------------------------------------
@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return saved_model(tmp_path_factory.mktemp("tiny-gpt2"), tiny_gpt2)


def test_cli_run_broken_mid_stream_writes_no_result(model_dir, tmp_path):
    data = tmp_path / "data.jsonl"
    good = [json.dumps({"text": row["text"]}) for row in rows()]
    data.write_text("\n".join([*good[:5], "{not json", *good[5:]]) + "\n")
    out = tmp_path / "result.json"
    done = CliRunner().invoke(
        gl_app(),
        ["run", "activation-stats", "--model", str(model_dir), "--data", str(data),
         "--batch-size", "2", "--out", str(out)],
    )  # fmt: skip
    assert done.exit_code == 2, done.output
    assert "data.jsonl:6 is not valid JSON" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.jsonl"]


def test_cli_interrupted_run_writes_no_result(model_dir, tmp_path, monkeypatch):
    from geomlens.analyses.activation_stats import ActivationStats

    def interrupted(self, batch):
        raise KeyboardInterrupt

    monkeypatch.setattr(ActivationStats, "update", interrupted)
    data = tmp_path / "texts.txt"
    data.write_text("\n".join(row["text"] for row in rows()) + "\n")
    out = tmp_path / "result.json"
    done = CliRunner().invoke(
        gl_app(), ["run", "activation-stats", "--model", str(model_dir), "--out", str(out),
                   "--data", str(data)],
    )  # fmt: skip
    assert done.exit_code == 130
    assert "interrupted" in done.stderr and "Traceback" not in done.output
    assert [p.name for p in tmp_path.iterdir()] == ["texts.txt"]


def test_an_input_longer_than_the_model_takes_is_explained(model_dir, tmp_path):
    data = tmp_path / "long.txt"
    data.write_text(" ".join(["the"] * 80) + "\n")  # the tiny GPT-2 has 64 positions
    done = CliRunner().invoke(
        gl_app(), ["run", "activation-stats", "--model", str(model_dir), "--data", str(data),
                   "--out", str(tmp_path / "r.json")],
    )  # fmt: skip
    assert done.exit_code == 2
    assert "has 80 tokens" in done.stderr and "--max-length 64" in done.stderr
    assert not (tmp_path / "r.json").exists()


def gl_app():
    from geomlens.cli import app

    return app


def test_the_injected_faults_are_real():
    """The injection helpers themselves do fire (else the tests above would prove nothing)."""
    with pytest.raises(OSError, match="row 3"):
        list(failing_rows(3))
    analysis = exploding(gl.analysis_class("activation-stats")(site=SITE), 1, False)
    adapter, model = make_model("nnsight")
    with pytest.raises(RuntimeError, match="batch 1"):
        gl.run(analysis, adapter, rows(), batch_size=BATCH)
    assert np.isfinite(gl.run("activation-stats", adapter, rows(), site=SITE)[f"{SITE}.rows"])
