"""Feature explosion and the SSD bound of a causal LM with a published sae-lens SAE.

The SAE reads one site of the model. On English (disjoint calibration and held-out parts of
the bundled corpus), on Python source, on text with 15 % of its tokens replaced and on uniform
random token ids, the script counts the SAE's active latents k per token (mean and max per
input), scores each input by its mean k, and reports the AUROC of every OOD set against the
held-out English. The reconstruction is spliced into the model to measure ε̂_loss, with a
feature-shuffle ablation beside it, and the generalisation bound is decomposed term by term in
both its pool form and the form of the authors' released code. The SSD paper reports, for
GPT-2 small with gpt2-small-res-jb at blocks.6.hook_resid_pre, mean k ≈ 60 on English and
≈ 87 on random tokens (max 162 → 364). See docs/sae.md.

    python tutorials/gpu/sae_feature_explosion.py --model gpt2 \\
        --sae gpt2-small-res-jb/blocks.6.hook_resid_pre --device cuda
    python tutorials/gpu/sae_feature_explosion.py --model smollm2-135m-instruct --sae train \\
        --backend nnsight --device cpu        # no published SAE: train one (cached) first
    python tutorials/gpu/sae_feature_explosion.py --model PATH --sae SAE_FOLDER --device cpu \\
        --calibration-rows 8 --heldout-rows 8 --max-tokens 24     # tiny

``--sae train`` trains a standard sae-lens SAE on the model's own activations at ``--site``
(default: the middle block's ``hook_resid_post``) from the bundled corpus's training part,
without special tokens and attention sinks, and caches it (``geomlens sae train``).

Writes ``sae_features.json`` (the result) and ``sae_features.png`` into ``--out``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import geomlens as gl
from geomlens.atomic_files import atomic_save_figure
from geomlens.data.ood import feature_explosion_data


def k_table(result: gl.Result) -> list[str]:
    """One line per condition: inputs, median length, mean and max k both ways (every token,
    the paper's; content tokens, sae-lens's), AUROC by mean k with its interval, η̂, ε̂_loss."""
    lines = [
        f"{'site':>26} {'condition':>15} {'inputs':>6} {'len':>4} {'k all':>6} {'max':>5} "
        f"{'k cont':>6} {'max':>5} {'AUROC all [95%]':>18} {'AUROC content [95%]':>20} "
        f"{'eta':>5} {'eps_loss':>8} {'shuffled':>8}"
    ]
    for row in result.tables["ood"]:

        def cell(key: str, width: int, digits: int = 3, row: dict = row) -> str:
            value = row.get(key)
            return f"{value:>{width}.{digits}f}" if value is not None else f"{'-':>{width}}"

        def auroc(suffix: str, width: int, row: dict = row) -> str:
            key = f"auroc_mean_k{suffix}"
            if key not in row:
                return f"{'-':>{width}}"
            text = f"{row[key]:.2f} [{row[key + '_ci_low']:.2f}, {row[key + '_ci_high']:.2f}]"
            return f"{text:>{width}}"

        lines.append(
            f"{row['site']:>26} {row['condition']:>15} {row['inputs']:>6} "
            f"{row['median_tokens']:>4.0f} {row['mean_k_all']:>6.1f} {row['max_k_all']:>5.0f} "
            f"{row['mean_k_content']:>6.1f} {row['max_k_content']:>5.0f} {auroc('', 18)} "
            f"{auroc('_content', 20)} {cell('eta', 5, 2)} {cell('epsilon_loss', 8)} "
            f"{cell('epsilon_loss_shuffled', 8)}"
        )
    return lines


def quality_lines(result: gl.Result) -> list[str]:
    """The SAE's quality on held-out content tokens and its provenance, per site."""
    metrics, lines = result.metrics, []
    for site in dict.fromkeys(row["site"] for row in result.tables["ood"]):

        def value(name: str, digits: int = 3, site: str = site) -> str:
            number = metrics.get(f"{site}.{name}")
            return "-" if number is None else f"{number:.{digits}f}"

        lines.append(
            f"{site}: explained variance {value('explained_variance')}, L0 {value('l0', 1)}, "
            f"dead latents {value('dead_fraction')} of m, decoder norms "
            f"{value('decoder_norm_min')}-{value('decoder_norm_max')} (spread "
            f"{value('decoder_norm_spread')}), pool P = {value('pool_size', 0)} of "
            f"{value('dictionary_size', 0)}{' (saturated)' if metrics.get(f'{site}.pool_saturated') else ''}, "
            f"SSD = {value('ssd', 1)}, eta = {value('eta')}"
        )
    return lines


def bound_table(result: gl.Result) -> list[str]:
    """The bound's terms per form, its total against log2 V, and the crossing size N*."""
    lines = []
    metrics = result.metrics
    for site in dict.fromkeys(row["site"] for row in result.tables["bound_terms"]):
        threshold = metrics[f"{site}.vacuity_threshold"]
        for form in ("pool", "released"):
            terms = [
                r for r in result.tables["bound_terms"] if r["site"] == site and r["form"] == form
            ]
            parts = ", ".join(f"{r['term']} {r['value']:.3f}" for r in terms)
            total = metrics[f"{site}.bound.{form}"]
            verdict = "non-vacuous" if total < threshold else "vacuous"
            lines.append(
                f"{site} {form:>8} form: U = {total:.3f} bits ({verdict}; log2 V = "
                f"{threshold:.2f}), N* = {metrics[f'{site}.n_star.{form}']:.4g}\n    {parts}"
            )
    return lines or ["no bound: the model has no LM loss (encoder), see docs/sae.md"]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="gpt2", help="HF name or local path.")
    parser.add_argument(
        "--sae",
        default="gpt2-small-res-jb/blocks.6.hook_resid_pre",
        help="sae-lens 'release/sae_id', a folder saved by sae-lens, or 'train' (train one on "
        "the model's own activations at --site, cached).",
    )
    parser.add_argument("--train-tokens", type=int, default=None, help="With --sae train.")
    parser.add_argument("--train-d-sae", type=int, default=None, help="With --sae train.")
    parser.add_argument("--train-l1", type=float, default=None, help="With --sae train.")
    parser.add_argument("--train-passes", type=int, default=None, help="With --sae train.")
    parser.add_argument("--device", default="cuda", help="cuda, cpu, ...")
    parser.add_argument(
        "--backend",
        default="hooked-transformer",
        help="hooked-transformer (HookedTransformer.from_pretrained with the SAE's own "
        "model_from_pretrained_kwargs: the numerics sae-lens SAEs were trained on), "
        "transformer-lens (a TransformerBridge, raw HF numerics) or nnsight.",
    )
    parser.add_argument("--site", default=None, help="Override the SAE's own site.")
    parser.add_argument("--calibration-rows", type=int, default=512)
    parser.add_argument("--heldout-rows", type=int, default=256)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--pool-top-k", type=int, default=None, help="Top-k per token for G.")
    parser.add_argument("--shuffle", default="fixed", help="fixed, per-batch or none.")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("sae_feature_explosion"))
    args = parser.parse_args(argv)

    from geomlens.sae.loading import load_sae

    if args.sae == "train":
        # No published SAE for this model: one trained on its own activations, with the
        # backend asked for (it reads the same numerics it is trained on).
        adapter = gl.load(args.model, backend=args.backend, device=args.device)
        sae, args.site = trained_sae(adapter, args)
    elif args.backend == "hooked-transformer":
        from transformer_lens import HookedTransformer

        from geomlens.models.embedded_lms import embedded_lm

        if embedded_lm(args.model) is not None:
            # The offline GGUF models load only through gl.load; HookedTransformer would ask
            # the hub for its own copy (and has no SmolLM2 at all).
            parser.error(
                f"--model {args.model} is one of geomlens's offline models, which load through "
                "gl.load: give --backend nnsight or transformer-lens."
            )
        sae = load_sae(args.sae)
        # Published SAEs were trained on HookedTransformer activations (LayerNorm folded,
        # writing weights centred, ...): load the model as sae-lens would, or k shifts.
        kwargs = dict(sae.cfg.metadata.get("model_from_pretrained_kwargs") or {})
        model = HookedTransformer.from_pretrained(args.model, device=args.device, **kwargs)
        adapter = gl.attach(model)
    else:
        sae = load_sae(args.sae)
        adapter = gl.load(args.model, backend=args.backend, device=args.device)
    sae = sae.to(adapter.device)
    data = feature_explosion_data(
        adapter.tokenizer,
        calibration_rows=args.calibration_rows,
        heldout_rows=args.heldout_rows,
        max_tokens=args.max_tokens,
        seed=args.seed,
    )
    result = gl.run(
        "sae-features",
        adapter,
        data,
        sae=sae,
        site=args.site,
        pool_top_k=args.pool_top_k,
        shuffle=args.shuffle,
        batch_size=args.batch_size,
        seed=args.seed,
        progress=True,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    result.to_json(args.out / "sae_features.json")
    atomic_save_figure(result.plot(), args.out / "sae_features.png", dpi=120)

    print(f"model {args.model}, SAE {args.sae}: {len(data['token_ids'])} inputs")
    print("\n".join(k_table(result)))
    print("\n".join(quality_lines(result)))
    print("\n".join(bound_table(result)))
    print("paper (GPT-2 small, gpt2-small-res-jb, blocks.6.hook_resid_pre): mean k ≈ 60 English,")
    print("≈ 87 random tokens; max k 162 → 364")
    return {"result": result}


def trained_sae(adapter: gl.Adapter, args: argparse.Namespace) -> tuple[object, str]:
    """A standard SAE trained (or reused from the cache) on the model's own activations, with
    the model's default recipe (causal LM or encoder) and the options given."""
    import dataclasses

    from geomlens.sae.config import default_corpus_name, default_training
    from geomlens.sae.training import cached_sae, corpus_texts

    site = adapter.resolve_site(args.site or f"blocks.{adapter.n_layers // 2}.hook_resid_post")
    overrides = {
        "tokens": args.train_tokens,
        "d_sae": args.train_d_sae,
        "l1_coefficient": args.train_l1,
        "passes": args.train_passes,
        "max_length": args.max_tokens,  # train on texts as long as those analysed
    }
    base, recipe = default_training(adapter.is_causal_lm)
    config = dataclasses.replace(base, **{k: v for k, v in overrides.items() if v is not None})
    trained = cached_sae(
        adapter, site, corpus=default_corpus_name(), data=corpus_texts(), config=config
    )
    print(
        f"{'reused' if trained.reused else 'trained'} SAE {trained.path} (the {recipe}: {config})"
    )
    return trained.sae, site


if __name__ == "__main__":
    main()
