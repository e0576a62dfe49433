"""gl.series: the checkpoints of one model, from folders, lists, modules or hub revisions."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

import geomlens as gl
from geomlens.dynamics import series as series_module
from geomlens.experiments.checkpoint_steps import spec_steps, thin_indices


def test_a_trainer_folder_gives_its_checkpoints_in_step_order(tiny_lm_run):
    found = gl.series(tiny_lm_run)
    assert len(found) == 24
    assert [c.step for c in found] == list(range(0, 47, 2))
    assert found[0].label == "checkpoint-0" and found[-1].label == "checkpoint-46"
    assert all(c.kind == "folder" for c in found)


def test_sub_folder_names_and_trainer_state(tiny_lm_copy, tmp_path):
    # epoch-N / step-N / global_step-N are recognised; trainer_state.json's global_step wins.
    for old, new in (("checkpoint-2", "epoch-1"), ("checkpoint-4", "step-4"),
                     ("checkpoint-6", "global_step-6")):  # fmt: skip
        (tiny_lm_copy / old).rename(tiny_lm_copy / new)
    found = gl.series(tiny_lm_copy)
    by_label = {c.label: c.step for c in found}
    assert by_label["epoch-1"] == 2  # from trainer_state.json, not the epoch number
    assert by_label["step-4"] == 4 and by_label["global_step-6"] == 6


def test_an_explicit_list_of_folders_with_steps(tiny_lm_run):
    folders = [tiny_lm_run / "checkpoint-10", tiny_lm_run / "checkpoint-0"]
    found = gl.series(folders, steps=[100, 0])
    assert [(c.label, c.step) for c in found] == [("checkpoint-0", 0), ("checkpoint-10", 100)]
    by_name = gl.series(folders)
    assert [c.step for c in by_name] == [0, 10]
    with pytest.raises(ValueError, match="2 checkpoints"):
        gl.series(folders, steps=[1])


def test_modules_in_memory_are_a_series_with_content_digests():
    torch.manual_seed(0)
    modules = [torch.nn.Linear(3, 2) for _ in range(3)]
    found = gl.series(modules, steps=[0, 5, 10])
    assert [c.label for c in found] == ["step-0", "step-5", "step-10"]
    digests = {found.weights_digest(c) for c in found}
    assert len(digests) == 3
    mapping = gl.series({7: modules[0], 3: modules[1]})
    assert [c.step for c in mapping] == [3, 7]


def test_select_and_every_thin_a_series(tiny_lm_run):
    found = gl.series(tiny_lm_run)
    assert [c.step for c in found.every(5)] == [0, 10, 20, 30, 40, 46]
    thinned = gl.series(tiny_lm_run, select="log:6")
    steps = [c.step for c in thinned]
    assert steps[0] == 0 and steps[-1] == 46 and 4 <= len(steps) <= 6
    assert steps == sorted(steps)
    with pytest.raises(ValueError, match="log:N"):
        found.select("sometimes")


def test_checkpoint_selections():
    assert spec_steps("every:10", 25) == [0, 10, 20, 25]
    log = spec_steps("log:40", 3000)
    assert log[0] == 0 and log[-1] == 3000 and 30 <= len(log) <= 40
    assert thin_indices([0, 1, 2, 3, 4], "every:2") == [0, 2, 4]


def test_a_tokenizer_that_changes_along_the_series_is_refused(tiny_lm_copy):
    tokenizer_file = tiny_lm_copy / "checkpoint-20" / "tokenizer.json"
    content = json.loads(tokenizer_file.read_text())
    content["model"]["vocab"]["zebra"] = len(content["model"]["vocab"])
    tokenizer_file.write_text(json.dumps(content))
    with pytest.raises(ValueError, match="tokenizer changes along the series") as error:
        gl.series(tiny_lm_copy)
    assert "checkpoint-20" in str(error.value) or "checkpoint-0" in str(error.value)


def test_a_series_mixing_architectures_is_refused(tiny_lm_copy):
    config_file = tiny_lm_copy / "checkpoint-12" / "config.json"
    config = json.loads(config_file.read_text())
    config["n_layer"] = 5
    config_file.write_text(json.dumps(config))
    with pytest.raises(ValueError, match="mixes architectures"):
        gl.series(tiny_lm_copy)


def test_revision_tables_are_transformer_lens_labels():
    assert len(series_module.pythia_steps()) == 154
    assert series_module.pythia_steps()[:12] == [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000]
    hub = gl.series("EleutherAI/pythia-70m", revisions="pythia", select="log:20")
    assert hub[0].revision == "step0" and hub[-1].revision == "step143000"
    assert all(c.kind == "hub" for c in hub)
    crfm = gl.series("stanford-crfm/alias-gpt2-small-x21", revisions="stanford-crfm")
    assert crfm[1].revision == "checkpoint-10"


def fake_hub_cache(cache, repository, revisions):
    """A Hugging Face cache holding ``repository`` at each {revision: folder}, as the hub
    client lays it out (refs/NAME → commit, snapshots/COMMIT/files)."""
    root = cache / ("models--" + repository.replace("/", "--"))
    commits = {}
    for number, (name, source) in enumerate(revisions.items()):
        commit = f"{number + 1:040x}"
        (root / "refs").mkdir(parents=True, exist_ok=True)
        (root / "refs" / name).write_text(commit)
        shutil.copytree(source, root / "snapshots" / commit)
        commits[name] = commit
    return commits


def test_hub_revisions_load_offline_and_record_the_commit(tiny_lm_run, tmp_path, monkeypatch):
    from huggingface_hub import constants

    commits = fake_hub_cache(
        tmp_path / "hub",
        "geomlens-test/tiny",
        {"step0": tiny_lm_run / "checkpoint-0", "step46": tiny_lm_run / "checkpoint-46"},
    )
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    adapter = gl.load("geomlens-test/tiny", revision="step46")
    assert adapter.model_source == {
        "origin": "hub",
        "repository": "geomlens-test/tiny",
        "revision": "step46",
        "commit": commits["step46"],
    }
    assert adapter.describe()["model_source"]["commit"] == commits["step46"]
    hub = gl.series("geomlens-test/tiny", revisions=["step0", "step46"])
    assert [c.step for c in hub] == [0, 46]
    assert hub.weights_digest(hub[1]) == "commit:" + commits["step46"]
    from geomlens.experiments.two_factor_lm import concept_data

    outcome = gl.sweep(
        "abstraction", hub, concept_data(), out=tmp_path / "sweep", progress=False,
        n_bootstrap=0, n_shuffles=0,
    )  # fmt: skip
    result = outcome.results["step46"]["abstraction"]
    assert result.provenance["model_source"]["commit"] == commits["step46"]
    assert result.provenance["sweep"]["weights"] == "commit:" + commits["step46"]
    with pytest.raises(ValueError, match="local folder"):
        gl.load(str(tiny_lm_run / "checkpoint-0"), revision="main")
