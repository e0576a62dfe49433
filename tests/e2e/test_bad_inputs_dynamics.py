"""The bad-input catalogue, sweeps and experiments: the 21 hostile cases found against
`geomlens sweep` / `gl.series` / `geomlens experiment`, each failing on the code before the fix.

S is a folder ``checkpoint-0/10/20`` of tiny GPT-2s saved with ``save_pretrained``; RUN is what
``geomlens experiment abstraction-dynamics --steps 20 --checkpoints every:10`` writes; "sweep" is
``geomlens sweep activation-stats --series S --site blocks.0.hook_resid_post --data t.txt``.
Refusals are one line ``error: …`` (exit 2) naming the file or flag, before anything is written.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from helpers.cli_errors import error_line, message_lines
from safetensors.torch import load_file, save_file
from typer.testing import CliRunner

from geomlens.cli import app
from geomlens.experiments import two_factor_lm

runner = CliRunner()
SITE = "blocks.0.hook_resid_post"
FAST = ["--option", "n_bootstrap=0", "--option", "n_shuffles=0"]


@pytest.fixture(scope="module")
def trained_series(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("series") / "S"
    two_factor_lm.train(two_factor_lm.TinyLMConfig(steps=20, checkpoints="every:10"), folder)
    return folder


@pytest.fixture
def series(trained_series, tmp_path) -> Path:
    """A copy of S that the test may change."""
    return Path(shutil.copytree(trained_series, tmp_path / "S"))


@pytest.fixture
def texts(tmp_path) -> Path:
    path = tmp_path / "t.txt"
    path.write_text("the king was tall\nthe queen was kind\nthe boy was old\n")
    return path


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("run") / "RUN"
    done = experiment(folder)
    assert done.exit_code == 0, done.output
    return folder


@pytest.fixture
def run(trained_run, tmp_path) -> Path:
    return Path(shutil.copytree(trained_run, tmp_path / "RUN"))


def experiment(out: Path, *extra: str, steps: str = "20"):
    return runner.invoke(
        app,
        ["experiment", "abstraction-dynamics", "--steps", steps, "--checkpoints", "every:10",
         "--out", str(out), *extra],
    )  # fmt: skip


def sweep(series: Path, out: Path, data: Path | None, *extra: str):
    arguments = ["sweep", "activation-stats", "--series", str(series), "--site", SITE]
    if data is not None:
        arguments += ["--data", str(data)]
    return runner.invoke(app, [*arguments, "--out", str(out), *extra])


def sweep_abstraction(series: Path, out: Path, *extra: str):
    return runner.invoke(
        app, ["sweep", "abstraction", "--series", str(series), "--out", str(out), *FAST, *extra]
    )


def ok(done) -> str:
    assert done.exit_code == 0, (done.output, done.exception)
    return done.stdout


def trainer_state(series: Path, label: str, step: object) -> None:
    path = series / label / "trainer_state.json"
    state = json.loads(path.read_text())
    state["global_step"] = step
    path.write_text(json.dumps(state))


def table_steps(out: Path) -> list[int]:
    rows = json.loads((out / "trajectory.json").read_text())["rows"]
    return sorted({row["step"] for row in rows})


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every path under ``folder`` with its bytes (None for a folder)."""
    return {
        str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(folder.rglob("*"))
    }


# -- silently wrong numbers -----------------------------------------------------------------------


def test_case_01_data_edited_in_place_is_measured_again(series, texts, tmp_path):
    ok(sweep(series, tmp_path / "O", texts))
    first = (tmp_path / "O" / "trajectory.csv").read_text()
    texts.write_text("a dog sat there\nthe cat was red\nthe man was sad\n")  # same line count
    said = ok(sweep(series, tmp_path / "O", texts))
    assert "measured 3 of 3 checkpoints (0 cached)" in said
    assert (tmp_path / "O" / "trajectory.csv").read_text() != first


def test_case_02_a_trainer_state_changed_after_the_sweep_gives_the_new_step(
    series, texts, tmp_path
):
    ok(sweep(series, tmp_path / "O", texts))
    trainer_state(series, "checkpoint-10", 11)
    said = ok(sweep(series, tmp_path / "O", texts))
    assert "measured 1 of 3 checkpoints (2 cached)" in said
    assert table_steps(tmp_path / "O") == [0, 11, 20]
    record = json.loads((tmp_path / "O" / "sweep.json").read_text())
    assert [c["step"] for c in record["series"]["checkpoints"]] == [0, 11, 20]


@pytest.mark.parametrize("spelling", ["step-10", "checkpoint-010", "seed"])
def test_case_03_the_same_step_twice_is_refused(spelling, series, texts, tmp_path):
    if spelling == "seed":
        seeds = tmp_path / "seeds"
        for seed in (0, 1):
            shutil.copytree(series, seeds / f"seed-{seed}")
        shutil.copytree(series / "checkpoint-10", seeds / "seed-1" / "step-10")
        series = seeds
    else:
        shutil.copytree(series / "checkpoint-10", series / spelling)
    error_line(sweep(series, tmp_path / "O", texts), "step 10 twice", "checkpoint-10")
    assert not (tmp_path / "O").exists()


@pytest.mark.parametrize("where", ["checkpoint", "seed"])
def test_case_04_a_dangling_checkpoint_link_is_named(where, series, texts, tmp_path):
    if where == "seed":
        seeds = tmp_path / "seeds"
        shutil.copytree(series, seeds / "seed-0")
        (seeds / "seed-1").symlink_to(tmp_path / "gone")
        series, name = seeds, "seed-1"
    else:
        (series / "checkpoint-30").symlink_to(tmp_path / "gone")
        name = "checkpoint-30"
    error_line(sweep(series, tmp_path / "O", texts), name, "does not exist")
    assert not (tmp_path / "O").exists()


def test_case_05_a_negative_global_step_is_refused(series, texts, tmp_path):
    trainer_state(series, "checkpoint-10", -7)
    error_line(sweep(series, tmp_path / "O", texts), "trainer_state.json", "global_step -7")
    assert not (tmp_path / "O").exists()


def test_case_06_a_diverging_experiment_stops_naming_the_step(tmp_path):
    error_line(experiment(tmp_path / "RUN", "--lr", "1e200"), "diverged at step", "--lr")
    assert not (tmp_path / "RUN" / "run.json").exists()
    for weights in (tmp_path / "RUN").glob("step-*/model.safetensors"):
        assert all(torch.isfinite(t).all() for t in load_file(weights).values())
    ok(experiment(tmp_path / "RUN"))  # the same --out, rerun with a sane rate


def test_case_07_a_hand_edited_result_is_measured_again(series, texts, tmp_path):
    ok(sweep(series, tmp_path / "O", texts))
    stored = tmp_path / "O" / "checkpoints" / "checkpoint-10" / "activation-stats.json"
    original = json.loads(stored.read_text())
    edited = json.loads(stored.read_text())
    name = next(iter(edited["metrics"]))
    edited["metrics"][name] = 12345.0
    stored.write_text(json.dumps(edited))
    said = ok(sweep(series, tmp_path / "O", texts))
    assert "measured 1 of 3 checkpoints (2 cached)" in said
    assert json.loads(stored.read_text())["metrics"][name] == original["metrics"][name]


# -- the user's files touched ----------------------------------------------------------------------


@pytest.mark.parametrize("label", ["../../../victim", "absolute"])
def test_case_08_a_run_json_label_is_a_name_never_a_path(label, trained_run, tmp_path):
    run = Path(shutil.copytree(trained_run, tmp_path / "a" / "b" / "RUN"))
    victim = tmp_path / "victim"
    victim.mkdir()
    shutil.copy(run / "step-10" / "model.safetensors", victim / "model.safetensors")
    (victim / "abstraction.json").write_text('{"mine": true}\n')
    before = snapshot(victim)
    record = json.loads((run / "run.json").read_text())
    record["checkpoints"][1]["label"] = str(victim) if label == "absolute" else label
    (run / "run.json").write_text(json.dumps(record))
    error_line(
        sweep_abstraction(run, tmp_path / "a" / "b" / "out"), "run.json", "plain folder name"
    )
    assert snapshot(victim) == before
    assert not (tmp_path / "a" / "b" / "out").exists()


def test_case_09_an_out_holding_the_users_sweep_json_is_refused(series, texts, tmp_path):
    out = tmp_path / "O"
    out.mkdir()
    (out / "sweep.json").write_text('{"my": "own notes"}\n')
    (out / "notes.txt").write_text("keep\n")
    before = snapshot(out)
    error_line(sweep(series, out, texts), "not empty", "notes.txt", "sweep.json")
    assert snapshot(out) == before


def test_case_10_an_experiment_rerun_never_deletes_the_users_files(run):
    (run / "step-notes").mkdir()
    (run / "step-notes" / "todo.txt").write_text("mine\n")
    before = snapshot(run)
    error_line(experiment(run), "step-notes/todo.txt", "nothing was changed")
    assert snapshot(run) == before


def test_case_10b_one_kind_of_geomlens_folder_is_not_taken_for_another(series, texts, tmp_path):
    """An experiment rerun deletes only its own kind of files: given a sweep's folder (files
    geomlens wrote, but a sweep's), it is refused and deletes nothing."""
    out = tmp_path / "O"
    ok(sweep(series, out, texts))
    before = snapshot(out)
    error_line(experiment(out), "files of a geomlens sweep", "abstraction-dynamics run")
    assert snapshot(out) == before


# -- tracebacks ----------------------------------------------------------------------------------


def test_case_11_a_series_of_one_sweeps_without_a_traceback(tmp_path):
    ok(experiment(tmp_path / "RUN", steps="0"))
    said = ok(sweep_abstraction(tmp_path / "RUN", tmp_path / "out"))
    assert "measured 1 of 1 checkpoints" in said and "exact theory" in said


def test_case_12_an_infinite_global_step_is_refused(series, texts, tmp_path):
    path = series / "checkpoint-10" / "trainer_state.json"
    path.write_text('{"global_step": Infinity}')
    error_line(sweep(series, tmp_path / "O", texts), "trainer_state.json", "global_step inf")
    assert not (tmp_path / "O").exists()


@pytest.mark.parametrize("command", ["abstraction-dynamics", "toy-network"])
def test_case_13_log_beyond_the_steps_is_refused_up_front(command, tmp_path):
    done = runner.invoke(
        app,
        ["experiment", command, "--checkpoints", "log:1000000000000", "--out", str(tmp_path / "R")],
    )
    error_line(done, "--checkpoints log:1000000000000", "log:N with N <=")
    assert not (tmp_path / "R").exists()


# -- unclear, late or littering --------------------------------------------------------------------


def test_case_14_nan_weights_name_the_checkpoint(series, texts, tmp_path):
    weights = series / "checkpoint-10" / "model.safetensors"
    tensors = load_file(weights)
    name = next(n for n in tensors if "wte" in n)
    tensors[name] = torch.full_like(tensors[name], float("nan"))
    save_file(tensors, weights, metadata={"format": "pt"})
    error_line(sweep(series, tmp_path / "O", texts), "Checkpoint checkpoint-10", "NaN or Inf")


@pytest.mark.parametrize(("field", "value"), [("step", "abc"), ("lr_sum", "soon")])
def test_case_15_a_run_json_with_words_for_numbers_names_it(field, value, run, tmp_path):
    record = json.loads((run / "run.json").read_text())
    record["checkpoints"][1][field] = value
    (run / "run.json").write_text(json.dumps(record))
    error_line(sweep_abstraction(run, tmp_path / "out"), "run.json", "step-10", repr(value))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("flag", "value", "said"), [("--seed", "-1", "--seed"), ("--batch-size", "0", "--batch-size")]
)
def test_case_16_sweep_seed_and_batch_size_are_checked_first(
    flag, value, said, series, texts, tmp_path, monkeypatch
):
    from geomlens.dynamics.series import Series

    def never(*args, **kwargs):
        raise AssertionError("a checkpoint was loaded")

    monkeypatch.setattr(Series, "load", never)
    error_line(sweep(series, tmp_path / "O", texts, flag, value), said)
    assert not (tmp_path / "O").exists()


@pytest.mark.parametrize(
    ("extra", "said"),
    [(["--seed", "-1"], "--seed"), (["--input-modes", "nan,1,1,1"], "--input-modes")],
)
def test_case_17_experiment_options_are_refused_before_the_folder(extra, said, tmp_path):
    error_line(experiment(tmp_path / "RUN", *extra), said)
    assert not (tmp_path / "RUN").exists()


def test_case_18_an_absurd_init_scale_is_refused_up_front(tmp_path):
    error_line(experiment(tmp_path / "RUN", "--init-scale", "1e300"), "--init-scale", "at most")
    assert not (tmp_path / "RUN").exists()


def test_case_19_an_interrupted_experiment_says_so_and_reruns(tmp_path, monkeypatch):
    from geomlens.experiments import abstraction_dynamics

    saved = abstraction_dynamics.save_checkpoint
    calls = []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        saved(*args, **kwargs)

    monkeypatch.setattr(abstraction_dynamics, "save_checkpoint", interrupted)
    done = experiment(tmp_path / "RUN")
    assert done.exit_code == 130, done.output
    lines = message_lines(done)
    assert len(lines) == 1 and lines[0].startswith("interrupted;"), done.stderr
    monkeypatch.setattr(abstraction_dynamics, "save_checkpoint", saved)
    assert "wrote 3 checkpoints" in ok(experiment(tmp_path / "RUN"))


def test_case_20_unreadable_weights_are_named_as_unreadable(series, texts, tmp_path, monkeypatch):
    weights = series / "checkpoint-10" / "model.safetensors"
    if os.geteuid() != 0:
        weights.chmod(0)
    else:  # root reads any file: make this one refuse as chmod 000 would
        import builtins

        real_open = builtins.open

        def refusing_open(file, *args, **kwargs):
            if Path(str(file)) == weights:
                raise PermissionError(13, "Permission denied", str(file))
            return real_open(file, *args, **kwargs)

        monkeypatch.setattr(builtins, "open", refusing_open)
    error_line(sweep(series, tmp_path / "O", texts), "checkpoint-10", "unreadable")
    assert not (tmp_path / "O").exists()


def test_case_21a_one_sae_cache_entry_per_model_whatever_the_backend(tmp_path):
    from helpers.saved_models import saved_model
    from helpers.tiny_models import tiny_gpt2

    import geomlens as gl
    from geomlens.sae.config import default_training
    from geomlens.sae.training import cache_key

    folder = saved_model(tmp_path / "m", tiny_gpt2)
    keys = []
    for backend in ("nnsight", "transformer-lens"):
        adapter = gl.load(str(folder), backend=backend)
        keys.append(cache_key(adapter, SITE, "corpus", default_training(True)[0]))
    assert keys[0] == keys[1]


def test_case_21b_a_damaged_dequantised_model_names_its_folder(tmp_path, monkeypatch):
    import dataclasses

    from helpers.tiny_models import tiny_gpt2

    import geomlens as gl
    from geomlens.models import embedded_lms

    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF stand-in\n")

    def dense(gguf: Path, out: Path) -> None:
        model, tokenizer = tiny_gpt2()
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
        weights = out / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:200])  # damaged after it was made

    name = "smollm2-135m-instruct"
    lm = dataclasses.replace(embedded_lms.EMBEDDED_LMS[name], locate_chunks=lambda: [gguf])
    monkeypatch.setitem(embedded_lms.EMBEDDED_LMS, name, lm)
    monkeypatch.setattr(embedded_lms, "_save_dense", dense)
    monkeypatch.setenv(embedded_lms.CACHE_ENV, str(tmp_path / "cache"))
    with pytest.raises(OSError) as error:
        gl.load(name)
    message = str(error.value)
    assert str(tmp_path / "cache") in message and "dequantise it anew" in message
    assert "save_pretrained" not in message


@pytest.mark.parametrize("variable", ["GEOMLENS_MODEL_CACHE", "GEOMLENS_SAE_CACHE"])
def test_case_21c_a_cache_that_is_a_file_is_one_line(variable, tmp_path, monkeypatch):
    import dataclasses

    from geomlens.models import embedded_lms
    from geomlens.sae.cache import sae_cache_dir

    blocker = tmp_path / "cache-file"
    blocker.write_text("")
    monkeypatch.setenv(variable, str(blocker))
    with pytest.raises(OSError) as error:
        if variable == "GEOMLENS_SAE_CACHE":
            sae_cache_dir()
        else:
            gguf = tmp_path / "tiny.gguf"
            gguf.write_bytes(b"GGUF stand-in\n")
            lm = dataclasses.replace(
                embedded_lms.EMBEDDED_LMS["smollm2-135m-instruct"], locate_chunks=lambda: [gguf]
            )
            embedded_lms.resolve_embedded(lm)
    message = str(error.value)
    assert variable in message and "is a file" in message and "Errno" not in message


# -- no write outside --out -------------------------------------------------------------------------


def test_sweeps_and_experiments_write_nothing_outside_out(trained_series, tmp_path):
    """Under a read-only parent holding a user's file beside --out: everything outside the
    --out folders is byte-identical afterwards (and nothing new appears there)."""
    parent = tmp_path / "parent"
    parent.mkdir()
    (parent / "notes.txt").write_text("the user's notes\n")
    series = Path(shutil.copytree(trained_series, parent / "S"))
    texts = parent / "t.txt"
    texts.write_text("the king was tall\nthe queen was kind\n")
    outs = [parent / name for name in ("RUN", "SEEDS", "O", "OA")]
    for out in outs:
        out.mkdir()
    before = snapshot(tmp_path)
    parent.chmod(0o555)
    try:
        ok(experiment(parent / "RUN"))
        ok(experiment(parent / "SEEDS", "--seeds", "0,1"))
        ok(sweep(series, parent / "O", texts))
        ok(sweep(series, parent / "O", texts))  # the rerun, from the cache
        ok(sweep_abstraction(parent / "SEEDS", parent / "OA"))
        ok(experiment(parent / "RUN"))  # replacing the earlier run
    finally:
        parent.chmod(0o755)
    after = snapshot(tmp_path)
    inside = tuple(str(out.relative_to(tmp_path)) + os.sep for out in outs)
    assert {k: v for k, v in after.items() if not k.startswith(inside)} == before
    assert (parent / "O" / "trajectory.csv").is_file() and (parent / "RUN" / "run.json").is_file()
