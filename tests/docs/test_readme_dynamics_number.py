"""README's "follows the exact α(t) to within X" is the tutorial's own run (log:40, 3,000
steps at lr 0.01): its largest |measured − exact| is at most X, and X is that number rounded
up at its last digit."""

from __future__ import annotations

import re

from helpers.paths import REPO

import geomlens as gl
from geomlens.experiments import abstraction_dynamics


def test_readme_bound_holds_the_tutorials_residual(tmp_path):
    text = (REPO / "README.md").read_text(encoding="utf-8")
    (quoted,) = re.findall(r"follows the exact α\(t\) to within ([0-9.]+)", " ".join(text.split()))
    config = abstraction_dynamics.AbstractionDynamicsConfig(steps=3000, checkpoints="log:40")
    abstraction_dynamics.train(config, tmp_path / "run")
    outcome = gl.sweep("abstraction", tmp_path / "run", progress=False, n_bootstrap=0, n_shuffles=0)
    residual = outcome.theory["exact"]["max_abs_residual"]
    step = 10.0 ** -len(quoted.split(".")[1])
    assert residual <= float(quoted) < residual + step
