"""Resolution laws (docs/theory.md#resolution-theorems) against a plain simulation of the tests themselves.

The simulation below draws a probe and n candidates from ν, applies the Luce rule and averages
D_correct; it is written here from the SPEC's definition of the tests and shares no code with
`geomlens.theory.resolution`. Closed forms must agree with it within 4 standard errors.
"""

import itertools
import math
import zlib

import numpy as np
import pytest

from geomlens.theory import balls, finite_sets, resolution

Z_MAX = 4.0


# --------------------------------------------------------------------------------------------
# The tests, simulated directly


def simulate(draw, metric, g, n, trials, seed):
    """Mean and standard error of D_correct in the similarity and identification tests.

    draw(rng, shape) -> stimuli from ν; metric(x, y) -> distances; g(d) -> similarities.
    Ties for closest: the correct answer is one of the tied candidates at random.
    In identification the probe is a copy of the target and the n − 1 others are distractors.
    """
    rng = np.random.default_rng(seed)
    probe = draw(rng, trials)
    candidates = draw(rng, (n, trials))
    d = metric(candidates, probe)
    sim = g(d)
    total = sim.sum(axis=0)
    luce = np.where(total > 0, sim / np.where(total > 0, total, 1.0), 1.0 / n)
    closest = d == d.min(axis=0)
    similarity_test = (luce * closest).sum(axis=0) / closest.sum(axis=0)

    target = g(metric(probe, probe))
    total = target + sim[1:].sum(axis=0)
    identification_test = np.where(total > 0, target / np.where(total > 0, total, 1.0), 1.0 / n)

    def mean_se(x):
        return x.mean(), x.std(ddof=1) / math.sqrt(trials)

    return mean_se(similarity_test), mean_se(identification_test)


def step_similarity(eps, delta):
    return lambda d: np.where(d < eps, 1.0, delta)


def assert_agrees(theory, simulated, label):
    mean, se = simulated
    z = abs(theory - mean) / se
    assert z < Z_MAX, f"{label}: theory {theory:.5f}, simulation {mean:.5f} ± {se:.5f} (z={z:.1f})"


def circle_metric(x, y):
    gap = np.abs(x - y)
    return np.minimum(gap, 1.0 - gap)


def uniform(rng, shape):
    return rng.random(shape)


# A random finite point cloud with a non-uniform ν: 40 points in the unit square.
_CLOUD_RNG = np.random.default_rng(7)
CLOUD_POINTS = _CLOUD_RNG.random((40, 2))
CLOUD_DIST = np.linalg.norm(CLOUD_POINTS[:, None] - CLOUD_POINTS[None], axis=-1)
CLOUD_NU = _CLOUD_RNG.dirichlet(np.ones(40))


def cloud_draw(rng, shape):
    return rng.choice(len(CLOUD_NU), size=shape, p=CLOUD_NU)


def cloud_metric(x, y):
    return CLOUD_DIST[x, y]


# Probe grid for the segment's b_p: midpoints, so that the mean over it is the integral.
SEGMENT_GRID = (np.arange(20_000) + 0.5) / 20_000

SPACES = {
    # name: (draw, metric, eps values, ball measures -> (b, heterogeneous, weights))
    "circle": (
        uniform,
        circle_metric,
        (0.05, 0.2, 0.35),
        lambda e: (balls.circle_ball(e), False, None),
    ),
    "segment": (
        uniform,
        lambda x, y: np.abs(x - y),
        (0.1, 0.3, 0.6),
        lambda e: (balls.segment_ball(SEGMENT_GRID, e), True, None),
    ),
    "cloud": (
        cloud_draw,
        cloud_metric,
        (0.2, 0.4, 0.7),
        lambda e: (balls.finite_ball(CLOUD_DIST, e, CLOUD_NU), True, CLOUD_NU),
    ),
}


@pytest.mark.parametrize("space", SPACES)
@pytest.mark.parametrize("eps_index", [0, 1, 2])
@pytest.mark.parametrize("delta", [0.0, 0.25])
@pytest.mark.parametrize("n", [2, 3, 6])
def test_closed_forms_match_simulation(space, eps_index, delta, n):
    draw, metric, eps_values, ball = SPACES[space]
    eps = eps_values[eps_index]
    b, heterogeneous, weights = ball(eps)
    if heterogeneous:
        assert np.var(b) > 1e-4  # the heterogeneous cases must exercise Var(b)
    seed = zlib.crc32(f"{space} {eps_index} {delta} {n}".encode())
    sim_s, sim_i = simulate(draw, metric, step_similarity(eps, delta), n, 100_000, seed)
    kwargs = dict(heterogeneous=heterogeneous, weights=weights)
    label = f"{space} eps={eps} delta={delta} n={n}"
    assert_agrees(resolution.p_similarity(b, n, delta, **kwargs), sim_s, "p_S " + label)
    assert_agrees(resolution.p_identification(b, n, delta, **kwargs), sim_i, "p_I " + label)


def test_segment_needs_the_variance_term():
    # Var(b) is what separates the segment from the front: the homogeneous law at <b> is
    # rejected by the simulation, the heterogeneous one is not.
    eps = 0.3
    b = balls.segment_ball(SEGMENT_GRID, eps)
    sim_s, _ = simulate(
        uniform, lambda x, y: np.abs(x - y), step_similarity(eps, 0.0), 2, 200_000, 3
    )
    assert_agrees(resolution.p_similarity(b, heterogeneous=True), sim_s, "heterogeneous")
    homogeneous = resolution.p_similarity(b.mean())
    assert abs(homogeneous - sim_s[0]) / sim_s[1] > 8


@pytest.mark.parametrize("b", [0.2, 0.5, 0.8, 1.0])
def test_proposition_1_matches_simulation(b):
    eps = b / 2
    linear_decay = lambda d: np.maximum(0.0, 1.0 - d / eps)  # noqa: E731
    sim_s, sim_i = simulate(uniform, circle_metric, linear_decay, 2, 200_000, int(b * 100))
    p_s, p_i = resolution.linear_decay_circle(b)
    assert_agrees(p_s, sim_s, f"Prop 1 p_S b={b}")
    assert_agrees(p_i, sim_i, f"Prop 1 p_I b={b}")


def test_proposition_1_at_full_support_is_ln2():
    assert resolution.linear_decay_circle(1.0) == pytest.approx((math.log(2), math.log(2)))


# --------------------------------------------------------------------------------------------
# The closed forms are the SPEC's formulas


B_GRID = np.linspace(0.0, 1.0, 41)


@pytest.mark.parametrize("delta", [0.0, 0.1, 0.6, 1.0])
def test_two_candidates_are_theorem_2(delta):
    p_s = 0.5 + (1 - delta) / (1 + delta) * (B_GRID - B_GRID**2)
    p_i = (2 - (1 - delta) * B_GRID) / (2 * (1 + delta))
    assert resolution.p_similarity(B_GRID, 2, delta) == pytest.approx(p_s, abs=1e-12)
    assert resolution.p_identification(B_GRID, 2, delta) == pytest.approx(p_i, abs=1e-12)


def test_theorem_1_heterogeneous_has_the_variance_term():
    samples = np.random.default_rng(0).beta(2, 5, size=1000)
    expected = 0.5 + samples.mean() - samples.mean() ** 2 - samples.var()
    assert resolution.p_similarity(samples, heterogeneous=True) == pytest.approx(expected)
    assert resolution.p_identification(samples, heterogeneous=True) == pytest.approx(
        1 - samples.mean() / 2
    )


@pytest.mark.parametrize("n", [1, 2, 3, 5, 12, 40])
def test_theorem_3_noiseless_formulas(n):
    b = B_GRID[1:]  # the formula for p_I divides by b
    p_i = (1 - (1 - b) ** n) / (n * b)
    p_s = (1 - b) ** n / n + sum(
        math.comb(n, k) * b**k * (1 - b) ** (n - k) / k for k in range(1, n + 1)
    )
    assert resolution.p_identification(b, n) == pytest.approx(p_i, abs=1e-12)
    assert resolution.p_similarity(b, n) == pytest.approx(p_s, abs=1e-12)
    assert resolution.p_identification(0.0, n) == pytest.approx(1.0)  # perfect at b -> 0


def test_noise_lowers_both_accuracies():
    deltas = np.linspace(0, 1, 11)[:, None]
    for n in (2, 5):
        p_s = resolution.p_similarity(B_GRID[None, 1:-1], n, deltas)
        p_i = resolution.p_identification(B_GRID[None, 1:-1], n, deltas)
        assert np.all(np.diff(p_s, axis=0) < 0)
        assert np.all(np.diff(p_i, axis=0) < 0)
    # Full noise (g = 1 everywhere) is chance for both.
    assert resolution.p_similarity(B_GRID, 4, 1.0) == pytest.approx(np.full(41, 0.25))


# --------------------------------------------------------------------------------------------
# Front, optimum, regimes


def test_front_ends_and_optimum():
    front = resolution.pareto_front(num=101)
    assert (front.p_s[0], front.p_i[0]) == pytest.approx((0.5, 1.0))  # b -> 0
    assert (front.p_s[-1], front.p_i[-1]) == pytest.approx((0.5, 0.5))  # b -> 1
    optimum = resolution.similarity_optimum()
    assert (optimum.b, optimum.p_s) == pytest.approx((0.5, 0.75), abs=1e-6)
    assert front.p_s.max() == pytest.approx(0.75)
    noisy = resolution.similarity_optimum(delta=0.2)
    assert (noisy.b, noisy.p_s) == pytest.approx((0.5, 0.5 + 0.8 / (4 * 1.2)), abs=1e-6)
    # With more candidates the best resolution is finer.
    assert resolution.similarity_optimum(n=5).b < 0.5


@pytest.mark.parametrize("delta", [0.0, 0.4])
def test_regimes_follow_the_shape_of_the_front(delta):
    front = resolution.pareto_front(num=2001, delta=delta)
    slope = np.diff(front.p_i) / np.diff(front.p_s)  # dp_I / dp_S between neighbours
    middle = (front.b[1:] + front.b[:-1]) / 2
    labels = resolution.regime(middle)
    assert np.all(np.abs(slope[labels == "identification"]) < 1)
    trade = labels == "trade-off"
    assert np.all(slope[trade] <= -1 + 1e-9)
    interference = labels == "interference"
    assert np.all(np.diff(front.p_s)[interference] < 0)
    assert np.all(np.diff(front.p_i)[interference] < 0)
    assert resolution.regime(0.1) == "identification"
    assert list(resolution.regime([0.3, 0.9])) == ["trade-off", "interference"]


def test_nearest_on_front():
    front = resolution.pareto_front(num=401)
    on = resolution.nearest_on_front(front.p_s[123], front.p_i[123], front)
    assert on.distance == pytest.approx(0.0, abs=1e-12)
    assert on.b == pytest.approx(front.b[123])
    # Straight out along the normal at b = 0.3, 0.05 away.
    b = 0.3
    point = np.array([0.5 + b - b**2, 1 - b / 2])
    tangent = np.array([1 - 2 * b, -0.5])
    normal = np.array([-tangent[1], tangent[0]]) / np.linalg.norm(tangent)
    off = resolution.nearest_on_front(*(point - 0.05 * normal), front)
    assert off.distance == pytest.approx(0.05, abs=1e-4)
    assert off.b == pytest.approx(b, abs=1e-3)


# --------------------------------------------------------------------------------------------
# Many candidates: the 1/n collapse and the non-monotone p_S^n


def test_identification_collapses_like_one_over_n():
    for b in (0.05, 0.3):
        for delta in (0.0, 0.2):
            ns = [100, 1000, 5000]
            ratio = [
                resolution.p_identification(b, n, delta)
                / resolution.identification_asymptote(b, n, delta)
                for n in ns
            ]
            assert abs(ratio[-1] - 1) < 0.01
            assert abs(ratio[-1] - 1) < abs(ratio[0] - 1) or abs(ratio[0] - 1) < 1e-6
    # The law itself, simulated at n = 60 on the circle.
    eps, n = 0.1, 60
    _, sim_i = simulate(uniform, circle_metric, step_similarity(eps, 0.0), n, 40_000, 11)
    assert_agrees(resolution.p_identification(2 * eps, n), sim_i, "p_I^60")
    assert sim_i[0] == pytest.approx(1 / (n * 2 * eps), rel=0.05)


def test_similarity_is_not_monotone_in_n_for_small_b():
    b = 0.01
    n_min, n_max = resolution.similarity_turning_points(b, 300)
    profile = resolution.candidate_profile(b, 300)
    p_s = dict(zip(profile.n, profile.p_s))
    assert 2 < n_min < n_max
    assert p_s[n_min] < p_s[2] and p_s[n_min] < p_s[n_max] > p_s[300]
    # The same non-monotonicity in the simulated test on the circle (b = 2 eps).
    simulated = {
        n: simulate(uniform, circle_metric, step_similarity(b / 2, 0.0), n, 30_000, n)[0]
        for n in (2, n_min, n_max)
    }
    for low, high in ((n_min, 2), (n_min, n_max)):
        gap = simulated[high][0] - simulated[low][0]
        assert gap / math.hypot(simulated[high][1], simulated[low][1]) > Z_MAX
    # Coarse resolution: monotone.
    assert resolution.similarity_turning_points(0.3, 300) == ()


# --------------------------------------------------------------------------------------------
# evaluate(): finite sets, any similarity


def discretised_circle(size):
    gap = np.abs(np.subtract.outer(np.arange(size), np.arange(size)))
    return np.minimum(gap, size - gap) / size


@pytest.mark.parametrize(("size", "n"), [(200, 2), (36, 3)])
@pytest.mark.parametrize("delta", [0.0, 0.3])
def test_evaluate_reproduces_the_closed_forms_on_a_discretised_circle(size, n, delta):
    d = discretised_circle(size)
    for eps in (0.05, 0.2, 0.4):
        g = np.where(d < eps, 1.0, delta)
        accuracy = finite_sets.evaluate(d, g, n)
        assert accuracy.exact
        # Exact on the discrete measure, with its own (discrete) ball measure...
        b = balls.finite_ball(d, eps)
        p_s = resolution.p_similarity(b, n, delta, heterogeneous=True)
        p_i = resolution.p_identification(b, n, delta, heterogeneous=True)
        assert tuple(accuracy) == pytest.approx((p_s, p_i), abs=1e-10)
        # ...and close to the continuous circle's b = 2 eps.
        continuum = (
            resolution.p_similarity(2 * eps, n, delta),
            resolution.p_identification(2 * eps, n, delta),
        )
        assert tuple(accuracy) == pytest.approx(continuum, abs=3 / size)


def test_evaluate_linear_decay_on_a_fine_circle():
    d = discretised_circle(200)
    for b in (0.3, 0.7):
        p_s, p_i = finite_sets.evaluate(d, lambda dist, e=b / 2: np.maximum(0, 1 - dist / e))
        assert (p_s, p_i) == pytest.approx(resolution.linear_decay_circle(b), abs=0.01)


def random_similarity(size, seed):
    rng = np.random.default_rng(seed)
    points = rng.random((size, 2))
    d = np.round(np.linalg.norm(points[:, None] - points[None], axis=-1), 12)
    g = np.exp(-d / 0.3) * rng.uniform(0.5, 1.5, size=(size, size))  # not symmetric
    return d, g, rng.dirichlet(np.ones(size))


@pytest.mark.parametrize("n", [2, 3])
def test_evaluate_exact_matches_simulation_and_its_monte_carlo(n):
    d, g, nu = random_similarity(30, n)
    exact = finite_sets.evaluate(d, g, n, weights=nu, method="exact")
    # Simulated directly: g is given per (probe, candidate) pair, not as a function of d.
    rng = np.random.default_rng(100 + n)
    probe = rng.choice(30, size=150_000, p=nu)
    cand = rng.choice(30, size=(n, 150_000), p=nu)
    sim = g[probe, cand]
    dist = d[probe, cand]
    closest = dist == dist.min(axis=0)
    d_correct = ((sim / sim.sum(axis=0)) * closest).sum(axis=0) / closest.sum(axis=0)
    d_target = g[probe, probe] / (g[probe, probe] + sim[1:].sum(axis=0))
    sim_s = d_correct.mean(), d_correct.std(ddof=1) / math.sqrt(len(probe))
    sim_i = d_target.mean(), d_target.std(ddof=1) / math.sqrt(len(probe))
    assert_agrees(exact.p_s, sim_s, "exact p_S vs simulation")
    assert_agrees(exact.p_i, sim_i, "exact p_I vs simulation")

    monte_carlo = finite_sets.evaluate(d, g, n, weights=nu, method="monte_carlo", seed=5)
    assert not monte_carlo.exact and monte_carlo.se_s > 0 and monte_carlo.se_i > 0
    assert_agrees(exact.p_s, (monte_carlo.p_s, monte_carlo.se_s), "exact vs MC p_S")
    assert_agrees(exact.p_i, (monte_carlo.p_i, monte_carlo.se_i), "exact vs MC p_I")


def test_evaluate_ties_by_hand():
    # Two stimuli at distance 1 with similarity s between them, uniform ν, n = 2.
    # Probe a: candidates (a, a) and (b, b) tie -> 1/2 each; (a, b), (b, a) -> 1/(1 + s).
    s = 0.25
    d = np.array([[0.0, 1.0], [1.0, 0.0]])
    g = np.array([[1.0, s], [s, 1.0]])
    p_s, p_i = finite_sets.evaluate(d, g)
    assert p_s == pytest.approx((0.5 + 2 / (1 + s) + 0.5) / 4)
    # Identification: the distractor is the target itself (1/2) or the other (1/(1 + s)).
    assert p_i == pytest.approx((0.5 + 1 / (1 + s)) / 2)
    # Distinct candidates at equal distance: a brute-force enumeration with the SPEC's tie rule.
    d3 = np.array([[0.0, 1.0, 1.0], [1.0, 0.0, 2.0], [1.0, 2.0, 0.0]])
    g3 = np.array([[1.0, 0.6, 0.2], [0.6, 1.0, 0.1], [0.2, 0.1, 1.0]])
    total = 0.0
    for p, i, j in itertools.product(range(3), repeat=3):
        share = {i: g3[p, i] / (g3[p, i] + g3[p, j]), j: g3[p, j] / (g3[p, i] + g3[p, j])}
        if d3[p, i] == d3[p, j]:  # tied: the correct one is either, at random
            total += (share[i] + share[j]) / 2 if i != j else share[i]
        else:
            total += share[i] if d3[p, i] < d3[p, j] else share[j]
    assert finite_sets.evaluate(d3, g3).p_s == pytest.approx(total / 27)
    assert d3[0, 1] == d3[0, 2]  # the example does contain a tie between distinct candidates


def test_evaluate_zero_similarity_is_a_uniform_choice():
    d = discretised_circle(12)
    for n in (2, 3):
        accuracy = finite_sets.evaluate(d, np.zeros((12, 12)), n)
        assert tuple(accuracy) == pytest.approx((1 / n, 1 / n))
    assert tuple(finite_sets.evaluate(d, np.ones((12, 12)), 1)) == (1.0, 1.0)


def test_evaluate_accepts_a_function_of_distance_and_chooses_its_method():
    d = discretised_circle(20)
    g = lambda dist: np.exp(-dist / 0.1)  # noqa: E731
    assert tuple(finite_sets.evaluate(d, g)) == pytest.approx(tuple(finite_sets.evaluate(d, g(d))))
    assert finite_sets.evaluate(d, g, 3).exact is True  # 20^4 enumerations
    assert finite_sets.evaluate(d, g, 3, max_exact=1000, samples=1000).exact is False


# --------------------------------------------------------------------------------------------
# Ball measures


def test_ball_measures_match_sampling():
    rng = np.random.default_rng(1)
    trials = 200_000
    for dim in (1, 2, 4):
        z = rng.standard_normal((trials, dim + 1))
        angle = np.arccos(np.clip(z[:, 0] / np.linalg.norm(z, axis=1), -1, 1))
        for eps in (0.3, 1.2, 2.5):
            hits = angle < eps
            assert_agrees(
                balls.sphere_ball(eps, dim),
                (hits.mean(), hits.std() / math.sqrt(trials)),
                f"S^{dim} eps={eps}",
            )
    assert balls.sphere_ball(2 * np.pi * 0.1, 1) == pytest.approx(balls.circle_ball(0.1))
    assert balls.sphere_ball(np.pi, 3) == pytest.approx(1.0)
    x = rng.random(trials)
    for p, eps in ((0.05, 0.2), (0.5, 0.2), (0.9, 0.4)):
        hits = np.abs(x - p) < eps
        assert_agrees(
            balls.segment_ball(p, eps),
            (hits.mean(), hits.std() / math.sqrt(trials)),
            f"segment p={p}",
        )
        hits = circle_metric(x, p) < eps
        assert_agrees(
            balls.circle_ball(eps), (hits.mean(), hits.std() / math.sqrt(trials)), "circle"
        )
    assert balls.circle_ball([0.1, 0.7]) == pytest.approx([0.2, 1.0])


def test_finite_ball_by_hand():
    d = np.array([[0.0, 1.0, 3.0], [1.0, 0.0, 2.0], [3.0, 2.0, 0.0]])
    assert balls.finite_ball(d, 1.5) == pytest.approx([2 / 3, 2 / 3, 1 / 3])
    assert balls.finite_ball(d, 1.0, weights=[2, 1, 1]) == pytest.approx([0.5, 0.25, 0.25])
    np.testing.assert_allclose(balls.finite_ball(d, [0.0, 5.0]), [[0, 0, 0], [1, 1, 1]])


# --------------------------------------------------------------------------------------------
# Invalid arguments


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (lambda: resolution.p_similarity(-0.1), r"b must be a ball measure in \[0, 1\]"),
        (lambda: resolution.p_identification([0.5, 1.2]), r"b must be a ball measure in \[0, 1\]"),
        (lambda: resolution.p_similarity(0.5, n=0), "n must be an integer >= 1"),
        (lambda: resolution.p_identification(0.5, n=2.5), "n must be an integer >= 1"),
        (
            lambda: resolution.p_similarity(0.5, delta=-0.1),
            r"delta must be a noise level in \[0, 1\]",
        ),
        (
            lambda: resolution.p_identification(0.5, delta=1.5),
            r"delta must be a noise level in \[0, 1\]",
        ),
        (lambda: resolution.p_similarity([0.2, 0.3], weights=[1, 1]), "pass heterogeneous=True"),
        (lambda: resolution.p_similarity([], heterogeneous=True), "at least one sample"),
        (lambda: resolution.linear_decay_circle(1.5), r"b must be a ball measure in \[0, 1\]"),
        (lambda: resolution.pareto_front(num=1), "num must be an integer >= 2"),
        (lambda: resolution.regime(2.0), r"b must be a ball measure in \[0, 1\]"),
        (lambda: resolution.identification_asymptote(0.5, 0), "n must be an integer >= 1"),
        (lambda: balls.circle_ball(-0.1), "eps must be a finite ball radius >= 0"),
        (lambda: balls.segment_ball(0.5, -1.0), "eps must be a finite ball radius >= 0"),
        (lambda: balls.segment_ball(1.5, 0.1), r"p must lie in the segment \[0, 1\]"),
        (lambda: balls.sphere_ball(-0.1), "eps must be a finite ball radius >= 0"),
        (lambda: balls.sphere_ball(0.1, dim=0), "dim must be an integer >= 1"),
        (
            lambda: balls.finite_ball(np.zeros((2, 2)), -1.0),
            "eps must be a finite ball radius >= 0",
        ),
        (lambda: balls.finite_ball(np.zeros((2, 3)), 1.0), "square"),
        (lambda: finite_sets.evaluate(np.zeros((2, 3)), np.zeros((2, 3))), "square"),
        (lambda: finite_sets.evaluate(np.zeros((2, 2)), -np.ones((2, 2))), "finite and >= 0"),
        (lambda: finite_sets.evaluate(np.zeros((2, 2)), np.ones((3, 3))), "shape of distances"),
        (
            lambda: finite_sets.evaluate(np.zeros((2, 2)), np.ones((2, 2)), 0),
            "n must be an integer >= 1",
        ),
        (
            lambda: finite_sets.evaluate(np.zeros((2, 2)), np.ones((2, 2)), weights=[1, -1]),
            "non-negative",
        ),
        (
            lambda: finite_sets.evaluate(np.zeros((2, 2)), np.ones((2, 2)), method="mc"),
            "method must be",
        ),
    ],
)
def test_invalid_arguments_say_what_was_expected(call, expected):
    with pytest.raises(ValueError, match=expected):
        call()
