"""Rows the analyses' examples share (each folder's ``example.py`` picks its own), over the
vocabulary of the contract checks' tiny GPT-2 (d_model 32). Rows are plain mappings so that a
check can hand them over as a list, a generator, a .jsonl file or a ``datasets`` dataset."""

from __future__ import annotations

from typing import Any

__all__ = ["concept_rows", "condition_rows", "coordinate_rows", "corpus_rows", "tiny_sae"]

MALE = ("king", "man", "boy")
FEMALE = ("queen", "woman", "girl")
TEMPLATES = ("the {} sat on the mat .", "a {} was in the house .", "this {} is old .")
ADJECTIVES = ("big", "small")


def corpus_rows(count: int = 22) -> list[dict[str, Any]]:
    """Plain texts of varied length over the tiny tokenizer's vocabulary."""
    words = [
        "the",
        "quick",
        "brown",
        "fox",
        "jumps",
        "over",
        "the",
        "lazy",
        "dog",
        "and",
        "a",
        "cat",
        "sat",
        "on",
        "the",
        "mat",
    ]
    return [{"text": " ".join(words[: 3 + (i * 5) % 12])} for i in range(count)]


def concept_rows() -> list[dict[str, Any]]:
    """A binary concept (gender) seen in three contexts (sentence templates), 6 rows per cell."""
    rows = []
    for context, template in enumerate(TEMPLATES):
        for concept, words in enumerate((MALE, FEMALE)):
            for word in words:
                for adjective in ADJECTIVES:
                    text = template.format(f"{adjective} [[{word}]]")
                    rows.append({"text": text, "concept": concept, "context": f"c{context}"})
    return rows


def coordinate_rows() -> list[dict[str, Any]]:
    """Number words with their value as the coordinate, in two templates."""
    words = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
    templates = ("it happened in the year [[{}]] .", "the cat sat on the mat in year [[{}]] .")
    return [
        {"text": template.format(word), "coordinate": value}
        for template in templates
        for value, word in enumerate(words, start=1)
    ]


def condition_rows() -> list[dict[str, Any]]:
    """Calibration and held-out text and one out-of-distribution condition (shuffled words)."""
    texts = [row["text"] for row in corpus_rows(24)]
    rows = [{"text": t, "condition": "calibration"} for t in texts[:12]]
    rows += [{"text": t, "condition": "heldout"} for t in texts[12:]]
    rows += [{"text": " ".join(sorted(t.split())), "condition": "sorted_words"} for t in texts[12:]]
    return rows


def tiny_sae() -> dict[str, Any]:
    """A seeded sae-lens SAE (width 64) on the tiny GPT-2's last residual stream."""
    import torch
    from sae_lens.saes.sae import SAEMetadata
    from sae_lens.saes.standard_sae import StandardSAE, StandardSAEConfig

    torch.manual_seed(0)
    config = StandardSAEConfig(
        d_in=32, d_sae=64, metadata=SAEMetadata(hook_name="blocks.1.hook_resid_post")
    )
    sae = StandardSAE(config)
    with torch.no_grad():
        for parameter in sae.parameters():
            parameter.normal_(0.0, 0.3)
    return {"sae": sae.eval()}
