"""Bilingual abstraction under local linearisation: the abstraction paper's LLM protocol.

Translation concepts (concept = the language, context = the word pair: ``u_w = h(L2 word) −
h(L1 word)``) over 15 language pairs of English, Spanish, French, German, Italian and
Portuguese (68-96 word pairs each, shipped with geomlens). The MLP activation of the
penultimate layer (the gate branch of a gated MLP) is replaced by the identity and by its
tangent at the mean pre-activation (``adapter.linearize``), and α and the cross-context probe
accuracy (CCGP) are measured with and without it, with the LM-loss cost. The paper reports,
on Gemma 4 E2B with 18 language-pair concepts of 80 pairs: mean α 0.207 → 0.242 (18/18
concepts up), probe accuracy 94.4% → 95.3% (17/18 up or equal). Each mode's line gives the
mean α change with a 95% paired bootstrap interval over concepts, so a change within noise
reads as such. See docs/abstraction.md.

    python tutorials/gpu/bilingual_abstraction.py --model google/gemma-2-2b --device cuda
    python tutorials/gpu/bilingual_abstraction.py --model PATH --device cpu --pairs en-es \
        --max-word-pairs 6 --calibration-texts 4                            # tiny, on CPU

Writes ``bilingual_abstraction_{mode}.json`` / ``.png`` per mode and
``bilingual_abstraction.txt`` (the comparison with the paper) into ``--out``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import geomlens as gl
from geomlens.atomic_files import atomic_write_text
from geomlens.data.corpus import corpus_split
from geomlens.experiments.causal_lm import (
    LINEARISATION_MODES,
    gated_mlp_linearisation,
    linearisation_summary,
    lm_loss_cost,
)

#: The paper's numbers (Gemma 4 E2B, 18 concepts): α base → linearised, concepts up, CCGP.
PAPER = {"alpha_base": 0.207, "alpha_linearized": 0.242, "up": "18/18", "ccgp": (0.944, 0.953)}


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="HF model name or local folder.")
    parser.add_argument("--device", default="cuda", help="cuda, cuda:1, cpu, ...")
    parser.add_argument("--dtype", default=None, help="float32 (default), bfloat16, float16.")
    parser.add_argument("--backend", default="nnsight", choices=("nnsight", "transformer-lens"))
    parser.add_argument(
        "--pairs", nargs="*", default=None, help="Language pairs such as en-es (default: all 15)."
    )
    parser.add_argument("--max-word-pairs", type=int, default=None, help="Word pairs per task.")
    parser.add_argument(
        "--layers", type=int, nargs="*", default=None, help="Layers to linearise (penultimate)."
    )
    parser.add_argument(
        "--mode", nargs="+", default=list(LINEARISATION_MODES), choices=LINEARISATION_MODES
    )
    parser.add_argument(
        "--calibration-texts", type=int, default=64, help="Paragraphs giving x0 (tangent)."
    )
    parser.add_argument(
        "--cost-texts", type=int, default=None, help="Held-out paragraphs for the LM-loss cost."
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--out", type=Path, default=Path("out"))
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse_arguments(argv)
    adapter = gl.load(args.model, backend=args.backend, device=args.device, dtype=args.dtype)
    results = gated_mlp_linearisation(
        adapter,
        modes=args.mode,
        pairs=args.pairs,
        max_word_pairs=args.max_word_pairs,
        layers=args.layers,
        calibration_texts=args.calibration_texts,
        batch_size=args.batch_size,
        progress=True,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    lines = [f"{args.model}:"]
    costs = {}
    for mode, result in results.items():
        result.to_json(args.out / f"bilingual_abstraction_{mode}.json")
        gl.plot(result, args.out / f"bilingual_abstraction_{mode}.png")
        cost = lm_loss_cost(
            adapter,
            layers=args.layers,
            mode=mode,
            calibration_texts=args.calibration_texts,
            texts=None if args.cost_texts is None else corpus_split("heldout", args.cost_texts),
        )
        lines.append(
            "  " + linearisation_summary(result)["text"] + f"; on {cost['texts']:.0f} held-out "
            f"paragraphs ({cost['tokens']:.0f} tokens) LM loss {cost['lm_loss_base']:.3f} → "
            f"{cost['lm_loss_linearized']:.3f} nats/token ({cost['lm_loss_change']:+.3f})"
        )
        costs[mode] = cost
    lines.append(
        f"  paper (Gemma 4 E2B, identity): mean α {PAPER['alpha_base']} → "
        f"{PAPER['alpha_linearized']}, {PAPER['up']} concepts up; CCGP {PAPER['ccgp'][0]} → "
        f"{PAPER['ccgp'][1]}, 17/18 up or equal"
    )
    report = "\n".join(lines) + "\n"
    atomic_write_text(args.out / "bilingual_abstraction.txt", report)
    print(report, end="")
    return {"results": results, "lm_loss_cost": costs}


if __name__ == "__main__":
    main()
