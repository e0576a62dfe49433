"""What a new user hit on first contact with the CLI: each case gives one line on stderr and exit
2 before any model loads (or a documented behaviour), and nothing is written."""

import json
from pathlib import Path

import pytest
from helpers.minimal_analysis import register_minimal_analysis
from helpers.saved_models import saved_model
from helpers.tiny_models import tiny_bert
from typer.testing import CliRunner

from geomlens.cli import app

runner = CliRunner()
RUN = ["run", "activation-stats"]


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny BERT saved as a user's local model folder (safetensors, tokenizer beside it)."""
    return saved_model(tmp_path_factory.mktemp("tiny-bert"), tiny_bert)


def one_line_error(done, *fragments: str) -> str:
    """The run exited 2 with a single ``error:`` line naming every fragment, no traceback."""
    assert done.exit_code == 2, done.output
    lines = [line for line in done.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), done.output
    assert "Traceback" not in done.output
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def test_out_naming_a_directory_is_refused(tmp_path):
    one_line_error(runner.invoke(app, [*RUN, "--out", str(tmp_path)]), "is a directory", ".json")


def test_out_with_another_suffix_is_refused(tmp_path):
    done = runner.invoke(app, [*RUN, "--out", str(tmp_path / "r.csv")])
    one_line_error(done, "must end in .json", "r.json")
    assert not (tmp_path / "r.csv").exists()


def test_out_in_an_unwritable_location_is_refused(tmp_path):
    # A path under a plain file cannot be created, whoever runs the test (even root).
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    done = runner.invoke(app, [*RUN, "--out", str(blocker / "r.json")])
    one_line_error(done, "cannot write", "writable")


@pytest.mark.parametrize(
    ("device", "fragment"),
    [("gpu", "Unknown device 'gpu'"), ("mps", "MPS is not available"), ("cuda:7", "cuda")],
)
def test_unavailable_or_unknown_device(tmp_path, device, fragment):
    import torch

    if device != "gpu" and (torch.cuda.is_available() or torch.backends.mps.is_available()):
        pytest.skip("this machine has an accelerator")
    done = runner.invoke(app, [*RUN, "--device", device, "--out", str(tmp_path / "r.json")])
    one_line_error(done, fragment)


def test_plot_for_an_analysis_without_a_figure_is_refused_before_running(tmp_path):
    from geomlens.analyses.plotting import has_plot
    from geomlens.analyses.registry import ANALYSES, analysis_class, list_analyses

    without = [name for name in list_analyses() if not has_plot(analysis_class(name))]
    planted = not without
    if planted:  # every built-in draws: a plugin-like analysis without a plot stands in
        without = [register_minimal_analysis("test-no-figure").name]
    out = tmp_path / "r.json"
    try:
        done = runner.invoke(
            app, ["run", without[0], "--plot", str(tmp_path / "f.png"), "--out", str(out)]
        )
    finally:  # the listing of later tests on this worker shows the built-ins only
        if planted:
            ANALYSES.remove("test-no-figure")
    one_line_error(done, "draws no figure", "without --plot")
    assert not out.exists()  # checked before running, not after the JSON was written


def test_plot_with_an_unknown_image_suffix_is_refused(tmp_path):
    one_line_error(runner.invoke(app, [*RUN, "--plot", str(tmp_path / "f.xyz")]), ".png")


def test_blank_text_file_says_it_holds_no_inputs(tmp_path):
    data = tmp_path / "blank.txt"
    data.write_text("\n   \n\n")
    one_line_error(runner.invoke(app, [*RUN, "--data", str(data)]), "holds no inputs")


def test_json_of_something_else_says_what_json_must_hold(tmp_path):
    data = tmp_path / "d.json"
    data.write_text(json.dumps([1, 2, 3]))
    one_line_error(runner.invoke(app, [*RUN, "--data", str(data)]), "list of strings")
    data.write_text(json.dumps({"texts": ["a"]}))
    one_line_error(runner.invoke(app, [*RUN, "--data", str(data)]), "'text' column")
    data.write_text("{not json")
    one_line_error(runner.invoke(app, [*RUN, "--data", str(data)]), "not valid JSON")


def test_wrongly_typed_option_names_the_option_and_its_type(tmp_path):
    done = runner.invoke(app, [*RUN, "--option", "dead_threshold=abc"])
    one_line_error(done, "'dead_threshold'", "float", "'abc'")


@pytest.mark.parametrize(
    ("flag", "bound", "meaning"),
    [
        ("--limit", "at least 1", "inputs"),
        ("--max-length", "at least 1", "tokens"),
        # The batch size has an upper bound too: its message names the whole range.
        ("--batch-size", "from 1 to 65536", "inputs per forward pass"),
    ],
)
def test_zero_counts_are_refused_not_reinterpreted(flag, bound, meaning):
    one_line_error(runner.invoke(app, [*RUN, flag, "0"]), flag, bound, meaning, "got 0")


def test_site_given_twice_is_refused():
    done = runner.invoke(
        app,
        [*RUN, "--site", "blocks.0.hook_resid_post", "--option", "site=blocks.1.hook_resid_post"],
    )
    one_line_error(done, "--site", "--option site=", "not both")


def test_bare_geomlens_prints_help_and_succeeds():
    done = runner.invoke(app, [])
    assert done.exit_code == 0
    assert "run" in done.output and "list" in done.output and "sites" in done.output


def test_check_on_recorded_activations_says_there_is_no_model():
    import numpy as np

    import geomlens as gl
    from geomlens.checks.conformance import check_adapter

    recorded = gl.attach({"blocks.0.hook_resid_post": np.zeros((4, 3))})
    with pytest.raises(ValueError, match="recorded activations have none") as info:
        check_adapter(recorded)
    assert "label" not in str(info.value)


def test_json_list_of_strings_is_accepted_and_the_source_recorded(tmp_path, tiny_model_dir):
    data = tmp_path / "texts.json"
    data.write_text(json.dumps(["the king sat", "a cat sat on the mat", "the dog"]))
    out = tmp_path / "r.json"
    done = runner.invoke(
        app,
        [*RUN, "--model", str(tiny_model_dir), "--data", str(data), "--out", str(out),
         "--option", "pooling=last"],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    result = json.loads(out.read_text())
    assert result["provenance"]["data_source"] == f"file {data} (3 inputs)"
    assert result["provenance"]["trust_remote_code"] is False
    assert result["metrics"]["blocks.0.hook_resid_post.rows"] == 3.0
    # Same defaults as the Python API: one place for both.
    from geomlens.inputs.batches import DEFAULT_BATCH_SIZE, DEFAULT_MAX_LENGTH

    assert result["provenance"]["batch_size"] == DEFAULT_BATCH_SIZE
    assert result["provenance"]["max_length"] == DEFAULT_MAX_LENGTH


def test_sites_lists_the_models_sites_in_forward_order(tiny_model_dir):
    import geomlens as gl

    done = runner.invoke(app, ["sites", str(tiny_model_dir)])
    assert done.exit_code == 0, done.output
    listed = [line.strip() for line in done.stdout.splitlines()[1:] if line.strip()]
    assert listed == gl.load(tiny_model_dir).sites()
    assert "blocks.1.hook_resid_post" in listed


@pytest.fixture
def broken_plugin(tmp_path, monkeypatch):
    """An installed plugin (an entry point in a dist-info on sys.path) whose module fails to
    import; the registry rescans entry points for this test and is restored after it."""
    from geomlens.analyses.registry import ANALYSES

    info = tmp_path / "broken_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[geomlens.analyses]\nbroken = broken_plugin_mod\n")
    (tmp_path / "broken_plugin_mod.py").write_text("import a_dependency_nobody_installed\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(ANALYSES, "_entry_points_loaded", False)
    monkeypatch.setattr(ANALYSES, "load_errors", {})


def test_broken_plugin_is_listed_with_its_error(broken_plugin):
    done = runner.invoke(app, ["list"])
    assert done.exit_code == 1
    assert "activation-stats" in done.stdout
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("broken")]
    assert "failed to load" in line and "a_dependency_nobody_installed" in line


def test_running_a_broken_plugin_reports_its_error_once_before_loading_a_model(
    broken_plugin, monkeypatch
):
    import geomlens.models.attach

    def no_model_may_load(*args, **kwargs):
        raise AssertionError("a model was loaded before the plugin error was reported")

    monkeypatch.setattr(geomlens.models.attach, "load", no_model_may_load)
    done = runner.invoke(app, ["run", "broken"])
    line = one_line_error(done, "plugin", "failed to load")
    assert line.count("a_dependency_nobody_installed") == 1


def test_list_shows_declared_option_ranges():
    done = runner.invoke(app, ["list", "-v"])
    assert done.exit_code == 0
    folds = [line for line in done.stdout.splitlines() if line.strip().startswith("folds =")]
    assert folds and all(line.endswith("[≥ 2]") for line in folds)
    confidence = [line for line in done.stdout.splitlines() if "confidence = 0.95" in line]
    assert confidence and all(line.endswith("[0 … 1]") for line in confidence)


def test_a_broken_plugin_from_python_raises_its_load_error(broken_plugin):
    import geomlens as gl
    from geomlens.analyses.registry import PluginLoadError

    with pytest.raises(PluginLoadError, match="a_dependency_nobody_installed"):
        gl.analysis_class("broken")
    assert "activation-stats" in gl.list_analyses()  # the others still load
