"""``geomlens sae``: train a small SAE offline with sae-lens and keep it in the cache."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Annotated, Any

import typer

from geomlens.cli.options import (
    DEFAULT_BACKEND,
    DEFAULT_MODEL,
    BackendOption,
    DeviceOption,
    ModelOption,
    SeedOption,
)
from geomlens.sae.config import (
    CAUSAL_LM_TRAINING,
    ENCODER_TRAINING,
    default_corpus_name,
    default_training,
)


def _default(field: str) -> str:
    """Help text for an option whose default depends on the model (encoder or causal LM)."""
    encoder, causal = getattr(ENCODER_TRAINING, field), getattr(CAUSAL_LM_TRAINING, field)
    if encoder == causal:
        return f"default {encoder}"
    return f"default {encoder} on an encoder, {causal} on a causal LM"


def _recipe(flag: str, meaning: str, field: str) -> Any:
    """An option of the training recipe, its help ending in the model's default for ``field``."""
    return typer.Option(flag, help=f"{meaning}; {_default(field)}.")


app = typer.Typer(
    help="Sparse autoencoders (sae-lens): train offline, cached for sae-features.",
    rich_markup_mode="markdown",  # hard-wrapped docstrings join into paragraphs
)


@app.command("train")
def train_command(
    model: ModelOption = DEFAULT_MODEL,
    site: Annotated[
        str | None,
        typer.Option(
            "--site", "-s", help="Site to train on (default: the middle block's resid_post)."
        ),
    ] = None,
    d_sae: Annotated[int | None, _recipe("--d-sae", "Dictionary size (latents)", "d_sae")] = None,
    tokens: Annotated[int | None, _recipe("--tokens", "Distinct tokens captured", "tokens")] = None,
    l1: Annotated[
        float | None, _recipe("--l1", "sae-lens L1 coefficient", "l1_coefficient")
    ] = None,
    lr: Annotated[float | None, _recipe("--lr", "Adam learning rate", "lr")] = None,
    batch_tokens: Annotated[
        int | None, _recipe("--batch-tokens", "Tokens per step", "batch_tokens")
    ] = None,
    passes: Annotated[
        int | None, _recipe("--passes", "Times each captured token is trained on", "passes")
    ] = None,
    data: Annotated[
        Path | None,
        typer.Option(
            "--data", help=".txt/.jsonl/.json texts (default: the corpus's training part)."
        ),
    ] = None,
    backend: BackendOption = DEFAULT_BACKEND,
    device: DeviceOption = None,
    cache_dir: Annotated[
        Path | None,
        typer.Option(
            "--cache-dir", help="Cache folder (default: $GEOMLENS_SAE_CACHE or the user cache)."
        ),
    ] = None,
    seed: SeedOption = 0,
) -> None:
    """Train (or reuse) an SAE on the model's activations at SITE; print its folder.

    Options left out take the model's default recipe: one for encoders, one for causal LMs
    (docs/sae.md)."""
    import geomlens as gl
    from geomlens.cli.data import load_data
    from geomlens.cli.errors import check_positive, check_seed, fail, one_line_errors
    from geomlens.progress import phase, showing_progress
    from geomlens.sae.training import cached_sae, corpus_texts

    # Every option is checked before the model is loaded (minutes for a large one).
    for flag, value in (
        ("--d-sae", d_sae),
        ("--tokens", tokens),
        ("--batch-tokens", batch_tokens),
        ("--passes", passes),
    ):
        check_positive(flag, value)
    if lr is not None and not 0 < lr < float("inf"):
        raise fail(f"--lr must be a positive finite number (e.g. 4e-4); got {lr}.")
    if l1 is not None and not 0 <= l1 < float("inf"):
        raise fail(f"--l1 must be a finite number of at least 0 (e.g. 5.0); got {l1}.")
    check_seed(seed)
    if cache_dir is not None and cache_dir.exists() and not cache_dir.is_dir():
        raise fail(
            f"--cache-dir {cache_dir} is a file; give a folder (it is made if missing), or "
            "leave --cache-dir out for the user cache."
        )
    if data is None:
        texts, corpus = corpus_texts(), default_corpus_name()
    else:
        texts = load_data(data, None)
        digest = hashlib.sha256(data.read_bytes()).hexdigest()[:16]
        corpus = f"file:{data.name}:{digest}"
    # The cache publishes an entry whole or not at all, so Ctrl-C leaves nothing half-trained.
    with one_line_errors(interrupted="interrupted; no SAE was cached."):
        adapter = gl.load(model, backend=backend, device=device)
        base, recipe = default_training(adapter.is_causal_lm)
        given: dict[str, Any] = {
            "d_sae": d_sae,
            "tokens": tokens,
            "l1_coefficient": l1,
            "lr": lr,
            "batch_tokens": batch_tokens,
            "passes": passes,
        }
        config = dataclasses.replace(
            base, seed=seed, **{k: v for k, v in given.items() if v is not None}
        )
        where = site or f"blocks.{adapter.n_layers // 2}.hook_resid_post"
        # Reading the tokens through the model, then training: minutes to an hour on a CPU. The
        # progress lines (what is counted, its target, an ETA) go to standard error, to a log too.
        with showing_progress(True), phase(f"SAE at {where}", announce=True):
            trained = cached_sae(
                adapter, where, corpus=corpus, data=texts, config=config, cache_dir=cache_dir
            )
    action = "reused cached" if trained.reused else "trained and cached"
    l0 = trained.sae.cfg.metadata.get("l0")
    typer.echo(f"{action} SAE for {adapter.model_id} at {where}: {trained.path}")
    typer.echo(f"  d_in={trained.sae.cfg.d_in} d_sae={trained.sae.cfg.d_sae} training L0={l0}")
    typer.echo(f"  recipe: the {recipe}, with {config.tokens} tokens x {config.passes} passes")
    typer.echo(f"  use it: geomlens run sae-features --option sae='{trained.path}'")
