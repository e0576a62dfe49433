"""resolution's quantities mean what their names say, on planted data.

1. ε describes the measured curve (g(0) = 1, no amplitude divided out); a sharp drop then a
   slow tail gives back both scales; the theory's point uses the same unscaled g, so it
   agrees with the empirical one; g at d = 0 across texts is reported.
2. Δ is a noise floor in [0, 1]; the centring offset is reported on its own.
3. ⟨b⟩ is taken at the half-width (the same point of every family's curve) and the regime is
   read from it.
4. The Monte-Carlo switch of the (p_S, p_I) evaluation is recorded with its standard errors.
"""

import numpy as np
import pytest
from helpers.planted_kernels import kernel_features

import geomlens as gl
from geomlens.theory import resolution as theory
from geomlens.theory.balls import finite_ball

SITE = "blocks.0.hook_resid_post"
LINE = np.arange(0.0, 101.0, 2.0)  # 51 stimuli on a line, 2 apart


def _run(representations, coordinates, **options):
    options = {"similarity": "cosine", "bootstrap": 30, **options}
    data = options.pop("data", {"coordinate": coordinates})
    return gl.run(
        "resolution", {SITE: representations.astype(np.float32)}, data, progress=False, **options
    )


def _chosen(result):
    (row,) = [r for r in result.tables["fits"] if r["chosen"]]
    return row


def _independent(rows, dim, seed):
    """Nearly orthogonal unit vectors (one per row): similarity ~0 between any two."""
    noise = np.random.default_rng(seed).normal(size=(rows, dim))
    return noise / np.linalg.norm(noise, axis=1, keepdims=True)


# -- 1. ε of the measured curve -------------------------------------------------------------


def test_a_sharp_drop_then_a_slow_tail_gives_back_both_scales():
    fast, slow, share = 4.0, 40.0, 0.5
    planted = np.concatenate(
        [
            np.sqrt(share) * kernel_features(LINE, "exponential", fast, seed=1),
            np.sqrt(1 - share) * kernel_features(LINE, "exponential", slow, seed=2),
        ],
        axis=1,
    )
    result = _run(planted, LINE)
    assert _chosen(result)["family"] == "two-scale"
    assert result[f"{SITE}.epsilon"] == pytest.approx(slow, rel=0.15)
    assert result[f"{SITE}.epsilon_fast"] == pytest.approx(fast, rel=0.15)
    assert result[f"{SITE}.fast_share"] == pytest.approx(share, abs=0.05)
    # The measured similarity lost within the first bin (d = 2), beside ε.
    lost = 1 - (share * np.exp(-2 / fast) + (1 - share) * np.exp(-2 / slow))
    assert result[f"{SITE}.amplitude"] == pytest.approx(lost, abs=0.02)


def test_a_first_drop_is_not_divided_out_and_the_theory_point_matches_the_measured_one():
    # g(0) = 1 and g(d > 0) = 0.5 e^(−d/20): half of the similarity is lost at the first step
    # (every stimulus carries its own independent half). A fit with a free amplitude would
    # describe 0.5 e^(−d/20) rescaled to 1 at 0 and predict far too much interference.
    kept = 0.5
    planted = np.concatenate(
        [
            np.sqrt(kept) * kernel_features(LINE, "exponential", 20.0),
            np.sqrt(1 - kept) * _independent(len(LINE), 20000, seed=3),
        ],
        axis=1,
    )
    result = _run(planted, LINE)
    assert result[f"{SITE}.amplitude"] == pytest.approx(1 - kept * np.exp(-2 / 20), abs=0.02)
    assert result[f"{SITE}.epsilon"] == pytest.approx(20.0, rel=0.15)
    # Built from the same unscaled g, the theory's (p_S, p_I) is the measured one.
    assert result[f"{SITE}.p_identification_theory"] == pytest.approx(
        result[f"{SITE}.p_identification"], abs=0.01
    )
    assert result[f"{SITE}.p_similarity_theory"] == pytest.approx(
        result[f"{SITE}.p_similarity"], abs=0.02
    )


def test_g_at_zero_across_texts_is_the_same_stimulus_in_another_text():
    # Three texts per stimulus: each row is its stimulus's vector plus its own text noise,
    # so two texts of one stimulus have cosine `same` (the diagonal stays 1).
    same, texts = 0.8, 3
    stimulus = kernel_features(LINE, "exponential", 10.0)
    rows = np.repeat(stimulus, texts, axis=0)
    noise = _independent(len(rows), 20000, seed=4)
    planted = np.concatenate([np.sqrt(same) * rows, np.sqrt(1 - same) * noise], axis=1)
    coordinates = np.repeat(LINE, texts)
    result = _run(planted, coordinates, bootstrap=0)
    assert result[f"{SITE}.g0_across_texts"] == pytest.approx(same, abs=0.02)
    assert result[f"{SITE}.g0_across_texts_pairs"] == len(LINE) * 3  # C(3, 2) per stimulus
    # The similarity analysis reports it too; one text per stimulus has nothing to compare.
    similarity = gl.run(
        "similarity",
        {SITE: planted.astype(np.float32)},
        {"coordinate": coordinates},
        progress=False,
        similarity="cosine",
    )
    assert similarity[f"{SITE}.g0_across_texts"] == pytest.approx(same, abs=0.02)
    alone = _run(stimulus, LINE, bootstrap=0)
    assert np.isnan(alone[f"{SITE}.g0_across_texts"])


# -- 2. Δ is a noise floor ------------------------------------------------------------------


def test_centring_gives_a_non_negative_floor_and_a_separate_offset():
    # Centred cosines of a bounded range make far pairs negative; that is the offset, not Δ.
    result = _run(kernel_features(LINE, "exponential", 15.0), LINE, similarity="centred-cosine")
    assert 0.0 <= result[f"{SITE}.delta"] <= 1.0
    assert result[f"{SITE}.delta_ci_low"] >= 0.0
    assert result[f"{SITE}.offset"] < -0.05
    assert result[f"{SITE}.offset_ci_low"] <= result[f"{SITE}.offset"]
    assert result[f"{SITE}.offset"] <= result[f"{SITE}.offset_ci_high"]
    (scope,) = result.tables["scale_depends_on"]
    assert scope["similarity"] == "centred-cosine"
    assert (scope["coordinate_low"], scope["coordinate_high"]) == (0.0, 100.0)
    assert "stimulus range" in scope["note"] and "centring" in scope["note"]


def test_an_uncentred_floor_is_delta_with_no_offset():
    result = _run(kernel_features(LINE, "exponential", 12.0, 0.3), LINE)
    assert result[f"{SITE}.delta"] == pytest.approx(0.3, abs=0.03)
    assert result[f"{SITE}.offset"] == 0.0


# -- 3. ⟨b⟩ at the half-width, the regime from ⟨b⟩ ------------------------------------------


@pytest.mark.parametrize(
    "family, epsilon",
    [
        ("exponential", 20.0 / np.log(2)),
        ("gaussian", 20.0 / np.sqrt(2 * np.log(2))),
        ("linear", 40.0),
    ],
)
def test_mean_b_is_taken_at_the_half_width_whatever_the_family(family, epsilon):
    # Three families with the same half-width (20): the same ⟨b⟩, and the regime is ⟨b⟩'s.
    result = _run(kernel_features(LINE, family, epsilon), LINE)
    distances = np.abs(np.subtract.outer(LINE, LINE))
    half_width = result[f"{SITE}.half_width"]
    assert half_width == pytest.approx(20.0, rel=0.05)
    mean_b = result[f"{SITE}.mean_b"]
    assert mean_b == pytest.approx(finite_ball(distances, half_width).mean())
    assert mean_b == pytest.approx(finite_ball(distances, 20.0).mean(), abs=2 / len(LINE))
    (placement,) = result.tables["placement"]
    assert placement["regime"] == theory.regime(mean_b)
    assert 0.0 <= result[f"{SITE}.regime_agreement"] <= 1.0
    assert result[f"{SITE}.mean_b_ci_low"] <= mean_b <= result[f"{SITE}.mean_b_ci_high"]


@pytest.mark.parametrize(
    "family, epsilon, similarity",
    [("linear", 80.0, "centred-cosine"), ("exponential", 30.0, "cosine")],
)
def test_the_regime_never_contradicts_mean_b(family, epsilon, similarity):
    # Read from the nearest point of the front, these profiles were "trade-off" with
    # ⟨b⟩ = 0.73 (an interference value) and "interference" with ⟨b⟩ = 0.49.
    result = _run(kernel_features(LINE, family, epsilon), LINE, similarity=similarity)
    (placement,) = result.tables["placement"]
    assert placement["regime"] == theory.regime(result[f"{SITE}.mean_b"])


# -- 4. The Monte-Carlo switch is recorded --------------------------------------------------


def test_a_large_stimulus_set_records_monte_carlo_and_its_standard_errors():
    # Above ~310 stimuli (N³ > 3·10⁷ trials) the evaluation samples instead of enumerating.
    line = np.arange(320.0)
    planted = kernel_features(line, "exponential", 15.0, features=256)
    result = _run(planted, line, bootstrap=0, samples=20_000)
    (placement,) = result.tables["placement"]
    assert placement["method"] == "monte_carlo"
    assert result[f"{SITE}.samples"] == 20_000
    for key in ("p_similarity_se", "p_identification_se", "p_similarity_theory_se"):
        assert 0 < result[f"{SITE}.{key}"] < 0.01, key
    small = _run(kernel_features(LINE, "exponential", 15.0), LINE, bootstrap=0)
    assert small.tables["placement"][0]["method"] == "exact"
    assert small[f"{SITE}.samples"] == 0
    assert small[f"{SITE}.p_similarity_se"] == 0.0


# -- The plain-words readings follow the definitions ----------------------------------------


def test_readings_say_how_sure_the_regime_is_and_what_the_text_does():
    from geomlens.report.readings import read

    same, texts = 0.8, 3
    rows = np.repeat(kernel_features(LINE, "exponential", 10.0), texts, axis=0)
    noise = _independent(len(rows), 20000, seed=5)
    planted = np.concatenate([np.sqrt(same) * rows, np.sqrt(1 - same) * noise], axis=1)
    result = _run(planted, np.repeat(LINE, texts), bootstrap=20)
    words = " ".join(read(result))
    regime = result.tables["placement"][0]["regime"]
    agreement = f"{100 * result[f'{SITE}.regime_agreement']:.0f} %"
    assert (
        f"the {regime} regime, which survives one grid step either way and {agreement} of "
        "the bootstrap resamples agree on"
    ) in words
    assert f"⟨b⟩ = {result[f'{SITE}.mean_b']:.3g}" in words
    across = result[f"{SITE}.g0_across_texts"]
    assert f"The same stimulus in another text has similarity {across:.3g}" in words
