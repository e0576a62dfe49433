"""A real training run for the sweep tests: a tiny GPT-2 trained on the two-factor sentences,
24 checkpoints (made once per session, copied where a test changes it)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from geomlens.experiments import two_factor_lm

#: 3 layers, so that the per-layer law has a layer between the first and the last.
TINY_RUN = two_factor_lm.TinyLMConfig(layers=3, width=32, steps=46, checkpoints="every:2")


@pytest.fixture(scope="session")
def tiny_lm_run(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tiny-lm") / "run"
    two_factor_lm.train(TINY_RUN, folder)
    return folder


@pytest.fixture
def tiny_lm_copy(tiny_lm_run, tmp_path) -> Path:
    """A copy of the run that a test may change."""
    return Path(shutil.copytree(tiny_lm_run, tmp_path / "run"))
