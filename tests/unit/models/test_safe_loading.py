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


# --- Every place geomlens reads a file: a pickle carrying code there never runs ---


def _code_pickle(path: Path, marker: Path, wrap=lambda payload: payload) -> Path:
    """Write at ``path`` a torch pickle whose loading would create ``marker``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(wrap(_RunsCodeWhenUnpickled(marker)), path)
    return path


def _checkpoint_payload(code: object) -> dict:
    """A checkpoint as geomlens wrote them before plain state: a pickled dict of objects."""
    return {"format": 1, "arguments": {}, "progress": {}, "rng": {}, "states": [code]}


def _sae_folder(folder: Path, d_in: int = 8, d_sae: int = 16) -> Path:
    """A small SAE saved by sae-lens (cfg.json and sae_weights.safetensors)."""
    from sae_lens import StandardSAE, StandardSAEConfig

    StandardSAE(StandardSAEConfig(d_in=d_in, d_sae=d_sae)).save_model(str(folder))
    return folder


def _gpt2_folder(tmp_path: Path) -> Path:
    from helpers.saved_models import saved_model
    from helpers.tiny_models import tiny_gpt2

    return saved_model(tmp_path / "gpt2", tiny_gpt2)


def test_a_checkpoint_carrying_code_is_refused_by_gl_run_and_nothing_runs(tmp_path):
    marker = tmp_path / "code-ran"
    folder = tmp_path / "ckpt"
    _code_pickle(folder / "state-rank0-of-1.pt", marker, _checkpoint_payload)
    adapter = gl.load(_gpt2_folder(tmp_path), backend="nnsight")
    with pytest.raises(ValueError, match=r"Refused checkpoint .*state-rank0-of-1\.pt"):
        gl.run("activation-stats", adapter, ["the king sat", "a cat"], checkpoint=folder)
    assert not marker.exists()


def test_a_checkpoint_carrying_code_is_one_line_on_the_command_line(tmp_path):
    marker = tmp_path / "code-ran"
    folder = tmp_path / "ckpt"
    _code_pickle(folder / "state-rank0-of-1.pt", marker, _checkpoint_payload)
    done = CliRunner().invoke(
        app,
        ["run", "activation-stats", "--model", str(_gpt2_folder(tmp_path)),
         "--data", str(_texts(tmp_path)), "--out", str(tmp_path / "r.json"),
         "--checkpoint", str(folder)],
    )  # fmt: skip
    assert done.exit_code == 2, done.output
    errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and "state-rank0-of-1.pt" in errors[0], done.stderr
    assert "Traceback" not in done.output
    assert not marker.exists() and not (tmp_path / "r.json").exists()


def test_checkpoints_and_gathers_still_round_trip_every_state_exactly(tmp_path):
    """What replaced the pickle keeps what analyses hold: arrays, tuples, sets, odd keys."""
    from geomlens.plain_state import from_bytes, to_bytes
    from geomlens.stats import StreamingMoments

    state = {
        "moments": {"s": StreamingMoments(3, torch.arange(3.0), torch.ones(3))},
        "means": {("a", "b"): [np.arange(4, dtype=np.int32), np.float64(0.5)]},
        "labels": [(np.array(["x", "yy"]), np.array([1, None], dtype=object))],
        "seen": {"p", "q"},
        "rng": np.random.get_state(),
    }
    back = from_bytes(to_bytes(state), "cpu")
    assert torch.equal(back["moments"]["s"].mean, torch.arange(3.0))
    assert back["moments"]["s"].count == 3 and isinstance(back["moments"]["s"], StreamingMoments)
    assert back["means"][("a", "b")][0].dtype == np.int32
    assert back["means"][("a", "b")][1] == np.float64(0.5)
    assert back["labels"][0][0].tolist() == ["x", "yy"]
    assert back["labels"][0][1].tolist() == [1, None] and back["seen"] == {"p", "q"}
    assert back["rng"][0] == "MT19937" and np.array_equal(back["rng"][1], state["rng"][1])


def test_a_gathered_state_naming_an_unregistered_class_is_refused(tmp_path):
    from geomlens.plain_state import UnsafeStateError, from_bytes

    marker = tmp_path / "code-ran"
    import io

    buffer = io.BytesIO()
    torch.save({"__geomlens_plain__": "object", "cls": "os:system", "fields": {}}, buffer)
    with pytest.raises(UnsafeStateError, match="not a registered state class"):
        from_bytes(buffer.getvalue(), "cpu")
    buffer = io.BytesIO()
    torch.save([_RunsCodeWhenUnpickled(marker)], buffer)
    with pytest.raises(UnsafeStateError, match="never unpickles"):
        from_bytes(buffer.getvalue(), "cpu", "rank 1's state")
    assert not marker.exists()


def test_an_sae_folder_whose_weights_are_a_pickle_is_refused_and_nothing_runs(tmp_path):
    from geomlens.sae.loading import load_sae

    marker = tmp_path / "code-ran"
    folder = _sae_folder(tmp_path / "sae")
    _code_pickle(folder / "sae_weights.safetensors", marker)
    with pytest.raises(ValueError, match=str(folder)):
        load_sae(folder)
    assert not marker.exists()


def test_a_cache_entry_whose_weights_are_a_pickle_is_refused_and_nothing_runs(tmp_path):
    from helpers.tiny_models import tiny_gpt2

    from geomlens.sae.cache import cache_entry, publish_folder
    from geomlens.sae.config import TrainingConfig
    from geomlens.sae.training import cache_key, cached_sae

    model, tokenizer = tiny_gpt2()
    adapter = gl.attach(model, tokenizer=tokenizer)
    site, config = "blocks.0.hook_resid_post", TrainingConfig()
    key = cache_key(adapter, site, "c", config)  # the entry cached_sae looks for
    entry = cache_entry(key, tmp_path / "cache")
    marker = tmp_path / "code-ran"
    publish_folder(entry, _sae_folder, key)  # an entry that records its key, as geomlens writes
    _code_pickle(entry / "sae_weights.safetensors", marker)
    with pytest.raises(ValueError, match=str(entry)):
        cached_sae(
            adapter, site, corpus="c", data=["a b"], config=config, cache_dir=tmp_path / "cache"
        )
    assert not marker.exists()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_model_safetensors_file_that_is_a_pickle_is_refused_and_nothing_runs(tmp_path, backend):
    marker = tmp_path / "code-ran"
    folder = _gpt2_folder(tmp_path)
    _code_pickle(folder / "model.safetensors", marker)
    with pytest.raises(ValueError, match=str(folder)):
        gl.load(folder, backend=backend)
    assert not marker.exists()


def test_a_result_file_that_is_a_pickle_is_refused_and_nothing_runs(tmp_path):
    from geomlens.results import Result

    marker = tmp_path / "code-ran"
    path = _code_pickle(tmp_path / "result.json", marker)
    with pytest.raises(ValueError, match="not a geomlens result"):
        Result.from_json(path)
    assert not marker.exists()


def test_a_checkpoint_of_another_format_is_refused_naming_both_formats(tmp_path):
    """A checkpoint written by a geomlens whose states had other fields (format 1, before the
    concept and SAE states kept device sums) is refused in one line, not half-loaded."""
    from geomlens.engine.checkpoint import CHECKPOINT_FORMAT, Checkpoint
    from geomlens.plain_state import read_file, to_bytes

    folder = tmp_path / "ckpt"
    adapter = gl.load(_gpt2_folder(tmp_path), backend="nnsight")
    gl.run("activation-stats", adapter, ["the king sat", "a cat"], checkpoint=folder)
    path = folder / "state-rank0-of-1.pt"
    payload = read_file(path, "cpu")
    payload["format"] = CHECKPOINT_FORMAT - 1
    path.write_bytes(to_bytes(payload))
    checkpoint = Checkpoint(folder, payload["arguments"])
    with pytest.raises(ValueError, match=rf"format {CHECKPOINT_FORMAT - 1} .*reads format "):
        checkpoint.load("cpu")
