"""What `geomlens run` and `geomlens check` tell a newcomer: the data used, whether a run
resumed, every layer's headline metrics, the model checked and the checks that do not apply."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from geomlens.cli import app


@pytest.mark.slow
def test_run_names_its_data_and_shows_every_layer_and_resumption(tmp_path):
    out, checkpoint = tmp_path / "stats.json", tmp_path / "state"
    command = ["run", "activation-stats", "--out", str(out), "--checkpoint", str(checkpoint)]
    first = CliRunner().invoke(app, command)
    assert first.exit_code == 0, first.output
    assert "data: The bundled English corpus: 64 paragraphs" in first.output
    assert "(a fresh start)" in first.output and "resumed" not in first.output
    sites = json.loads(out.read_text())["provenance"]["sites"]
    for site in sites:  # every layer's headline row, not the first 20 metrics
        layer = site.split(".")[1]
        assert f"layer {layer}, residual stream after the block" in first.output
    assert "mean token norm" in first.output
    again = CliRunner().invoke(app, command)
    assert again.exit_code == 0, again.output
    assert f"resumed from {checkpoint}: 64 rows were already done" in again.output


def test_run_help_says_where_default_data_comes_from_and_how_options_parse():
    shown = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "400"}, terminal_width=400)
    text = " ".join(shown.output.split())
    assert "the analysis's own shipped data" in text
    assert "site=a,b is the one string 'a,b'" in text


@pytest.mark.slow
def test_check_names_the_model_and_what_it_skips():
    shown = CliRunner().invoke(app, ["check"])
    assert shown.exit_code == 0, shown.output
    assert "checking sentence-transformers/all-MiniLM-L6-v2" in shown.output
    assert "SKIP  sub-layers add up: not checked, post-LayerNorm blocks" in shown.output
