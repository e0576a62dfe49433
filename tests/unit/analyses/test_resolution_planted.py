"""resolution on planted ground truth through the recorded backend: the family and ε of a
known g(d), and the empirical (p_S, p_I) of known similarity matrices against the theory."""

import numpy as np
import pytest
from helpers.planted_kernels import kernel_features, run_planted

import geomlens as gl
from geomlens.analyses.resolution import FAMILIES, Resolution, fit_profile
from geomlens.analyses.similarity import distance_bins
from geomlens.data.dataset import as_dataset
from geomlens.engine import stream
from geomlens.models.recorded import RecordedAdapter
from geomlens.theory import resolution as theory
from geomlens.theory.balls import finite_ball
from geomlens.theory.finite_sets import evaluate

SITE = "blocks.0.hook_resid_post"
LINE = np.arange(0.0, 101.0, 2.0)  # 51 stimuli on a line, 2 apart


def _run(representations, coordinates, **options):
    return run_planted(representations, coordinates, site=SITE, **options)


@pytest.mark.parametrize(
    "family, epsilon, delta",
    [
        ("linear", 12.0, 0.0),
        ("linear", 30.0, 0.2),
        ("exponential", 8.0, 0.1),
        ("exponential", 20.0, 0.3),
        ("gaussian", 6.0, 0.0),
        ("gaussian", 15.0, 0.25),
    ],
)
def test_planted_kernel_family_and_epsilon_are_recovered(family, epsilon, delta):
    result = _run(kernel_features(LINE, family, epsilon, delta), LINE)
    chosen = [row for row in result.tables["fits"] if row["chosen"]]
    assert [row["family"] for row in chosen] == [family]
    assert result[f"{SITE}.epsilon"] == pytest.approx(epsilon, rel=0.1)
    assert result[f"{SITE}.delta"] == pytest.approx(delta, abs=0.05)
    assert result[f"{SITE}.epsilon_ci_low"] <= result[f"{SITE}.epsilon"]
    assert result[f"{SITE}.epsilon"] <= result[f"{SITE}.epsilon_ci_high"]


@pytest.mark.parametrize("epsilon, delta", [(9.0, 0.0), (21.0, 0.15), (41.0, 0.3)])
def test_planted_step_profile_is_recovered(epsilon, delta):
    # A step is not a positive-definite kernel, so no representation has it as its exact
    # cosine; the fitting is checked on a noisy step similarity matrix directly.
    rng = np.random.default_rng(1)
    distances = np.abs(np.subtract.outer(LINE, LINE))
    noise = rng.normal(0, 0.05, distances.shape)
    similarity = np.where(distances < epsilon, 1.0, delta) + (noise + noise.T) / 2
    fits = fit_profile(distances, similarity, distance_bins(distances, None))
    chosen = min(fits, key=lambda f: f.aic)
    assert chosen.family == "step"
    assert chosen.epsilon == pytest.approx(epsilon, rel=0.1)
    assert chosen.delta == pytest.approx(delta, abs=0.03)
    assert [f.family for f in fits] == [*FAMILIES, "flat"]


def _clustered_step():
    """Stimuli in clusters of unequal size, far apart: one-hot cluster codes have cosine 1
    inside a cluster and 0 between, a step g with ε between the two scales."""
    sizes = [1, 2, 3, 5, 8]
    coordinates = np.concatenate([100.0 * k + np.arange(size) for k, size in enumerate(sizes)])
    codes = np.repeat(np.eye(len(sizes)), sizes, axis=0)
    return coordinates, codes


def test_empirical_accuracy_of_a_planted_step_is_theorem_1():
    coordinates, codes = _clustered_step()
    result = _run(codes, coordinates)
    # Through the recorded backend the step is the chosen family, its edge between the
    # cluster width (7) and the gaps (>= 93).
    assert [r["family"] for r in result.tables["fits"] if r["chosen"]] == ["step"]
    assert 7 < result[f"{SITE}.epsilon"] < 93
    distances = np.abs(np.subtract.outer(coordinates, coordinates))
    b = finite_ball(distances, 50.0)  # any ε between the cluster width and the gaps
    mean_b, var_b = b.mean(), b.var()
    assert result[f"{SITE}.mean_b"] == pytest.approx(mean_b)
    assert result[f"{SITE}.var_b"] == pytest.approx(var_b)
    p_s = 0.5 + mean_b - mean_b**2 - var_b  # Theorem 1, with the variance term
    p_i = 1 - mean_b / 2
    assert result[f"{SITE}.p_similarity"] == pytest.approx(p_s, abs=1e-12)
    assert result[f"{SITE}.p_identification"] == pytest.approx(p_i, abs=1e-12)
    # The same through sampled choices: equal within Monte-Carlo error (4 standard errors).
    sampled = _run(codes, coordinates, choice="sampled", samples=100_000, bootstrap=0)
    se = np.sqrt(p_s * (1 - p_s) / 100_000)
    assert abs(sampled[f"{SITE}.p_similarity"] - p_s) < 4 * se


def test_empirical_accuracy_of_linear_decay_on_the_circle_is_proposition_1():
    size, epsilon = 100, 0.2  # b = 2 ε = 0.4
    circle = np.arange(size) / size
    codes = kernel_features(circle, "linear", epsilon, features=8000, period=1.0)
    result = _run(codes, circle, metric="circular:1")
    p_s, p_i = theory.linear_decay_circle(2 * epsilon)
    # 100 points stand for the continuum: the finite set is within 1/size of the limit.
    assert result[f"{SITE}.p_similarity"] == pytest.approx(p_s, abs=0.01)
    assert result[f"{SITE}.p_identification"] == pytest.approx(p_i, abs=0.01)
    assert [r["family"] for r in result.tables["fits"] if r["chosen"]] == ["linear"]
    assert result[f"{SITE}.epsilon"] == pytest.approx(epsilon, rel=0.05)


def test_merging_halves_equals_one_pass():
    representations = kernel_features(LINE, "exponential", 10.0, 0.1).astype(np.float32)
    adapter = RecordedAdapter({SITE: representations})
    dataset = as_dataset({"coordinate": LINE}, num_rows=len(LINE))
    options = {"similarity": "cosine", "bootstrap": 20}
    whole, first, second = Resolution(**options), Resolution(**options), Resolution(**options)
    stream([whole], adapter, dataset, batch_size=7, progress=False)
    stream([second], adapter, dataset, batch_size=5, rows=np.arange(30, 51), progress=False)
    stream([first], adapter, dataset, batch_size=8, rows=np.arange(0, 30), progress=False)
    first.merge(second)
    a, b = whole.finalize(), first.finalize()
    assert a.metrics == pytest.approx(b.metrics, rel=1e-12, nan_ok=True)
    assert a.tables["g_of_d"] == b.tables["g_of_d"]
    empty = Resolution(**options)
    empty.merge(first)
    assert empty.finalize().metrics == pytest.approx(a.metrics, rel=1e-12, nan_ok=True)


def test_distinct_draws_are_used_and_recorded():
    coordinates, codes = _clustered_step()
    independent = _run(codes, coordinates, bootstrap=0)
    distinct = _run(codes, coordinates, bootstrap=0, draws="distinct")
    assert distinct.config["draws"] == "distinct"
    distances = np.abs(np.subtract.outer(coordinates, coordinates))
    expected = evaluate(distances, (distances < 50).astype(float), draws="distinct")
    assert distinct[f"{SITE}.p_identification"] == pytest.approx(expected.p_i)
    assert distinct[f"{SITE}.p_identification"] != pytest.approx(
        independent[f"{SITE}.p_identification"]
    )


def test_plot_reads_only_the_json(tmp_path):
    result = _run(kernel_features(LINE, "gaussian", 10.0, 0.1), LINE)
    result.to_json(tmp_path / "r.json")
    again = gl.Result.from_json(tmp_path / "r.json")
    again.plot(tmp_path / "r.png")
    assert (tmp_path / "r.png").stat().st_size > 10_000


@pytest.mark.parametrize(
    "options, message",
    [
        ({"similarity": "negative-distance"}, "g\\(0\\) = 1"),
        ({"mode": "behavioural"}, "mode='behavioural'"),
        ({"draws": "unique"}, "draws must be"),
        ({"metric": "circular:0"}, "positive number"),
        ({"similarity": "dot"}, "similarity must be one of"),
    ],
)
def test_bad_options_are_refused_before_running(options, message):
    with pytest.raises(ValueError, match=message):
        Resolution(**options)


def test_half_width_is_where_the_planted_g_is_halfway():
    result = _run(kernel_features(LINE, "exponential", 12.0, 0.2), LINE)
    # (1 - Δ) e^(-d/ε) + Δ = (1 + Δ)/2  at  d = ε ln 2
    assert result[f"{SITE}.half_width"] == pytest.approx(12.0 * np.log(2), rel=0.1)


def test_a_similarity_that_does_not_fall_has_no_scale(tmp_path):
    # Every stimulus has the same representation (cosine 1 at every distance): g is flat, the
    # one-parameter flat model wins, and there is no resolution to report: NaN, not a
    # made-up number.
    result = _run(np.ones((len(LINE), 8)), LINE)
    assert [r["family"] for r in result.tables["fits"] if r["chosen"]] == ["flat"]
    for key in ("epsilon", "delta", "epsilon_ci_low", "epsilon_ci_high", "half_width"):
        assert np.isnan(result[f"{SITE}.{key}"]), key
    assert np.isnan(result[f"{SITE}.p_similarity_theory"])
    assert result[f"{SITE}.p_identification"] == pytest.approx(0.5, abs=1e-3)  # all alike
    result.to_json(tmp_path / "flat.json")
    gl.Result.from_json(tmp_path / "flat.json").plot(tmp_path / "flat.png")
