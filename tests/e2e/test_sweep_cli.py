"""`geomlens experiment` and `geomlens sweep` end to end, and their bad-input errors: one line
``error: …``, exit code 2, nothing written."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from geomlens.cli import app
from geomlens.experiments import two_factor_lm

runner = CliRunner()
FAST = ["--option", "n_bootstrap=0", "--option", "n_shuffles=0"]


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lm") / "run"
    two_factor_lm.train(two_factor_lm.TinyLMConfig(steps=4, checkpoints="every:2"), folder)
    return folder


def test_experiment_then_sweep_with_the_exact_theory(tmp_path):
    run = tmp_path / "run"
    done = runner.invoke(
        app,
        ["experiment", "abstraction-dynamics", "--steps", "400", "--checkpoints", "every:20",
         "--out", str(run)],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "wrote 21 checkpoints and run.json" in done.output
    sweep = tmp_path / "sweep"
    done = runner.invoke(
        app, ["sweep", "abstraction", "--series", str(run), "--out", str(sweep), *FAST]
    )
    assert done.exit_code == 0, done.output
    assert "measured 21 of 21 checkpoints" in done.output and "exact theory: α_max" in done.output
    record = json.loads((sweep / "sweep.json").read_text())
    assert record["theory"]["level"] == "exact" and record["state"] == "complete"
    assert record["theory"]["exact"]["origin"].startswith("run.json")
    assert (sweep / "abstraction.png").is_file() and (sweep / "trajectory.csv").is_file()
    again = runner.invoke(
        app, ["sweep", "abstraction", "--series", str(run), "--out", str(sweep), *FAST]
    )
    assert "measured 0 of 21 checkpoints (21 cached)" in again.output


def error_line(done):
    assert done.exit_code == 2, done.output
    lines = [line for line in done.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), done.output
    return lines[0]


def sweep_of(series, out, *extra):
    return runner.invoke(
        app, ["sweep", "abstraction", "--series", str(series), "--out", str(out), *FAST, *extra]
    )


def test_an_empty_folder(tmp_path):
    (tmp_path / "empty").mkdir()
    line = error_line(sweep_of(tmp_path / "empty", tmp_path / "out"))
    assert "is empty" in line
    assert not (tmp_path / "out").exists()


def test_a_folder_without_checkpoints(tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.txt").write_text("no weights here")
    (tmp_path / "notes" / "final").mkdir()
    line = error_line(sweep_of(tmp_path / "notes", tmp_path / "out"))
    assert "no recognisable checkpoints" in line and "checkpoint-N" in line
    assert not (tmp_path / "out").exists()


def test_a_checkpoint_whose_weights_do_not_load(small_run, tmp_path):
    series = shutil.copytree(small_run, tmp_path / "run")
    weights = series / "checkpoint-2" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    line = error_line(sweep_of(series, tmp_path / "out"))
    assert "checkpoint-2" in line and "do not load" in line
    assert not (tmp_path / "out").exists()


def test_a_series_mixing_architectures(small_run, tmp_path):
    series = shutil.copytree(small_run, tmp_path / "run")
    config = json.loads((series / "checkpoint-4" / "config.json").read_text())
    config["n_embd"] = 64
    (series / "checkpoint-4" / "config.json").write_text(json.dumps(config))
    line = error_line(sweep_of(series, tmp_path / "out"))
    assert "mixes architectures" in line
    assert not (tmp_path / "out").exists()


def test_a_series_mixing_tokenizers(small_run, tmp_path):
    series = shutil.copytree(small_run, tmp_path / "run")
    tokenizer = json.loads((series / "checkpoint-4" / "tokenizer.json").read_text())
    tokenizer["model"]["vocab"]["zebra"] = 999
    (series / "checkpoint-4" / "tokenizer.json").write_text(json.dumps(tokenizer))
    line = error_line(sweep_of(series, tmp_path / "out"))
    assert "tokenizer changes" in line and "checkpoint-" in line
    assert not (tmp_path / "out").exists()


def test_checkpoint_given_for_series(small_run, tmp_path):
    done = runner.invoke(
        app,
        ["sweep", "abstraction", "--checkpoint", str(small_run), "--out", str(tmp_path / "out")],
    )
    line = error_line(done)
    assert "--series" in line and "--checkpoint" in line
    assert not (tmp_path / "out").exists()


def test_series_given_to_run(small_run, tmp_path):
    done = runner.invoke(app, ["run", "abstraction", "--series", str(small_run)])
    assert done.exit_code == 2 and "--series" in done.output


def test_out_inside_a_checkpoint_folder(small_run, tmp_path):
    series = shutil.copytree(small_run, tmp_path / "run")
    line = error_line(sweep_of(series, series / "checkpoint-2" / "sweep"))
    assert "would overwrite" in line
    assert not (series / "checkpoint-2" / "sweep").exists()


def test_a_non_empty_out_that_is_no_sweep(small_run, tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "mine.txt").write_text("keep")
    line = error_line(sweep_of(small_run, tmp_path / "out"))
    assert "not empty" in line
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["mine.txt"]
