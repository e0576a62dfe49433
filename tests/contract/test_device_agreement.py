"""tutorials/gpu/device_agreement.py runs on CPU with a tiny causal LM saved to a folder.

On CPU against CPU the gaps must be exactly zero (same kernels, same order): anything else
would mean a run depends on more than its weights, data and seed."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from helpers.saved_models import saved_model
from helpers.tiny_models import tiny_gpt2

from geomlens.analyses.registry import report_analyses

SCRIPT = Path(__file__).parents[2] / "tutorials" / "gpu" / "device_agreement.py"


def load_script():
    spec = importlib.util.spec_from_file_location("device_agreement", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_analysis_agrees_with_itself_on_cpu(tmp_path):
    folder = saved_model(tmp_path / "model", tiny_gpt2)
    out = tmp_path / "agreement.json"
    report = load_script().main(
        [
            "--model",
            str(folder),
            "--device",
            "cpu",
            "--rows",
            "8",
            "--max-length",
            "32",
            "--out",
            str(out),
        ]
    )
    # Every built-in the default report runs, as the folders declare them (a new folder joins
    # without editing this; llc, a sweep's column whose SGLD noise is drawn per device, is not).
    expected = set(report_analyses())
    assert len(expected) >= 7, expected
    assert expected <= set(report)
    for name in expected:
        assert report[name]["largest_gap"] == 0.0, (name, report[name])
    assert json.loads(out.read_text())["device"] == "cpu"


def test_a_real_gap_is_reported():
    module = load_script()
    import geomlens as gl

    a = gl.Result("x", metrics={"m.alpha": 0.5, "m.n": 10.0, "m.nan": float("nan")})
    b = gl.Result("x", metrics={"m.alpha": 0.6, "m.n": 10.0, "m.nan": float("nan")})
    gap, where = module.largest_gap(a, b)
    assert where == "m.alpha" and abs(gap - 0.1) < 1e-12
