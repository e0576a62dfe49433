"""The logits reduced inside the pass (``logits.next_token_logprob``, ``logits.last``) equal the
formula evaluated on the full logits of the same pass, on both backends, with the head applied
in chunks of a few tokens; and the head never sees more than a chunk."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers.tiny_models import tiny_decoder, tiny_gpt2, tiny_hooked_transformer, tiny_llama

import geomlens.models.next_token as next_token
from geomlens.hooks.sites import LAST_LOGITS_SITE, LOGITS_SITE, NEXT_TOKEN_SITE
from geomlens.inputs.encoding import encode_token_ids
from geomlens.models.nnsight import NNsightAdapter
from geomlens.models.transformer_lens import TransformerLensAdapter

RTOL = 1e-6
ROWS = [[5, 6, 7, 8, 9, 10], [11, 12, 13], [14, 15, 16, 17]]
DECODERS = {
    "gpt2": tiny_gpt2,
    "llama": tiny_llama,
    # Soft-capped logits: the head's output projection alone is not the model's logits.
    "gemma2-softcap": lambda: tiny_decoder("gemma2", final_logit_softcapping=0.5),
}


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    """Chunks of 3 tokens of the tiny vocabulary: every batch here is scored in several."""
    monkeypatch.setattr(next_token, "CHUNK_ELEMENTS", 3 * 64)


@pytest.fixture(scope="module", params=list(DECODERS))
def adapters(request):
    hf_model, tokenizer = DECODERS[request.param]()
    return [
        NNsightAdapter(hf_model, tokenizer=tokenizer),
        TransformerLensAdapter.from_hf(hf_model, tokenizer),
    ]


def formula(logits: np.ndarray, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """log softmax(logits[b, t])[ids[b, t + 1]] where tokens t, t + 1 are real, else 0; numpy."""
    x = logits - logits.max(-1, keepdims=True)
    log_probs = x - np.log(np.exp(x).sum(-1, keepdims=True))
    out = np.zeros(ids.shape)
    for b in range(ids.shape[0]):
        for t in range(ids.shape[1] - 1):
            if mask[b, t] and mask[b, t + 1]:
                out[b, t] = log_probs[b, t, ids[b, t + 1]]
    return out


def last_real(mask: np.ndarray) -> np.ndarray:
    return np.array([np.flatnonzero(row).max() for row in mask])


def check_against_full_logits(adapter, inputs) -> None:
    full = adapter.capture(inputs, [LOGITS_SITE])[LOGITS_SITE].double().cpu().numpy()
    reduced = adapter.capture(inputs, [NEXT_TOKEN_SITE, LAST_LOGITS_SITE])
    ids = inputs.input_ids.numpy()
    mask = inputs.attention_mask.bool().numpy()
    scores = reduced[NEXT_TOKEN_SITE]
    assert scores.dtype == torch.float64 and tuple(scores.shape) == ids.shape
    expected = formula(full, ids, mask)
    assert (expected != 0).sum() == sum(len(r) - 1 for r in ROWS)
    np.testing.assert_allclose(scores.cpu().numpy(), expected, rtol=RTOL, atol=0)
    last = reduced[LAST_LOGITS_SITE].double().cpu().numpy()
    np.testing.assert_allclose(
        last, full[np.arange(len(ids)), last_real(mask)], rtol=RTOL, atol=1e-6
    )


@pytest.mark.parametrize("side", ["left", "right"])
def test_reduced_logits_equal_the_formula_on_full_logits_on_both_backends(adapters, side):
    inputs = encode_token_ids(ROWS, np.arange(len(ROWS)), padding_side=side)
    for adapter in adapters:
        check_against_full_logits(adapter, inputs)


def test_reduced_logits_under_an_edit_equal_the_edited_full_logits(adapters):
    """A spliced pass: the edit upstream reaches the scores exactly as it reaches the logits."""
    inputs = encode_token_ids(ROWS, np.arange(len(ROWS)), padding_side="right")
    for adapter in adapters:
        with adapter.intervene("blocks.0.hook_resid_post", lambda act: act * 0.5 + 1.0):
            check_against_full_logits(adapter, inputs)


@pytest.mark.hooked_transformer
def test_hooked_transformer_reduced_logits_equal_the_formula():
    model = tiny_hooked_transformer()
    adapter = TransformerLensAdapter(model)
    inputs = encode_token_ids(ROWS, np.arange(len(ROWS)), padding_side="right")
    check_against_full_logits(adapter, inputs)


def test_the_head_sees_one_chunk_at_a_time():
    """Peak memory: the head is applied to at most CHUNK_ELEMENTS // V tokens per call."""
    rng = np.random.default_rng(0)
    batch, length, width, vocab = 4, 9, 8, 50
    weight = torch.as_tensor(rng.normal(size=(vocab, width)))
    hidden = torch.as_tensor(rng.normal(size=(batch, length, width)))
    ids = torch.as_tensor(rng.integers(0, vocab, size=(batch, length)))
    mask = torch.ones(batch, length, dtype=torch.bool)
    mask[2, 5:] = False
    seen: list[int] = []

    def head(x: torch.Tensor) -> torch.Tensor:
        seen.append(len(x))
        return x @ weight.T

    scores = next_token.target_log_probs(head, hidden, ids, mask, chunk_elements=4 * vocab)
    assert max(seen) == 4 and sum(seen) == batch * length
    full = (hidden @ weight.T).numpy()
    expected = formula(full, ids.numpy(), mask.numpy())
    np.testing.assert_allclose(scores.numpy(), expected, rtol=1e-12, atol=0)


def test_head_sites_are_refused_where_no_logits_are_offered():
    from helpers.tiny_models import tiny_bert

    from geomlens.models.adapter import UnknownSiteError

    model, tokenizer = tiny_bert()
    adapter = NNsightAdapter(model, tokenizer=tokenizer)
    with pytest.raises(UnknownSiteError):
        adapter.resolve_site(NEXT_TOKEN_SITE)


# -- the analyses that keep a language-model loss, end to end, in chunks of 3 tokens -----------


def numpy_log_softmax(logits: np.ndarray) -> np.ndarray:
    x = logits - logits.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def own_logits(model, row: list[int]) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor([row])).logits[0].double().numpy()


SAE_SITE = "blocks.1.hook_resid_pre"
SAE_ROWS = [[5, 6, 7, 8, 9, 10], [12, 13, 14], [16, 17, 18, 19, 20], [22, 23, 24, 25]]
SAE_CONDITIONS = ["calibration", "heldout", "heldout", "shuffled_words"]


@pytest.mark.sae
@pytest.mark.parametrize("backend", ["nnsight", "transformer-lens"])
def test_sae_features_losses_equal_the_full_logit_formula(backend):
    """ε̂_loss's clean and spliced smoothed bits, scored in chunks inside the passes, equal
    SPEC §3's formula on the whole model's own logits (numpy), with and without the splice."""
    from helpers import tiny_saes

    import geomlens as gl

    model, tokenizer = tiny_gpt2()
    sae = tiny_saes.random_sae(32, SAE_SITE)
    adapter = gl.attach(model, tokenizer=tokenizer, backend=backend)
    data = {"token_ids": SAE_ROWS, "condition": SAE_CONDITIONS}
    result = gl.run("sae-features", adapter, data, sae=sae, batch_size=4, shuffle="none")

    def bits(logits: np.ndarray, row: list[int], a: float = 0.5) -> float:
        p = np.exp(numpy_log_softmax(logits)[np.arange(len(row) - 1), row[1:]])
        return float(np.mean(-np.log2((1 - a) * p + a / logits.shape[-1])))

    def splice(module, args, kwargs):
        return (sae.decode(sae.encode(args[0])), *args[1:]), kwargs

    heldout = [r for r, c in zip(SAE_ROWS, SAE_CONDITIONS) if c == "heldout"]
    clean = [bits(own_logits(model, r), r) for r in heldout]
    handle = model.transformer.h[1].register_forward_pre_hook(splice, with_kwargs=True)
    try:
        spliced = [bits(own_logits(model, r), r) for r in heldout]
    finally:
        handle.remove()
    m = result.metrics
    assert abs(np.mean(spliced) - np.mean(clean)) > 1e-3  # the splice changes the predictions
    assert m[f"{SAE_SITE}.proxy_loss"] == pytest.approx(np.mean(spliced), rel=RTOL)
    assert m[f"{SAE_SITE}.model_loss"] == pytest.approx(np.mean(clean), rel=RTOL)


@pytest.mark.parametrize("backend", ["nnsight", "transformer-lens"])
def test_linearization_effect_loss_equals_the_full_logit_formula(backend):
    """The held-out next-token loss with and without the linearised MLP, scored in chunks,
    equals the cross-entropy of the model's own logits (numpy) over every (token, next) pair."""
    import copy

    import geomlens as gl

    model, tokenizer = tiny_gpt2()
    pairs = {
        "gender": ("the [[{}]] sat", [("king", "queen"), ("man", "woman"), ("boy", "girl")]),
        "size": ("the [[{}]] house", [("big", "small"), ("old", "new"), ("first", "last")]),
    }
    data: dict[str, list[str]] = {"text": [], "concept": [], "context": [], "task": []}
    for task, (frame, words) in pairs.items():
        for pair in words:
            for concept, word in zip(("first", "second"), pair):
                data["text"].append(frame.format(word))
                data["concept"].append(concept)
                data["context"].append("/".join(pair))
                data["task"].append(task)
    texts = [t.replace("[[", "").replace("]]", "") for t in data["text"]]
    adapter = gl.attach(model, tokenizer=tokenizer, backend=backend)
    result = gl.run("linearization-effect", adapter, data, n_bootstrap=20, n_shuffles=5)
    linearized = copy.deepcopy(model)
    linearized.transformer.h[0].mlp.act = torch.nn.Identity()

    def loss(net) -> float:
        total, count = 0.0, 0
        for text in texts:
            ids = tokenizer(text)["input_ids"]
            log_probs = numpy_log_softmax(own_logits(net, ids))
            total -= log_probs[np.arange(len(ids) - 1), ids[1:]].sum()
            count += len(ids) - 1
        return total / count

    m = result.metrics
    assert m["fidelity.lm_loss_base"] == pytest.approx(loss(model), rel=RTOL)
    assert m["fidelity.lm_loss_linearized"] == pytest.approx(loss(linearized), rel=RTOL)


@pytest.mark.parametrize("backend", ["nnsight", "transformer-lens"])
def test_behavioural_choices_equal_those_from_the_full_logits(backend):
    """Behavioural similarity's option logits, made at the last token inside the pass, give the
    metrics the whole [B, T, V] logits give (read at the last real token after the pass)."""
    import geomlens as gl
    from geomlens.data.prompts import choice_prompts

    model, tokenizer = tiny_gpt2()
    adapter = gl.attach(model, tokenizer=tokenizer, backend=backend)
    prompts = choice_prompts(
        ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"],
        coordinates=range(1, 11),
        candidates=(2, 3),
        trials=6,
        similarity_template="the year closest to {probe} : {options} ?",
        identification_template="the year {probe} : {options} ?",
    )
    reduced = gl.run("similarity", adapter, prompts, mode="behavioural", progress=False)
    full = gl.run(
        "similarity", adapter, prompts, mode="behavioural", site=LOGITS_SITE, progress=False
    )
    assert set(reduced.metrics) == set(full.metrics)
    assert 0 < reduced["logits.p_identification_n3"] < 1
    for key, value in full.metrics.items():
        assert reduced[key] == pytest.approx(value, rel=RTOL, abs=1e-12), key
