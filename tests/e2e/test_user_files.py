"""Nothing a user has is lost: every option of `report` and `sae train` is checked before the
first write or model load; a report never overwrites or deletes a file geomlens cannot prove
it wrote (its manifest is checked against the files' sha256); a report killed with SIGKILL,
then rerun, leaves the folder as a clean run would; Ctrl-C during `sae train` prints on a line
of its own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.saved_models import saved_model
from helpers.tiny_models import tiny_gpt2
from typer.testing import CliRunner

import geomlens as gl
from geomlens.cli import app
from geomlens.report import build_report
from geomlens.report.folder import MANIFEST, STAGING

runner = CliRunner()
#: A fast analysis on the tiny model's shipped data.
ANALYSIS = "activation-stats"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return saved_model(tmp_path_factory.mktemp("tiny-gpt2"), tiny_gpt2)


def report_args(model_dir: Path, out: Path, *extra: str) -> list[str]:
    return ["report", "--model", str(model_dir), "--quick", "-a", ANALYSIS, "--out", str(out),
            "--max-length", "32", *extra]  # fmt: skip


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (hidden ones too), by relative path, with its bytes."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def no_model_load(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded before the options were checked")

    # gl.load first: the package resolves it lazily from geomlens.models.attach, so patched second
    # it would remember the refusal as its original and keep it after the test (it did under
    # pytest 9.1, and every later gl.load on that worker failed).
    monkeypatch.setattr(gl, "load", refuse)
    monkeypatch.setattr("geomlens.models.attach.load", refuse)


@pytest.fixture(scope="module")
def earlier_report(model_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("earlier") / "rep"
    done = runner.invoke(app, report_args(model_dir, out))
    assert done.exit_code == 0, done.output
    return out


def copy_of(folder: Path, into: Path) -> Path:
    import shutil

    shutil.copytree(folder, into)
    return into


@pytest.mark.parametrize("seed", ["-1", str(2**64)])
def test_a_bad_seed_leaves_an_earlier_report_intact(model_dir, earlier_report, tmp_path, seed,
                                                    monkeypatch):  # fmt: skip
    out = copy_of(earlier_report, tmp_path / "rep")
    before = snapshot(out)
    no_model_load(monkeypatch)
    done = runner.invoke(app, report_args(model_dir, out, "--seed", seed))
    assert done.exit_code == 2, done.output
    assert (
        done.stderr.count("\n") == 1
        and "--seed must be an integer from 0 to 2**63 - 1" in done.stderr
    )
    assert snapshot(out) == before  # was replaced by a page of failures


def test_out_naming_a_file_is_refused_before_any_work(model_dir, tmp_path, monkeypatch):
    target = tmp_path / "notes.txt"
    target.write_text("mine")
    no_model_load(monkeypatch)
    done = runner.invoke(app, report_args(model_dir, target))
    assert done.exit_code == 2, done.output  # was "[Errno 17] File exists" after the whole run
    assert done.stderr.count("\n") == 1
    assert (
        f"--out {target} is a file" in done.stderr and "give a new or empty folder" in done.stderr
    )
    assert target.read_text() == "mine"


def test_a_users_own_index_html_is_never_overwritten(model_dir, tmp_path, monkeypatch):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "index.html").write_text("<p>my page</p>")
    (out / "notes.txt").write_text("my notes")
    before = snapshot(out)
    no_model_load(monkeypatch)
    done = runner.invoke(app, report_args(model_dir, out))
    assert done.exit_code == 2, done.output
    assert "index.html" in done.stderr and "notes.txt" not in done.stderr
    assert "nothing was changed" in done.stderr
    assert snapshot(out) == before


def test_a_report_writes_beside_a_users_other_files_and_leaves_them_byte_identical(
    model_dir, earlier_report, tmp_path
):
    out = copy_of(earlier_report, tmp_path / "rep")
    (out / "notes.txt").write_bytes(b"my notes\x00\xff")
    (out / "figures").mkdir()
    (out / "figures" / "mine.png").write_bytes(b"png")
    (out / ".hidden").write_text("mine")
    mine = {
        k: v for k, v in snapshot(out).items() if k in ("notes.txt", "figures/mine.png", ".hidden")
    }
    done = runner.invoke(app, report_args(model_dir, out))
    assert done.exit_code == 0, done.output
    after = snapshot(out)
    assert {k: after[k] for k in mine} == mine
    assert (out / "index.html").is_file() and not (out / STAGING).exists()


@pytest.mark.parametrize("form", ["a list of names", "names with false hashes"])
def test_a_manifest_naming_a_users_files_deletes_none_of_them(model_dir, tmp_path, form):
    out = tmp_path / "rep"
    out.mkdir()
    (out / "thesis.tex").write_text("three years of work")
    (out / "data.csv").write_text("1,2,3")
    names = ["thesis.tex", "data.csv"]
    manifest = (
        names
        if form == "a list of names"
        else {"format": 2, "files": {n: ["0" * 64] for n in names}}
    )
    (out / MANIFEST).write_text(json.dumps(manifest))  # copied from elsewhere, or edited
    done = runner.invoke(app, report_args(model_dir, out))
    assert done.exit_code == 0, done.output
    assert (out / "thesis.tex").read_text() == "three years of work"  # was deleted
    assert (out / "data.csv").read_text() == "1,2,3"


def test_a_file_a_report_wrote_and_the_user_then_edited_is_not_deleted(model_dir, tmp_path):
    out = tmp_path / "rep"
    model, tokenizer = tiny_gpt2()
    adapter = gl.attach(model, tokenizer=tokenizer)
    build_report(adapter, out=out, quick=True, progress=False, max_length=32,
                 analyses=[ANALYSIS, "similarity"])  # fmt: skip
    (out / "similarity.json").write_text("my edits")
    with pytest.raises(ValueError, match="similarity.json"):  # it would be replaced: refused
        build_report(adapter, out=out, quick=True, progress=False, max_length=32,
                     analyses=[ANALYSIS, "similarity"])  # fmt: skip
    # A report that no longer writes it leaves the edited file alone (proven only by hash).
    build_report(adapter, out=out, quick=True, progress=False, max_length=32, analyses=[ANALYSIS])
    assert (out / "similarity.json").read_text() == "my edits"
    assert not (out / "similarity.png").exists()  # unedited, the report's own: removed


# -- SIGKILL in a long phase, then a rerun: the folder as a clean run leaves it --------------
CHILD = """
import os, sys, time
from pathlib import Path
import geomlens as gl
from geomlens.report import build_report
from geomlens.report import folder as report_folder
sys.path.insert(0, sys.argv[3])
from helpers.tiny_models import tiny_gpt2

phase = sys.argv[2]
out = Path(sys.argv[1])
model, tokenizer = tiny_gpt2()
adapter = gl.attach(model, tokenizer=tokenizer)

if phase == "pass":
    import geomlens.engine as engine
    real_run = engine.run
    def slow_run(*args, **kwargs):
        (out.parent / "READY").write_text("")
        time.sleep(600)
    engine.run = slow_run
else:  # killed while the new files are moved into place
    real_replace = os.replace
    calls = []
    def slow_replace(src, dst):
        real_replace(src, dst)
        calls.append(dst)
        if len(calls) == 3:
            (out.parent / "READY").write_text("")
            time.sleep(600)
    report_folder.os.replace = slow_replace
build_report(adapter, out=out, quick=True, progress=False, max_length=32,
             analyses=["activation-stats", "similarity"])
"""


def names(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))


@pytest.mark.parametrize("phase", ["pass", "publish"])
def test_a_report_killed_with_sigkill_then_rerun_leaves_the_folder_as_a_clean_run(tmp_path, phase):
    model, tokenizer = tiny_gpt2()
    adapter = gl.attach(model, tokenizer=tokenizer)
    clean = tmp_path / "clean"
    build_report(adapter, out=clean, quick=True, progress=False, max_length=32,
                 analyses=["activation-stats", "similarity"])  # fmt: skip
    out = tmp_path / "killed" / "rep"
    out.parent.mkdir()
    # An earlier report of other analyses (its files must go or stay as a clean rerun decides).
    build_report(adapter, out=out, quick=True, progress=False, max_length=32,
                 analyses=["activation-stats", "ccgp"])  # fmt: skip
    (out / "notes.txt").write_text("mine")
    before = snapshot(out)
    tests = str(Path(__file__).resolve().parents[1])
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(out), phase, tests],
                             env={**os.environ, "MPLBACKEND": "Agg"})  # fmt: skip
    deadline = time.monotonic() + 300
    while not (out.parent / "READY").exists() and time.monotonic() < deadline:
        assert child.poll() is None, "the child ended before the phase"
        time.sleep(0.1)
    child.send_signal(signal.SIGKILL)
    child.wait()
    if phase == "pass":
        assert snapshot(out) == before  # nothing is touched before the page is written
    else:
        assert (out / STAGING).exists()  # the kill left the staging folder
    build_report(adapter, out=out, quick=True, progress=False, max_length=32,
                 analyses=["activation-stats", "similarity"])  # fmt: skip
    assert names(out) == sorted([*names(clean), "notes.txt"])
    assert (out / "notes.txt").read_text() == "mine"


# -- sae train: options checked before the model loads; Ctrl-C on its own line ---------------
@pytest.mark.parametrize("seed", ["-1", str(2**64)])
def test_sae_train_refuses_a_bad_seed_before_loading(model_dir, tmp_path, seed, monkeypatch):
    no_model_load(monkeypatch)
    done = runner.invoke(app, ["sae", "train", "--model", str(model_dir), "--cache-dir",
                               str(tmp_path), "--seed", seed])  # fmt: skip
    assert done.exit_code == 2, done.output  # was a raw library error after the model loaded
    assert done.stderr.count("\n") == 1
    assert "--seed must be an integer from 0 to 2**63 - 1" in done.stderr
    assert "--seed 0 is the default" in done.stderr


def test_ctrl_c_during_sae_training_prints_on_its_own_line(model_dir, tmp_path, monkeypatch):
    from tqdm import tqdm

    def training_then_ctrl_c(*args, **kwargs):
        bar = tqdm(total=100, desc="Training SAE")
        bar.update(30)  # a bar left open mid-line, as sae-lens's is when Ctrl-C lands
        raise KeyboardInterrupt

    monkeypatch.setattr("geomlens.sae.training.cached_sae", training_then_ctrl_c)
    done = runner.invoke(app, ["sae", "train", "--model", str(model_dir), "--cache-dir",
                               str(tmp_path)])  # fmt: skip
    assert done.exit_code == 130, done.output
    lines = done.stderr.replace("\r", "\n").splitlines()
    assert "interrupted; no SAE was cached." in lines, done.stderr
