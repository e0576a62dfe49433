"""The ``logits`` site: the model's own output logits [B, T, V], offered last and only by models
with an LM head, equal on both backends to what the model's forward returns for each example."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers.tiny_models import (
    tiny_bert,
    tiny_decoder,
    tiny_gpt2,
    tiny_hooked_transformer,
    tiny_llama,
    tiny_tokenizer,
)
from transformers import BertForMaskedLM

from geomlens.inputs.encoding import encode_token_ids
from geomlens.models.adapter import LOGITS_SITE
from geomlens.models.nnsight import NNsightAdapter
from geomlens.models.transformer_lens import TransformerLensAdapter

ATOL = 1e-5
ROWS = [[5, 6, 7, 8, 9, 10], [11, 12, 13], [14, 15, 16, 17]]
DECODERS = {
    "gpt2": tiny_gpt2,
    "llama": tiny_llama,
    # Soft-capped logits: the head's output projection alone is not the model's logits.
    "gemma2-softcap": lambda: tiny_decoder("gemma2", final_logit_softcapping=0.5),
}


@pytest.fixture(scope="module", params=list(DECODERS))
def decoder(request):
    hf_model, tokenizer = DECODERS[request.param]()
    return (
        hf_model,
        NNsightAdapter(hf_model, tokenizer=tokenizer),
        TransformerLensAdapter.from_hf(hf_model, tokenizer),
    )


def own_logits(model, row: list[int]) -> torch.Tensor:
    """What the model's own forward returns for one unpadded example."""
    with torch.no_grad():
        out = model(torch.tensor([row]))
    return (out.logits if hasattr(out, "logits") else out)[0]


@pytest.mark.parametrize("side", ["left", "right"])
def test_logits_equal_the_models_own_forward_on_both_backends(decoder, side):
    hf_model, nnsight, bridge = decoder
    inputs = encode_token_ids(ROWS, np.arange(len(ROWS)), padding_side=side)
    per_backend = []
    for adapter in (nnsight, bridge):
        assert adapter.sites()[-1] == LOGITS_SITE
        logits = adapter.capture(inputs, [LOGITS_SITE, "blocks.0.hook_resid_post"])[LOGITS_SITE]
        assert logits.shape == (*inputs.attention_mask.shape, hf_model.config.vocab_size)
        for row, tokens in enumerate(ROWS):
            real = inputs.attention_mask[row]
            torch.testing.assert_close(
                logits[row][real], own_logits(hf_model, tokens), atol=ATOL, rtol=0
            )
        per_backend.append(logits[inputs.attention_mask])
        assert adapter.hook_count() == 0
    torch.testing.assert_close(per_backend[0], per_backend[1], atol=ATOL, rtol=0)


def test_an_edit_upstream_changes_the_logits_on_both_backends(decoder):
    _, nnsight, bridge = decoder
    inputs = encode_token_ids(ROWS, np.arange(len(ROWS)), padding_side="left")
    edited = []
    for adapter in (nnsight, bridge):
        clean = adapter.capture(inputs, [LOGITS_SITE])[LOGITS_SITE]
        with adapter.intervene("blocks.0.hook_resid_post", lambda act: act * 0.0):
            changed = adapter.capture(inputs, [LOGITS_SITE])[LOGITS_SITE]
        assert (changed - clean)[inputs.attention_mask].abs().max() > 1e-2
        edited.append(changed[inputs.attention_mask])
    torch.testing.assert_close(edited[0], edited[1], atol=ATOL, rtol=0)


def test_an_edit_at_the_logits_is_what_is_captured(decoder):
    _, nnsight, bridge = decoder
    inputs = encode_token_ids(ROWS[:1], np.arange(1))
    for adapter in (nnsight, bridge):
        clean = adapter.capture(inputs, [LOGITS_SITE])[LOGITS_SITE]
        with adapter.intervene(LOGITS_SITE, lambda act: act + 1.0):
            shifted = adapter.capture(inputs, [LOGITS_SITE])[LOGITS_SITE]
        torch.testing.assert_close(shifted, clean + 1.0)


@pytest.mark.hooked_transformer
def test_hooked_transformer_logits_equal_its_own_forward():
    model = tiny_hooked_transformer()
    adapter = TransformerLensAdapter(model, tokenizer=tiny_tokenizer())
    assert adapter.sites()[-1] == LOGITS_SITE
    for side in ("left", "right"):
        inputs = encode_token_ids(ROWS, np.arange(len(ROWS)), padding_side=side)
        logits = adapter.capture(inputs, [LOGITS_SITE])[LOGITS_SITE]
        for row, tokens in enumerate(ROWS):
            real = inputs.attention_mask[row]
            torch.testing.assert_close(
                logits[row][real], own_logits(model, tokens), atol=ATOL, rtol=0
            )
    assert adapter.hook_count() == 0


def test_an_encoder_without_a_head_offers_no_logits():
    bert, tokenizer = tiny_bert()
    assert LOGITS_SITE not in NNsightAdapter(bert, tokenizer=tokenizer).sites()
    assert LOGITS_SITE not in TransformerLensAdapter.from_hf(bert, tokenizer).sites()


def test_a_masked_lm_head_offers_its_logits_on_nnsight():
    bert, tokenizer = tiny_bert()
    torch.manual_seed(1)
    masked_lm = BertForMaskedLM(bert.config).eval()
    adapter = NNsightAdapter(masked_lm, tokenizer=tokenizer)
    assert adapter.sites()[-1] == LOGITS_SITE
    inputs = encode_token_ids(ROWS, np.arange(len(ROWS)), padding_side="left")
    logits = adapter.capture(inputs, [LOGITS_SITE])[LOGITS_SITE]
    for row, tokens in enumerate(ROWS):
        real = inputs.attention_mask[row]
        torch.testing.assert_close(
            logits[row][real], own_logits(masked_lm, tokens), atol=ATOL, rtol=0
        )
