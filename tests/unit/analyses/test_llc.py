"""llc: the user's model and the global generators untouched by the sampler, the models and
data it refuses, and what a user without devinterp sees. (Its numbers against devinterp's
own estimate: tests/unit/dynamics/test_llc_beside_alpha.py.) Tests that need devinterp skip,
saying so, where it is not installed (CI installs the extra)."""

from __future__ import annotations

import importlib.util
import random
import sys

import numpy as np
import pytest
import torch
from helpers.tiny_models import tiny_bert, tiny_gpt2, tiny_hooked_transformer, tiny_tokenizer
from typer.testing import CliRunner

import geomlens as gl
from geomlens.cli import app

HAS_DEVINTERP = importlib.util.find_spec("devinterp") is not None
needs_devinterp = pytest.mark.skipif(
    not HAS_DEVINTERP, reason='needs devinterp: pip install "geomlens[devinterp]"'
)


def _state(model: torch.nn.Module) -> dict:
    return {
        "weights": {k: v.detach().clone() for k, v in model.state_dict().items()},
        "grad": {k: p.requires_grad for k, p in model.named_parameters()},
        "modes": {k: m.training for k, m in model.named_modules()},
        "hooks": sum(
            len(m._forward_hooks) + len(m._forward_pre_hooks) + len(m._backward_hooks)
            for m in model.modules()
        ),  # fmt: skip
    }


@needs_devinterp
@pytest.mark.parametrize("backend", ["nnsight", "hooked-transformer"])
def test_sampling_leaves_the_users_model_and_the_global_generators_as_they_were(backend):
    if backend == "nnsight":
        model, tokenizer = tiny_gpt2()
        model.train()  # the user left it in train mode; frozen weights too
        model.transformer.wte.weight.requires_grad_(False)
        adapter = gl.attach(model, backend="nnsight", tokenizer=tokenizer)
    else:
        model = tiny_hooked_transformer()
        adapter = gl.attach(model, tokenizer=tiny_tokenizer())
    before = _state(model)
    numpy_state, python_state = np.random.get_state()[1].copy(), random.getstate()
    cls = gl.analysis_class("llc")
    result = gl.run("llc", adapter, cls.example.rows(), **cls.example.run_options())
    assert np.isfinite(result.metrics["summary.llc"])
    after = _state(model)
    assert after["grad"] == before["grad"] and after["modes"] == before["modes"]
    assert after["hooks"] == before["hooks"] and adapter.hook_count() == 0
    assert all(torch.equal(after["weights"][k], v) for k, v in before["weights"].items())
    assert np.array_equal(np.random.get_state()[1], numpy_state)
    assert random.getstate() == python_state


@needs_devinterp
def test_an_encoder_is_refused_in_one_line():
    model, tokenizer = tiny_bert()
    adapter = gl.attach(model, backend="nnsight", tokenizer=tokenizer)
    with pytest.raises(ValueError, match="causal language model") as error:
        gl.run("llc", adapter, ["the cat sat on the mat", "the dog sat"], batch_size=2)
    assert "\n" not in str(error.value) and "--model" in str(error.value)


@needs_devinterp
def test_data_too_short_for_one_batch_says_what_to_change():
    model, tokenizer = tiny_gpt2()
    adapter = gl.attach(model, backend="nnsight", tokenizer=tokenizer)
    with pytest.raises(ValueError, match="fewer than sgld_batch_size=8"):
        gl.run("llc", adapter, ["the cat sat", "the dog sat"], batch_size=2)


def test_without_devinterp_llc_is_listed_and_running_it_names_the_extra(
    tiny_gpt2_folder, tmp_path, monkeypatch
):
    monkeypatch.setitem(sys.modules, "devinterp", None)  # as if it were not installed
    runner = CliRunner()
    listed = runner.invoke(app, ["list"])
    assert listed.exit_code == 0 and "\nllc " in f"\n{listed.output}"
    out = tmp_path / "llc.json"
    ran = runner.invoke(app, ["run", "llc", "--model", str(tiny_gpt2_folder), "--out", str(out)])
    assert ran.exit_code == 2, ran.output
    message = ran.output.strip()
    assert len(message.splitlines()) == 1, message
    assert 'pip install "geomlens[devinterp]"' in message and not out.exists()
