"""The command line with a user's stimulus file: coordinates and metric come from the file."""

import json

import pytest
from typer.testing import CliRunner

import geomlens as gl
from geomlens.cli import app
from geomlens.data import stimuli

runner = CliRunner()


def test_run_similarity_on_a_users_hue_file(tmp_path):
    hues = stimuli.hue_circle(step=60, words=True)
    path = tmp_path / "hues.jsonl"
    path.write_text(
        "\n".join(
            json.dumps({"text": t, "coordinate": float(c), "metric": hues.metric})
            for t, c in zip(hues.texts, hues.coordinates)
        )
    )
    out = tmp_path / "hues.json"
    outcome = runner.invoke(
        app,
        [
            "run",
            "similarity",
            "--data",
            str(path),
            "--out",
            str(out),
            "--site",
            "blocks.5.hook_resid_post",
        ],
    )
    assert outcome.exit_code == 0, outcome.output
    result = gl.Result.from_json(out)
    distances = [r["distance"] for r in result.tables["g_of_d"]]
    assert max(distances) == 180  # circular: no two hues are more than half a turn apart
    assert (
        result["blocks.5.hook_resid_post.stimuli"] == 12
    )  # 6 numeric hues + 12 words at 12 angles
    assert result.config["metric"] is None  # chosen from the file's metric column


@pytest.mark.parametrize(
    "option, message",
    [("metric=circle", "Unknown metric"), ("similarity=dot", "similarity must be")],
)
def test_bad_options_stop_before_the_model_loads(option, message, tmp_path):
    outcome = runner.invoke(
        app, ["run", "resolution", "--option", option, "--out", str(tmp_path / "r.json")]
    )
    assert outcome.exit_code != 0
    assert message in outcome.output
