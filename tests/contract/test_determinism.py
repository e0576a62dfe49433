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
from sae_lens.saes.sae import SAEMetadata
from sae_lens.saes.standard_sae import StandardSAE, StandardSAEConfig
from typer.testing import CliRunner

from geomlens.analyses.registry import analysis_class, builtin_analyses
from geomlens.cli import app

SITE = "blocks.1.hook_resid_post"
WORDS = ["king", "queen", "man", "woman", "boy", "girl", "cat", "dog", "fox", "bird"]


def timing_free(result: dict) -> dict:
    """The result without the fields that measure time (they differ run to run by nature)."""
    provenance = {k: v for k, v in result["provenance"].items() if not k.endswith("_seconds")}
    return {**result, "provenance": provenance}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> dict[str, Path]:
    """A saved tiny GPT-2, an SAE for its last residual stream, and data with every column."""
    folder = tmp_path_factory.mktemp("determinism")
    torch.manual_seed(0)
    sae = StandardSAE(StandardSAEConfig(d_in=32, d_sae=24, metadata=SAEMetadata(hook_name=SITE)))
    sae.save_model(str(folder / "sae"))
    rows = []
    for context_number, context in enumerate(("on the mat", "in the house", "by the river")):
        for number, word in enumerate(WORDS[:8]):
            rows.append(
                {
                    "text": f"the {word} sat {context}",
                    # A binary concept present in every context (as abstraction / CCGP need).
                    "concept": "royal" if word in ("king", "queen", "boy") else "plain",
                    "context": context,
                    "coordinate": float(number + 2 * context_number),
                    "condition": ("calibration", "heldout", "noise")[context_number],
                }
            )
    data = folder / "data.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return {
        "model": saved_model(folder / "model", tiny_gpt2),
        "sae": folder / "sae",
        "data": data,
        "folder": folder,
    }


def options(name: str, workspace: dict[str, Path]) -> list[str]:
    """Small but complete settings: each run goes through finalise, bootstraps included."""
    chosen = {
        "abstraction": ["n_bootstrap=50", "n_shuffles=20", f"site={SITE}"],
        "ccgp": ["folds=2", f"site={SITE}"],
        "linearization-effect": ["layers=[0]", "n_bootstrap=20", "n_shuffles=10", "folds=2",
                                 f"site={SITE}"],
        "resolution": ["bootstrap=30", "samples=2000", f"site={SITE}", "pooling=last"],
        "similarity": [f"site={SITE}", "pooling=last"],
        "sae-features": [f"sae={workspace['sae']}"],
        "activation-stats": [f"site={SITE}"],
    }.get(name, [])  # fmt: skip
    return [part for option in chosen for part in ("--option", option)]


def run_cli(name: str, workspace: dict[str, Path], out: Path, seed: int) -> dict:
    done = CliRunner().invoke(
        app,
        ["run", name, "--model", str(workspace["model"]), "--data", str(workspace["data"]),
         "--seed", str(seed), "--batch-size", "5", "--out", str(out), *options(name, workspace)],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    return json.loads(out.read_text())


@pytest.mark.parametrize("name", builtin_analyses())
def test_same_command_same_seed_same_json(name, workspace, tmp_path):
    first = run_cli(name, workspace, tmp_path / "first.json", seed=7)
    # Disturb every global generator in between: a result that depended on them would change.
    torch.manual_seed(12345)
    import random

    import numpy as np

    np.random.seed(12345)
    random.seed(12345)
    second = run_cli(name, workspace, tmp_path / "second.json", seed=7)
    assert first["provenance"]["seed"] == 7
    assert timing_free(first) == timing_free(second)
    assert first["metrics"], "a result with no metrics proves nothing"


def test_the_seed_drives_the_bootstrap(workspace, tmp_path):
    """Another seed changes the bootstrap interval: the seed is used, not only recorded."""
    assert "n_bootstrap" in {f for f in analysis_class("abstraction").Config.__dataclass_fields__}
    seven = run_cli("abstraction", workspace, tmp_path / "seven.json", seed=7)
    eight = run_cli("abstraction", workspace, tmp_path / "eight.json", seed=8)
    assert eight["provenance"]["seed"] == 8
    assert seven["metrics"] != eight["metrics"] or seven["tables"] != eight["tables"]
