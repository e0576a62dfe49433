"""Linear concept probes of one task: CCGP over held-out contexts, the accuracy cross-validated
inside each context (the ceiling CCGP is read against), and the older mixed-context accuracy
(docs/theory.md#abstraction-measuring, docs/abstraction.md).

Probes are scikit-learn logistic regressions on standardised features. Every fit starts cold
(from zero) and runs to a tight tolerance (:data:`PROBE_TOLERANCE`), so an accuracy does not
depend on which fit ran before it (with warm starts and the default tolerance the solver stops
at a point that depends on the split order). A concept set's probe is small (about a hundred rows by a few hundred
features), and for problems that small a multi-threaded BLAS spends more time starting and
synchronising threads than computing (7–8× slower per fit on the bundled MiniLM's sets on a
busy two-core machine), so small probes are fitted with one BLAS thread.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

#: Up to this many contexts CCGP uses every balanced split; above, leave one context out.
MAX_CONTEXTS_FOR_BALANCED_SPLITS = 6
Scored = TypeVar("Scored")
#: Tolerance of the probe's solver (scikit-learn's default is 1e-4).
PROBE_TOLERANCE = 1e-8
#: Probes with fewer rows × features than this are fitted with one BLAS thread.
SINGLE_THREAD_BELOW = 2_000_000


def one_blas_thread_when_small(function: Callable[..., Scored]) -> Callable[..., Scored]:
    """Run ``function(rows, ...)`` with one BLAS thread when ``rows`` is a small matrix."""

    @functools.wraps(function)
    def limited(rows: np.ndarray, *args: Any, **kwargs: Any) -> Scored:
        if rows.size >= SINGLE_THREAD_BELOW:
            return function(rows, *args, **kwargs)
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="blas"):
            return function(rows, *args, **kwargs)

    return limited


def context_splits(contexts: Sequence[str], max_splits: int) -> tuple[str, list[list[str]]]:
    """How CCGP holds contexts out: (scheme name, list of held-out context sets).

    Up to 6 contexts: every balanced split (half the contexts held out; for 2, both
    directions). More: leave one context out, exactly — unless ``max_splits`` > 0 and there are
    more contexts than that, then ``max_splits`` groups of contexts held out in turn (an
    approximation the result names in ``split_scheme`` and ``n_splits``).
    """
    contexts = list(contexts)
    k = len(contexts)
    if k <= MAX_CONTEXTS_FOR_BALANCED_SPLITS:
        held = [list(c) for c in itertools.combinations(contexts, k // 2)]
        return "all balanced splits", held
    if max_splits <= 0 or k <= max_splits:
        return "leave one context out", [[c] for c in contexts]
    groups = [contexts[i::max_splits] for i in range(max_splits)]
    return f"{max_splits} groups of contexts held out in turn", groups


class Probe:
    """A standardise-then-logistic-regression probe; every fit starts cold and converges to
    :data:`PROBE_TOLERANCE`."""

    def __init__(self, inverse_regularisation: float, seed: int) -> None:
        from sklearn.linear_model import LogisticRegression
        from sklearn.preprocessing import StandardScaler

        self.scaler = StandardScaler()
        self.model = LogisticRegression(
            C=inverse_regularisation,
            max_iter=20_000,
            tol=PROBE_TOLERANCE,
            random_state=seed,
            warm_start=False,
        )

    def fit(self, rows: np.ndarray, labels: np.ndarray) -> Probe:
        self.model.fit(self.scaler.fit_transform(rows), labels)
        return self

    def score(self, rows: np.ndarray, labels: np.ndarray) -> float:
        return float(self.model.score(self.scaler.transform(rows), labels))


def _fold_accuracy(
    rows: np.ndarray, labels: np.ndarray, folds: int, seed: int, probe: Probe
) -> float | None:
    """Mean accuracy of stratified ``folds``-fold cross-validation (fewer folds when a class has
    fewer rows), or None when a class has fewer than two rows (nothing to hold out)."""
    from sklearn.model_selection import StratifiedKFold

    values, sizes = np.unique(labels, return_counts=True)
    if len(values) != 2 or sizes.min() < 2:
        return None
    split = StratifiedKFold(n_splits=min(folds, int(sizes.min())), shuffle=True, random_state=seed)
    scores = [
        probe.fit(rows[train], labels[train]).score(rows[test], labels[test])
        for train, test in split.split(rows, labels)
    ]
    return float(np.mean(scores))


@one_blas_thread_when_small
def within_context_accuracy(
    rows: np.ndarray,
    concept: np.ndarray,
    context: np.ndarray,
    *,
    folds: int,
    seed: int,
    inverse_regularisation: float,
) -> tuple[float, int]:
    """Accuracy of probes cross-validated inside each context, averaged over the contexts that
    have at least two rows of each concept value, and how many did. NaN (and 0) when none
    has: with one row per value and context (word pairs) there is no within-context test."""
    probe = Probe(inverse_regularisation, seed)
    accuracies = []
    for value in dict.fromkeys(context):
        inside = context == value
        accuracy = _fold_accuracy(rows[inside], concept[inside], folds, seed, probe)
        if accuracy is not None:
            accuracies.append(accuracy)
    if not accuracies:
        return float("nan"), 0
    return float(np.mean(accuracies)), len(accuracies)


@one_blas_thread_when_small
def ccgp_scores(
    rows: np.ndarray,
    concept: np.ndarray,
    context: np.ndarray,
    *,
    seed: int,
    max_splits: int,
    folds: int,
    inverse_regularisation: float,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """CCGP (accuracy on held-out contexts, mean over splits), the within-context accuracy
    (:func:`within_context_accuracy`), the mixed-context accuracy (stratified cross-validation
    with rows split at random over all contexts, so test contexts were seen in training: on
    word-pair sets, accuracy on unseen words), plus one record per split."""
    both = sorted({x for x in context if len(set(concept[context == x])) == 2})
    keep = np.isin(context, both)
    rows, concept, context = rows[keep], concept[keep], context[keep]
    scheme, held_out = context_splits(both, max_splits)
    probe = Probe(inverse_regularisation, seed)
    splits = []
    for held in held_out:
        test = np.isin(context, held)
        accuracy = probe.fit(rows[~test], concept[~test]).score(rows[test], concept[test])
        splits.append({"held_out": "|".join(held), "accuracy": accuracy, "n_test": int(test.sum())})
    within, n_within = within_context_accuracy(
        rows,
        concept,
        context,
        folds=folds,
        seed=seed,
        inverse_regularisation=inverse_regularisation,
    )
    mixed = _fold_accuracy(rows, concept, folds, seed, Probe(inverse_regularisation, seed))
    summary = {
        "ccgp": float(np.mean([s["accuracy"] for s in splits])),
        "within_context_accuracy": within,
        "mixed_context_accuracy": float("nan") if mixed is None else mixed,
        "n_contexts": float(len(both)),
        "n_within_contexts": float(n_within),
        "n_splits": float(len(splits)),
        "split_scheme": scheme,
    }
    return summary, splits
