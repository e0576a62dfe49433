"""`geomlens report --quick`: reuses a cached full-size SAE, and never overwrites a full report
without a word."""

from __future__ import annotations

import json

import numpy as np
from typer.testing import CliRunner

from geomlens.analyses.registry import declaration
from geomlens.cli import app
from geomlens.data.prompts import choice_prompts
from geomlens.report.causal_lm import CAUSAL_LM_ANALYSES, QUICK_LANGUAGE_PAIRS
from geomlens.report.folder import MANIFEST, MANIFEST_FORMAT, sha256_of
from geomlens.report.plan import build_analysis, quick_subset
from geomlens.sae.cache import cache_entry
from geomlens.sae.config import TrainingConfig, default_corpus_name
from geomlens.sae.training import cache_key


def test_quick_reuses_a_cached_full_size_sae(minilm, tmp_path, monkeypatch):
    monkeypatch.setenv("GEOMLENS_SAE_CACHE", str(tmp_path))
    quick = build_analysis("sae-features", quick=True, adapter=minilm)
    assert quick.config.training == declaration("sae-features").quick["training"], (
        "no full-size SAE yet: a small one"
    )
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
    # An earlier full report as geomlens leaves it: its manifest proves the file is geomlens's.
    (full / MANIFEST).write_text(
        json.dumps(
            {
                "format": MANIFEST_FORMAT,
                "files": {"results.json": [sha256_of(full / "results.json")]},
            }
        )
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
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "results.json").write_text("{}")  # a file geomlens did not write: never replaced
    refused = CliRunner().invoke(
        app, ["report", "--quick", "--out", str(mine), "--analysis", "activation-stats"]
    )
    assert refused.exit_code == 2 and "did not write" in refused.output
    assert (mine / "results.json").read_text() == "{}"


def test_quick_subset_keeps_whole_trials_in_every_rotation_and_both_tests():
    """A behavioural choice set shows each trial in all n rotations of its options, so that a
    preference for a position or label cancels: a quick cut keeps or drops a trial whole, and
    keeps both tests and every n."""
    data = choice_prompts(
        list(range(1500, 2001, 10)), candidates=(2, 4), trials=12, labels="letters",
        rotations=True,
    )  # fmt: skip
    small = quick_subset(data, max_rows=32)
    assert len(small) < len(data)
    trials, tests = small.columns["trial"], small.columns["test"]
    assert set(tests) == {"similarity", "identification"}
    sizes = set()
    for trial in set(trials.tolist()):
        rows = trials == trial
        n = len(small.columns["options"][np.flatnonzero(rows)[0]])
        assert rows.sum() == n, f"trial {trial}: {rows.sum()} of its {n} rotations kept"
        sizes.add(n)
    assert sizes == {2, 4}


def test_the_quick_section_runs_fewer_language_pairs():
    (linearization,) = [s for s in CAUSAL_LM_ANALYSES if s.name == "linearization-effect"]
    full = linearization.data(None, False)
    quick = linearization.data(None, True)
    assert set(quick["task"]) == set(QUICK_LANGUAGE_PAIRS)
    assert len(set(full["task"])) == 15 and len(quick["text"]) < len(full["text"])
