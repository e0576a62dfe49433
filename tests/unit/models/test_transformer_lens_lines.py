"""The TransformerLens backend on whichever TransformerLens line is installed (3.x or 4.x), and
without TransformerLens at all: the nnsight backend then works, nothing imports TransformerLens
before its backend is asked for, and asking for it names the extra to install.

The suite's main environment has TransformerLens 3 (beside sae-lens); .ci/run's second
environment runs this file with TransformerLens 4 and no sae-lens."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from importlib.metadata import version

import numpy as np
import pytest
import torch
from helpers.paths import REPO
from helpers.tiny_models import tiny_bert, tiny_gpt2
from packaging.version import Version

import geomlens as gl
from geomlens.inputs.encoding import encode_token_ids
from geomlens.models.transformer_lens import MODEL_CLASSES, TransformerLensAdapter

TL_MAJOR = Version(version("transformer-lens")).major
ROWS = [[5, 6, 7, 8], [9, 10, 11]]

#: Run first in a child process: TransformerLens and sae-lens (which imports it) cannot be
#: found, as where neither is installed.
BLOCK_TRANSFORMER_LENS = """
import importlib.abc, sys

class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("transformer_lens", "sae_lens"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Absent())
"""

#: In the child: the nnsight backend on a tiny GPT-2 against the model's own hidden states,
#: whether TransformerLens was imported by then, then each way of asking for the TL backend.
PROBE = """
import json, sys
import numpy as np, torch
sys.path.insert(0, {tests!r})
from helpers.tiny_models import tiny_gpt2
import geomlens as gl
from geomlens.inputs.encoding import encode_token_ids

model, tokenizer = tiny_gpt2()
adapter = gl.attach(model, backend="nnsight", tokenizer=tokenizer)
inputs = encode_token_ids([[5, 6, 7, 8]], np.arange(1))
captured = adapter.capture(inputs, ["blocks.0.hook_resid_post"])["blocks.0.hook_resid_post"]
with torch.no_grad():
    hidden = model(inputs.input_ids, output_hidden_states=True).hidden_states[1]
report = {{
    "nnsight_error": float((captured - hidden).abs().max()),
    "imported_before": sorted(m for m in sys.modules if m.split(".")[0] == "transformer_lens"),
    "errors": {{}},
}}
asks = {{
    "attach": lambda: gl.attach(model, backend="transformer-lens", tokenizer=tokenizer),
    "load": lambda: gl.load(backend="transformer-lens"),
    "sae": lambda: __import__("geomlens.sae.training"),
}}
for what, ask in asks.items():
    try:
        ask()
    except ImportError as error:
        report["errors"][what] = f"{{type(error).__name__}}: {{error}}"
    else:
        report["errors"][what] = None
print(json.dumps(report))
"""


def probe(*, block: bool) -> dict:
    script = (BLOCK_TRANSFORMER_LENS if block else "") + PROBE.format(tests=str(REPO / "tests"))
    ran = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    return json.loads(ran.stdout.strip().splitlines()[-1])


def test_without_transformer_lens_nnsight_works_and_the_backend_names_the_extra():
    report = probe(block=True)
    assert report["nnsight_error"] < 1e-5
    for what in ("attach", "load"):
        error = report["errors"][what]
        assert error is not None, f"{what} gave a TransformerLens adapter without TransformerLens"
        assert error.startswith("ModuleNotFoundError: The TransformerLens backend needs "), error
        assert "pip install 'geomlens[transformer-lens]'" in error, error
        assert "\n" not in error, error
    assert "pip install 'geomlens[sae]'" in report["errors"]["sae"]


def test_nothing_imports_transformer_lens_until_its_backend_is_asked_for():
    report = probe(block=False)
    assert report["nnsight_error"] < 1e-5
    assert report["imported_before"] == []
    assert report["errors"]["attach"] is None  # installed here, so the backend attaches


def test_the_installed_line_decides_which_models_the_backend_runs():
    from transformer_lens.model_bridge import TransformerBridge

    expected: tuple[type, ...] = (TransformerBridge,)
    if TL_MAJOR < 4:
        from transformer_lens import HookedTransformer

        expected = (HookedTransformer, TransformerBridge)
    assert expected == MODEL_CLASSES
    with pytest.raises(TypeError, match=r"runs (HookedTransformer and )?TransformerBridge models"):
        TransformerLensAdapter(torch.nn.Linear(2, 2))


@pytest.mark.parametrize("family", ["gpt2", "bert"])
def test_a_bridge_counts_only_the_hooks_geomlens_adds(family):
    """TransformerLens 4 ties a BERT bridge's MLP HookPoints together with permanent hooks: the
    model's wiring, not a hook left behind; a hook added through TransformerLens is counted."""
    model, tokenizer = {"gpt2": tiny_gpt2, "bert": tiny_bert}[family]()
    adapter = gl.attach(model, backend="transformer-lens", tokenizer=tokenizer)
    assert adapter.hook_count() == 0
    inputs = encode_token_ids(ROWS, np.arange(len(ROWS)), padding_side="left")
    with adapter.intervene("blocks.0.mlp.hook_post", lambda act: act * 0.5):
        adapter.capture(inputs, ["blocks.1.hook_resid_post"])
    assert adapter.hook_count() == 0
    hook_point = adapter.hook_points()["blocks.0.hook_resid_post"]
    hook_point.add_hook(lambda activation, hook: activation, dir="fwd")
    try:
        assert adapter.hook_count() == 1
    finally:
        hook_point.remove_hooks("fwd")
    assert adapter.hook_count() == 0
