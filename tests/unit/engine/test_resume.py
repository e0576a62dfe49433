"""Checkpoint and resume: a run interrupted after some batches and resumed gives the result of
an uninterrupted run (for every analysis: the contract's ``resume`` check, tests/contract/);
other arguments or other data are refused."""

from __future__ import annotations

import pytest
from helpers.tiny_models import tiny_gpt2

import geomlens as gl
from geomlens.analyses.activation_stats import ActivationStats
from geomlens.analyses.example_rows import corpus_rows


@pytest.fixture(scope="module")
def adapter():
    hf_model, tokenizer = tiny_gpt2()
    return gl.attach(hf_model, backend="nnsight", tokenizer=tokenizer)


class Interrupted(RuntimeError):
    pass


def rows_then_failure(rows, fail_at):
    for number, row in enumerate(rows):
        if number == fail_at:
            raise Interrupted(f"stopped at row {number}")
        yield row


def test_an_analysis_failing_mid_run_resumes(adapter, tmp_path):
    rows = corpus_rows(20)

    class FailsOnce(ActivationStats):
        name = "fails-once"
        remaining = 3  # updates before it fails (class-wide, so the resumed run does not fail)

        def update(self, batch):
            if FailsOnce.remaining == 0:
                FailsOnce.remaining = -1
                raise Interrupted("analysis failed")
            FailsOnce.remaining -= 1
            super().update(batch)

    expected = gl.run("activation-stats", adapter, rows, batch_size=3)
    checkpoint = tmp_path / "ckpt"
    with pytest.raises(Interrupted):
        gl.run(FailsOnce(), adapter, rows, batch_size=3, checkpoint=checkpoint, checkpoint_every=1)
    resumed = gl.run(FailsOnce(), adapter, rows, batch_size=3, checkpoint=checkpoint)
    assert resumed.metrics == pytest.approx(expected.metrics, rel=1e-12)
    assert resumed.tables == expected.tables


def test_a_finished_checkpoint_reruns_without_a_forward_pass(adapter, tmp_path):
    rows = corpus_rows(9)
    first = gl.run("activation-stats", adapter, rows, batch_size=4, checkpoint=tmp_path)
    calls = []
    original = adapter.capture
    adapter.capture = lambda *a, **k: calls.append(1) or original(*a, **k)
    try:
        again = gl.run("activation-stats", adapter, rows, batch_size=4, checkpoint=tmp_path)
    finally:
        del adapter.capture
    assert calls == []
    assert again.metrics == first.metrics


def test_other_arguments_are_refused_naming_the_difference(adapter, tmp_path):
    rows = corpus_rows(9)
    gl.run("activation-stats", adapter, rows, batch_size=4, checkpoint=tmp_path)
    with pytest.raises(ValueError, match="batch_size: the checkpoint has 4, this run has 3"):
        gl.run("activation-stats", adapter, rows, batch_size=3, checkpoint=tmp_path)
    with pytest.raises(
        ValueError,
        match="analyses.activation-stats.pooling: the checkpoint has None, this run has 'mean'",
    ):
        gl.run("activation-stats", adapter, rows, batch_size=4, pooling="mean", checkpoint=tmp_path)
    with pytest.raises(ValueError, match="seed"):
        gl.run("activation-stats", adapter, rows, batch_size=4, seed=1, checkpoint=tmp_path)


def test_other_data_are_refused(adapter, tmp_path):
    rows = corpus_rows(12)
    with pytest.raises(Interrupted):
        gl.run("activation-stats", adapter, rows_then_failure(rows, 9), batch_size=4,
               checkpoint=tmp_path, checkpoint_every=1)  # fmt: skip
    changed = [dict(row) for row in rows]
    changed[5]["text"] = "the dog"
    with pytest.raises(ValueError, match="data differ from the checkpointed run"):
        gl.run("activation-stats", adapter, iter(changed), batch_size=4, checkpoint=tmp_path)


def test_bad_checkpoint_settings(adapter, tmp_path):
    with pytest.raises(ValueError, match="checkpoint_every must be at least 1"):
        gl.run("activation-stats", adapter, ["the cat"], checkpoint=tmp_path, checkpoint_every=0)
    path = tmp_path / "file"
    path.write_text("x")
    with pytest.raises(ValueError, match="not a directory"):
        gl.run("activation-stats", adapter, ["the cat"], checkpoint=path)


def test_cli_scale_flags_are_checked_before_any_work(tmp_path):
    from typer.testing import CliRunner

    from geomlens.cli import app

    runner = CliRunner()
    out = str(tmp_path / "r.json")
    bad_dtype = runner.invoke(app, ["run", "activation-stats", "--dtype", "float8", "--out", out])
    assert bad_dtype.exit_code == 2
    assert "--dtype must be float32, bfloat16 or float16" in bad_dtype.output
    bad_every = runner.invoke(
        app, ["run", "activation-stats", "--checkpoint-every", "0", "--out", out]
    )
    assert bad_every.exit_code == 2
    assert "--checkpoint-every must be at least 1" in bad_every.output
