"""Family-specific behaviour the survey summarises, each tested directly: positions from
padding_idx + 1, mixture-of-experts refusals on both backends, ALBERT per application, BLOOM's
embedding before its LayerNorm, T5 loaded as its encoder."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from helpers.tiny_models import tiny_decoder, tiny_encoder

from geomlens.inputs.encoding import encode_token_ids
from geomlens.models.adapter import UnknownSiteError
from geomlens.models.nnsight import NNsightAdapter
from geomlens.models.nnsight_loading import load_nnsight
from geomlens.models.transformer_lens import TL_MAJOR, TransformerLensAdapter

ROWS = [[5, 6, 7, 8, 9, 10], [11, 12, 13], [14, 15, 16, 17]]


def own_hidden(model, row):
    with torch.no_grad():
        return model(input_ids=torch.tensor([row]), output_hidden_states=True).hidden_states


@pytest.mark.parametrize("model_type", ["roberta", "mpnet"])
@pytest.mark.parametrize("side", ["left", "right"])
def test_positions_from_padding_idx_match_the_models_own_forward(model_type, side):
    hf_model, tokenizer = tiny_encoder(model_type)
    adapter = NNsightAdapter(hf_model, tokenizer=tokenizer)
    inputs = encode_token_ids(ROWS, np.arange(3), padding_side=side)
    acts = adapter.capture(inputs, ["blocks.0.hook_resid_post"])["blocks.0.hook_resid_post"]
    for row, tokens in enumerate(ROWS):
        expected = own_hidden(hf_model, tokens)[1][0]
        torch.testing.assert_close(
            acts[row][inputs.attention_mask[row]], expected, atol=1e-5, rtol=0
        )


@pytest.mark.parametrize("model_type", ["mixtral", "qwen2_moe"])
def test_moe_mlp_hidden_sites_are_refused_with_the_reason_on_both_backends(model_type):
    hf_model, tokenizer = tiny_decoder(model_type)
    for adapter in (
        NNsightAdapter(hf_model, tokenizer=tokenizer),
        TransformerLensAdapter.from_hf(hf_model, tokenizer),
    ):
        assert "blocks.0.hook_mlp_out" in adapter.sites()
        with pytest.raises(UnknownSiteError, match="mixture-of-experts"):
            adapter.resolve_site("blocks.1.mlp.hook_pre")
        assert "mixture-of-experts" in adapter.refused_sites()["blocks.0.mlp.hook_post"]


def test_albert_sites_are_per_application_of_its_shared_layer():
    hf_model, tokenizer = tiny_encoder("albert", num_hidden_layers=3, embedding_size=16)
    adapter = NNsightAdapter(hf_model, tokenizer=tokenizer)
    assert adapter.n_layers == 3
    posts = [f"blocks.{layer}.hook_resid_post" for layer in range(3)]
    acts = adapter.capture(encode_token_ids(ROWS[:1], np.arange(1)), posts)
    hidden = own_hidden(hf_model, ROWS[0])
    for layer, site in enumerate(posts):
        torch.testing.assert_close(acts[site][0], hidden[layer + 1][0], atol=1e-5, rtol=0)
    # An edit at the first application reaches the later ones, and applies to that one only:
    # the reference doubles the shared layer's output on its first call alone.
    with adapter.intervene("blocks.0.hook_resid_post", lambda act: act * 2.0):
        edited = adapter.capture(encode_token_ids(ROWS[:1], np.arange(1)), posts)
    outputs = []  # what each application hands on (transformers records hidden states earlier)

    def double_first_call(module, args, output):
        tensor = output[0] if isinstance(output, tuple) else output
        if not outputs:
            tensor = tensor * 2.0
        outputs.append(tensor.detach().clone())
        return (tensor, *output[1:]) if isinstance(output, tuple) else tensor

    layer = hf_model.encoder.albert_layer_groups[0].albert_layers[0]
    handle = layer.register_forward_hook(double_first_call)
    try:
        own_hidden(hf_model, ROWS[0])
    finally:
        handle.remove()
    for index, site in enumerate(posts):
        torch.testing.assert_close(edited[site][0], outputs[index][0], atol=1e-5, rtol=0)
    # LayerNorm undoes most of a doubling; what is left is still far above round-off.
    assert (edited[posts[2]] - acts[posts[2]]).abs().max() > 1e-5


def test_bloom_embedding_is_read_before_its_layernorm_on_both_backends():
    hf_model, tokenizer = tiny_decoder("bloom")
    lookup = hf_model.transformer.word_embeddings(torch.tensor([ROWS[0]]))
    inputs = encode_token_ids(ROWS[:1], np.arange(1))
    for adapter in (
        NNsightAdapter(hf_model, tokenizer=tokenizer),
        TransformerLensAdapter.from_hf(hf_model, tokenizer),
    ):
        embed = adapter.capture(inputs, ["hook_embed"])["hook_embed"]
        torch.testing.assert_close(embed, lookup, atol=1e-6, rtol=0)


def test_an_encoder_decoder_checkpoint_loads_as_its_encoder(tmp_path):
    from transformers import T5ForConditionalGeneration

    encoder, tokenizer = tiny_encoder("t5")
    config = encoder.config.to_dict() | {"is_encoder_decoder": True}  # as the hub ships T5
    T5ForConditionalGeneration(type(encoder.config)(**config)).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    adapter = load_nnsight(tmp_path)
    assert type(adapter.model).__name__ == "T5EncoderModel"
    assert adapter.table.family == "t5_encoder"
    acts = adapter.capture(
        encode_token_ids(ROWS, np.arange(3), padding_side="left"), adapter.sites()
    )
    assert acts["blocks.1.mlp.hook_post"].shape[-1] == encoder.config.d_ff


def test_the_cohere_bridge_is_refused_exactly_where_it_differs_from_the_model():
    """Evidence for the refusal: TransformerLens 3's own Cohere bridge (built directly) gives
    block inputs that differ from the model's hidden states far beyond round-off, and is
    refused; TransformerLens 4.3's equals the model, and attaches. If a release changes either,
    this test fails: move the refusal then."""
    from transformer_lens.model_bridge.sources._bridge_builder import build_bridge_from_module

    hf_model, _ = tiny_decoder("cohere")
    bridge = build_bridge_from_module(
        copy.deepcopy(hf_model), "CohereForCausalLM", hf_config=hf_model.config
    )
    _, cache = bridge.run_with_cache(torch.tensor([ROWS[0]]))
    hidden = own_hidden(hf_model, ROWS[0])
    error = float((cache["blocks.1.hook_resid_pre"][0] - hidden[1][0]).abs().max())
    if TL_MAJOR < 4:
        assert error > 1e-5
        with pytest.raises(ValueError, match="Cohere bridge differs"):
            TransformerLensAdapter.from_hf(hf_model)
    else:
        assert error < 1e-6
        assert "blocks.1.hook_resid_pre" in TransformerLensAdapter.from_hf(hf_model).sites()


def test_an_edit_inside_opts_flattened_mlp_matches_the_bridge():
    hf_model, tokenizer = tiny_decoder("opt", ffn_dim=64, word_embed_proj_dim=32)
    inputs = encode_token_ids(ROWS, np.arange(3), padding_side="left")
    results = []
    for adapter in (
        NNsightAdapter(hf_model, tokenizer=tokenizer),
        TransformerLensAdapter.from_hf(hf_model, tokenizer),
    ):
        with adapter.intervene("blocks.0.mlp.hook_post", lambda act: act * 0.5):
            results.append(adapter.capture(inputs, ["blocks.1.hook_resid_post"]))
    real = inputs.attention_mask
    site = "blocks.1.hook_resid_post"
    torch.testing.assert_close(results[0][site][real], results[1][site][real], atol=1e-5, rtol=0)
