"""Determinism: the same command with the same seed gives the same result JSON (timing fields
aside) for every built-in analysis on CPU, bootstraps and shuffles included; the seed is
recorded, and a different seed does change what the seed draws."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from helpers.saved_models import saved_model
from helpers.tiny_models import tiny_gpt2
from sae_lens import SAE
from typer.testing import CliRunner

from geomlens.analyses.registry import analysis_class, builtin_analyses
from geomlens.cli import app


def timing_free(result: dict) -> dict:
    """The result without the fields that measure time (they differ run to run by nature)."""
    provenance = {k: v for k, v in result["provenance"].items() if not k.endswith("_seconds")}
    return {**result, "provenance": provenance}


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    """The contract checks' tiny GPT-2, saved as a user's model folder."""
    return saved_model(tmp_path_factory.mktemp("determinism") / "model", tiny_gpt2)


def command_line(name: str, folder: Path) -> list[str]:
    """The analysis's own example (its rows and options, the ones every contract check uses) as
    a user gives it on the command line: a .jsonl file, and ``--option KEY=VALUE`` with an SAE
    saved to a folder."""
    example = analysis_class(name).example
    data = folder / "data.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in example.rows()))
    options: dict[str, object] = dict(example.options)
    for key, value in (example.built_options() if example.built_options else {}).items():
        if not isinstance(value, SAE):
            raise TypeError(f"{name}'s example builds {key}={value!r}: give it a command-line form")
        value.save_model(str(folder / key))
        options[key] = str(folder / key)
    given = [part for key, value in options.items() for part in ("--option", f"{key}={value}")]
    return ["--data", str(data), "--batch-size", str(example.batch_size), *given]


def run_cli(name: str, model: Path, folder: Path, out: Path, seed: int) -> dict:
    done = CliRunner().invoke(
        app,
        ["run", name, "--model", str(model), "--seed", str(seed), "--out", str(out),
         *command_line(name, folder)],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    return json.loads(out.read_text())


@pytest.mark.parametrize("name", builtin_analyses())
def test_same_command_same_seed_same_json(name, model, tmp_path):
    first = run_cli(name, model, tmp_path, tmp_path / "first.json", seed=7)
    # Disturb every global generator in between: a result that depended on them would change.
    torch.manual_seed(12345)
    import random

    import numpy as np

    np.random.seed(12345)
    random.seed(12345)
    second = run_cli(name, model, tmp_path, tmp_path / "second.json", seed=7)
    assert first["provenance"]["seed"] == 7
    assert timing_free(first) == timing_free(second)
    assert first["metrics"], "a result with no metrics proves nothing"


def test_the_seed_drives_the_bootstrap(model, tmp_path):
    """Another seed changes the bootstrap interval: the seed is used, not only recorded."""
    assert "n_bootstrap" in {f for f in analysis_class("abstraction").Config.__dataclass_fields__}
    seven = run_cli("abstraction", model, tmp_path, tmp_path / "seven.json", seed=7)
    eight = run_cli("abstraction", model, tmp_path, tmp_path / "eight.json", seed=8)
    assert eight["provenance"]["seed"] == 8
    assert seven["metrics"] != eight["metrics"] or seven["tables"] != eight["tables"]
