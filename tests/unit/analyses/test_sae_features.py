"""sae-features on planted ground truth through recorded activations: an SAE whose encoder is
the identity, so latent j fires exactly when coordinate j of the activation is positive, and
activations written so that every expected count is known by hand."""

import math

import numpy as np
import pytest
from helpers import tiny_saes
from sae_lens.saes.standard_sae import StandardSAE

import geomlens as gl
from geomlens.analyses.sae_features import SAEFeatures
from geomlens.engine import stream
from geomlens.results import Result

SITE = "blocks.0.hook_resid_post"
D = 6


def identity_sae(d: int = D, site: str = SITE) -> StandardSAE:
    """Latent j = relu(x_j): active exactly where coordinate j is positive."""
    return tiny_saes.identity_sae(d, site)


def vector(*entries: tuple[int, float]) -> list[float]:
    x = [-1.0] * D
    for index, value in entries:
        x[index] = value
    return x


ALL_ON = [1.0] * D
# Three tokens per row. Row 1's last token is padding (all latents on, must not count).
ROWS = [
    [vector((0, 2.0)), vector((0, 2.0), (1, 1.0)), vector((1, 1.0))],  # calibration: k 1 2 1
    [vector((2, 1.0)), vector((0, 1.0)), ALL_ON],  # calibration: k 1 1 (+pad)
    [vector((0, 1.0)), vector((1, 1.0)), vector((0, 1.0))],  # heldout, inside the pool
    [vector((3, 1.0)), vector((0, 1.0)), vector((1, 1.0))],  # heldout, latent 3 leaves it
    [ALL_ON, ALL_ON, ALL_ON],  # noise: k 6 6 6
    [vector(*[(j, 1.0) for j in range(5)])] * 3,  # noise: k 5 5 5
]
MASK = [[1, 1, 1], [1, 1, 0], [1, 1, 1], [1, 1, 1], [1, 1, 1], [1, 1, 1]]
CONDITIONS = ["calibration", "calibration", "heldout", "heldout", "noise", "noise"]


def recorded():
    return gl.attach({SITE: np.array(ROWS, dtype=np.float32)}, attention_mask=MASK)


def run(**options) -> Result:
    return gl.run("sae-features", recorded(), {"condition": CONDITIONS}, batch_size=4, **options)


def test_planted_counts_pool_and_mismatch():
    result = run(sae=identity_sae())
    m = result.metrics
    assert m[f"{SITE}.mean_k.calibration"] == pytest.approx((4 / 3 + 1) / 2)
    assert m[f"{SITE}.max_k.calibration"] == 2
    assert m[f"{SITE}.mean_k.heldout"] == 1.0
    assert m[f"{SITE}.mean_k.noise"] == 5.5
    assert m[f"{SITE}.max_k.noise"] == 6
    assert m[f"{SITE}.pool_size"] == 3  # latents 0, 1, 2
    assert m[f"{SITE}.ssd"] == pytest.approx(3 * math.log(math.e * 6 / 3))
    assert m[f"{SITE}.eta"] == 0.5  # row 3 uses latent 3
    assert m[f"{SITE}.eta.noise"] == 1.0
    assert m[f"{SITE}.auroc.noise"] == 1.0
    assert m[f"{SITE}.calibration_tokens"] == 5  # the padded token is not counted
    pool = {row["latent"]: row["first_seen_token"] for row in result.tables["pool"]}
    assert pool == {0: 0, 1: 1, 2: 3}
    histogram = {(r["condition"], r["k"]): r["count"] for r in result.tables["k_histogram"]}
    assert histogram[("calibration", 1)] == 4 and histogram[("calibration", 2)] == 1
    assert histogram[("noise", 6)] == 3 and histogram[("noise", 5)] == 3
    growth = {r["tokens"]: r["pool_size"] for r in result.tables["pool_growth"]}
    assert growth[1] == 1 and growth[2] == 2 and growth[5] == 3
    # Recordings cannot be spliced into: no loss, and the result says why.
    assert f"{SITE}.epsilon_loss" not in m
    assert any("recorded" in note["note"] for note in result.tables["notes"])


def test_pool_top_k_and_threshold():
    # Top-1 per token: token (2.0 on latent 0, 1.0 on latent 1) adds only latent 0, so latent
    # 1 first joins the pool at calibration token 2.
    result = run(sae=identity_sae(), pool_top_k=1)
    pool = {row["latent"]: row["first_seen_token"] for row in result.tables["pool"]}
    assert pool == {0: 0, 1: 2, 2: 3}
    # tau = 1.5: only the 2.0 entries count.
    strict = run(sae=identity_sae(), threshold=1.5)
    assert strict.metrics[f"{SITE}.pool_size"] == 1
    assert strict.metrics[f"{SITE}.max_k.noise"] == 0


def test_merging_halves_equals_one_pass():
    sae = identity_sae()
    data = gl.data.as_dataset({"condition": CONDITIONS}, num_rows=len(ROWS))
    adapter = recorded()
    first, second = SAEFeatures(sae=sae), SAEFeatures(sae=sae)
    stream([first], adapter, data, rows=np.arange(3), batch_size=2)
    stream([second], adapter, data, rows=np.arange(3, 6), batch_size=2)
    first.merge(second)
    whole = SAEFeatures(sae=sae)
    stream([whole], adapter, data, batch_size=4)
    merged, single = first.finalize(), whole.finalize()
    assert merged.metrics == single.metrics
    assert merged.tables == single.tables
    empty = SAEFeatures(sae=sae)
    empty.merge(whole)
    assert empty.finalize().metrics == single.metrics


def test_result_survives_json_and_plots(tmp_path):
    result = run(sae=identity_sae())
    path = tmp_path / "sae.json"
    result.to_json(path)
    loaded = Result.from_json(path)
    assert loaded.metrics == result.metrics
    assert "StandardSAE(d_in=6" in loaded.config["sae"]
    figure = SAEFeatures.plot(loaded)
    assert len(figure.axes) == 3


def test_bad_inputs_fail_before_any_pass():
    with pytest.raises(ValueError, match="condition"):
        gl.run("sae-features", recorded(), None, sae=identity_sae())
    with pytest.raises(ValueError, match=r"d_in=4 but 'blocks.0.hook_resid_post'.*width 6"):
        run(sae=identity_sae(d=4))
    with pytest.raises(KeyError, match="Unknown site 'blocks.9.hook_resid_post'"):
        run(sae=identity_sae(site="blocks.9.hook_resid_post"))
    with pytest.raises(ValueError, match="is not an SAE saved by sae-lens"):
        run(sae=__file__)
    with pytest.raises(ValueError, match="shuffle='sometimes' is not one of"):
        run(sae=identity_sae(), shuffle="sometimes")
    with pytest.raises(ValueError, match=r"training options \['dsae'\] are not fields"):
        run(training={"dsae": 16})
    with pytest.raises(ValueError, match="pool_top_k must be at least 1"):
        run(sae=identity_sae(), pool_top_k=0)
    with pytest.raises(
        ValueError, match=r"splice_pool lists latent 6, but the SAE has latents 0..5"
    ):
        run(sae=identity_sae(), splice_pool=[0, 6])


def test_several_saes_at_several_sites_in_one_pass():
    other = "blocks.1.hook_resid_post"
    flipped = -np.array(ROWS, dtype=np.float32)  # latent j fires where coordinate j < 0
    adapter = gl.attach(
        {SITE: np.array(ROWS, dtype=np.float32), other: flipped}, attention_mask=MASK
    )
    both = gl.run(
        "sae-features",
        adapter,
        {"condition": CONDITIONS},
        sae={SITE: identity_sae(), other: identity_sae(site=other)},
    )
    alone = run(sae=identity_sae())
    for name, value in alone.metrics.items():
        assert both.metrics[name] == value
    # Row 4 is all positive: no latent fires on the flipped copy; row 5 has one negative entry.
    assert both.metrics[f"{other}.max_k.noise"] == 1
    assert both.metrics[f"{other}.mean_k.noise"] == 0.5
    with pytest.raises(ValueError, match="site= overrides the site of one SAE"):
        gl.run(
            "sae-features",
            adapter,
            {"condition": CONDITIONS},
            sae=[identity_sae(), identity_sae(site=other)],
            site=SITE,
        )
