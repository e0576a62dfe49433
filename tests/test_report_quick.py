"""`geomlens report --quick`: reuses a cached full-size SAE, and never overwrites a full report
without a word."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import geomlens as gl
from geomlens.cli import app
from geomlens.report.plan import QUICK_OPTIONS, build_analysis
from geomlens.sae.cache import cache_entry
from geomlens.sae.config import TrainingConfig, default_corpus_name
from geomlens.sae.training import cache_key


@pytest.fixture(scope="module")
def minilm():
    return gl.load()


def test_quick_reuses_a_cached_full_size_sae(minilm, tmp_path, monkeypatch):
    monkeypatch.setenv("GEOMLENS_SAE_CACHE", str(tmp_path))
    quick = build_analysis("sae-features", quick=True, adapter=minilm)
    assert quick.config.training == QUICK_OPTIONS["training"], "no full-size SAE yet: a small one"
    site = minilm.resolve_site(f"blocks.{minilm.n_layers // 2}.hook_resid_post")
    key = cache_key(minilm, site, default_corpus_name(), TrainingConfig())
    cache_entry(key, tmp_path).mkdir(parents=True)  # what a full report leaves behind
    reused = build_analysis("sae-features", quick=True, adapter=minilm)
    assert reused.config.training == {}, "the full-size SAE's config, so its cache entry is used"
    assert build_analysis("resolution", quick=True, adapter=minilm).config.bootstrap == 50


def test_quick_report_has_its_own_folder_and_says_what_it_overwrites(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    full = tmp_path / "report"
    full.mkdir()
    (full / "results.json").write_text(
        json.dumps({"provenance": {"quick": False, "started_utc": "2026-01-01T00:00:00+00:00"}})
    )
    ran = CliRunner().invoke(app, ["report", "--quick", "--analysis", "activation-stats"])
    assert ran.exit_code == 0, ran.output
    assert (tmp_path / "report-quick" / "index.html").exists()
    assert json.loads((full / "results.json").read_text())["provenance"]["quick"] is False
    again = CliRunner().invoke(
        app, ["report", "--quick", "--out", str(full), "--analysis", "activation-stats"]
    )
    assert again.exit_code == 0, again.output
    assert "overwrit" in again.output and "full report" in again.output
