"""The SAE splice in sae-features starts its passes at the SAE's block: ε̂_loss (faithful and
shuffled) for an SAE at block 1 equals the splice computed on the whole Hugging Face model by a
plain torch pre-hook, on nnsight and TransformerLens, and block 0 runs only in the base pass."""

import numpy as np
import pytest
import torch
from helpers import tiny_saes
from helpers.tiny_models import tiny_gpt2
from sae_lens.saes.standard_sae import StandardSAE

import geomlens as gl

SITE = "blocks.1.hook_resid_pre"
ROWS = [[5, 6, 7, 8, 9, 10], [12, 13, 14], [16, 17, 18, 19, 20], [22, 23, 24, 25]]
CONDITIONS = ["calibration", "heldout", "heldout", "shuffled_words"]


def random_sae() -> StandardSAE:
    return tiny_saes.random_sae(32, SITE)


def smoothed_bits(logits: np.ndarray, row: list[int], a: float = 0.5) -> float:
    logits = logits - logits.max(-1, keepdims=True)
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    p = probs[np.arange(len(row) - 1), row[1:]]
    return float(np.mean(-np.log2((1 - a) * p + a / logits.shape[-1])))


def logits_with_block1_input_spliced(model, row, sae) -> np.ndarray:
    def splice(module, args, kwargs):
        hidden = args[0] if args else kwargs["hidden_states"]
        recon = sae.decode(sae.encode(hidden))
        return ((recon, *args[1:]), kwargs) if args else (args, {**kwargs, "hidden_states": recon})

    handle = model.transformer.h[1].register_forward_pre_hook(splice, with_kwargs=True)
    try:
        with torch.no_grad():
            return model(torch.tensor([row])).logits[0].double().numpy()
    finally:
        handle.remove()


@pytest.mark.parametrize("backend", ["nnsight", "transformer-lens"])
def test_splice_from_the_sae_block_equals_the_whole_model_splice(backend):
    model, tokenizer = tiny_gpt2()
    sae = random_sae()
    adapter = gl.attach(model, tokenizer=tokenizer, backend=backend)
    blocks = adapter.model.transformer.h if backend == "nnsight" else adapter.model.blocks
    calls = []
    handle = blocks[0].attn.register_forward_hook(lambda *a: calls.append(1))
    try:
        data = {"token_ids": ROWS, "condition": CONDITIONS}
        result = gl.run("sae-features", adapter, data, sae=sae, batch_size=2, shuffle="none")
    finally:
        handle.remove()
    # Two batches: two base passes and one look at block 0's output form; the two spliced
    # passes (one per batch with held-out rows) do not run block 0.
    assert len(calls) == 3
    heldout = [row for row, c in zip(ROWS, CONDITIONS) if c == "heldout"]
    with torch.no_grad():
        clean = [
            smoothed_bits(model(torch.tensor([r])).logits[0].double().numpy(), r) for r in heldout
        ]
    proxy = [smoothed_bits(logits_with_block1_input_spliced(model, r, sae), r) for r in heldout]
    eps = float(np.mean(np.abs(np.subtract(proxy, clean))))
    assert eps > 1e-3  # the splice changes the predictions
    m = result.metrics
    assert m[f"{SITE}.proxy_loss"] == pytest.approx(np.mean(proxy), rel=1e-6)
    assert m[f"{SITE}.epsilon_loss"] == pytest.approx(eps, rel=1e-6)
