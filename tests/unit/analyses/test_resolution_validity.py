"""Issue 36: where the design, not the model, would set a number: the binning, the fits
table's guards, ⟨b⟩'s grid step, the stimulus range, and corrected α at low reliability."""

import numpy as np
import pytest
from helpers.planted_kernels import kernel_features, run_planted

from geomlens.analyses.similarity import distance_bins
from geomlens.analyses.similarity.analysis import g_of_d

SITE = "blocks.0.hook_resid_post"


def _run(representations, coordinates, **options):
    return run_planted(representations, coordinates, site=SITE, bootstrap=20, **options)


def test_past_128_distances_the_first_bins_keep_the_exact_grid():
    line = np.arange(200.0)
    distances = np.abs(np.subtract.outer(line, line))
    edges = distance_bins(distances, None)
    assert len(edges) - 1 <= 129
    rows = g_of_d(distances, np.exp(-distances / 3), None)
    assert rows[0]["distance"] == 1.0
    # Every distance with 1/128 of the pairs (155.5) keeps its own bin: 1, 2, ... up to 44.
    exact = [r for r in rows if r["distance_low"] == r["distance_high"]]
    assert [r["distance"] for r in exact[:44]] == list(np.arange(1.0, 45.0))
    # Only the sparse tail is pooled, and each row says which distances it holds.
    pooled = [r for r in rows if r["distance_low"] < r["distance_high"]]
    assert pooled and min(r["distance_low"] for r in pooled) > 44
    assert sum(r["count"] for r in rows) == 200 * 199 // 2


def test_asked_for_bins_are_equal_width():
    line = np.arange(200.0)
    distances = np.abs(np.subtract.outer(line, line))
    assert len(distance_bins(distances, 10)) == 11


def test_a_planted_laplace_half_width_does_not_depend_on_the_number_of_stimuli():
    widths = []
    for size in (50, 100, 200):
        line = np.arange(float(size))
        result = _run(kernel_features(line, "exponential", 3.0), line)
        assert result[f"{SITE}.first_distance"] == 1.0
        widths.append(result[f"{SITE}.half_width"])
    assert np.all(np.isfinite(widths))
    assert max(widths) / min(widths) < 1.05
    assert widths[0] == pytest.approx(3.0 * np.log(2.0), rel=0.05)


def _two_scales(line, fast, slow, share):
    """Representations whose cosine is share e^(−d/fast) + (1 − share) e^(−d/slow)."""
    return np.concatenate(
        [
            np.sqrt(share) * kernel_features(line, "exponential", fast, seed=1),
            np.sqrt(1 - share) * kernel_features(line, "exponential", slow, seed=2),
        ],
        axis=1,
    )


def test_the_fits_table_shows_no_scale_below_d1_as_a_number():
    line = np.arange(60.0)  # d₁ = 1; the fast scale 0.5 is below it
    result = _run(_two_scales(line, 0.5, 20.0, 0.4), line)
    d1 = result[f"{SITE}.first_distance"]
    (two,) = [r for r in result.tables["fits"] if r["family"] == "two-scale"]
    assert np.isnan(two["epsilon_fast"]) and two["epsilon_fast_censored"] == -1
    assert "epsilon_fast < d₁" in two["unresolved"]
    for row in result.tables["fits"]:
        for name in ("epsilon", "half_width", "epsilon_fast"):
            assert np.isnan(row[name]) or row[name] >= d1, (row["family"], name, row[name])
            if np.isnan(row[name]) and row[f"{name}_censored"] in (-1, 1):
                assert name in row["unresolved"]
    # The figure draws the chosen fit from the g_of_d table, not from the guarded scales.
    assert all(np.isfinite(r["fitted"]) for r in result.tables["g_of_d"])
