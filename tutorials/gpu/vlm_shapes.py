"""Which shape is closest to the red cross? The seed paper's VLM task, scored by option logits.

Each image (drawn by geomlens.data.shapes, nothing downloaded) has a circle, a square, a
triangle and a star in the four corners and a red cross between them. The model reads the image
and the question; its next-token probabilities of the four shape names, renormalised over them,
are its choice probabilities (``similarity`` in behavioural mode, read at the ``logits`` site).
The script reports p_S^4 (the mean probability of the right shape), the argmax accuracy, the
accuracy against the distance from the cross to its nearest shape, and the resolution scale
beyond which accuracy drops (half way to chance; see docs/vision.md). The paper finds a
model-specific scale for gemma-3-12b and Qwen2.5-VL-7B, as for birth years in LLMs.

    python tutorials/gpu/vlm_shapes.py --model Qwen/Qwen2.5-VL-7B-Instruct --device cuda
    python tutorials/gpu/vlm_shapes.py --model google/gemma-3-12b-it --device cuda
    python tutorials/gpu/vlm_shapes.py --model PATH --device cpu --trials 24 --size 32   # tiny

Writes ``vlm_shapes.json`` (the similarity result), ``vlm_shapes_profile.json`` (accuracy by
distance, resolution scale) and ``vlm_shapes.png`` into ``--out``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

import geomlens as gl
from geomlens.atomic_files import atomic_save_figure, atomic_write_text
from geomlens.data.shapes import SHAPES, draw_scene, shapes_scenes
from geomlens.experiments.vlm_shapes import CHANCE, ShapesOutcome, score_shapes

QUESTION = (
    "Which shape is closest to the red cross: circle, square, triangle or star? "
    "Answer with one word."
)


def prompt_and_prefix(processor: object) -> tuple[str, str]:
    """The text beside the image and what precedes an answer token.

    With a chat template the question is a user turn holding the image, and the answer starts
    the assistant's turn (no leading space); otherwise the image placeholder, the question and
    "Answer:" (answers after a space).
    """
    if getattr(processor, "chat_template", None):
        messages = [
            {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": QUESTION}]}
        ]
        prompt = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return prompt, ""
    image_token = getattr(processor, "image_token", "<image>")
    return f"{image_token} {QUESTION} Answer:", " "


def check_distinct_first_tokens(tokenizer: object, prefix: str) -> None:
    firsts = {}
    for shape in SHAPES:
        ids = tokenizer(prefix + shape, add_special_tokens=False)["input_ids"]
        firsts.setdefault(ids[0], []).append(shape)
    shared = [names for names in firsts.values() if len(names) > 1]
    if shared:
        raise SystemExit(
            f"The shapes {shared} start with the same token for this tokenizer, so their first "
            "token cannot tell them apart; this model cannot be scored by option logits here."
        )


def plot(outcome: ShapesOutcome, scene_image: object, path: Path, model: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (ax_scene, ax_acc) = plt.subplots(1, 2, figsize=(10, 4))
    ax_scene.imshow(np.asarray(scene_image))
    ax_scene.set_axis_off()
    ax_scene.set_title("an example scene")
    rows = outcome.profile
    distance = [r["distance"] for r in rows]
    ax_acc.plot(distance, [r["expected_accuracy"] for r in rows], "o-", label="mean D of right")
    ax_acc.plot(distance, [r["argmax_accuracy"] for r in rows], "s--", label="argmax accuracy")
    ax_acc.axhline(CHANCE, color="grey", lw=0.8, ls=":", label="chance 1/4")
    if np.isfinite(outcome.resolution_scale):
        ax_acc.axvline(outcome.resolution_scale, color="crimson", lw=1, label="resolution scale")
    ax_acc.set_xlabel("distance from the cross to the nearest shape (image sides)")
    ax_acc.set_ylabel("accuracy")
    ax_acc.set_ylim(0, 1.02)
    ax_acc.legend(fontsize=7)
    figure.suptitle(f"shapes task · {model}")
    figure.tight_layout()
    atomic_save_figure(figure, path, dpi=120)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="Qwen/Qwen2.5-VL-7B-Instruct", help="HF name or path.")
    parser.add_argument("--device", default="cuda", help="cuda, cpu, ...")
    parser.add_argument("--dtype", default="bfloat16", help="float32, bfloat16, float16.")
    parser.add_argument("--trials", type=int, default=400, help="Scenes (one question each).")
    parser.add_argument("--size", type=int, default=448, help="Image side in pixels.")
    parser.add_argument("--margin", type=float, default=0.05, help="Least gap to 2nd shape.")
    parser.add_argument("--bins", type=int, default=8, help="Distance bins (equal counts).")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("vlm_shapes"), help="Output folder.")
    args = parser.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("--device cuda was asked for but torch sees no GPU; use --device cpu.")

    adapter = gl.load(args.model, device=args.device, dtype=args.dtype)  # model + processor
    if adapter.processor is None or "logits" not in adapter.sites():
        raise SystemExit(
            f"{args.model} did not load as a vision-language model with an LM head (no "
            "processor or no logits); give an image-text-to-text checkpoint."
        )
    prompt, prefix = prompt_and_prefix(adapter.processor)
    check_distinct_first_tokens(adapter.tokenizer, prefix)
    scenes = shapes_scenes(args.trials, seed=args.seed, margin=args.margin)
    outcome = score_shapes(
        adapter,
        scenes,
        prompt=prompt,
        size=args.size,
        option_prefix=prefix,
        batch_size=args.batch_size,
        bins=args.bins,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    outcome.result.to_json(args.out / "vlm_shapes.json")
    summary = {"model": args.model, **outcome.metrics, "profile": outcome.profile}
    atomic_write_text(args.out / "vlm_shapes_profile.json", json.dumps(summary, indent=2) + "\n")
    plot(outcome, draw_scene(scenes[0], args.size), args.out / "vlm_shapes.png", args.model)

    print(f"model {args.model}: {len(scenes)} scenes of {args.size} px")
    print(f"  p_S^4 (mean D of the right shape) = {outcome.metrics['expected_accuracy']:.3f}")
    print(f"  argmax accuracy = {outcome.metrics['argmax_accuracy']:.3f} (chance {CHANCE:.2f})")
    for row in outcome.profile:
        print(
            f"  nearest distance {row['distance']:.3f}: D {row['expected_accuracy']:.3f}, "
            f"argmax {row['argmax_accuracy']:.3f} ({row['count']} scenes)"
        )
    print(f"resolution scale = {outcome.resolution_scale:.3f} image sides (NaN: no drop seen)")
    return {"outcome": outcome, "summary": summary}


if __name__ == "__main__":
    main()
