"""Bilingual abstraction under local linearisation: the abstraction paper's LLM protocol.

Translation concepts (concept = the language, context = the word pair: ``u_w = h(L2 word) −
h(L1 word)``) over 15 language pairs of English, Spanish, French, German, Italian and
Portuguese (68-96 word pairs each, shipped with geomlens). The MLP activation of the
penultimate layer is replaced by the identity (``adapter.linearize``), and α and the
cross-context probe accuracy (CCGP) are measured with and without it. The paper reports, on
Gemma 4 E2B with 18 language-pair concepts of 80 pairs: mean α 0.207 → 0.242 (18/18 concepts
up), probe accuracy 94.4% → 95.3% (17/18 up or equal). See docs/abstraction.md.

    python tutorials/gpu/bilingual_abstraction.py --model google/gemma-2-2b --device cuda
    python tutorials/gpu/bilingual_abstraction.py --model PATH --device cpu --pairs en-es \
        --max-word-pairs 6                                                   # tiny, on CPU

Writes ``bilingual_abstraction.json`` (the linearization-effect result) and
``bilingual_abstraction.png`` into ``--out``, and prints the comparison with the paper.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import geomlens as gl
from geomlens.data.concepts import bilingual_concepts
from geomlens.results import atomic_write_text

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
    parser.add_argument("--mode", default="identity", choices=("identity", "tangent"))
    parser.add_argument(
        "--sweep",
        action="store_true",
        help="Measure every layer's output (slow on big models); default: the linearised "
        "layer's output and the last layer's.",
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--out", type=Path, default=Path("out"))
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> gl.Result:
    args = parse_arguments(argv)
    adapter = gl.load(args.model, backend=args.backend, device=args.device, dtype=args.dtype)
    layers = args.layers if args.layers else [adapter.n_layers - 2]
    sites = None
    if not args.sweep:
        deepest = max(layer % adapter.n_layers for layer in layers)
        last = adapter.n_layers - 1
        sites = [f"blocks.{layer}.hook_resid_post" for layer in sorted({deepest, last})]
    data = bilingual_concepts(args.pairs, max_word_pairs=args.max_word_pairs)
    result = gl.run(
        "linearization-effect",
        adapter,
        data,
        site=sites,
        layers=layers,
        mode=args.mode,
        batch_size=args.batch_size,
        progress=True,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    result.to_json(args.out / "bilingual_abstraction.json")
    gl.plot(result, args.out / "bilingual_abstraction.png")
    m = result.metrics
    n_tasks = int(m["summary.n_tasks"])
    site = result.tables["linearization"][0]["summary_site"]
    report = (
        f"{args.model}: layers {layers} → {args.mode}; measured at {site}\n"
        f"  mean α {m['summary.alpha_base']:.3f} → {m['summary.alpha_linearized']:.3f}, "
        f"{int(m['summary.tasks_alpha_up'])}/{n_tasks} concepts up "
        f"(paper: {PAPER['alpha_base']} → {PAPER['alpha_linearized']}, {PAPER['up']})\n"
        f"  CCGP {m['summary.ccgp_base']:.3f} → {m['summary.ccgp_linearized']:.3f}, "
        f"{int(m['summary.tasks_ccgp_up_or_equal'])}/{n_tasks} up or equal "
        f"(paper: {PAPER['ccgp'][0]} → {PAPER['ccgp'][1]}, 17/18)\n"
        + "".join(f"  {k} = {v:.4g}\n" for k, v in m.items() if k.startswith("fidelity."))
    )
    atomic_write_text(args.out / "bilingual_abstraction.txt", report)
    print(report, end="")
    return result


if __name__ == "__main__":
    main()
