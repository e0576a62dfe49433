"""The SAE training recipe per kind of model: causal LMs get their own default
(more passes over one buffer of every captured token, warm-ups, the decoder bias started at the
mean), encoders keep theirs (MiniLM's numbers come from it); the choice enters the cache key and
the result's notes. Tiny models: what is checked is the choice and its mechanics, not quality."""

import dataclasses
import time

import pytest
import torch
from helpers.tiny_models import tiny_bert, tiny_gpt2

import geomlens as gl
from geomlens.analyses.sae_features.provisioning import default_sae
from geomlens.models.nnsight import NNsightAdapter
from geomlens.sae.cache import cache_entry
from geomlens.sae.config import (
    CAUSAL_LM_TRAINING,
    ENCODER_TRAINING,
    TrainingConfig,
    default_training,
)
from geomlens.sae.training import cache_key, is_cached, train_sae, training_batches

SITE = "blocks.1.hook_resid_post"
TEXTS = gl.data.as_dataset(
    [f"the cat sat on the mat and the dog ran after it {i}" for i in range(12)]
)
TINY = dict(d_sae=16, tokens=256, batch_tokens=64, rows_per_chunk=64, max_length=16)


@pytest.fixture(scope="module")
def gpt2():
    model, tokenizer = tiny_gpt2()
    return NNsightAdapter(model, tokenizer=tokenizer)


@pytest.fixture(scope="module")
def bert():
    model, tokenizer = tiny_bert()
    return NNsightAdapter(model, tokenizer=tokenizer)


def test_the_causal_lm_default_differs_from_the_encoder_default():
    causal, causal_name = default_training(True)
    encoder, encoder_name = default_training(False)
    assert causal == CAUSAL_LM_TRAINING and encoder == ENCODER_TRAINING
    assert encoder == TrainingConfig(), "the encoder default is TrainingConfig() unchanged"
    assert causal != encoder and causal_name != encoder_name
    # What makes it a different recipe, not only another size.
    assert causal.passes > encoder.passes and causal.b_dec_init == "mean"


def test_each_default_is_in_the_cache_key_and_the_model_picks_its_own(gpt2, bert, tmp_path):
    assert gpt2.is_causal_lm and not bert.is_causal_lm
    keys = {
        name: cache_key(gpt2, SITE, "corpus", config)
        for name, config in (("causal", CAUSAL_LM_TRAINING), ("encoder", ENCODER_TRAINING))
    }
    assert keys["causal"]["config"] == CAUSAL_LM_TRAINING.to_dict()
    assert keys["encoder"]["config"] == ENCODER_TRAINING.to_dict()
    assert cache_entry(keys["causal"], tmp_path) != cache_entry(keys["encoder"], tmp_path)
    # With no config, a causal LM looks for the causal-LM recipe's entry, an encoder for its own.
    cache_entry(keys["encoder"], tmp_path).mkdir(parents=True)
    assert not is_cached(gpt2, SITE, corpus="corpus", cache_dir=tmp_path)
    cache_entry(keys["causal"], tmp_path).mkdir(parents=True)
    assert is_cached(gpt2, SITE, corpus="corpus", cache_dir=tmp_path)
    bert_key = cache_key(bert, SITE, "corpus", ENCODER_TRAINING)
    cache_entry(bert_key, tmp_path).mkdir(parents=True)
    assert is_cached(bert, SITE, corpus="corpus", cache_dir=tmp_path)


@pytest.mark.parametrize("causal", [True, False])
def test_the_default_sae_says_which_recipe_trained_it(gpt2, bert, causal, tmp_path, monkeypatch):
    monkeypatch.setenv("GEOMLENS_SAE_CACHE", str(tmp_path))
    adapter = gpt2 if causal else bert
    sae, note = default_sae(adapter, SITE, {**TINY, "passes": 2})
    assert sae.cfg.d_sae == 16
    expected = "causal-LM default" if causal else "encoder default"
    assert f"training recipe: the {expected}" in note
    assert "overridden" in note and "2 passes" in note
    # The entry trained is the model's default with the overrides: its key says so.
    base = CAUSAL_LM_TRAINING if causal else ENCODER_TRAINING
    config = dataclasses.replace(base, **TINY, passes=2)
    assert is_cached(adapter, SITE, corpus=_corpus(), config=config, cache_dir=tmp_path)


def _corpus() -> str:
    from geomlens.sae.config import default_corpus_name

    return default_corpus_name()


@pytest.mark.parametrize("init", ["mean", "zeros"])
def test_the_decoder_bias_starts_where_asked(gpt2, init):
    """With a learning rate too small to move it, the trained SAE's decoder bias (in raw
    activation units, after sae-lens folds its scale in) is where it started: the activations'
    mean, or zero."""
    config = TrainingConfig(**TINY, passes=1, lr=1e-12, b_dec_init=init, sink_norm_ratio=None)
    sae = train_sae(gpt2, SITE, TEXTS, config)
    # The mean over the very batches the bias was started from (sae-lens's norm-estimate ones).
    batches = training_batches(gpt2, SITE, TEXTS, config)
    head = torch.cat([next(batches) for _ in range(config.tokens // config.batch_tokens)])
    mean = head.mean(0)
    b_dec = sae.b_dec.detach()
    if init == "mean":
        assert torch.allclose(b_dec, mean, rtol=1e-4, atol=1e-4 * float(mean.norm()))
    else:
        assert float(b_dec.norm()) < 1e-6 * float(mean.norm())


@pytest.mark.parametrize(
    "bad, fragment",
    [
        ({"b_dec_init": "median"}, "b_dec_init='median' is not one of 'zeros', 'mean'"),
        ({"lr_warmup": 1.5}, "lr_warmup is a fraction of the steps, from 0 to 1; got 1.5"),
        ({"lr_warmup": 0.6, "lr_decay": 0.6}, "lr_warmup + lr_decay must not exceed 1"),
    ],
)
def test_a_bad_recipe_is_refused_naming_the_field(bad, fragment):
    with pytest.raises(ValueError, match="TrainingConfig") as error:
        TrainingConfig(**bad)
    assert fragment in str(error.value)


def test_reading_a_chunk_is_counted_in_tokens_with_an_eta(gpt2, monkeypatch, capsys):
    """A chunk is read whole before training takes a token from it (on the causal-LM recipe,
    all its tokens: minutes on a CPU): the progress lines count the tokens read against the
    number the recipe trains on, not "0 tokens trained on" over and over. One count for the
    whole training, read and trained on together, so its target never changes (two counts
    alternating read as a target that shrinks)."""
    from geomlens import progress

    monkeypatch.setattr(progress, "HEARTBEAT_SECONDS", 0.1)
    texts = gl.data.as_dataset([f"the cat sat on the mat {i}" for i in range(400)])
    slow = gpt2.model.transformer.h[0].register_forward_pre_hook(lambda *_: time.sleep(0.4))
    config = TrainingConfig(
        **{**TINY, "rows_per_chunk": 400, "tokens": 1024}, passes=1, sink_norm_ratio=None
    )
    try:
        with progress.showing_progress(True), progress.phase("training"):
            train_sae(gpt2, SITE, texts, config)
    finally:
        slow.remove()
    err = capsys.readouterr().err.splitlines()
    assert any("training an SAE on" in line for line in err), "training is named before it starts"
    counts = [line for line in err if line.startswith("geomlens: training: ") and " of " in line]
    said = [line for line in counts if "of 2,048 token activations read, then trained on" in line]
    assert said and len(said) == len(counts), f"one count, one target: {counts}"
    read = {int(line.split("training: ")[1].split(" of ")[0].replace(",", "")) for line in said}
    assert read - {0}, f"the count moves while the chunk is read: {said}"
    assert max(read) <= 2048
    assert any("left" in line for line in said), said


def _rows_through_the_model(adapter):
    """A forward pre-hook on the first block counting the rows that go through the model (to
    remove with ``.remove()``) and the list it appends each batch's row count to."""
    rows: list[int] = []
    hook = adapter.model.transformer.h[0].register_forward_pre_hook(
        lambda _module, args: rows.append(int(args[0].shape[0]))
    )
    return hook, rows


def test_capture_stops_at_the_tokens_it_trains_on(gpt2):
    """The causal-LM recipe's chunk covers the corpus; the recipe trains on ``tokens`` of it.
    Reading stops there: far fewer rows go through the model than the data holds, and the
    ``tokens × passes`` samples the trainer takes hold each token read exactly ``passes`` times
    (not a first pass over a larger capture)."""
    texts = gl.data.as_dataset([f"{i} the cat sat on the mat and the dog ran" for i in range(400)])
    config = TrainingConfig(
        **{**TINY, "rows_per_chunk": 4096, "tokens": 256}, passes=4, sink_norm_ratio=None
    )
    hook, rows = _rows_through_the_model(gpt2)
    try:
        batches = training_batches(gpt2, SITE, texts, config)
        steps = config.tokens * config.passes // config.batch_tokens
        taken = torch.cat([next(batches) for _ in range(steps)])
    finally:
        hook.remove()
    assert 0 < sum(rows) < len(texts) // 4, f"{sum(rows)} of {len(texts)} rows read"
    _, counts = torch.unique(taken, dim=0, return_counts=True)
    # A token read c times (equal activations count together) is taken c × passes times.
    assert len(taken) == config.tokens * config.passes
    assert bool((counts % config.passes == 0).all()), counts.tolist()


def test_data_smaller_than_the_recipe_is_read_once(gpt2):
    """With fewer tokens in the data than the recipe trains on, every row goes through the model
    once; the trainer's further batches are cut from the tokens already read."""
    texts = gl.data.as_dataset([f"{i} the cat sat on the mat" for i in range(10)])
    config = TrainingConfig(**{**TINY, "rows_per_chunk": 4}, passes=1, sink_norm_ratio=None)
    hook, rows = _rows_through_the_model(gpt2)
    try:
        batches = training_batches(gpt2, SITE, texts, config)
        taken = [next(batches) for _ in range(3 * config.tokens // config.batch_tokens)]
    finally:
        hook.remove()
    assert sum(rows) == len(texts), rows
    assert all(batch.shape == (config.batch_tokens, taken[0].shape[1]) for batch in taken)


def test_an_sae_trains_when_the_caller_has_gradients_off(gpt2):
    """A run under ``torch.no_grad()`` with no cached SAE trains one: it failed in sae-lens's
    backward pass ("element 0 of tensors does not require grad")."""
    config = TrainingConfig(**TINY, passes=1, sink_norm_ratio=None)
    with torch.no_grad():
        sae = train_sae(gpt2, SITE, TEXTS, config)
        assert not torch.is_grad_enabled(), "the caller's setting is restored on return"
    assert sae.W_enc.shape[-1] == config.d_sae
