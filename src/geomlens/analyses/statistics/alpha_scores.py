"""The abstraction cosine α of one task, its bootstrap over contexts, its two label-shuffle nulls,
and the interval of a site's mean α over tasks (docs/theory.md#abstraction-measuring; formulas in docs/abstraction.md).

Every resampling here is vectorised: the bootstrap and both nulls are one matrix product (or
one indexed Gram matrix) over all draws at once, never a Python loop over draws.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: The label-shuffle nulls of α, by name. ``within-context`` (the default, docs/theory.md#abstraction-measuring): the
#: concept label shuffled inside each context, i.e. each context's two class means swapped with
#: probability ½ (u_c → ±u_c); with one row per concept value and context (word pairs,
#: translations) this is exactly the row-level label shuffle, with several rows per cell it
#: shuffles the class-mean labels. ``across-contexts`` (the null of geomlens 0.1.0): the 2k
#: class means dealt at random into k (+, −) pairs, concept and context labels shuffled together.
NULLS = ("within-context", "across-contexts")
#: Fewer contexts than this: no bootstrap interval over contexts. Resampling two contexts gives
#: either their one pair or no pair at all, so the interval would have zero width.
MIN_CONTEXTS_FOR_INTERVAL = 3
#: Cosines that differ by less than this are the same value computed two ways.
TIE_TOLERANCE = 1e-12


#: Kinds of the within-context null, as the ``alpha_null_kind`` column names them.
ROW_SHUFFLE = "concept label shuffled among each context's rows"
SIGN_FLIP = "sign of each context's difference flipped (one row per cell)"
#: What the corrected α's interval resamples when a task has too few contexts to resample.
ROWS_RESAMPLED = (
    "each cell's row noise redrawn (Gaussian multipliers of its residuals; too few contexts "
    "to resample)"
)
#: Kept for the ``n_half_splits`` option: the corrected α now averages every halving in
#: closed form (:class:`CellDifferences`), so the number of random halvings no longer matters.
DEFAULT_HALF_SPLITS = 20
#: Below this reliability of the contexts' directions (the share of their squared length that
#: is not row noise) the corrected α is refused: its denominator is then mostly noise, and on
#: planted data (12 contexts) its mean strays by more than 0.15 from the truth.
MIN_RELIABILITY = 0.2


def _unit_rows(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def vanishing_differences(means: np.ndarray) -> list[int]:
    """Indices of the contexts whose difference vector μ(+, c) − μ(−, c) is zero (its cosine
    with anything is undefined)."""
    norms = np.linalg.norm(means[1] - means[0], axis=-1)
    scale = max(float(np.abs(means).max(initial=0.0)), 1.0)
    return [int(i) for i in np.flatnonzero(norms <= 1e-12 * scale)]


def difference_cosines(means: np.ndarray) -> np.ndarray:
    """``[k, k]`` cosines between the difference vectors u_c = μ(+, c) − μ(−, c) of class means
    ``[2, k, d]``; NaN in the rows and columns of a context whose difference vanishes."""
    differences = means[1] - means[0]
    unit = _unit_rows(differences)
    cosines = unit @ unit.T
    vanished = vanishing_differences(means)
    cosines[vanished, :] = np.nan
    cosines[:, vanished] = np.nan
    return cosines


def pairwise_alpha(differences: np.ndarray) -> float:
    """α: the mean cosine over pairs of distinct rows of ``differences`` ``[k, d]``."""
    unit = _unit_rows(differences)
    cosines = unit @ unit.T
    upper = np.triu_indices(len(unit), k=1)
    return float(cosines[upper].mean())


def context_counts(rng: np.random.Generator, k: int, n: int) -> np.ndarray:
    """``[n, k]``: how often each of k contexts is drawn in n resamples of k with replacement."""
    return rng.multinomial(k, np.full(k, 1.0 / k), size=n).astype(np.float64)


def weighted_pair_means(cosines: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Σ_{a≠b} w_a w_b C_ab / Σ_{a≠b} |w_a w_b| for each row of ``weights`` ``[n, k]``, as one
    matrix product; NaN where no pair of distinct contexts has weight."""
    off_diagonal = cosines - np.diag(np.diag(cosines))
    numerator = np.einsum("bi,ij,bj->b", weights, off_diagonal, weights)
    magnitude = np.abs(weights)
    denominator = magnitude.sum(1) ** 2 - (magnitude**2).sum(1)
    safe = np.where(denominator > 0, denominator, 1.0)
    return np.where(denominator > 0, numerator / safe, np.nan)


def bootstrap_alphas(cosines: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """α of each context resample ``counts`` ``[n, k]``: a context drawn twice is not paired with
    itself, so α_b is the count-weighted mean cosine over pairs of different contexts."""
    return weighted_pair_means(cosines, counts)


def within_context_null(cosines: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
    """α under the within-context label shuffle: u_c → s_c u_c with random signs s_c, so
    α = Σ_{c≠c'} s_c s_c' C_cc' / (k(k − 1))."""
    signs = rng.choice(np.array([-1.0, 1.0]), size=(n, len(cosines)))
    return weighted_pair_means(cosines, signs)


def across_contexts_null(means: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
    """α with the 2k class means ``[2, k, d]`` dealt at random into k (+, −) pairs, from their
    Gram matrix G: ⟨x_a − x_b, x_a' − x_b'⟩ = G_aa' − G_ab' − G_ba' + G_bb'."""
    k = means.shape[1]
    flat = means.reshape(2 * k, -1)
    gram = flat @ flat.T
    dealt = rng.permuted(np.tile(np.arange(2 * k), (n, 1)), axis=1)
    plus, minus = dealt[:, :k, None], dealt[:, k:, None]
    plus_t, minus_t = dealt[:, None, :k], dealt[:, None, k:]
    dots = gram[plus, plus_t] - gram[plus, minus_t] - gram[minus, plus_t] + gram[minus, minus_t]
    norms = np.sqrt(np.clip(np.einsum("bii->bi", dots), 0.0, None))
    norms = np.where(norms > 0, norms, 1.0)
    cosines = dots / norms[:, :, None] / norms[:, None, :]
    upper = np.triu_indices(k, k=1)
    return cosines[:, upper[0], upper[1]].mean(1)


@dataclass
class TaskRows:
    """The pooled rows of one task, labelled by cell: what the corrected α and the row-level
    label shuffle need (the class means alone do not carry the noise)."""

    rows: np.ndarray  # [n, d]
    #: True for the second concept value (the + of u_c = μ(+, c) − μ(−, c)).
    positive: np.ndarray  # bool [n]
    #: Index of each row's context in the task's context order.
    context: np.ndarray  # int [n]
    n_contexts: int

    @classmethod
    def from_labels(
        cls,
        rows: np.ndarray,
        concept: np.ndarray,
        context: np.ndarray,
        values: Sequence[str],
        contexts: Sequence[str],
    ) -> TaskRows:
        """The rows of ``contexts`` (in that order), ``values[1]`` the positive value."""
        position = {str(x): i for i, x in enumerate(contexts)}
        keep = np.array([str(x) in position for x in context], dtype=bool)
        index = np.array([position[str(x)] for x in np.asarray(context)[keep]], dtype=np.int64)
        positive = np.asarray(concept)[keep].astype(str) == str(values[1])
        return cls(np.asarray(rows, np.float64)[keep], positive, index, len(contexts))

    def cells(self) -> list[list[np.ndarray]]:
        """``[value][context]``: the row indices of each cell (value 0: −, 1: +)."""
        return [
            [
                np.flatnonzero((self.context == c) & (self.positive == bool(v)))
                for c in range(self.n_contexts)
            ]
            for v in (0, 1)
        ]

    def cell_sizes(self) -> np.ndarray:
        """``[2, k]`` rows per (concept value, context) cell."""
        return np.array([[len(i) for i in value] for value in self.cells()], dtype=np.int64)


@dataclass(frozen=True)
class CellDifferences:
    """Each context's difference of cell means u_c = ū(+, c) − ū(−, c) and its row noise.

    ``noise[c]`` = tr S₊/n₊ + tr S₋/n₋ (sample covariances, ddof 1) is unbiased for E|u_c −
    t_c|², so |u_c|² − noise[c] is unbiased for |t_c|² (the direction's squared length without
    row noise), and ⟨u_c, u_c'⟩ for c ≠ c' is unbiased for ⟨t_c, t_c'⟩ (independent rows). This
    is the average over every halving of the cells of the split-half products, in closed form.
    ``residuals[v][c]``: the rows of cell (v, c) minus their mean, for resampling."""

    differences: np.ndarray  # [k, d]
    noise: np.ndarray  # [k]
    residuals: list[list[np.ndarray]]

    @classmethod
    def of(cls, task: TaskRows) -> CellDifferences:
        cells = task.cells()
        means = np.array([[task.rows[c].mean(0) for c in value] for value in cells])
        residuals = [
            [task.rows[c] - means[v, j] for j, c in enumerate(value)]
            for v, value in enumerate(cells)
        ]
        noise = np.array(
            [
                sum(
                    (r**2).sum() / (len(r) - 1) / len(r) for r in (residuals[0][c], residuals[1][c])
                )
                for c in range(task.n_contexts)
            ]
        )
        return cls(means[1] - means[0], noise, residuals)

    def products(self, differences: np.ndarray | None = None, times: float = 1.0) -> np.ndarray:
        """``[k, k]`` ⟨u_c, u_c'⟩ with ``times`` × the noise taken off the diagonal."""
        u = self.differences if differences is None else differences
        gram = u @ u.T
        return gram - times * np.diag(self.noise)

    def reliability(self) -> float:
        """The share of the directions' squared length that is not row noise: Σ(|u_c|² −
        noise_c) / Σ|u_c|² (the classical reliability of a context's direction)."""
        squares = float((self.differences**2).sum())
        return float((squares - self.noise.sum()) / squares) if squares > 0 else float("nan")

    def resampled(self, rng: np.random.Generator) -> np.ndarray:
        """``[k, k]`` products of one Gaussian-multiplier resample: u*_c = u_c + Σᵢ zᵢ rᵢ /
        √(n(n − 1)) per cell (rᵢ its residuals, zᵢ standard normal), whose added noise has the
        cell's own covariance and, unlike a row bootstrap, no ties at n = 2. The added noise is
        taken off the diagonal too, so the resample centres on the estimate."""
        drawn = self.differences.copy()
        for sign, value in ((1.0, 1), (-1.0, 0)):
            for c, r in enumerate(self.residuals[value]):
                n = len(r)
                drawn[c] += sign * (rng.standard_normal(n) @ r) / np.sqrt(n * (n - 1))
        return self.products(drawn, times=2.0)


def corrected_ratios(products: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Corrected α of each row of ``weights`` ``[n, k]`` from noise-debiased ``products``
    ``[k, k]`` (:class:`CellDifferences`): Σ_{c≠c'} w_c w_c' P_cc' / Σ_{c≠c'} w_c w_c'
    (P_cc + P_c'c')/2, a ratio of two unbiased sums (the mean cosine of the noise-free
    directions when they are equally long); NaN where the denominator is not positive."""
    squares = np.diag(products)
    off = ~np.eye(len(squares), dtype=bool)
    scale = (squares[:, None] + squares[None, :]) / 2
    numerator = np.einsum("bi,ij,bj->b", weights, np.where(off, products, 0.0), weights)
    denominator = np.einsum("bi,ij,bj->b", weights, np.where(off, scale, 0.0), weights)
    safe = np.where(denominator > 0, denominator, 1.0)
    return np.where(denominator > 0, numerator / safe, np.nan)


def multiplier_corrected(cells: CellDifferences, rng: np.random.Generator, n: int) -> np.ndarray:
    """``[n]`` corrected α of Gaussian-multiplier resamples of every cell's rows (the interval
    of a task with too few contexts to resample them; see :meth:`CellDifferences.resampled`)."""
    k = len(cells.noise)
    ones = np.ones((1, k))
    return np.array([corrected_ratios(cells.resampled(rng), ones)[0] for _ in range(n)])


def row_shuffle_null(task: TaskRows, rng: np.random.Generator, n: int) -> np.ndarray:
    """α with the concept label shuffled among the rows of each context (class sizes kept),
    ``n`` draws, every context's difference vector recomputed from the shuffled rows."""
    k = task.n_contexts
    differences = np.zeros((n, k, task.rows.shape[1]))
    for c in range(k):
        inside = np.flatnonzero(task.context == c)
        labels = task.positive[inside]
        n_plus, n_minus = int(labels.sum()), int((~labels).sum())
        shuffled = rng.permuted(np.tile(labels, (n, 1)), axis=1)
        weights = np.where(shuffled, 1.0 / n_plus, -1.0 / n_minus)
        differences[:, c] = weights @ task.rows[inside]
    unit = _unit_rows(differences)
    cosines = np.einsum("bid,bjd->bij", unit, unit)
    upper = np.triu_indices(k, k=1)
    return cosines[:, upper[0], upper[1]].mean(1)


@dataclass
class AlphaDraws:
    """α of one task with its bootstrap draws over contexts and both nulls' draws, and the
    noise-corrected α with its bootstrap draws (the same context resamples)."""

    alpha: float
    n_contexts: int
    #: ``[n_bootstrap]``; all NaN with fewer than :data:`MIN_CONTEXTS_FOR_INTERVAL` contexts.
    bootstrap: np.ndarray
    nulls: dict[str, np.ndarray] = field(default_factory=dict)
    #: Why α is undefined ("" when it is defined).
    undefined: str = ""
    #: Mean and smallest number of rows per (concept value, context) cell.
    rows_per_cell: float = float("nan")
    rows_per_cell_min: float = float("nan")
    #: What the within-context null did: :data:`ROW_SHUFFLE` or :data:`SIGN_FLIP`.
    null_kind: str = SIGN_FLIP
    alpha_corrected: float = float("nan")
    corrected_bootstrap: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: Why the corrected α is undefined ("" when it is defined).
    corrected_undefined: str = ""
    #: What the corrected α's interval resamples.
    corrected_interval: str = "contexts resampled"
    #: The reliability of the contexts' directions (:meth:`CellDifferences.reliability`).
    reliability: float = float("nan")


def alpha_draws(
    means: np.ndarray,
    rng: np.random.Generator,
    *,
    n_bootstrap: int,
    n_shuffles: int,
    rows: TaskRows | None = None,
    n_half_splits: int = DEFAULT_HALF_SPLITS,
) -> AlphaDraws:
    """α of class means ``[2, k, d]`` and its draws; with the task's ``rows``, also the
    corrected α (noise-debiased products, :class:`CellDifferences`; ``n_half_splits`` is
    accepted and unused: every halving is averaged in closed form) and, where cells hold several rows,
    the within-context null as a row-level label shuffle. The context resamples are drawn
    first, so two conditions of the same task measured with equally seeded generators (base
    and linearised) are resampled identically: their difference is a paired bootstrap."""
    cosines = difference_cosines(means)
    k = len(cosines)
    upper = np.triu_indices(k, k=1)
    alpha = float(cosines[upper].mean())
    counts = context_counts(rng, k, n_bootstrap)
    if k >= MIN_CONTEXTS_FOR_INTERVAL:
        bootstrap = bootstrap_alphas(cosines, counts)
    else:
        bootstrap = np.full(n_bootstrap, np.nan)
    vanished = vanishing_differences(means)
    undefined = ""
    if vanished:
        undefined = (
            f"the difference vector vanishes in {len(vanished)} context(s) (both concept values "
            "have the same mean there), so its cosine is undefined"
        )
    sizes = rows.cell_sizes() if rows is not None else None
    several = sizes is not None and int(sizes.min()) >= 2
    if several:
        assert rows is not None
        within, kind = row_shuffle_null(rows, rng, n_shuffles), ROW_SHUFFLE
    else:
        within, kind = within_context_null(cosines, rng, n_shuffles), SIGN_FLIP
    nulls = {
        "within-context": within,
        "across-contexts": across_contexts_null(means, rng, n_shuffles),
    }
    draws = AlphaDraws(alpha, k, bootstrap, nulls, undefined=undefined, null_kind=kind)
    if sizes is None:
        draws.corrected_undefined = "the rows were not kept, so no split halves"
        return draws
    draws.rows_per_cell = float(sizes.mean())
    draws.rows_per_cell_min = float(sizes.min())
    if not several:
        draws.corrected_undefined = (
            "a cell holds one row, so its row noise cannot be measured (the "
            "corrected α needs two or more rows per concept value and context)"
        )
        return draws
    assert rows is not None
    _correct(draws, CellDifferences.of(rows), counts, rng, n_bootstrap)
    if undefined:
        draws.alpha_corrected = float("nan")
        draws.corrected_undefined = undefined
    return draws


def _correct(
    draws: AlphaDraws,
    cells: CellDifferences,
    counts: np.ndarray,
    rng: np.random.Generator,
    n_bootstrap: int,
) -> None:
    """The corrected α, its reliability and its draws into ``draws``: the same context
    resamples as the raw α's (``counts``), or with two contexts the cells' row noise redrawn;
    refused (NaN, with the reason) below :data:`MIN_RELIABILITY`."""
    k = len(cells.noise)
    products = cells.products()
    draws.reliability = cells.reliability()
    if not draws.reliability >= MIN_RELIABILITY:
        draws.corrected_undefined = (
            f"the contexts' directions have reliability r = {draws.reliability:.2f} (the share "
            "of their squared length that is not row noise): too low to correct (the "
            f"corrected α needs r ≥ {MIN_RELIABILITY:g}; more rows per cell raise it)"
        )
        return
    point = float(corrected_ratios(products, np.ones((1, k)))[0])
    draws.alpha_corrected = point
    if k >= MIN_CONTEXTS_FOR_INTERVAL:
        draws.corrected_bootstrap = corrected_ratios(products, counts)
    else:
        # Two contexts cannot be resampled; the rows' noise can be redrawn.
        draws.corrected_bootstrap = multiplier_corrected(cells, rng, n_bootstrap)
        draws.corrected_interval = ROWS_RESAMPLED
    if not np.isfinite(point):
        draws.corrected_undefined = (
            "the contexts' noise-free directions have no positive length (row noise accounts "
            "for all of them): there is no reliable direction to compare"
        )


def _interval(draws: np.ndarray, confidence: float) -> tuple[float, float]:
    finite = draws[np.isfinite(draws)]
    if finite.size == 0:
        return float("nan"), float("nan")
    tail = (1 - confidence) / 2
    return float(np.quantile(finite, tail)), float(np.quantile(finite, 1 - tail))


def _null_columns(name: str, draws: np.ndarray, alpha: float) -> dict[str, float]:
    if draws.size == 0:
        return {f"alpha_null{name}": np.nan, f"alpha_null_p95{name}": np.nan}
    return {
        f"alpha_null{name}": float(draws.mean()),
        f"alpha_null_p95{name}": float(np.quantile(draws, 0.95)),
        # A draw equal to α up to rounding is a tie, and ties count against the data.
        f"alpha_p_value{name}": float(
            (1 + np.sum(draws >= alpha - TIE_TOLERANCE)) / (1 + draws.size)
        )
        if np.isfinite(alpha)
        else float("nan"),
    }


def null_suffix(null: str) -> str:
    """Column suffix of a named null: ``within-context`` → ``_within_context``."""
    return "_" + null.replace("-", "_")


def summarise_alpha(draws: AlphaDraws, *, confidence: float, null: str) -> dict[str, Any]:
    """Table columns of one task: α, its interval over contexts (NaN with fewer than three
    contexts), the chosen null (``alpha_null``, ``alpha_null_p95``, ``alpha_p_value``) and
    both nulls under their own names."""
    low, high = _interval(draws.bootstrap, confidence)
    columns: dict[str, Any] = {"alpha": draws.alpha, "alpha_ci_low": low, "alpha_ci_high": high}
    columns["rows_per_cell"] = draws.rows_per_cell
    columns["rows_per_cell_min"] = draws.rows_per_cell_min
    corrected_low, corrected_high = _interval(draws.corrected_bootstrap, confidence)
    columns["alpha_corrected"] = draws.alpha_corrected
    columns["alpha_corrected_ci_low"] = corrected_low
    columns["alpha_corrected_ci_high"] = corrected_high
    columns["alpha_corrected_interval"] = draws.corrected_interval
    columns["alpha_corrected_reliability"] = draws.reliability
    columns.update(_null_columns("", draws.nulls[null], draws.alpha))
    for name in NULLS:
        columns.update(_null_columns(null_suffix(name), draws.nulls[name], draws.alpha))
    columns["alpha_null_kind"] = draws.null_kind if null == "within-context" else "across contexts"
    columns["alpha_null_kind_within_context"] = draws.null_kind
    columns["n_contexts"] = float(draws.n_contexts)
    columns["alpha_undefined"] = draws.undefined
    columns["alpha_corrected_undefined"] = draws.corrected_undefined
    return columns


def _site_bootstrap(points: np.ndarray, draws: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Draws of a mean over tasks: tasks resampled with replacement, each drawn task entering
    with one of its own bootstrap draws over contexts (a two-stage bootstrap). A task without
    draws (fewer than three contexts, or a resample that drew one context) enters with its α."""
    n_tasks, n = draws.shape
    filled = np.where(np.isfinite(draws), draws, points[:, None])
    task_counts = rng.multinomial(n_tasks, np.full(n_tasks, 1.0 / n_tasks), size=n)
    return (task_counts * filled.T).sum(1) / n_tasks


def site_mean_interval(
    points: Sequence[float],
    draws: Sequence[np.ndarray],
    rng: np.random.Generator,
    *,
    confidence: float,
) -> tuple[float, float]:
    """Interval for the mean over tasks of ``points`` from each task's bootstrap ``draws``,
    resampling tasks and contexts. NaN when it has nothing to resample: one task without an
    interval of its own, or no bootstrap draws at all."""
    points_array = np.asarray(points, dtype=np.float64)
    stacked = np.stack([np.asarray(d, dtype=np.float64) for d in draws])
    if stacked.shape[1] == 0:
        return float("nan"), float("nan")
    if len(points_array) == 1 and not np.isfinite(stacked).any():
        return float("nan"), float("nan")
    return _interval(_site_bootstrap(points_array, stacked, rng), confidence)


def site_null_p95(nulls: Sequence[np.ndarray]) -> float:
    """95th percentile of the mean over tasks of independent per-task null draws: the null of
    the site mean (not the mean of the tasks' 95th percentiles)."""
    stacked = np.stack(list(nulls))
    if stacked.shape[1] == 0:
        return float("nan")
    return float(np.quantile(stacked.mean(0), 0.95))
