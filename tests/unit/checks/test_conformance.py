"""`geomlens check` / check_adapter: passes on right adapters, and fails naming the site on each
planted fault (swapped sites, positions off by two, a wrong width, a silently missing site)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from helpers.tiny_models import tiny_decoder, tiny_encoder, tiny_gpt2
from typer.testing import CliRunner

import geomlens as gl
from geomlens.checks.conformance import all_passed, check_adapter
from geomlens.cli import app
from geomlens.models.architectures import GPT2, SiteRead
from geomlens.models.nnsight import NNsightAdapter
from geomlens.models.transformer_lens import TL_MAJOR, TransformerLensAdapter


def failing(checks) -> dict[str, str]:
    return {c.name: c.detail for c in checks if not c.passed}


def gpt2_with(**changes) -> NNsightAdapter:
    hf_model, tokenizer = tiny_gpt2()
    table = dataclasses.replace(GPT2, **changes)
    return NNsightAdapter(hf_model, tokenizer=tokenizer, architecture=table)


@pytest.mark.parametrize("backend", ["nnsight", "transformer-lens"])
def test_right_adapters_pass_every_check(backend):
    hf_model, tokenizer = tiny_gpt2()
    adapter = gl.attach(hf_model, tokenizer=tokenizer, backend=backend)
    checks = check_adapter(adapter)
    assert all_passed(checks), failing(checks)
    per_site = {c.site for c in checks if c.site}
    assert per_site == set(adapter.sites())  # one report per site
    by_name = {c.name: c for c in checks}
    assert "own hidden states" in by_name
    assert "not compared" not in by_name["own hidden states"].detail


def test_roberta_positions_pass_and_the_parallel_block_adds_up():
    for hf_model, tokenizer in (tiny_encoder("roberta"), tiny_decoder("gpt_neox")):
        checks = check_adapter(NNsightAdapter(hf_model, tokenizer=tokenizer))
        assert all_passed(checks), failing(checks)
    neox = check_adapter(NNsightAdapter(tiny_decoder("gpt_neox")[0]))
    assert "sum of parts" in {c.name: c for c in neox}["blocks.0.hook_resid_post"].detail


@pytest.mark.parametrize("model_type", ["roberta", "xlm-roberta"])
def test_roberta_positions_pass_when_a_real_token_equals_the_pad_id(model_type):
    # No tokenizer: the check's own token ids include 1, RoBERTa's pad id. The adapter numbers
    # real tokens by the attention mask from padding_idx + 1; the reference run numbered them
    # from the token ids, gave token 1 the padding position and reported a false 2.2.
    hf_model, _ = tiny_encoder(model_type, pad_token_id=1, max_position_embeddings=64)
    checks = check_adapter(NNsightAdapter(hf_model))
    assert all_passed(checks), failing(checks)
    own = {c.name: c for c in checks}["own hidden states"].detail
    assert "not compared" not in own


def test_mamba_hidden_states_are_read_from_the_first_blocks_output():
    # transformers' Mamba leaves the embeddings out of hidden_states (entry L is block L's
    # output): block L's input is entry L - 1, not L.
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(
        "mamba",
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        state_size=4,
    )
    hf_model = AutoModelForCausalLM.from_config(config).eval()
    checks = check_adapter(NNsightAdapter(hf_model))
    assert all_passed(checks), failing(checks)
    own = {c.name: c for c in checks}["own hidden states"].detail
    assert own.startswith("2 residual sites equal output_hidden_states"), own


class Swapped(NNsightAdapter):
    """Reads two sites into each other's place (a table entry pointing at the wrong module)."""

    def __init__(self, *args, pair: tuple[str, str], **kwargs):
        super().__init__(*args, **kwargs)
        self.pair = pair

    def capture(self, inputs, sites):
        first, second = self.pair
        wanted = list(dict.fromkeys([*sites, first, second]))
        acts = super().capture(inputs, wanted)
        acts[first], acts[second] = acts[second], acts[first]
        return {site: acts[site] for site in sites}


def swapped(*pair: str) -> Swapped:
    hf_model, tokenizer = tiny_gpt2()
    return Swapped(hf_model, tokenizer=tokenizer, pair=pair)


def test_swapped_residual_sites_fail_naming_them():
    adapter = swapped("blocks.0.hook_resid_pre", "blocks.0.hook_resid_post")
    bad = failing(check_adapter(adapter))
    assert "hidden_states[0]" in bad["blocks.0.hook_resid_pre"]
    assert "blocks.0.hook_resid_pre" in bad["own hidden states"]


def test_swapped_sublayer_sites_fail_the_sums():
    bad = failing(check_adapter(swapped("blocks.0.hook_attn_out", "blocks.0.hook_mlp_out")))
    assert "not the sum of its parts" in bad["blocks.0.hook_resid_mid"]
    assert "blocks.0.hook_resid_mid" in bad["sites"]


def test_positions_off_by_two_fail_against_the_models_own_hidden_states():
    # Numbered from padding_idx + 1 with padding_idx 1: every position shifted by two, the
    # RoBERTa bug the other way round. Batched and one-by-one still agree with each other.
    bad = failing(check_adapter(gpt2_with(positions="after_padding_idx", padding_idx=1)))
    assert "hidden_states[1]" in bad["blocks.0.hook_resid_post"]
    assert "left-padding" not in bad and "right-padding" not in bad


def test_a_wrong_width_fails_naming_the_site():
    # The MLP's input norm instead of its hidden layer: d_model wide, not d_mlp.
    wrong = {**GPT2.block, "mlp.hook_pre": SiteRead("ln_2")}
    bad = failing(check_adapter(gpt2_with(block=wrong)))
    assert "width 32, config says d_mlp = 128" in bad["blocks.0.mlp.hook_pre"]
    assert "blocks.1.mlp.hook_pre" in bad


def test_a_site_missing_without_a_reason_fails_coverage():
    class Silent(NNsightAdapter):
        def refused_sites(self):
            return {}

    hf_model, tokenizer = tiny_decoder("gpt_neox")
    bad = failing(check_adapter(Silent(hf_model, tokenizer=tokenizer)))
    assert "blocks.0.hook_resid_mid" in bad["coverage"]


def test_check_command_fails_naming_the_site(monkeypatch):
    broken = gpt2_with(positions="after_padding_idx", padding_idx=1)
    monkeypatch.setattr(gl, "load", lambda *args, **kwargs: broken)
    done = CliRunner().invoke(app, ["check", "tiny-gpt2"])
    assert done.exit_code == 1, done.output
    assert "FAIL" in done.output and "blocks.0.hook_resid_post" in done.output
    assert "hidden_states[1]" in done.output


def test_check_command_passes_on_a_right_model(monkeypatch):
    hf_model, tokenizer = tiny_gpt2()
    monkeypatch.setattr(gl, "load", lambda *a, **k: NNsightAdapter(hf_model, tokenizer=tokenizer))
    done = CliRunner().invoke(app, ["check", "tiny-gpt2"])
    assert done.exit_code == 0, done.output
    assert "FAIL" not in done.output


def test_check_on_recorded_activations_says_so_without_mentioning_labels():
    recorded = gl.attach({"blocks.0.hook_resid_post": np.zeros((4, 3))})
    with pytest.raises(ValueError, match="recorded activations have none") as info:
        check_adapter(recorded)
    assert "label" not in str(info.value)


def test_a_bridge_refuses_what_it_cannot_read():
    # A post-LayerNorm OPT's bridge fails in its forward pass on either TransformerLens line.
    with pytest.raises(ValueError, match="backend='nnsight'"):
        TransformerLensAdapter.from_hf(tiny_decoder("opt", do_layer_norm_before=False)[0])
    # A T5 encoder has no canonical site: TransformerLens 3 bridges it with none, 4 refuses to.
    why = "no canonical site" if TL_MAJOR < 4 else "could not bridge"
    with pytest.raises(ValueError, match=f"{why}.*backend='nnsight'"):
        TransformerLensAdapter.from_hf(tiny_encoder("t5")[0])


def test_a_bridged_copy_is_refereed_by_the_users_own_module():
    hf_model, tokenizer = tiny_encoder("bert")
    adapter = TransformerLensAdapter.from_hf(hf_model, tokenizer)
    assert adapter.reference_module is hf_model
    checks = {c.name: c for c in check_adapter(adapter)}
    assert checks["own hidden states"].passed
    assert "not compared" not in checks["own hidden states"].detail


def _survey_model(label: str, **config):
    from geomlens.checks.survey import SURVEY_MODELS, build

    entry = next(m for m in SURVEY_MODELS if m.label == label)
    return build(dataclasses.replace(entry, config=(*entry.config, *config.items())))


def test_opt_mlp_sites_on_transformer_lens_are_the_hidden_layer_and_pass_the_width_check():
    # The bridge's cfg says d_mlp = 4 * d_model = 128; OPT's MLP is ffn_dim = 64 wide. The sites
    # hold fc1's output and its ReLU (computed here from the model's own modules); the check
    # read the width from the bridge's cfg and failed them.
    import torch

    hf_model = _survey_model("opt")
    adapter = TransformerLensAdapter.from_hf(hf_model)
    checks = check_adapter(adapter)
    assert all_passed(checks), failing(checks)
    inputs = adapter.encode(gl.Dataset(token_ids=[[5, 6, 7, 8]]), np.arange(1))
    sites = ["blocks.0.hook_resid_mid", "blocks.0.mlp.hook_pre", "blocks.0.mlp.hook_post"]
    acts = adapter.capture(inputs, sites)
    layer = hf_model.model.decoder.layers[0]
    with torch.no_grad():
        hidden = layer.fc1(layer.final_layer_norm(acts["blocks.0.hook_resid_mid"]))
    assert hidden.shape[-1] == hf_model.config.ffn_dim == 64
    scale = hidden.abs().max().item()
    assert (acts["blocks.0.mlp.hook_pre"] - hidden).abs().max().item() <= 1e-6 * scale
    assert (acts["blocks.0.mlp.hook_post"] - hidden.relu()).abs().max().item() <= 1e-6 * scale


@pytest.mark.parametrize("config", [{"expansion_ratio": 2}, {"intermediate_size": 64}])
def test_mpt_mlp_width_is_read_as_transformers_builds_it(config):
    # transformers' MptMLP is 4 * d_model wide whatever expansion_ratio (or a stray
    # intermediate_size) says; the check read 64 from the config and failed the right sites.
    hf_model = _survey_model("mpt", **config)
    assert hf_model.transformer.blocks[0].ffn.up_proj.out_features == 128
    checks = check_adapter(NNsightAdapter(hf_model))
    assert all_passed(checks), failing(checks)
