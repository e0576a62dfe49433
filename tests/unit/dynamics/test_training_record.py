"""The training record in the table (a Trainer's trainer_state.json: loss, learning rate, Σ lr
for ``time='lr-sum'``) and checkpoints whose weights repeat an earlier one's (``duplicate_of``)."""

from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import pytest

import geomlens as gl
from geomlens.cli.dynamics import summary_lines
from geomlens.dynamics.trajectory import across_seeds
from geomlens.experiments import two_factor_lm

FAST = {"n_bootstrap": 0, "n_shuffles": 0}
KEPT = ("checkpoint-0", "checkpoint-10", "checkpoint-20")


def rate(step: int) -> float:
    return 1e-3 * (1 - step / 100)


def write_trainer_log(folder) -> None:
    """A Trainer's log of every step (loss and a linearly decaying rate) in each checkpoint."""
    for checkpoint in folder.iterdir():
        state = json.loads((checkpoint / "trainer_state.json").read_text())
        step = state["global_step"]
        history = [
            {"step": s, "loss": 4.0 - 0.01 * s, "learning_rate": rate(s),
             "num_input_tokens_seen": 64 * s}
            for s in range(1, step + 1)
        ]  # fmt: skip
        state["log_history"] = history
        (checkpoint / "trainer_state.json").write_text(json.dumps(state))


def test_loss_and_lr_columns_and_lr_sum_from_a_trainer_series(tiny_lm_copy, tmp_path):
    write_trainer_log(tiny_lm_copy)
    series = gl.series([tiny_lm_copy / name for name in KEPT])
    outcome = gl.sweep(
        "abstraction", series, two_factor_lm.concept_data(), out=tmp_path / "s",
        time="lr-sum", progress=False, **FAST,
    )  # fmt: skip
    for row in outcome.rows:
        state = json.loads((tiny_lm_copy / row["checkpoint"] / "trainer_state.json").read_text())
        last = state["log_history"][-1] if state["log_history"] else {}
        assert row["time"] == pytest.approx(sum(rate(s) for s in range(1, row["step"] + 1)))
        assert row["train_loss"] == last.get("loss") and row["learning_rate"] == last.get(
            "learning_rate"
        )
        assert row["tokens_seen"] == last.get("num_input_tokens_seen")
    assert {r["step"] for r in outcome.rows} == {0, 10, 20}
    header = (tmp_path / "s" / "trajectory.csv").read_text().splitlines()[0]
    assert header.endswith("duplicate_of,train_loss,learning_rate,tokens_seen")


def test_equal_weights_under_another_step_are_flagged_not_counted(tiny_lm_copy, tmp_path):
    shutil.copy(
        tiny_lm_copy / "checkpoint-10" / "model.safetensors",
        tiny_lm_copy / "checkpoint-20" / "model.safetensors",
    )
    series = gl.series([tiny_lm_copy / name for name in KEPT])
    assert series.duplicates() == {"checkpoint-20": "checkpoint-10"}
    outcome = gl.sweep(
        "abstraction", series, two_factor_lm.concept_data(), out=tmp_path / "s",
        progress=False, **FAST,
    )  # fmt: skip
    # Not loaded, not measured: the earlier checkpoint's Results, marked.
    assert [label for label, _ in outcome.measured] == ["checkpoint-0", "checkpoint-10"]
    copied = gl.Result.from_json(
        tmp_path / "s" / "checkpoints" / "checkpoint-20" / "abstraction.json"
    )
    assert copied.provenance["duplicate_of"] == "checkpoint-10"
    assert copied.provenance["sweep"]["label"] == "checkpoint-20"
    values = {(r["checkpoint"], r["site"], r["task"]): r["value"] for r in outcome.rows}
    assert all(
        value == values[("checkpoint-10", site, task)]
        for (label, site, task), value in values.items()
        if label == "checkpoint-20"
    )
    flagged = {r["checkpoint"]: r["duplicate_of"] for r in outcome.rows}
    assert flagged == {"checkpoint-0": None, "checkpoint-10": None,
                       "checkpoint-20": "checkpoint-10"}  # fmt: skip
    record = json.loads((tmp_path / "s" / "sweep.json").read_text())
    assert record["duplicates"] == {"checkpoint-20": "checkpoint-10"}
    assert any("checkpoint-20 = checkpoint-10" in line for line in summary_lines({}, outcome.rows))
    # Two seeds where one seed's last checkpoint repeats its previous one: not counted twice.
    rows = [
        {**r, "seed": seed, "step": r["step"]} for seed in (0, 1) for r in outcome.rows
        if not (seed == 0 and r["duplicate_of"] is None and r["step"] == 20)
    ]  # fmt: skip
    counts = {(s["step"], s["site"]): s["seeds"] for s in across_seeds(rows)}
    assert all(n == 1 for (step, _), n in counts.items() if step == 20)


def test_hub_duplicates_from_the_listed_sha256_before_any_download(monkeypatch):
    """A recorded listing (tests run offline): step2 and step3 list the same weight digest."""
    from huggingface_hub import HfApi

    listings = {
        "step1": [("model.safetensors", "a" * 64), ("config.json", None)],
        "step2": [("model.safetensors", "b" * 64), ("config.json", None)],
        "step3": [("model.safetensors", "b" * 64), ("config.json", None)],
    }

    def listing(self, repository, revision=None, recursive=False):
        return [
            SimpleNamespace(path=name, lfs=None if sha is None else {"sha256": sha, "size": 1})
            for name, sha in listings[revision]
        ]

    monkeypatch.setattr(HfApi, "list_repo_tree", listing)
    series = gl.series("org/model", revisions=["step1", "step2", "step3"])
    assert series.duplicates() == {"step3": "step2"}
