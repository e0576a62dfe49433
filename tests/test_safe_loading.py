"""Safe loading: weights only from safetensors or ``torch.load(weights_only=True)``; code shipped
with a model runs only when the user passes trust_remote_code, which results record."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers.tiny_models import tiny_bert
from typer.testing import CliRunner

import geomlens as gl
from geomlens.cli import app

BACKENDS = ("nnsight", "transformer-lens")


class _RunsCodeWhenUnpickled:
    """Unpickling this object calls ``open(marker, "w")``: the file appearing proves code ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def _pickled_checkpoint(folder: Path, extra: dict | None = None) -> Path:
    """A tiny BERT whose weights are a torch pickle (pytorch_model.bin) instead of safetensors."""
    model, tokenizer = tiny_bert()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "model.safetensors").unlink()
    torch.save({**model.state_dict(), **(extra or {})}, folder / "pytorch_model.bin")
    return folder


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_pickle_carrying_code_is_refused_and_the_code_never_runs(tmp_path, backend):
    marker = tmp_path / "code-ran"
    folder = _pickled_checkpoint(tmp_path / "model", {"x": _RunsCodeWhenUnpickled(marker)})
    with pytest.raises(ValueError, match="Refused to load model .* pickle .* safetensors"):
        gl.load(folder, backend=backend)
    assert not marker.exists()


def test_the_cli_refuses_it_in_one_line(tmp_path):
    marker = tmp_path / "code-ran"
    folder = _pickled_checkpoint(tmp_path / "model", {"x": _RunsCodeWhenUnpickled(marker)})
    done = CliRunner().invoke(app, ["sites", str(folder)])
    assert done.exit_code == 2 and "Refused to load model" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not marker.exists()


def test_a_plain_tensor_pickle_still_loads_with_the_same_weights(tmp_path):
    folder = _pickled_checkpoint(tmp_path / "model")
    loaded = gl.load(folder, backend="nnsight")
    reference, _ = tiny_bert()
    got = dict(loaded.model.named_parameters()) if hasattr(loaded, "model") else {}
    for name, parameter in reference.named_parameters():
        match = [p for n, p in got.items() if n.endswith(name)]
        assert match and torch.equal(match[0].detach(), parameter.detach()), name


def test_remote_code_is_off_by_default_and_recorded(tmp_path):
    folder = tmp_path / "model"
    model, tokenizer = tiny_bert()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    # A config that asks for code shipped beside the weights (auto_map), as hub repos do.
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoModel": "modeling_custom.CustomModel"}
    (folder / "config.json").write_text(json.dumps(config))
    marker = tmp_path / "code-ran"
    (folder / "modeling_custom.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nfrom transformers import BertModel as CustomModel\n"
    )
    adapter = gl.load(folder)  # transformers ignores auto_map unless remote code is trusted
    assert not marker.exists()
    result = gl.run("activation-stats", adapter, ["the king sat"], site="hook_embed")
    assert result.provenance["trust_remote_code"] is False

    out = tmp_path / "r.json"
    done = CliRunner().invoke(
        app,
        ["run", "activation-stats", "--model", str(folder), "--site", "hook_embed",
         "--data", str(_texts(tmp_path)), "--out", str(out), "--trust-remote-code"],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    assert json.loads(out.read_text())["provenance"]["trust_remote_code"] is True
    assert marker.exists()  # the flag reached transformers: the shipped code ran this time
    assert np.isfinite(json.loads(out.read_text())["metrics"]["hook_embed.mean_norm"])


def _texts(folder: Path) -> Path:
    path = folder / "texts.txt"
    path.write_text("the king sat\na cat\n")
    return path
