"""Train a small SAE offline with sae-lens's own trainer, fed by the engine's streaming pass.

Activations are captured through the adapter (``geomlens.engine.stream``, one forward pass per
batch of texts, on any backend), shuffled within a chunk of texts, and handed to
``sae_lens.SAETrainer`` as the iterator of activation batches it accepts. The SAE, its loss and
its optimiser are sae-lens's (a standard ReLU SAE with an L1 penalty: its active count k varies
per token, which is what feature explosion measures; a TopK SAE would fix it). Trained SAEs are
kept in a cache (:mod:`geomlens.sae.cache`) and reused.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from geomlens.models.optional import missing_extra

try:
    import sae_lens  # noqa: F401  (only to name the extra when it is missing)
except ModuleNotFoundError as missing:
    raise missing_extra(missing) from None
from sae_lens import SAE
from sae_lens.config import SAETrainerConfig
from sae_lens.saes.sae import SAEMetadata
from sae_lens.saes.standard_sae import StandardTrainingSAE, StandardTrainingSAEConfig
from sae_lens.training.sae_trainer import SAETrainer

from geomlens.atomic_files import atomic_write_text
from geomlens.data.dataset import Dataset, as_dataset
from geomlens.formatting import layer_label
from geomlens.hooks.finite_check import NonFiniteWatch
from geomlens.inputs.batches import DEFAULT_BATCH_SIZE, captured_batches, dataset_batches
from geomlens.inputs.content_tokens import select_tokens, special_token_ids
from geomlens.inputs.positions import max_positions
from geomlens.models.adapter import Adapter
from geomlens.models.fingerprint import weights_fingerprint
from geomlens.progress import Count, counting, current_count, say
from geomlens.sae.cache import cache_entry, check_entry, publish_folder
from geomlens.sae.config import TrainingConfig, default_training
from geomlens.sae.loading import read_sae_folder

#: What geomlens writes beside sae-lens's files in a cached SAE's folder.
TRAINING_RECORD = "geomlens_training.json"

#: How the tokens an SAE trains on are read, in its cache key: an SAE read another way is
#: another SAE. 2: at most ``TrainingConfig.tokens`` tokens are read through the model and no
#: row twice (1, before 2026-12-02, read whole chunks, the causal-LM recipe's whole corpus of
#: ~52k content tokens for its 40k, and cycled the data again when it had fewer tokens).
CAPTURE_VERSION = 2


@dataclass
class TrainedSAE:
    """An SAE from :func:`cached_sae`: the SAE, its folder, and whether it was reused."""

    sae: SAE
    path: Path
    reused: bool


def activation_batches(
    adapter: Adapter,
    site: str,
    data: Any,
    *,
    batch_tokens: int,
    rows_per_chunk: int = 64,
    max_length: int | None = 128,
    seed: int = 0,
    passes: int = 1,
    exclude_special: bool = False,
    sink_norm_ratio: float | None = None,
    max_tokens: int | None = None,
) -> Iterator[torch.Tensor]:
    """Endless ``[batch_tokens, d]`` activation batches at ``site`` over ``data`` (cycled).

    Each chunk of ``rows_per_chunk`` texts goes through the batch loop
    (:func:`geomlens.inputs.batches.captured_batches`: one forward pass per batch, nothing else
    kept), its real tokens are shuffled, and batches are cut from them, ``passes`` times over
    (reshuffled); tokens left over carry into the next chunk. Row order is reshuffled every
    cycle through the data. A NaN or Inf in the activations stops training, naming the rows.
    ``exclude_special`` and ``sink_norm_ratio`` leave special tokens and attention sinks out
    (``geomlens.inputs.content_tokens``).

    ``max_tokens``: read no more than this many tokens through the model in all, and no row
    twice. The chunk that reaches it stops reading rows there (cut to the count); after it, or
    after one cycle through data with fewer tokens, batches are cut from every token read,
    reshuffled, for as long as they are asked for. A trainer that takes ``max_tokens × passes``
    samples sees each token read ``passes`` times, and no forward pass is spent on a token it
    never sees.
    """
    from geomlens.data.streaming import as_stream, is_streamed, rows_to_dataset

    # Rows are revisited in a fresh order every cycle, so a streamed source is read in once.
    dataset = (
        rows_to_dataset(list(as_stream(data).rows())) if is_streamed(data) else as_dataset(data)
    )
    special = special_token_ids(adapter.tokenizer) if exclude_special else []
    rng = np.random.default_rng(seed)
    leftover: torch.Tensor | None = None
    read: list[torch.Tensor] = []  # every token read, kept only when max_tokens bounds them
    budget = max_tokens
    while True:
        order = rng.permutation(len(dataset))
        for start in range(0, len(order), rows_per_chunk):
            rows = np.sort(order[start : start + rows_per_chunk])
            captured = torch.cat(
                list(
                    _content_tokens(
                        adapter, site, dataset, rows, max_length, special, sink_norm_ratio,
                        limit=budget,
                    )
                )
            )  # fmt: skip
            if budget is not None:
                captured = captured[:budget]
                budget -= len(captured)
                read.append(captured)
            for _ in range(passes):
                leftover = yield from _cut(captured, rng, leftover, batch_tokens)
            if budget is not None and budget <= 0:
                break
        if budget is not None:  # every token allowed, or every row of the data, has been read
            break
    # More batches come from the tokens read, reshuffled: no row goes through the model twice.
    everything = torch.cat(read)
    if len(everything) == 0:
        raise ValueError(
            f"No token of the {len(dataset)} rows is left to train an SAE on at {site!r}: every "
            "one is padding, a special token or an attention sink. Give rows with text."
        )
    while True:
        leftover = yield from _cut(everything, rng, leftover, batch_tokens)


def _cut(
    tokens: torch.Tensor,
    rng: np.random.Generator,
    leftover: torch.Tensor | None,
    batch_tokens: int,
) -> Generator[torch.Tensor, None, torch.Tensor]:
    """Batches of ``batch_tokens`` from ``tokens`` reshuffled, after the ``leftover`` of the
    last cut; returns the new leftover (fewer than a batch)."""
    tokens = tokens[torch.from_numpy(rng.permutation(len(tokens)))]
    if leftover is not None:
        tokens = torch.cat([leftover, tokens])
    usable = len(tokens) - len(tokens) % batch_tokens
    for begin in range(0, usable, batch_tokens):
        yield tokens[begin : begin + batch_tokens]
    return tokens[usable:]


def _content_tokens(
    adapter: Adapter,
    site: str,
    dataset: Dataset,
    rows: np.ndarray,
    max_length: int | None,
    special_ids: Sequence[int] = (),
    sink_norm_ratio: float | None = None,
    *,
    limit: int | None = None,
) -> Iterator[torch.Tensor]:
    """Every real (non-padding) token's activation at ``site`` over ``rows``, batch by batch,
    on the CPU in float32, less the special tokens and attention sinks asked to be left out;
    with ``limit``, no batch is read once that many tokens have been kept."""
    site = adapter.resolve_site(site)
    # Never longer than the model's position table: the default 128 on a 64-position model
    # failed however the user truncated the analysis's own pass (--max-length 64).
    positions = max_positions(adapter)
    if positions is not None and (max_length is None or max_length > positions):
        max_length = positions
    watch = NonFiniteWatch()
    batches = dataset_batches(dataset, DEFAULT_BATCH_SIZE, rows)
    # A chunk is read whole before training takes a token from it (the causal-LM recipe reads
    # all its tokens at once: minutes): progress lines count its rows (or the tokens, when a
    # limit ends it first), with an ETA.
    # Inside training (train_sae's count of tokens trained on), that count is the phase's one:
    # a second count here would alternate with it, its target changing from chunk to chunk.
    read: Any
    inside = current_count()
    if inside is not None:  # the tokens kept count toward training's target (read, then trained)
        read = contextlib.nullcontext(inside)
    elif limit is None:
        read = counting("read through the model for the SAE", len(rows), "rows")
    else:
        read = counting("content tokens read through the model for the SAE", limit, "")
    kept_so_far = 0
    with read as count:
        for number, batch in enumerate(
            captured_batches(adapter, batches, [site], max_length=max_length)
        ):
            if limit is not None and kept_so_far >= limit:
                break
            mask = batch.inputs.attention_mask
            watch.update(number, batch.activations, mask, batch.inputs.index)
            activation = batch.activations[site]
            # Content tokens only: one attention sink (120 x the median norm on SmolLM2) would
            # dominate the SAE's loss and its dictionary.
            selection = select_tokens(
                activation, mask, batch.inputs.input_ids, special_ids, sink_norm_ratio
            )
            kept = activation[selection.content.to(activation.device)]
            kept_so_far += len(kept)
            count.add(int(mask.shape[0]) if limit is None and inside is None else len(kept))
            yield kept.detach().to("cpu", torch.float32)
    watch.raise_if_any()


def training_batches(
    adapter: Adapter, site: str, data: Any, config: TrainingConfig
) -> Iterator[torch.Tensor]:
    """The activation batches :func:`train_sae` trains on for ``config``, in its order."""
    return activation_batches(
        adapter,
        site,
        data,
        batch_tokens=config.batch_tokens,
        rows_per_chunk=config.rows_per_chunk,
        max_length=config.max_length,
        seed=config.seed,
        passes=config.passes,
        exclude_special=config.exclude_special,
        sink_norm_ratio=config.sink_norm_ratio,
        max_tokens=config.tokens,
    )


def train_sae(
    adapter: Adapter,
    site: str,
    data: Any,
    config: TrainingConfig | None = None,
) -> StandardTrainingSAE:
    """Train a standard (ReLU, L1) SAE with sae-lens on activations of ``site`` over ``data``.

    ``data`` is anything ``gl.run`` accepts (texts, token ids). The site and width are checked
    against the model before the first forward pass; ``d_in`` is read from the activations.
    ``config`` None: the model's default (:func:`geomlens.sae.config.default_training`).
    Returns the trained sae-lens SAE, whose metadata records the model and site.
    """
    site = adapter.resolve_site(site)  # an unknown site fails here, before any forward pass
    config = config or default_training(adapter.is_causal_lm)[0]
    torch.manual_seed(config.seed)
    # Named before it starts: on a CPU it is the longest step of a report (minutes).
    trained = config.tokens * config.passes
    say(
        f"training an SAE on {layer_label(site)} (the longest step on a CPU): reading "
        f"{config.tokens:,} token activations through the model, then training on {trained:,}; "
        f"the count below is both together ({config.tokens + trained:,}) …"
    )
    with counting("token activations read, then trained on", config.tokens + trained, "") as count:
        return _train(adapter, site, data, config, count)


def _train(
    adapter: Adapter, site: str, data: Any, config: TrainingConfig, count: Count
) -> StandardTrainingSAE:
    """:func:`train_sae`'s work; ``count`` gets every batch handed to the trainer (progress
    lines report it against the target, with an ETA from the average rate)."""
    batches = training_batches(adapter, site, data, config)
    # The batches sae-lens estimates its norm scaling factor from (and the decoder bias's start).
    norm_batches = max(1, min(8, config.tokens // config.batch_tokens))
    head = [next(batches) for _ in range(norm_batches)]
    d_in = int(head[0].shape[-1])

    # Unless the decoder bias starts at the mean (which sets the scale from ``head``), sae-lens
    # first takes ``norm_batches`` batches to estimate its scale and trains on the ones after.
    uncounted = 0 if config.b_dec_init == "mean" else norm_batches

    def provider() -> Iterator[torch.Tensor]:
        for number, batch in enumerate(itertools.chain(head, batches)):
            if number >= uncounted:
                count.add(len(batch))
            yield batch

    steps = config.tokens * config.passes // config.batch_tokens
    sae = StandardTrainingSAE(
        StandardTrainingSAEConfig(
            d_in=d_in,
            d_sae=config.d_sae,
            l1_coefficient=config.l1_coefficient,
            l1_warm_up_steps=int(config.l1_warmup * steps),
            # sae-lens estimates a scale so inputs have norm √d_in, and folds it back into the
            # weights after training: the saved SAE reads raw activations.
            normalize_activations="expected_average_only_in",
            metadata=SAEMetadata(
                model_name=adapter.model_id,
                hook_name=site,
                context_size=config.max_length,
                prepend_bos=True,
                # sae-lens's own field, and geomlens's sink rule beside it.
                exclude_special_tokens=config.exclude_special,
                sink_norm_ratio=config.sink_norm_ratio,
            ),
        )
    )
    trainer_config = SAETrainerConfig(
        total_training_samples=config.tokens * config.passes,
        train_batch_size_samples=config.batch_tokens,
        lr=config.lr,
        lr_end=config.lr,
        lr_warm_up_steps=int(config.lr_warmup * steps),
        lr_decay_steps=int(config.lr_decay * steps),
        n_batches_for_norm_estimate=norm_batches,
        dead_feature_window=max(1, config.tokens // config.batch_tokens),
        feature_sampling_window=max(1, config.tokens // config.batch_tokens),
        device=str(adapter.device),
    )
    trainer = _StepTrainer(trainer_config, sae, provider())
    if config.b_dec_init == "mean":
        _start_decoder_bias_at_mean(trainer, torch.cat(head))
    # Training needs gradients even when the caller turned them off (a run under torch.no_grad
    # with no cached SAE trains one here).
    with torch.enable_grad():
        return trainer.fit()


def _start_decoder_bias_at_mean(trainer: SAETrainer, sample: torch.Tensor) -> None:
    """Set sae-lens's norm scaling factor from ``sample`` (as its trainer would estimate it:
    √d_in over the mean norm) and start the decoder bias at the sample's mean, scaled alike.

    The factor is fixed first because the bias lives in the scaled space the trainer trains
    in; sae-lens skips its own estimate when the factor is set and folds it in at the end.
    A causal LM's residual stream has a large common mean; from zero, latents spend the first
    steps learning it and many die.
    """
    sample = sample.to(torch.float32)
    scale = math.sqrt(sample.shape[-1]) / float(sample.norm(dim=-1).mean())
    trainer.activation_scaler.scaling_factor = scale
    with torch.no_grad():
        trainer.sae.b_dec.data = (sample.mean(0) * scale).to(trainer.sae.b_dec)


class _StepTrainer(SAETrainer):
    """sae-lens's trainer with its bar moved every step (sae-lens moves it every 100 steps, so
    a short run sat at 0 % and stopped short of 100 %), capped at the bar's total, its ETA from
    the average rate."""

    def _update_pbar(self, step_output: Any, pbar: Any, update_interval: int = 100) -> None:
        # Its ETA from the average rate since the start: batches come in bursts (a chunk of
        # texts through the model, then many steps), so tqdm's smoothed rate swung by minutes.
        pbar.smoothing = 0
        if self.n_training_steps % update_interval == 0:  # the losses, as often as sae-lens
            super()._update_pbar(step_output, _NoAdvance(pbar), update_interval)
        pbar.update(min(self.cfg.train_batch_size_samples, pbar.total - pbar.n))


class _NoAdvance:
    """A bar whose description may change but which does not advance (the step does that)."""

    def __init__(self, bar: Any) -> None:
        self.bar = bar

    def set_description(self, text: str) -> None:
        self.bar.set_description(f"Training SAE {text}")

    def update(self, count: int) -> None:
        pass


def cached_sae(
    adapter: Adapter,
    site: str,
    *,
    corpus: str,
    data: Any,
    config: TrainingConfig | None = None,
    cache_dir: str | Path | None = None,
) -> TrainedSAE:
    """The SAE for (model, site, corpus, config) from the cache, training and saving it first
    when it is not there yet. ``corpus`` names ``data`` in the cache key; ``config`` None: the
    model's default (:func:`geomlens.sae.config.default_training`)."""
    config = config or default_training(adapter.is_causal_lm)[0]
    key = cache_key(adapter, site, corpus, config)
    folder = cache_entry(key, cache_dir)
    if folder.is_dir():
        check_entry(folder, key)  # never trusted by its folder name alone
        return TrainedSAE(read_sae_folder(folder, str(adapter.device)), folder, True)
    trained = train_sae(adapter, site, data, config)

    def write(staging: Path) -> None:
        trained.save_inference_model(str(staging))
        record = {**key, "l0": trained.cfg.metadata.get("l0"), "sae_lens_files": "inference"}
        atomic_write_text(staging / TRAINING_RECORD, json.dumps(record, indent=2, default=str))

    publish_folder(folder, write, key)
    return TrainedSAE(read_sae_folder(folder, str(adapter.device)), folder, False)


def cache_key(adapter: Adapter, site: str, corpus: str, config: TrainingConfig) -> dict[str, Any]:
    """What a cached SAE was made for; reuse checks it (the folder name alone is not trusted)."""
    return {
        "model": adapter.model_id,
        # The same model name may stand for other weights (a model retrained into its folder).
        "model_weights": weights_fingerprint(adapter),
        "site": site,
        "corpus": corpus,
        "config": config.to_dict(),
        "capture": CAPTURE_VERSION,
    }


def is_cached(
    adapter: Adapter,
    site: str,
    *,
    corpus: str,
    config: TrainingConfig | None = None,
    cache_dir: str | Path | None = None,
) -> bool:
    """Whether :func:`cached_sae` would reuse a saved SAE (no training) for these arguments."""
    key = cache_key(adapter, site, corpus, config or default_training(adapter.is_causal_lm)[0])
    return cache_entry(key, cache_dir).is_dir()


def corpus_texts(parts: Sequence[str] = ("training",), limit: int | None = None) -> Dataset:
    """The shipped English corpus's ``parts`` as a Dataset (the default training data)."""
    from geomlens.data.corpus import corpus_split

    texts = [t for part in parts for t in corpus_split(part, limit)]
    return Dataset(texts=texts)
