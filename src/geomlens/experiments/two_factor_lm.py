"""A tiny GPT-2 trained from scratch on templated sentences with two binary factors, saved as a
series of Hugging Face checkpoints: a real training run that needs no download.

Sentences such as ``yesterday the king was tall and he was kind .`` carry two binary factors
that the next-token loss rewards: the noun's gender (the pronoun that follows agrees with it)
and the tense (``today … is`` / ``yesterday … was``), which the first word sets before the noun,
so that a causal model's representation of the noun can depend on it. :func:`train` writes
``OUT/checkpoint-N/`` folders (weights, config, tokenizer and a ``trainer_state.json`` with the
step), which ``gl.series(OUT)`` reads like a Hugging Face Trainer's output. :func:`concept_data`
is the probe set a sweep measures: the noun marked as ``[[span]]``, ``concept`` its gender,
``context`` the tense.
"""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from geomlens.atomic_files import atomic_write_text
from geomlens.experiments.checkpoint_steps import spec_steps
from geomlens.experiments.word_tokenizer import word_level_tokenizer

MALE = ("king", "man", "boy", "father", "prince", "uncle", "brother", "son")
FEMALE = ("queen", "woman", "girl", "mother", "princess", "aunt", "sister", "daughter")
ADJECTIVES = ("tall", "kind", "old", "young", "happy", "tired", "brave", "quiet")
#: Tense: the opening word and the verb it calls for.
TENSES = {"present": ("today", "is"), "past": ("yesterday", "was")}


@dataclass(frozen=True)
class TinyLMConfig:
    """The run: a GPT-2 of ``layers`` blocks of width ``width``, AdamW at ``learning_rate``,
    ``steps`` batches of ``batch_size`` sentences; ``checkpoints`` chooses the saved steps."""

    layers: int = 2
    width: int = 32
    heads: int = 4
    steps: int = 240
    batch_size: int = 32
    learning_rate: float = 3e-3
    checkpoints: str = "every:12"
    seed: int = 0


def sentence(noun: str, tense: str, first: str, second: str) -> str:
    pronoun = "he" if noun in MALE else "she"
    opening, verb = TENSES[tense]
    return f"{opening} the {noun} {verb} {first} and {pronoun} {verb} {second} ."


def corpus() -> list[str]:
    """Every training sentence (16 nouns × 2 tenses × 8 × 7 adjective pairs)."""
    return [
        sentence(noun, tense, first, second)
        for noun in MALE + FEMALE
        for tense in TENSES
        for first, second in itertools.permutations(ADJECTIVES, 2)
    ]


def tokenizer() -> Any:
    """A word-level fast tokenizer over the corpus's words."""
    return word_level_tokenizer(sorted({w for s in corpus() for w in s.split()}))


def concept_data() -> dict[str, list[str]]:
    """Probe rows: ``today the [[noun]]`` / ``yesterday the [[noun]]`` for every noun;
    ``concept`` is the gender, ``context`` the tense (two contexts: α is the cosine of the two
    gender directions)."""
    rows: dict[str, list[str]] = {"text": [], "concept": [], "context": []}
    for tense, (opening, _) in TENSES.items():
        for noun in MALE + FEMALE:
            rows["text"].append(f"{opening} the [[{noun}]]")
            rows["concept"].append("male" if noun in MALE else "female")
            rows["context"].append(tense)
    return rows


def train(config: TinyLMConfig, out: str | Path) -> list[dict[str, Any]]:
    """Train and write ``out/checkpoint-N`` at the steps ``config.checkpoints`` keeps; return
    one ``{"label", "step", "loss"}`` per checkpoint (the loss of the batch before it)."""
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging as hf_logging

    folder = Path(out)
    if folder.exists() and any(folder.iterdir()):
        raise ValueError(f"{folder} is not empty; give an empty or new folder.")
    folder.mkdir(parents=True, exist_ok=True)
    words = tokenizer()
    torch.manual_seed(config.seed)
    model = GPT2LMHeadModel(
        GPT2Config(
            n_layer=config.layers,
            n_embd=config.width,
            n_head=config.heads,
            vocab_size=len(words),
            n_positions=32,
            bos_token_id=words.bos_token_id,
            eos_token_id=words.eos_token_id,
            pad_token_id=words.pad_token_id,
        )
    )
    optimiser = torch.optim.AdamW(model.parameters(), lr=config.learning_rate)
    kept = set(spec_steps(config.checkpoints, config.steps))
    saved: list[dict[str, Any]] = []
    quiet = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # one "Writing model shards" bar per checkpoint
    threads = torch.get_num_threads()
    # A model this small trains fastest on one thread (more only contend, ~10x slower on a
    # busy machine).
    torch.set_num_threads(1)
    try:
        _loop(config, model, optimiser, words, folder, kept, saved)
    finally:
        torch.set_num_threads(threads)
        if quiet:
            hf_logging.enable_progress_bar()
    return saved


def _loop(
    config: TinyLMConfig,
    model: Any,
    optimiser: torch.optim.Optimizer,
    words: Any,
    folder: Path,
    kept: set[int],
    saved: list[dict[str, Any]],
) -> None:
    sentences = corpus()
    shuffle = random.Random(config.seed)
    loss_value = float("nan")
    for step in range(config.steps + 1):
        if step in kept:
            label = f"checkpoint-{step}"
            model.eval()
            model.save_pretrained(folder / label)
            words.save_pretrained(folder / label)
            state = {"global_step": step, "log_history": [{"step": step, "loss": loss_value}]}
            atomic_write_text(folder / label / "trainer_state.json", json.dumps(state) + "\n")
            saved.append({"label": label, "step": step, "loss": loss_value})
        if step == config.steps:
            break
        model.train()
        batch = words(
            shuffle.sample(sentences, config.batch_size), return_tensors="pt", padding=True
        )
        labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
        loss = model(**batch, labels=labels).loss
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        loss_value = float(loss.detach())
