"""The example third-party plugin: pip-installed, discovered through its entry point, run."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

PLUGIN = Path(__file__).resolve().parents[2] / "examples" / "geomlens-anisotropy"


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory):
    """Install the plugin into a private folder (the test environment itself stays as it was)."""
    target = tmp_path_factory.mktemp("plugin-site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--target", str(target), str(PLUGIN)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return target


def run_geomlens(plugin_path, *args):
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(plugin_path), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, "-m", "geomlens", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_plugin_is_listed(plugin_path):
    listing = run_geomlens(plugin_path, "list")
    assert listing.returncode == 0, listing.stderr
    assert "anisotropy" in listing.stdout
    assert "activation-stats" in listing.stdout


def test_plugin_is_not_listed_without_install():
    listing = subprocess.run(
        [sys.executable, "-m", "geomlens", "list"], capture_output=True, text=True
    )
    assert "anisotropy" not in listing.stdout


def test_plugin_runs_on_a_model_and_matches_numpy(plugin_path, tmp_path):
    out = tmp_path / "aniso.json"
    ran = run_geomlens(
        plugin_path, "run", "anisotropy", "--model", "all-MiniLM-L6-v2", "--limit", "12",
        "--site", "blocks.2.hook_resid_post", "--out", str(out),
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    import json

    metrics = json.loads(out.read_text())["metrics"]
    assert metrics["inputs"] == 12.0
    assert -1.0 < metrics["mean_cosine"] < 1.0

    # The same plugin on recorded activations against a direct numpy computation.
    check = (
        "import numpy as np, geomlens as gl\n"
        "x = np.random.default_rng(1).normal(size=(50, 7)) + 0.5\n"
        "r = gl.run('anisotropy', {'blocks.0.hook_resid_post': x}, batch_size=8)\n"
        "u = x / np.linalg.norm(x, axis=1, keepdims=True)\n"
        "c = u @ u.T\n"
        "expected = (c.sum() - 50) / (50 * 49)\n"
        "assert abs(r['mean_cosine'] - expected) < 1e-10, (r['mean_cosine'], expected)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(plugin_path)}
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert np.isfinite(metrics["mean_cosine"])


def test_example_plugin_merge_into_an_empty_side_copies(plugin_path):
    """The docs' merge checklist: an empty side takes a copy of the other's tensors, so a later
    in-place change to one does not change the other."""
    check = (
        "import numpy as np, torch, geomlens as gl\n"
        "from geomlens.data.dataset import as_dataset\n"
        "from geomlens.engine import stream\n"
        "from geomlens.models.recorded import RecordedAdapter\n"
        "from geomlens_anisotropy import Anisotropy\n"
        "x = np.random.default_rng(2).normal(size=(20, 5))\n"
        "adapter = RecordedAdapter({'blocks.0.hook_resid_post': x})\n"
        "full, empty = Anisotropy(), Anisotropy()\n"
        "stream([full], adapter, as_dataset(None, num_rows=20), batch_size=8)\n"
        "empty.merge(full)\n"
        "before = empty.unit_sum.clone()\n"
        "full.unit_sum.add_(1.0)\n"
        "assert torch.equal(empty.unit_sum, before), 'merge kept the other side tensor'\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(plugin_path), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
