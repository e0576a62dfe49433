"""sae-features' comparison set: OOD sets length-matched to the whole negative set, derived sets
compared with their own source rows (paired, in the interval too), score intervals valid at
complete separation, and the two raw-activation baselines beside k — on planted activations
whose answers are recomputed here with numpy and scikit-learn."""

import numpy as np
import pytest
from helpers import tiny_saes
from sklearn.covariance import LedoitWolf
from sklearn.metrics import roc_auc_score

import geomlens as gl
from geomlens.stats import auroc_score_interval

SITE = "blocks.0.hook_resid_post"
D, T, N = 6, 4, 16


def planted():
    """Calibration, held-out (N rows), 'scaled' (held-out row i times 3, paired with it),
    'shifted' (fresh rows moved along the held-out set's quietest direction, unpaired)."""
    rng = np.random.default_rng(0)
    spread = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 0.05])
    heldout = rng.normal(size=(N, T, D)) * spread
    shifted = rng.normal(size=(N, T, D)) * spread + np.array([0, 0, 0, 0, 0, 1.5])
    rows = np.concatenate([rng.normal(size=(4, T, D)), heldout, 3 * heldout, shifted])
    conditions = ["calibration"] * 4 + ["heldout"] * N + ["scaled"] * N + ["shifted"] * N
    source = [-1] * 4 + list(range(N)) + list(range(N))[::-1] + [-1] * N
    # The scaled rows arrive in another order: the pairing is by source_row, not position.
    rows[4 + N : 4 + 2 * N] = rows[4 + N : 4 + 2 * N][::-1]
    return rows.astype(np.float32), conditions, source


def run(rows, data, **options):
    adapter = gl.attach({SITE: rows}, attention_mask=[[1] * T] * len(rows))
    return gl.run(
        "sae-features", adapter, data, sae=tiny_saes.identity_sae(D, SITE), batch_size=5,
        sink_norm_ratio=None, **options,
    )  # fmt: skip


def test_baselines_beside_k_recomputed():
    rows, conditions, source = planted()
    result = run(rows, {"condition": conditions, "source_row": source})
    m = result.metrics
    x = rows.astype(np.float64)
    cond = np.array(conditions)
    norms = np.linalg.norm(x, axis=-1).mean(-1)
    pooled = x.mean(1)
    held = pooled[cond == "heldout"]
    loo = np.array(
        [LedoitWolf().fit(np.delete(held, i, 0)).mahalanobis(held[i : i + 1])[0] for i in range(N)]
    )
    fitted = LedoitWolf().fit(held)
    src = np.array(source)
    # A row made from held-out row s is scored against the held-out rows without s.
    scaled = np.array(
        [
            LedoitWolf().fit(np.delete(held, s, 0)).mahalanobis(row[None])[0]
            for row, s in zip(pooled[cond == "scaled"], src[cond == "scaled"])
        ]
    )
    ood = {"scaled": scaled, "shifted": fitted.mahalanobis(pooled[cond == "shifted"])}
    for name in ("scaled", "shifted"):
        labels = [0] * N + [1] * N
        norm_auc = roc_auc_score(labels, np.r_[norms[cond == "heldout"], norms[cond == name]])
        maha_auc = roc_auc_score(labels, np.r_[loo, ood[name]])
        assert m[f"{SITE}.auroc_norm.{name}"] == pytest.approx(norm_auc, abs=1e-12)
        assert m[f"{SITE}.auroc_mahalanobis.{name}"] == pytest.approx(maha_auc, abs=1e-12)
        for score in ("norm", "mahalanobis"):
            low = m[f"{SITE}.auroc_{score}_ci_low.{name}"]
            high = m[f"{SITE}.auroc_{score}_ci_high.{name}"]
            assert low <= m[f"{SITE}.auroc_{score}.{name}"] <= high
    # Planted: tripling a row triples its norm; a shift along the quietest direction (30 of
    # its standard deviations) is what the Mahalanobis distance sees better than the norm.
    assert m[f"{SITE}.auroc_norm.scaled"] == 1.0
    assert m[f"{SITE}.auroc_mahalanobis.shifted"] == 1.0
    assert m[f"{SITE}.auroc_norm.shifted"] < 0.9
    # Complete separation still has an interval below 1 (score interval, not a bootstrap).
    assert m[f"{SITE}.auroc_norm_ci_low.scaled"] < 0.95
    assert m[f"{SITE}.auroc_norm_ci_high.scaled"] == 1.0


def test_mahalanobis_leaves_the_scored_rows_source_out_of_the_reference():
    """Copies of the held-out rows are no more out of distribution than the rows themselves:
    scored against a reference holding their own source they would look closer than every
    held-out row (scored leave one out), an AUROC near 0 read as "does not separate"."""
    rows, conditions, source = planted()
    copies = rows[4 : 4 + N]
    rows = np.concatenate([rows, copies])
    conditions = conditions + ["copies"] * N
    source = list(source) + list(range(N))
    result = run(rows, {"condition": conditions, "source_row": source})
    assert result.metrics[f"{SITE}.auroc_mahalanobis.copies"] == pytest.approx(0.5)


def test_a_derived_set_is_compared_with_its_own_rows_paired():
    rows, conditions, source = planted()
    result = run(rows, {"condition": conditions, "source_row": source})
    table = {row["condition"]: row for row in result.tables["ood"]}
    assert table["scaled"]["paired_with_source"] is True
    assert table["shifted"]["paired_with_source"] is False
    assert table["scaled"]["negatives"] == N
    # Recompute content k (identity SAE: latent j on where coordinate j > 0) per row, put
    # held-out row i beside the row made from it, and read the paired interval.
    k = (rows > 0).sum(-1).mean(-1).astype(float)
    cond, src = np.array(conditions), np.array(source)
    order_h = np.argsort(src[cond == "heldout"])
    order_s = np.argsort(src[cond == "scaled"])
    negatives, positives = k[cond == "heldout"][order_h], k[cond == "scaled"][order_s]
    expected = auroc_score_interval(negatives, positives, paired=True)
    m = result.metrics
    assert (m[f"{SITE}.auroc_content_ci_low.scaled"], m[f"{SITE}.auroc_content_ci_high.scaled"]) \
        == pytest.approx(expected)  # fmt: skip
    # Scaling keeps every sign: k of row i is k of its source, a paired AUROC of exactly 1/2
    # whose interval is narrowed by the pairing (each pair ties).
    assert m[f"{SITE}.auroc_content.scaled"] == 0.5
    unpaired = auroc_score_interval(negatives, positives)
    assert expected[1] - expected[0] < unpaired[1] - unpaired[0]


def test_a_set_made_from_part_of_the_heldout_rows_is_not_paired():
    rows, conditions, source = planted()
    source = list(source)
    for i in range(4 + N, 4 + N + 3):  # three derived rows share one source
        source[i] = 0
    result = run(rows, {"condition": conditions, "source_row": source})
    table = {row["condition"]: row for row in result.tables["ood"]}
    assert table["scaled"]["paired_with_source"] is False


def test_default_data_matches_the_whole_negative_set():
    """Every OOD set has the lengths of all the held-out rows (not of the first half), and a
    row made from a held-out row names it and keeps its length and special tokens."""
    from helpers.tiny_models import tiny_tokenizer

    from geomlens.data.ood import feature_explosion_data

    tokenizer = tiny_tokenizer()
    data = feature_explosion_data(tokenizer, calibration_rows=6, heldout_rows=10, max_tokens=24)
    cond = np.array(data["condition"])
    ids = data["token_ids"]
    lengths = np.array([len(row) for row in ids])
    held = sorted(lengths[cond == "heldout"])
    for name in ("random_tokens", "replaced_15pct", "python_source"):
        assert sorted(lengths[cond == name]) == held, name
    source = np.array(data["source_row"])
    held_rows = [ids[i] for i in np.flatnonzero(cond == "heldout")]
    special = set(tokenizer.all_special_ids)
    for name in ("random_tokens", "replaced_15pct"):
        for i in np.flatnonzero(cond == name):
            origin = held_rows[source[i]]
            assert len(ids[i]) == len(origin)
            assert [t in special for t in ids[i]] == [t in special for t in origin]
    assert (source[cond == "python_source"] == -1).all()
    with pytest.raises(ValueError, match="ood_rows=4 differs from heldout_rows=10"):
        feature_explosion_data(
            tokenizer, calibration_rows=6, heldout_rows=10, ood_rows=4, max_tokens=24
        )
