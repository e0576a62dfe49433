"""The folder is the analysis: a built-in's folder copied under a new name, with edits inside
that folder only, is a built-in that listing, ``run NAME --help``, ``run NAME``, the report's
plan and ``sweep`` all see; listing and ``--help`` read declarations without importing torch."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import geomlens
from geomlens.experiments import two_factor_lm

SOURCE = Path(geomlens.__file__).parent


def _geomlens(
    root: Path | None, *args: str, python_flags: tuple[str, ...] = ()
) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "MPLBACKEND": "Agg"}
    if root is not None:
        env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, *python_flags, "-m", "geomlens", *args],
        capture_output=True, text=True, env=env, timeout=900,
    )  # fmt: skip


@pytest.fixture(scope="module")
def copied(tmp_path_factory) -> Path:
    """A copy of the package whose analyses hold ``mean_stats``: activation-stats' folder copied,
    its declaration renamed (name, aliases, summary) inside that folder and nowhere else."""
    root = tmp_path_factory.mktemp("package")
    shutil.copytree(SOURCE, root / "geomlens", ignore=shutil.ignore_patterns("__pycache__"))
    folder = root / "geomlens" / "analyses" / "mean_stats"
    shutil.copytree(SOURCE / "analyses" / "activation_stats", folder,
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    declared = folder / "__init__.py"
    text = declared.read_text(encoding="utf-8")
    text = text.replace('name="activation-stats"', 'name="mean-stats"')
    text = re.sub(r"aliases=\([^)]*\),", "aliases=(),", text)
    text = text.replace('"Streaming per-dimension moments at each site."',
                        '"Mean activations, copied from activation-stats."')  # fmt: skip
    declared.write_text(text, encoding="utf-8")
    return root


def test_listing_sees_the_copied_folder(copied):
    done = _geomlens(copied, "list")
    assert done.returncode == 0, done.stderr
    assert "mean-stats  Mean activations, copied from activation-stats." in done.stdout
    assert "activation-stats  (aliases: activation_stats, stats)" in done.stdout


def test_run_help_reads_the_copied_declaration(copied):
    done = _geomlens(copied, "run", "mean-stats", "--help")
    assert done.returncode == 0, done.stderr
    assert "Options of mean-stats" in done.stdout and "dead_threshold = 0.0" in done.stdout


def test_run_runs_the_copied_analysis_on_its_default_data(copied, tmp_path):
    out = tmp_path / "mean.json"
    done = _geomlens(copied, "run", "mean-stats", "--out", str(out))
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert result["analysis"] == "mean-stats"
    assert result["metrics"]["blocks.0.hook_resid_post.mean_norm"] > 0


def test_the_report_plan_builds_the_copied_analysis(copied):
    script = (
        "from geomlens.analyses.registry import builtin_analyses\n"
        "from geomlens.report.plan import build_analysis, default_data_description\n"
        "assert 'mean-stats' in builtin_analyses(), builtin_analyses()\n"
        "built = build_analysis('mean-stats', quick=True)\n"
        "print(built.name, '|', default_data_description('mean-stats'))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(copied)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("mean-stats | The bundled English corpus")


def test_a_sweep_measures_the_copied_analysis(copied, tmp_path):
    series = tmp_path / "run"
    two_factor_lm.train(two_factor_lm.TinyLMConfig(steps=2, checkpoints="every:2"), series)
    out = tmp_path / "sweep"
    data = tmp_path / "short.txt"  # the series' tiny models take 32 positions
    data.write_text("the king is here\nthe queen was there\na cat sat\n", encoding="utf-8")
    arguments = ["sweep", "mean-stats", "--series", str(series), "--out", str(out)]
    done = _geomlens(copied, *arguments, "--data", str(data))
    assert done.returncode == 0, done.stderr
    table = (out / "trajectory.csv").read_text()
    assert ",mean-stats," in table and "mean_norm" in table


@pytest.mark.parametrize("args", [("list",), ("run", "resolution", "--help"), ("list", "-v")])
def test_listing_and_help_import_no_torch(args):
    done = _geomlens(None, *args, python_flags=("-X", "importtime"))
    assert done.returncode == 0, done.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "torch" not in imported and "transformers" not in imported
