"""sae-features on a tiny GPT-2 through nnsight and TransformerLens, against independent
computations on the Hugging Face model itself (its hidden states, and its logits with the SAE's
reconstruction spliced in by a plain torch forward hook)."""

import math

import numpy as np
import pytest
import torch
from helpers import tiny_saes
from helpers.tiny_models import tiny_gpt2
from sae_lens.saes.sae import SAEMetadata
from sae_lens.saes.standard_sae import StandardSAE, StandardSAEConfig

import geomlens as gl
from geomlens.models.nnsight import NNsightAdapter
from geomlens.models.transformer_lens import TransformerLensAdapter

SITE = "blocks.0.hook_resid_post"
WIDTH = 32
ROWS = [
    [5, 6, 7, 8, 9, 10, 11],
    [12, 13, 14, 15],
    [16, 17, 18, 19, 20, 21],
    [22, 23, 24, 25, 26],
    [27, 28, 29, 30, 31, 32, 33, 34],
    [35, 36, 37],
    [40, 41, 42, 43, 44],
    [45, 46, 47, 48, 49, 50, 51],
]
CONDITIONS = ["calibration"] * 3 + ["heldout"] * 3 + ["shuffled_words"] * 2
MARGIN = 0.05  # a planted latent fires when one coordinate's magnitude exceeds this (~10 %)


def planted_sae() -> StandardSAE:
    """Latents j and 32 + j fire when coordinate j is above +MARGIN or below -MARGIN."""
    sae = StandardSAE(
        StandardSAEConfig(d_in=WIDTH, d_sae=2 * WIDTH, metadata=SAEMetadata(hook_name=SITE))
    )
    eye = torch.eye(WIDTH)
    with torch.no_grad():
        sae.W_enc.copy_(torch.cat([eye, -eye], dim=1))
        sae.W_dec.copy_(torch.cat([eye, -eye], dim=0))
        sae.b_enc.fill_(-MARGIN)
        sae.b_dec.zero_()
    return sae


def random_sae(seed: int = 0) -> StandardSAE:
    return tiny_saes.random_sae(WIDTH, SITE, seed=seed)


@pytest.fixture(scope="module")
def model():
    return tiny_gpt2()


@pytest.fixture(scope="module")
def adapters(model):
    hf_model, tokenizer = model
    return {
        "nnsight": NNsightAdapter(hf_model, tokenizer=tokenizer),
        "transformer-lens": TransformerLensAdapter.from_hf(hf_model, tokenizer),
    }


def hidden_after_block0(hf_model, row):
    with torch.no_grad():
        out = hf_model(torch.tensor([row]), output_hidden_states=True)
    return out.hidden_states[1][0].numpy()


def spliced_logits(hf_model, row, sae):
    """Logits with block 0's output replaced by the SAE reconstruction (a plain torch hook)."""

    def replace(module, args, output):
        hidden = output[0] if isinstance(output, tuple) else output
        recon = sae.decode(sae.encode(hidden))
        return (recon, *output[1:]) if isinstance(output, tuple) else recon

    handle = hf_model.transformer.h[0].register_forward_hook(replace)
    try:
        with torch.no_grad():
            return hf_model(torch.tensor([row])).logits[0].double().numpy()
    finally:
        handle.remove()


def smoothed_bits(logits, row, a=0.5):
    """Mean over next tokens of -log2((1 - a) p + a / V), written out with numpy."""
    logits = logits - logits.max(-1, keepdims=True)
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    vocab = logits.shape[-1]
    p = probs[np.arange(len(row) - 1), row[1:]]
    return float(np.mean(-np.log2((1 - a) * p + a / vocab)))


@pytest.mark.parametrize("backend", ["nnsight", "transformer-lens"])
def test_planted_counts_match_the_hf_hidden_states(model, adapters, backend):
    hf_model, _ = model
    result = gl.run(
        "sae-features",
        adapters[backend],
        {"token_ids": ROWS, "condition": CONDITIONS},
        sae=planted_sae(),
        fidelity=False,
        batch_size=3,
    )
    pool, per_condition, leaves = set(), {}, []
    for row, condition in zip(ROWS, CONDITIONS):
        hidden = hidden_after_block0(hf_model, row)  # [T, 32]
        latents = np.concatenate([hidden > MARGIN, -hidden > MARGIN], axis=1)
        k = latents.sum(1)
        per_condition.setdefault(condition, []).append((k.mean(), k.max()))
        used = set(np.flatnonzero(latents.any(0)))
        if condition == "calibration":
            pool |= used
        elif condition == "heldout":
            leaves.append(bool(used - pool))
    m = result.metrics
    for condition, values in per_condition.items():
        assert m[f"{SITE}.mean_k.{condition}"] == pytest.approx(np.mean([v[0] for v in values]))
        assert m[f"{SITE}.max_k.{condition}"] == max(v[1] for v in values)
    assert m[f"{SITE}.pool_size"] == len(pool)
    assert m[f"{SITE}.ssd"] == pytest.approx(len(pool) * math.log(math.e * 64 / len(pool)))
    assert {r["latent"] for r in result.tables["pool"]} == pool
    assert m[f"{SITE}.eta"] == pytest.approx(np.mean(leaves))
    assert 0 < len(pool) < 64  # the planted margin makes a non-trivial pool


def test_same_counts_through_both_backends(adapters):
    results = {
        name: gl.run(
            "sae-features",
            adapter,
            {"token_ids": ROWS, "condition": CONDITIONS},
            sae=planted_sae(),
            fidelity=False,
            batch_size=4,
        )
        for name, adapter in adapters.items()
    }
    nnsight, bridge = results["nnsight"], results["transformer-lens"]
    assert nnsight.tables["k_histogram"] == bridge.tables["k_histogram"]
    assert nnsight.tables["pool"] == bridge.tables["pool"]
    for name, value in nnsight.metrics.items():
        # Counts are exact; the explained variance sums float32 activations, which the two
        # backends compute in a different order (relative 1e-6).
        tolerance = {"rel": 1e-6} if ".explained_variance" in name else {"abs": 1e-12}
        assert bridge.metrics[name] == pytest.approx(value, **tolerance), name


@pytest.mark.parametrize("backend", ["nnsight", "transformer-lens"])
def test_epsilon_loss_and_bound_equal_an_independent_computation(model, adapters, backend):
    hf_model, _ = model
    sae = random_sae()
    result = gl.run(
        "sae-features",
        adapters[backend],
        {"token_ids": ROWS, "condition": CONDITIONS},
        sae=sae,
        batch_size=3,
    )
    heldout = [row for row, c in zip(ROWS, CONDITIONS) if c == "heldout"]
    with torch.no_grad():
        clean = [
            smoothed_bits(hf_model(torch.tensor([r])).logits[0].double().numpy(), r)
            for r in heldout
        ]
    proxy = [smoothed_bits(spliced_logits(hf_model, r, sae), r) for r in heldout]
    eps = float(np.mean(np.abs(np.subtract(proxy, clean))))
    m = result.metrics
    assert m[f"{SITE}.model_loss"] == pytest.approx(np.mean(clean), abs=1e-6)
    assert m[f"{SITE}.proxy_loss"] == pytest.approx(np.mean(proxy), abs=1e-6)
    assert m[f"{SITE}.epsilon_loss"] == pytest.approx(eps, abs=1e-6)
    assert eps > 1e-3  # the splice really changed the model's predictions

    # The pool form of the bound, by hand from SPEC's formula.
    V = hf_model.config.vocab_size
    B = math.log2(V / 0.5)
    P, N, eta = m[f"{SITE}.pool_size"], len(heldout), m[f"{SITE}.eta"]
    ssd = P * math.log(math.e * 48 / P)
    risk = float(np.mean(proxy))
    expected = (
        risk
        + eps
        + B * eta
        + B * math.sqrt((ssd + math.log(2 / 0.05)) / (2 * N))
        + B * math.sqrt(math.log(4 / 0.05) / (2 * N))
    )
    assert m[f"{SITE}.bound"] == pytest.approx(expected, abs=1e-6)
    assert m[f"{SITE}.bound.pool"] == m[f"{SITE}.bound"]
    floor = risk + eps + B * eta
    slope = B * (math.sqrt((ssd + math.log(40)) / 2) + math.sqrt(math.log(80) / 2))
    n_star = (slope / (math.log2(V) - floor)) ** 2 if floor < math.log2(V) else math.inf
    assert m[f"{SITE}.n_star"] == pytest.approx(n_star, rel=1e-6)
    # The released-code form uses the mean per-token k and N in predicted tokens.
    k = m[f"{SITE}.token_mean_k.heldout"]
    tokens = sum(len(r) - 1 for r in heldout)
    released = (
        risk
        + eps
        + 4 * B * math.sqrt(k * math.log(math.e * 48 / k) / tokens)
        + B * math.sqrt(math.log(math.pi**2 * k**2 / (6 * 0.05)) / (2 * tokens))
        + B * math.sqrt(math.log(1 / 0.05) / (2 * tokens))
    )
    assert m[f"{SITE}.bound.released"] == pytest.approx(released, abs=1e-6)
    assert m[f"{SITE}.heldout_predicted_tokens"] == tokens
    # The shuffle ablation ran and is reported beside the faithful splice.
    assert f"{SITE}.epsilon_loss_shuffled" in m


def exact_sae() -> StandardSAE:
    """relu(x) - relu(-x) = x: the reconstruction is exact, so splicing changes nothing."""
    sae = planted_sae()
    with torch.no_grad():
        sae.b_enc.zero_()
    return sae


def test_shuffle_ablation_raises_the_loss_of_an_exact_sae(adapters):
    adapter = adapters["nnsight"]
    data = {"token_ids": ROWS, "condition": CONDITIONS}
    fixed = gl.run("sae-features", adapter, data, sae=exact_sae(), batch_size=3).metrics
    assert fixed[f"{SITE}.epsilon_loss"] < 1e-5
    assert fixed[f"{SITE}.epsilon_loss_shuffled"] > 100 * max(fixed[f"{SITE}.epsilon_loss"], 1e-5)
    fresh = gl.run(
        "sae-features", adapter, data, sae=exact_sae(), shuffle="per-batch", batch_size=3
    ).metrics
    again = gl.run(
        "sae-features", adapter, data, sae=exact_sae(), shuffle="per-batch", batch_size=3
    ).metrics
    assert fresh == again  # seeded: the same rows get the same permutations
    assert fresh[f"{SITE}.epsilon_loss_shuffled"] != fixed[f"{SITE}.epsilon_loss_shuffled"]
    assert fresh[f"{SITE}.epsilon_loss"] == fixed[f"{SITE}.epsilon_loss"]


def test_merged_halves_with_losses_equal_one_pass(adapters):
    from geomlens.analyses.sae_features import SAEFeatures
    from geomlens.data.dataset import as_dataset
    from geomlens.engine import stream

    adapter = adapters["nnsight"]
    data = as_dataset({"token_ids": ROWS, "condition": CONDITIONS})
    sae = random_sae()
    first, second, whole = (SAEFeatures(sae=sae) for _ in range(3))
    stream([first], adapter, data, rows=np.arange(4), batch_size=2)
    stream([second], adapter, data, rows=np.arange(4, len(ROWS)), batch_size=2)
    first.merge(second)
    stream([whole], adapter, data, batch_size=2)
    merged, single = first.finalize().metrics, whole.finalize().metrics
    assert merged.keys() == single.keys()
    for name, value in single.items():
        assert merged[name] == pytest.approx(value, rel=1e-9, abs=1e-12), name


def test_splice_restrictions_change_the_reconstruction(adapters):
    adapter = adapters["nnsight"]
    data = {"token_ids": ROWS, "condition": CONDITIONS}

    def eps(**options):
        result = gl.run("sae-features", adapter, data, sae=exact_sae(), shuffle="none", **options)
        return result.metrics[f"{SITE}.epsilon_loss"]

    assert eps(splice_pool=list(range(64))) < 1e-5  # every latent kept: still exact
    assert eps(splice_top_k=64) < 1e-5
    assert eps(splice_pool=[]) > 1e-3  # nothing kept: the site is zeroed
    assert eps(splice_top_k=1) > 1e-3


@pytest.mark.parametrize("backend", ["nnsight", "transformer-lens"])
def test_width_mismatch_fails_before_any_forward_pass(adapters, backend):
    adapter = adapters[backend]
    narrow = StandardSAE(StandardSAEConfig(d_in=16, d_sae=8, metadata=SAEMetadata(hook_name=SITE)))
    mlp = StandardSAE(
        StandardSAEConfig(
            d_in=WIDTH, d_sae=8, metadata=SAEMetadata(hook_name="blocks.0.mlp.hook_post")
        )
    )
    data = {"token_ids": ROWS, "condition": CONDITIONS}
    with pytest.raises(ValueError, match=rf"d_in=16 but '{SITE}' of model .* has width 32"):
        gl.run("sae-features", adapter, data, sae=narrow)
    with pytest.raises(ValueError, match=r"'blocks.0.mlp.hook_post' of model .* has width 128"):
        gl.run("sae-features", adapter, data, sae=mlp)
