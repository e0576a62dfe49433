"""``geomlens sae``: train a small SAE offline with sae-lens and keep it in the cache."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Annotated

import typer

from geomlens.cli.options import (
    DEFAULT_BACKEND,
    DEFAULT_MODEL,
    BackendOption,
    DeviceOption,
    ModelOption,
    SeedOption,
)
from geomlens.sae.config import TrainingConfig, default_corpus_name

DEFAULTS = TrainingConfig()

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
    d_sae: Annotated[
        int, typer.Option("--d-sae", help="Dictionary size (latents).")
    ] = DEFAULTS.d_sae,
    tokens: Annotated[
        int, typer.Option("--tokens", help="Distinct tokens captured.")
    ] = DEFAULTS.tokens,
    l1: Annotated[
        float, typer.Option("--l1", help="sae-lens L1 coefficient.")
    ] = DEFAULTS.l1_coefficient,
    lr: Annotated[float, typer.Option("--lr", help="Adam learning rate.")] = DEFAULTS.lr,
    batch_tokens: Annotated[
        int, typer.Option("--batch-tokens", help="Tokens per step.")
    ] = DEFAULTS.batch_tokens,
    passes: Annotated[
        int, typer.Option("--passes", help="Times each captured token is trained on.")
    ] = DEFAULTS.passes,
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
    """Train (or reuse) an SAE on the model's activations at SITE; print its folder."""
    import geomlens as gl
    from geomlens.cli.data import load_data
    from geomlens.cli.errors import check_positive, one_line_errors
    from geomlens.sae.training import cached_sae, corpus_texts

    for flag, value in (
        ("--d-sae", d_sae),
        ("--tokens", tokens),
        ("--batch-tokens", batch_tokens),
        ("--passes", passes),
    ):
        check_positive(flag, value)
    if data is None:
        texts, corpus = corpus_texts(), default_corpus_name()
    else:
        texts = load_data(data, None)
        digest = hashlib.sha256(data.read_bytes()).hexdigest()[:16]
        corpus = f"file:{data.name}:{digest}"
    config = TrainingConfig(
        d_sae=d_sae,
        tokens=tokens,
        l1_coefficient=l1,
        lr=lr,
        batch_tokens=batch_tokens,
        passes=passes,
        seed=seed,
    )
    # The cache publishes an entry whole or not at all, so Ctrl-C leaves nothing half-trained.
    with one_line_errors(interrupted="interrupted; no SAE was cached."):
        adapter = gl.load(model, backend=backend, device=device)
        where = site or f"blocks.{adapter.n_layers // 2}.hook_resid_post"
        trained = cached_sae(
            adapter, where, corpus=corpus, data=texts, config=config, cache_dir=cache_dir
        )
    action = "reused cached" if trained.reused else "trained and cached"
    l0 = trained.sae.cfg.metadata.get("l0")
    typer.echo(f"{action} SAE for {adapter.model_id} at {where}: {trained.path}")
    typer.echo(f"  d_in={trained.sae.cfg.d_in} d_sae={trained.sae.cfg.d_sae} training L0={l0}")
    typer.echo(f"  use it: geomlens run sae-features --option sae='{trained.path}'")
