"""What a sweep shows a researcher: the figures read from their drawn artists, the CLI's lines
and messages, the series' selection (docs/dynamics.md, "Reading a sweep")."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from typer.testing import CliRunner

import geomlens as gl
from geomlens.cli import app
from geomlens.cli.dynamics import summary_lines
from geomlens.dynamics import sweep as sweeping
from geomlens.dynamics.figures import analysis_figure
from geomlens.dynamics.trajectory import COLUMNS, across_seeds
from geomlens.experiments import abstraction_dynamics as experiment
from geomlens.experiments import toy_network
from geomlens.theory import toy

FAST = {"n_bootstrap": 0, "n_shuffles": 0}


def record_of(out: Path) -> dict:
    return json.loads((out / "sweep.json").read_text(encoding="utf-8"))


def lines_labelled(axis, text):
    return [line for line in axis.get_lines() if text in str(line.get_label())]


@pytest.fixture(scope="module")
def missed_peak(tmp_path_factory):
    """lr 0.1, a checkpoint every 100 steps (t = 0, 10, 20, 30): the peak at t ≈ 2.47 falls
    between the first two."""
    folder = tmp_path_factory.mktemp("missed") / "run"
    experiment.train(
        experiment.AbstractionDynamicsConfig(learning_rate=0.1, steps=300, checkpoints="every:100"),
        folder,
    )
    out = folder.parent / "sweep"
    return gl.sweep("abstraction", folder, out=out, progress=False, **FAST), out


def test_exact_curve_is_drawn_between_checkpoints_and_names_the_missed_peak(missed_peak):
    outcome, out = missed_peak
    record = record_of(out)
    figure = analysis_figure(outcome, "abstraction", record)
    left = figure.axes[0]
    (curve,) = lines_labelled(left, "exact theory")
    times = np.asarray(curve.get_xdata())
    assert len(times) >= 200 and times.min() == 0.0 and times.max() == pytest.approx(30.0)
    exact = record["theory"]["exact"]
    assert np.max(curve.get_ydata()) == pytest.approx(exact["alpha_max"], abs=1e-3)
    named = f"the checkpoints miss the peak at t = {exact['peak_time']:.3g}"
    assert named == "the checkpoints miss the peak at t = 2.47"
    assert left.get_title() == named and lines_labelled(left, named)
    assert named in exact["peak_note"]
    assert any(named in line for line in summary_lines(outcome.theory, outcome.rows))


# --- synthetic tables: the figures' parts on known numbers ------------------------------------


def table(sites, steps, seeds=(None,), metric="alpha", analysis="abstraction", law=None, **extra):
    rows = []
    for seed in seeds:
        for step in steps:
            for position, site in enumerate(sites):
                row = dict.fromkeys(COLUMNS)
                value = 0.3 + 0.1 * position + 0.001 * step + 0.01 * (seed or 0)
                row.update(checkpoint=f"seed-{seed}/step-{step}" if seed is not None else
                           f"step-{step}", seed=seed, step=step, time=float(step),
                           analysis=analysis, site=site, task="", metric=metric, value=value)  # fmt: skip
                if law is not None and 0 < position < len(sites) - 1:
                    row["theory_layer_law"] = value + law
                row.update(extra)
                rows.append(row)
    return SimpleNamespace(rows=rows, across_seeds=[])


RECORD = {"time": "step", "series": {"source": "run", "checkpoints": []}, "theory": {}}
DEPTH_FOUR = [f"blocks.{i}.hook_resid_post" for i in range(4)]


def test_several_seeds_faint_each_bold_mean_and_a_band():
    outcome = table(DEPTH_FOUR[:1], range(0, 50, 10), seeds=(0, 1, 2))
    left, right = analysis_figure(outcome, "abstraction", RECORD).axes[:2]
    faint = [line for line in left.get_lines() if line.get_alpha() == 0.3]
    assert len(faint) == 3
    assert lines_labelled(left, "bold: mean of 3 seeds; faint: each seed")
    (mean,) = lines_labelled(left, DEPTH_FOUR[0])
    assert mean.get_linewidth() > 2 * faint[0].get_linewidth()
    values = [[r["value"] for r in outcome.rows if r["step"] == s] for s in range(0, 50, 10)]
    assert np.asarray(mean.get_ydata()) == pytest.approx([np.mean(v) for v in values])
    assert any(c.get_label() == "95 % interval across seeds" for c in left.collections)


def test_layer_panel_is_the_mean_over_seeds():
    outcome = table(DEPTH_FOUR, [0, 10, 20], seeds=(0, 1))
    right = analysis_figure(outcome, "abstraction", RECORD).axes[1]
    assert "mean of 2 seeds" in right.get_xlabel()
    first = right.get_lines()[0]
    expected = [np.mean([0.3 + 0.1 * p + 0.01 * s for s in (0, 1)]) for p in range(4)]
    assert np.asarray(first.get_ydata()) == pytest.approx(expected)


def test_an_interval_across_seeds_stays_in_the_metrics_range():
    rows = [
        {
            "step": 1,
            "time": 1.0,
            "analysis": "abstraction",
            "site": "s",
            "task": "",
            "metric": "alpha",
            "value": v,
            "seed": k,
        }  # fmt: skip
        for k, v in enumerate([0.94, 0.999, 0.999])
    ]
    (summary,) = across_seeds(rows)
    assert summary["ci_low"] >= -1.0 and summary["ci_high"] == 1.0


def test_layer_law_is_drawn_as_crosses_on_dashes_and_only_where_it_applies():
    figure = analysis_figure(table(DEPTH_FOUR, [0, 10, 20], law=0.01), "abstraction", RECORD)
    right = figure.axes[1]
    dashed = [line for line in right.get_lines() if line.get_linestyle() == "--"]
    assert dashed and all(
        len(line.get_xdata()) == 4 and line.get_marker() == "x" for line in dashed
    )
    assert any("per-layer artanh law" in t.get_text() for t in right.get_legend().get_texts())
    assert all(float(tick).is_integer() for tick in right.get_xticks())
    assert "×" not in right.get_xlabel()
    for outcome in (
        table(DEPTH_FOUR, [0, 10], metric="ccgp", analysis="ccgp"),
        table(DEPTH_FOUR[:2], [0, 10]),
    ):
        right = analysis_figure(outcome, outcome.rows[0]["analysis"], RECORD).axes[1]
        assert not [line for line in right.get_lines() if line.get_linestyle() == "--"]
        texts = [t.get_text() for t in right.get_legend().get_texts()]
        assert not any("law" in t for t in texts) and "×" not in right.get_xlabel()


def legends_outside(figure):
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    for axis in figure.axes:
        legend = axis.get_legend()
        if legend is not None:
            box = axis.get_window_extent(renderer)
            assert not legend.get_window_extent(renderer).overlaps(box), axis.get_legend()
    return True


def test_legends_sit_below_the_data_in_the_depth_four_figure():
    figure = analysis_figure(table(DEPTH_FOUR, range(0, 100, 10), law=0.0), "abstraction", RECORD)
    assert legends_outside(figure)


def test_duplicate_weights_are_marked_not_drawn_as_points():
    outcome = table(DEPTH_FOUR[:1], [0, 10, 20])
    outcome.rows[-1]["duplicate_of"] = "step-10"
    left = analysis_figure(outcome, "abstraction", RECORD).axes[0]
    (line,) = lines_labelled(left, DEPTH_FOUR[0])
    assert list(line.get_xdata()) == [0.0, 10.0]
    (mark,) = [c for c in left.collections if "same weights" in str(c.get_label())]
    assert mark.get_offsets().tolist() == [[20.0, outcome.rows[-1]["value"]]]


# --- the toy network --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("toy") / "run"
    toy_network.train(toy.ToyConfig(epochs=8), folder)
    return folder


def test_toy_figure_speaks_of_epochs_and_the_cli_summarises_the_front(toy_run, tmp_path):
    out = tmp_path / "sweep"
    done = CliRunner().invoke(
        app, ["sweep", "resolution", "--series", str(toy_run), "--out", str(out),
              "--option", "bootstrap=0"],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    assert re.search(
        r"toy front: distance to the linear-decay front \S+ at epoch-0 → ", done.output
    )
    outcome = SimpleNamespace(**json.loads((out / "trajectory.json").read_text()), across_seeds=[])
    figure = analysis_figure(outcome, "resolution", record_of(out))
    left, right = figure.axes[:2]
    assert left.get_xlabel() == "epoch" and "depth" not in figure.get_suptitle()
    assert any(axis.get_ylabel() == "epoch" for axis in figure.axes[2:])  # the colour bar
    assert legends_outside(figure)


def test_a_slow_sweep_names_the_cheaper_options(toy_run, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sweeping, "SLOW_SECONDS", -1.0)
    gl.sweep("resolution", toy_run, out=tmp_path / "s", progress=True, samples=2000)
    shown = capsys.readouterr().err
    assert "cheaper: --option bootstrap=50 --option samples=20000" not in shown
    assert "cheaper: --option bootstrap=50 (the settings of a --quick report" in shown


# --- series selection -------------------------------------------------------------------------


def test_log_n_keeps_n_where_n_exist():
    pythia = gl.series("EleutherAI/pythia-70m", revisions="pythia")
    kept = pythia.select("log:40")
    assert len(kept) == 40 and kept[0].step == 0 and kept[-1].step == 143_000
    modules = [__import__("torch").nn.Linear(2, 2) for _ in range(6)]
    one = gl.series(modules, steps=[10, 20, 30, 40, 50, 60])
    two = gl.series([one, one], seeds=[0, 1])
    assert [len([c for c in two.select("log:3") if c.seed == s]) for s in (0, 1)] == [3, 3]
    assert len(one.select("log:10")) == 6  # fewer than N: all of them


# --- the command line -------------------------------------------------------------------------


def test_messages_use_the_command_lines_spelling(toy_run, tmp_path):
    runner = CliRunner()
    missing = runner.invoke(app, ["sweep", "ccgp", "--series", str(tmp_path / "nowhere"),
                                  "--out", str(tmp_path / "o")])  # fmt: skip
    assert missing.exit_code == 2 and "--revisions pythia" in missing.output
    clock = runner.invoke(app, ["sweep", "resolution", "--series", str(toy_run), "--out",
                                str(tmp_path / "o"), "--time", "lr-sum"])  # fmt: skip
    assert (
        clock.exit_code == 2 and "--time lr-sum" in clock.output and "--time step" in clock.output
    )
    for said in (missing.output, clock.output):
        assert not re.search(r"\w='", said), said


def test_resume_is_accepted_and_said_to_be_automatic(missed_peak):
    runner = CliRunner()
    shown = runner.invoke(app, ["sweep", "--help"], terminal_width=200).output
    assert "--resume" in shown and "automatic" in shown
    run = Path(str(record_of(missed_peak[1])["series"]["source"]))
    done = runner.invoke(app, ["sweep", "abstraction", "--series", str(run), "--out",
                               str(missed_peak[1]), "--resume", "--option", "n_bootstrap=0",
                               "--option", "n_shuffles=0"])  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "measured 0 of 4 checkpoints (4 cached)" in done.output


def test_an_offline_hub_sweep_writes_nothing(tmp_path, monkeypatch):
    from huggingface_hub import HfApi

    def offline(*args, **kwargs):
        raise ConnectionError("offline mode is enabled")

    monkeypatch.setattr(HfApi, "model_info", offline)
    out = tmp_path / "sweep"
    done = CliRunner().invoke(app, ["sweep", "ccgp", "--series", "nobody/not-cached-model",
                                    "--revisions", "step0,step1", "--out", str(out)])  # fmt: skip
    assert done.exit_code == 2 and "not in the local cache" in done.output
    assert not out.exists()


def test_the_bar_counts_checkpoints_every_rank_measured(missed_peak, monkeypatch, capsys):
    """A rank skips the checkpoints another claims; its bar still ends at the whole series."""
    outcome, out = missed_peak
    taken = iter([True, False, True, False])
    monkeypatch.setattr(sweeping._Share, "take", lambda self, checkpoint: next(taken))
    run = record_of(out)["series"]["source"]
    gl.sweep("abstraction", run, out=out, progress=True, force=True, **FAST)
    assert "4/4" in capsys.readouterr().err


def test_stages_of_a_curve_and_over_seeds():
    from geomlens.dynamics.stages import curve_stages, stage_table

    times = [0, 1, 2, 3, 4, 5, 6, 7]
    values = [0.0, 0.1, 0.9, 1.0, 0.97, 0.6, 0.52, 0.5]
    found = curve_stages(times, values)
    assert found["peak_time"] == 3 and found["peak_value"] == 1.0
    assert found["plateau_start"] == 3 and found["plateau_end"] == 5  # level 0.95
    assert found["settled_time"] == 6  # |0.52 − 0.5| ≤ 0.05, |0.6 − 0.5| > 0.05
    outcome = table(DEPTH_FOUR[:1], range(0, 50, 10), seeds=(0, 1, 2))
    for row in outcome.rows:  # a peak at step 20 for seeds 0 and 1, at step 30 for seed 2
        row["value"] = 1.0 if row["step"] == (30 if row["seed"] == 2 else 20) else 0.5
    (entry,) = stage_table(outcome.rows, {})
    peak = entry["across_seeds"]["peak_time"]
    assert peak["mean"] == pytest.approx(70 / 3) and peak["seeds"] == 3
    assert 0 <= peak["ci_low"] < peak["mean"] < peak["ci_high"] <= 40
    figure = analysis_figure(outcome, "abstraction", RECORD)
    (mark,) = lines_labelled(figure.axes[0], "peak")
    assert mark.get_xdata()[0] == pytest.approx(70 / 3)
