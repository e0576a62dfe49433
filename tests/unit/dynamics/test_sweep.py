"""gl.sweep on a real training run: cached and resumable, the table rebuilt from the Result
files, both backends, the files it writes."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

import geomlens as gl
import geomlens.engine
from geomlens.experiments import two_factor_lm

FAST = {"n_bootstrap": 0, "n_shuffles": 0}


class Stop(Exception):
    """Stands for a sweep killed mid-way."""


def counting_run(monkeypatch, stop_after=None):
    """Wrap the engine's run (what gl.run is): record each checkpoint measured, and fail after ``stop_after`` of them."""
    calls: list[str] = []
    real = geomlens.engine.run

    def run(analyses, adapter, *args, **kwargs):
        if stop_after is not None and len(calls) == stop_after:
            raise Stop
        calls.append(adapter.model_id)
        return real(analyses, adapter, *args, **kwargs)

    monkeypatch.setattr(geomlens.engine, "run", run)
    return calls


def test_a_stopped_sweep_resumes_with_only_the_rest(tiny_lm_run, tmp_path, monkeypatch):
    data = two_factor_lm.concept_data()
    whole = gl.sweep(
        "abstraction", tiny_lm_run, data, out=tmp_path / "whole", progress=False, **FAST
    )
    assert len(whole.measured) == 24

    stopped = tmp_path / "stopped"
    counting_run(monkeypatch, stop_after=7)
    with pytest.raises(Stop):
        gl.sweep("abstraction", tiny_lm_run, data, out=stopped, progress=False, **FAST)
    written = sorted(p.parent.name for p in (stopped / "checkpoints").rglob("abstraction.json"))
    assert len(written) == 7
    assert not list(stopped.rglob("*.tmp"))  # whole Result files only
    monkeypatch.undo()

    calls = counting_run(monkeypatch)
    resumed = gl.sweep("abstraction", tiny_lm_run, data, out=stopped, progress=False, **FAST)
    assert len(calls) == 17
    assert {label for label, _ in resumed.measured}.isdisjoint(written)
    for name in ("trajectory.csv", "trajectory.json"):
        assert (stopped / name).read_bytes() == (tmp_path / "whole" / name).read_bytes()

    # A full rerun runs no forward pass.
    calls.clear()
    again = gl.sweep("abstraction", tiny_lm_run, data, out=stopped, progress=False, **FAST)
    assert calls == [] and again.measured == []
    assert (stopped / "trajectory.csv").read_bytes() == (
        tmp_path / "whole" / "trajectory.csv"
    ).read_bytes()


def test_rewritten_weights_are_measured_again_and_only_they(tiny_lm_copy, tmp_path, monkeypatch):
    data = two_factor_lm.concept_data()
    out = tmp_path / "sweep"
    gl.sweep("abstraction", tiny_lm_copy, data, out=out, progress=False, **FAST)
    weights = tiny_lm_copy / "checkpoint-30" / "model.safetensors"
    tensors = load_file(str(weights))
    name = next(k for k in tensors if k.endswith("wte.weight"))
    tensors[name] = tensors[name] * 1.5
    save_file(tensors, str(weights), metadata={"format": "pt"})
    calls = counting_run(monkeypatch)
    rerun = gl.sweep("abstraction", tiny_lm_copy, data, out=out, progress=False, **FAST)
    assert [label for label, _ in rerun.measured] == ["checkpoint-30"]
    assert len(calls) == 1
    # Another option is another key: everything is measured again; force measures everything.
    calls.clear()
    gl.sweep("abstraction", tiny_lm_copy, data, out=out, progress=False, seed=1, **FAST)
    assert len(calls) == 24
    calls.clear()
    gl.sweep("abstraction", tiny_lm_copy, data, out=out, progress=False, seed=1, force=True, **FAST)
    assert len(calls) == 24


def test_backends_agree_on_the_tiny_gpt2_series(tiny_lm_run):
    data = two_factor_lm.concept_data()
    chosen = gl.series(tiny_lm_run, select="log:8")
    outcomes = {
        backend: gl.sweep(
            ["abstraction", "ccgp"],
            gl.series(tiny_lm_run, select="log:8", backend=backend),
            data,
            progress=False,
            figures=False,
            **FAST,
        )  # fmt: skip
        for backend in ("nnsight", "transformer-lens")
    }
    nnsight, lens = (outcomes[b].rows for b in ("nnsight", "transformer-lens"))
    assert len(nnsight) == len(lens) == len(chosen) * 3 * 3  # α, ccgp, within-context at 3 sites
    for ours, theirs in zip(nnsight, lens):
        assert (ours["checkpoint"], ours["site"], ours["metric"]) == (
            theirs["checkpoint"], theirs["site"], theirs["metric"],
        )  # fmt: skip
        assert ours["value"] == pytest.approx(theirs["value"], abs=1e-5)


def test_the_files_a_sweep_writes(tiny_lm_run, tmp_path):
    out = tmp_path / "sweep"
    outcome = gl.sweep(
        ["abstraction", "ccgp"], gl.series(tiny_lm_run, select="log:6"),
        two_factor_lm.concept_data(), out=out, progress=False, **FAST,
    )  # fmt: skip
    record = json.loads((out / "sweep.json").read_text())
    assert record["analyses"] == ["abstraction", "ccgp"]
    assert record["theory"]["level"] == "laws" and "need not hold" in record["theory"]["note"]
    assert len(record["series"]["checkpoints"]) == len(outcome.rows) // 9
    for label in (c["label"] for c in record["series"]["checkpoints"]):
        for name in ("abstraction", "ccgp"):
            result = gl.Result.from_json(out / "checkpoints" / label / f"{name}.json")
            assert result.provenance["sweep"]["label"] == label
    assert (out / "abstraction.png").stat().st_size > 0 and (out / "ccgp.png").stat().st_size > 0
    header = (out / "trajectory.csv").read_text().splitlines()[0]
    assert header.startswith("checkpoint,seed,step,time,analysis,site,task,metric,value")
    # The per-layer law through the first and last layer, as a diagnostic, at the middle one.
    middle = [
        r
        for r in outcome.rows
        if r["site"] == "blocks.1.hook_resid_post" and r["metric"] == "alpha"
    ]
    assert all(r["theory_layer_law"] is not None for r in middle)
    assert outcome.to_frame().shape == (len(outcome.rows), 19)


def test_modules_in_memory_sweep_without_a_folder():
    torch.manual_seed(0)
    modules = [torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.ReLU()) for _ in range(3)]
    data = {
        "inputs": {"x": torch.randn(16, 4).numpy()},
        "concept": ["a", "b"] * 8,
        "context": ["c1"] * 8 + ["c2"] * 8,
    }
    outcome = gl.sweep(
        "abstraction", gl.series(modules), data, progress=False, site="module:0", **FAST
    )
    assert [r["step"] for r in outcome.rows] == [0, 1, 2]
    assert outcome.out is None and len(outcome.measured) == 3


def test_without_data_the_first_analysiss_shipped_data(tiny_lm_run):
    """No data: the sweep reads abstraction's shipped English concept sets. The tiny LM's own
    vocabulary holds none of their words, so its tokenizer reads the rows of a set alike (one
    unknown token each): abstraction refuses them as duplicates, naming a shipped set and
    saying why, rather than measuring α on copies."""
    from geomlens.analyses.statistics.duplicates import DuplicateRowsError
    from geomlens.data.concepts import english_concepts

    shipped = set(english_concepts()["task"])
    with pytest.raises(DuplicateRowsError, match="tokenizer reads them alike") as refused:
        gl.sweep(
            "abstraction", gl.series(tiny_lm_run, every=23), progress=False, figures=False, **FAST
        )
    assert any(f"(task {task})" in str(refused.value) for task in shipped), refused.value
