"""scripts/regenerate_numbers.py: regions of README/docs rewritten from real results.

The results come from running `resolution` on planted representations (a known exponential
g), so the generated text is checked against the analysis's own output, not a mock."""

import importlib.util
import json
import sys

import numpy as np
import pytest
from helpers.paths import REPO
from helpers.planted_kernels import kernel_features

import geomlens as gl

ROOT = REPO
SITE = "blocks.0.hook_resid_post"


def _script():
    spec = importlib.util.spec_from_file_location(
        "regenerate_numbers", ROOT / "scripts" / "regenerate_numbers.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def results():
    line = np.arange(0.0, 61.0, 3.0)
    features = kernel_features(line, "exponential", 12.0, 0.1, features=512)
    result = gl.run(
        "resolution",
        {SITE: features.astype(np.float32)},
        {"coordinate": line},
        progress=False,
        similarity="cosine",
        bootstrap=10,
    )
    return {"resolution": result}


def _tree(tmp_path, body="stale text"):
    (tmp_path / "docs").mkdir()
    readme = tmp_path / "README.md"
    readme.write_text(
        f"Intro.\nOn MiniLM <!-- numbers:resolution-readme -->\n{body}\n"
        "<!-- /numbers:resolution-readme --> and more.\n"
    )
    doc = tmp_path / "docs" / "similarity.md"
    doc.write_text(
        f"# Page\n\n<!-- numbers:resolution-layers -->\n{body}\n<!-- /numbers:resolution-layers -->\n"
        "Tail.\n"
    )
    return readme, doc


def test_regions_are_rewritten_from_the_results_and_the_rest_is_kept(tmp_path, results):
    script = _script()
    registry = script.load_sections()
    readme, doc = _tree(tmp_path)
    paths = script.documents(tmp_path)
    assert paths == [readme, doc]
    changes = script.regenerate(paths, registry.sections, results)
    assert [c.path for c in changes] == [readme, doc]
    text = readme.read_text()
    assert text.startswith("Intro.\nOn MiniLM <!-- numbers:resolution-readme -->\n")
    assert text.endswith("\n<!-- /numbers:resolution-readme --> and more.\n")
    assert "stale text" not in text
    epsilon = results["resolution"][f"{SITE}.epsilon"]
    assert f"{epsilon:.0f}" in text
    table = doc.read_text()
    assert table.startswith("# Page\n\n") and table.endswith("Tail.\n")
    # The layer-0 row, with the family its planted curve was fitted by.
    (row,) = [line for line in table.splitlines() if line.startswith("| 0 | ")]
    assert "| exponential |" in row
    # A second pass finds nothing to change, and --check agrees.
    assert script.regenerate(paths, registry.sections, results, check=True) == []


def test_check_reports_a_stale_region_and_writes_nothing(tmp_path, results):
    script = _script()
    readme, doc = _tree(tmp_path)
    report = tmp_path / "report"
    report.mkdir()
    script.save_results(results, report / "results.json", {"test": True})
    before = readme.read_text(), doc.read_text()
    argv = ["--root", str(tmp_path), "--from-report", str(report)]
    assert script.main([*argv, "--check"]) == 1
    assert (readme.read_text(), doc.read_text()) == before
    assert script.main(argv) == 0
    assert script.main([*argv, "--check"]) == 0
    assert json.loads((report / "results.json").read_text())["results"]["resolution"]


def test_only_leaves_other_regions_alone(tmp_path, results):
    script = _script()
    readme, doc = _tree(tmp_path)
    registry = script.load_sections()
    script.regenerate(
        script.documents(tmp_path), registry.sections, results, only=["resolution-layers"]
    )
    assert "stale text" in readme.read_text()
    assert "stale text" not in doc.read_text()


def test_unknown_key_and_unpaired_marker_are_one_clear_error(tmp_path, results, capsys):
    script = _script()
    (tmp_path / "README.md").write_text(
        "<!-- numbers:nobody-owns -->x<!-- /numbers:nobody-owns -->"
    )
    report = tmp_path / "results.json"
    script.save_results(results, report, {})
    assert script.main(["--root", str(tmp_path), "--from-report", str(report)]) == 2
    assert "no section renders numbers key 'nobody-owns'" in capsys.readouterr().err
    (tmp_path / "README.md").write_text("<!-- numbers:resolution-readme --> open only")
    assert script.main(["--root", str(tmp_path), "--from-report", str(report)]) == 2
    assert "without their pair" in capsys.readouterr().err


def test_every_region_in_the_repository_has_a_section():
    # The repository's own README and docs: every marker pair is balanced and every key is
    # rendered by a registered module (the numbers themselves need a run: see --check).
    script = _script()
    registry = script.load_sections()
    found = script.keys_in(script.documents(ROOT))
    keys = [k for ks in found.values() for k in ks]
    assert "resolution-readme" in keys
    assert set(keys) <= set(registry.sections)


def test_monte_carlo_errors_are_quoted_to_two_significant_figures():
    # A Monte-Carlo error of 0.004 printed to one decimal read "± 0.0": no error at all.
    _script().load_sections()  # puts scripts/numbers on the path
    from _format import sig

    assert [sig(v) for v in (0.0043, 0.0996, 0.12, 1.54, 12.3, 152.0, -0.0031, 0.0)] == [
        "0.0043",
        "0.10",
        "0.12",
        "1.5",
        "12",
        "150",
        "−0.0031",
        "0",
    ]
    assert sig(float("nan")) == "—"
    from resolution import _interval  # scripts/numbers/resolution.py: the layers table's cells

    row = {
        "half_width": 2.31,
        "half_width_ci_low": 1.84,
        "half_width_ci_low_mc": 0.0043,
        "half_width_ci_high": 2.72,
        "half_width_ci_high_mc": 0.012,
    }
    assert _interval(row, "half_width", 1) == "2.3 (1.8 ± 0.0043 to 2.7 ± 0.012)"
