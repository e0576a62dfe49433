import json
import math

import matplotlib.pyplot as plt
import pytest
from helpers.minimal_analysis import register_minimal_analysis

import geomlens as gl
from geomlens.atomic_files import atomic_save_figure, atomic_write_text
from geomlens.results import Result


def make_result():
    return gl.Result(
        "activation-stats",
        metrics={"a": 1.5, "b": math.inf, "c": math.nan},
        tables={"rows": [{"x": 1, "y": 2.0}, {"x": 2, "y": 3.0}]},
        config={"site": "blocks.0.hook_resid_post"},
        provenance={"model_id": "m", "backend": "recorded"},
    )


def test_json_round_trip(tmp_path):
    path = tmp_path / "sub" / "r.json"
    make_result().to_json(path)
    back = gl.Result.from_json(path)
    assert (
        back.metrics["a"] == 1.5 and back.metrics["b"] == math.inf and math.isnan(back.metrics["c"])
    )
    assert back.tables == make_result().tables
    assert back.provenance["backend"] == "recorded"
    json.loads(path.read_text())  # strict JSON, no NaN literals


def test_to_frame():
    result = make_result()
    assert list(result.to_frame()["metric"]) == ["a", "b", "c"]
    assert result.to_frame("rows")["y"].tolist() == [2.0, 3.0]
    with pytest.raises(KeyError, match="rows"):
        result.to_frame("nope")


def test_failed_write_leaves_old_file_and_no_temp(tmp_path):
    path = tmp_path / "r.json"
    atomic_write_text(path, "old")
    result = gl.Result("x", metrics={"a": 1.0}, config={"bad": object()})
    with pytest.raises(TypeError):
        result.to_json(path)
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_failed_figure_save_leaves_nothing(tmp_path):
    figure = plt.figure()
    with pytest.raises(ValueError):
        atomic_save_figure(figure, tmp_path / "f.notaformat")
    assert list(tmp_path.iterdir()) == []
    atomic_save_figure(figure, tmp_path / "f.png")
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"


def test_newer_schema_is_refused():
    with pytest.raises(ValueError, match="newer geomlens"):
        gl.Result.from_dict({"analysis": "x", "schema_version": 999})


def test_missing_metric_message():
    with pytest.raises(KeyError, match="has no metric 'zz'"):
        make_result()["zz"]


def test_written_files_get_ordinary_permissions(tmp_path):
    import os
    import stat

    umask = os.umask(0o022)
    try:
        path = tmp_path / "r.json"
        make_result().to_json(path)
        figure_path = atomic_save_figure(plt.figure(), tmp_path / "f.png")
    finally:
        os.umask(umask)
    for written in (path, figure_path):
        assert stat.S_IMODE(written.stat().st_mode) == 0o644


def test_repr_is_a_short_summary():
    result = Result(
        "activation-stats",
        metrics={f"m{i}": float(i) for i in range(500)},
        tables={"per_dimension": [{"dim": i, "mean": 0.5} for i in range(10_000)]},
        provenance={"model_id": "tiny"},
    )
    text = repr(result)
    assert len(text) < 300, text
    assert "'activation-stats'" in text and "500 metrics" in text and "10000 rows" in text


def test_results_module_knows_nothing_of_analyses_or_the_registry():
    import subprocess
    import sys

    code = (
        "import sys, geomlens.results\n"
        "assert not any(m.startswith(('geomlens.registry', 'geomlens.analyses')) "
        "for m in sys.modules), sorted(m for m in sys.modules if m.startswith('geomlens'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_plot_goes_through_the_analysis(tmp_path):
    import numpy as np

    import geomlens as gl

    x = np.random.default_rng(0).normal(size=(20, 4))
    result = Result.from_json(gl.run("activation-stats", {"blocks.0.hook_resid_post": x}).to_json())
    figure = gl.plot(result, tmp_path / "a.png")
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"
    assert figure.axes[0].get_ylabel() == "mean token norm"
    result.plot(tmp_path / "b.png")  # the method reaches the same drawing
    assert (tmp_path / "b.png").stat().st_size > 0


def test_plot_of_an_analysis_without_a_figure_says_so():
    import geomlens as gl

    register_minimal_analysis("test-results-no-figure")

    with pytest.raises(NotImplementedError, match="draws no figure"):
        gl.plot(Result("test-results-no-figure"))
