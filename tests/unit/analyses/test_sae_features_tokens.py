"""sae-features fit for causal LMs and encoders: k both
ways around special tokens and attention sinks, the splice kept off them, ε̂_loss only where
needed, the SAE's own activation normalisation, decoder norms, a saturated pool, AUROC
intervals — each on planted data whose answer is known."""

import copy
import math

import numpy as np
import pytest
import torch
from helpers import tiny_saes
from helpers.paths import REPO
from helpers.tiny_models import tiny_gpt2
from sae_lens.saes.standard_sae import StandardSAE

import geomlens as gl
from geomlens.models.nnsight import NNsightAdapter

SITE = "blocks.0.hook_resid_post"
D = 6


def identity_sae(d: int = D, site: str = SITE) -> StandardSAE:
    """Latent j = relu(x_j): active exactly where coordinate j is positive."""
    return tiny_saes.identity_sae(d, site)


def token(*on: int, scale: float = 1.0) -> list[float]:
    return [scale * (1.0 if j in on else -1.0) for j in range(D)]


SINK = token(*range(D), scale=300.0)  # every latent on, 300 x the norm of a token
# Position 0 of every row is a sink (a causal LM's first position). Held-out content tokens
# have k = 1; "noisy" content tokens k = 2; the sink's k = 6 everywhere.
ROWS = [
    [SINK, token(0), token(1), token(2)],  # calibration
    [SINK, token(0), token(1), token(0)],  # calibration
    [SINK, token(0), token(1), token(1)],  # heldout
    [SINK, token(1), token(0), token(0)],  # heldout
    [SINK, token(0), token(2), token(1)],  # heldout
    [SINK, token(0, 3), token(1, 4), token(2, 3)],  # noisy
    [SINK, token(3, 4), token(0, 5), token(1, 2)],  # noisy
    [SINK, token(1, 5), token(2, 4), token(0, 4)],  # noisy
]
CONDITIONS = ["calibration"] * 2 + ["heldout"] * 3 + ["noisy"] * 3


def recorded(rows=ROWS):
    mask = [[1] * len(rows[0])] * len(rows)
    return gl.attach({SITE: np.array(rows, dtype=np.float32)}, attention_mask=mask)


def run(sae=None, rows=ROWS, conditions=CONDITIONS, **options):
    return gl.run(
        "sae-features", recorded(rows), {"condition": conditions}, sae=sae or identity_sae(),
        batch_size=3, **options,
    )  # fmt: skip


def test_k_is_reported_with_and_without_the_sink():
    m = run().metrics
    # The paper's way counts the sink: (6 + 1 + 1 + 1) / 4 per held-out row.
    assert m[f"{SITE}.mean_k_all.heldout"] == pytest.approx(9 / 4)
    assert m[f"{SITE}.max_k_all.heldout"] == 6 == m[f"{SITE}.max_k_all.noisy"]
    assert m[f"{SITE}.mean_k.heldout"] == m[f"{SITE}.mean_k_all.heldout"]  # deprecated alias
    # sae-lens's way leaves it out.
    assert m[f"{SITE}.mean_k_content.heldout"] == 1.0
    assert m[f"{SITE}.mean_k_content.noisy"] == 2.0
    assert m[f"{SITE}.max_k_content.heldout"] == 1.0
    assert m[f"{SITE}.l0"] == 1.0
    # By max k the sink hides the OOD set; without it the OOD set separates.
    assert m[f"{SITE}.excluded_tokens.noisy"] == 3
    result = run(score="max")
    assert result.metrics[f"{SITE}.auroc_all.noisy"] == 0.5
    assert result.metrics[f"{SITE}.auroc_content.noisy"] == 1.0
    row = next(r for r in result.tables["ood"] if r["condition"] == "noisy")
    assert row["sink_tokens"] == row["sinks_at_first_position"] == 3
    assert row["median_tokens"] == 4
    assert "sink" in " ".join(n["note"] for n in result.tables["notes"])
    # The bound's k̄ and the pool stay the paper's way: the sink put every latent in the pool.
    assert m[f"{SITE}.pool_size"] == D
    # No sink rule: nothing is excluded.
    unflagged = run(sink_norm_ratio=None).metrics
    assert unflagged[f"{SITE}.mean_k_content.heldout"] == unflagged[f"{SITE}.mean_k_all.heldout"]


def test_every_auroc_has_a_score_interval():
    m = run().metrics
    for way in ("all", "content"):
        low, high = m[f"{SITE}.auroc_{way}_ci_low.noisy"], m[f"{SITE}.auroc_{way}_ci_high.noisy"]
        assert low <= m[f"{SITE}.auroc_{way}.noisy"] <= high
    # Content k separates perfectly: the score interval still reaches below 1 (a percentile
    # bootstrap gave [1, 1]), 3 rows a side leaving much room.
    assert m[f"{SITE}.auroc_content.noisy"] == 1.0
    assert m[f"{SITE}.auroc_content_ci_low.noisy"] < 0.9
    assert m[f"{SITE}.auroc_content_ci_high.noisy"] == 1.0
    # Overlapping planted scores give a proper interval, not a point.
    rows = ROWS[:5] + [[SINK, token(0), token(1), token(2)], *ROWS[6:]]  # ties held-out
    m = run(rows=rows).metrics
    assert m[f"{SITE}.auroc_content_ci_low.noisy"] < m[f"{SITE}.auroc_content.noisy"]


def test_explained_variance_dead_latents_and_a_saturated_pool():
    sae = identity_sae()
    with torch.no_grad():  # latent 5 reconstructs at half length: x̂_5 = 0.5 relu(x_5)
        sae.W_dec[5, 5] = 0.5
    m = run(sae=sae).metrics
    # Held-out content tokens never turn latent 5 on, so their reconstruction is relu(x) —
    # planted residual: the negative coordinates, -1 each.
    x = np.array([t for r, c in zip(ROWS, CONDITIONS) if c == "heldout" for t in r[1:]])
    residual = ((x - np.maximum(x, 0)) ** 2).sum()
    expected = 1 - residual / ((x - x.mean(0)) ** 2).sum()
    assert m[f"{SITE}.explained_variance"] == pytest.approx(expected, rel=1e-9)
    # Calibration and held-out content tokens use latents 0, 1, 2 only: 3 of 6 are dead.
    assert m[f"{SITE}.dead_latents"] == 3 and m[f"{SITE}.dead_fraction"] == 0.5
    # Decoder column norms: five of 1, one of 0.5.
    assert m[f"{SITE}.decoder_norm_min"] == 0.5 and m[f"{SITE}.decoder_norm_max"] == 1.0
    assert m[f"{SITE}.decoder_norm_spread"] == pytest.approx(0.5 / (5.5 / 6))
    # The sink put all 6 latents in the pool: P = m, saturated, and the result says so.
    result = run(sae=sae)
    assert result.metrics[f"{SITE}.pool_saturated"] == 1.0
    assert any("saturated" in n["note"].lower() for n in result.tables["notes"])
    calibration_only = [r[1:] for r in ROWS]  # no sink: the pool is latents 0-2 and 3-5 unseen
    unsaturated = run(sae=sae, rows=calibration_only).metrics
    assert unsaturated[f"{SITE}.pool_size"] == 3 and unsaturated[f"{SITE}.pool_saturated"] == 0.0


def test_the_sae_own_activation_normalisation_is_applied():
    """An SAE trained with sae-lens's expected_average_only_in normalisation reads x · c. Given
    its factor c, the counts equal those of the SAE with c folded in by sae-lens; without one,
    the run is refused instead of counting on unscaled activations."""
    factor = 0.25
    unfolded = identity_sae()
    with torch.no_grad():
        unfolded.b_enc.fill_(-0.5)  # latent j fires when c · x_j > 0.5, i.e. x_j > 2
    unfolded.cfg.normalize_activations = "expected_average_only_in"
    folded = copy.deepcopy(unfolded)
    folded.fold_activation_norm_scaling_factor(factor)
    rows = [[token(0, scale=s), token(1, scale=3 * s), token(2, scale=s)] for s in (1, 4, 1, 4)]
    conditions = ["calibration", "calibration", "heldout", "heldout"]
    expected = run(sae=folded, rows=rows, conditions=conditions, sink_norm_ratio=None).metrics
    got = run(
        sae=unfolded, rows=rows, conditions=conditions, norm_scaling_factor=factor,
        sink_norm_ratio=None,
    ).metrics  # fmt: skip
    assert got[f"{SITE}.mean_k_all.heldout"] == expected[f"{SITE}.mean_k_all.heldout"] != 1.0
    assert got[f"{SITE}.norm_scaling_factor"] == factor
    assert unfolded.cfg.normalize_activations == "expected_average_only_in"  # left as it was
    with pytest.raises(ValueError, match="norm_scaling_factor"):
        run(sae=unfolded, rows=rows, conditions=conditions)


@pytest.fixture(scope="module")
def tiny():
    model, tokenizer = tiny_gpt2()
    return model, tokenizer, NNsightAdapter(model, tokenizer=tokenizer)


def random_sae(width: int = 32, seed: int = 0) -> StandardSAE:
    return tiny_saes.random_sae(width, SITE, seed=seed)


def test_bos_is_counted_only_the_paper_way_and_never_spliced(tiny):
    model, tokenizer, adapter = tiny
    bos = tokenizer.bos_token_id
    rows = [[bos, 5, 6, 7, 8], [bos, 9, 10, 11], [bos, 12, 13, 14, 15, 16], [bos, 17, 18]]
    conditions = ["calibration", "calibration", "heldout", "heldout"]
    sae = random_sae()
    data = {"token_ids": rows, "condition": conditions}
    result = gl.run("sae-features", adapter, data, sae=sae, sink_norm_ratio=None, shuffle="none")
    m = result.metrics

    def latents(row):
        with torch.no_grad():
            hidden = model(torch.tensor([row]), output_hidden_states=True).hidden_states[1][0]
            return (sae.encode(hidden) > 0).sum(-1).numpy()

    heldout = [r for r, c in zip(rows, conditions) if c == "heldout"]
    assert m[f"{SITE}.mean_k_all.heldout"] == pytest.approx(
        np.mean([latents(r).mean() for r in heldout])
    )
    assert m[f"{SITE}.mean_k_content.heldout"] == pytest.approx(
        np.mean([latents(r)[1:].mean() for r in heldout])
    )
    assert m[f"{SITE}.excluded_tokens.heldout"] == 2

    def bits(row, splice_bos):
        def replace(module, args, output):
            hidden = output[0] if isinstance(output, tuple) else output
            recon = sae.decode(sae.encode(hidden))
            if not splice_bos:
                recon[:, 0] = hidden[:, 0]
            return (recon, *output[1:]) if isinstance(output, tuple) else recon

        handle = model.transformer.h[0].register_forward_hook(replace)
        try:
            with torch.no_grad():
                logits = model(torch.tensor([row])).logits[0].double()
        finally:
            handle.remove()
        with torch.no_grad():
            clean = model(torch.tensor([row])).logits[0].double()

        def loss(lg):
            p = torch.softmax(lg, -1)[torch.arange(len(row) - 1), torch.tensor(row[1:])]
            return float((-torch.log2(0.5 * p + 0.5 / lg.shape[-1])).mean())

        return abs(loss(logits) - loss(clean))

    assert m[f"{SITE}.epsilon_loss"] == pytest.approx(
        np.mean([bits(r, False) for r in heldout]), abs=1e-6
    )
    every = gl.run(
        "sae-features", adapter, data, sae=sae, sink_norm_ratio=None, shuffle="none",
        splice_excluded=True,
    ).metrics  # fmt: skip
    assert every[f"{SITE}.epsilon_loss"] == pytest.approx(
        np.mean([bits(r, True) for r in heldout]), abs=1e-6
    )
    assert every[f"{SITE}.epsilon_loss"] != pytest.approx(m[f"{SITE}.epsilon_loss"], abs=1e-6)


def test_calibration_rows_are_not_spliced(tiny):
    """ε̂_loss is measured on the rows that need it: a batch of calibration
    and held-out rows sends only its held-out rows through the spliced passes."""
    _, _, adapter = tiny
    rows = [[5, 6, 7, 8], [9, 10, 11], [12, 13, 14], [15, 16, 17, 18]]
    conditions = ["calibration", "heldout", "calibration", "heldout"]
    seen: list[int] = []

    class Watched(NNsightAdapter):
        def capture(self, inputs, sites):
            seen.append(inputs.batch_size)
            return super().capture(inputs, sites)

    watched = Watched(adapter.model, tokenizer=adapter.tokenizer)
    result = gl.run(
        "sae-features", watched, {"token_ids": rows, "condition": conditions},
        sae=random_sae(), batch_size=4,
    )  # fmt: skip
    spliced = seen[1:]  # the first capture is the clean pass of the batch (4 rows)
    assert spliced == [2, 2]  # the splice and the shuffle, on the two held-out rows only
    assert math.isfinite(result.metrics[f"{SITE}.epsilon_loss"])


def test_the_report_reading_and_the_quoted_numbers_follow_the_new_names(tmp_path):
    """The plain-words reading and scripts/numbers/sae.py read k the content way with its
    interval and the SAE's quality — also from a result loaded back from JSON."""
    import importlib.util
    import sys

    from geomlens.report.readings import read
    from geomlens.results import Result

    result = run(bootstrap=200)
    result.to_json(tmp_path / "r.json")
    loaded = Result.from_json(tmp_path / "r.json")
    text = " ".join(read(loaded))
    assert "sae-lens" in text and "95 % interval" in text and "explains" in text
    assert "saturated" in text  # the sink put every latent in the pool
    numbers = REPO / "scripts" / "numbers"
    sys.path.insert(0, str(numbers))
    try:
        spec = importlib.util.spec_from_file_location("numbers_sae", numbers / "sae.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        table = module.SECTIONS["sae-features-table"]({"sae-features": loaded})
    finally:
        sys.path.remove(str(numbers))
    noisy = next(line for line in table.splitlines() if line.startswith("| noisy"))
    assert "| 1.0 [1.00, 1.00]" not in noisy  # AUROCs print with two decimals
    assert "| 2.0 |" in noisy  # k content of the noisy rows
    assert "saturated" in table
