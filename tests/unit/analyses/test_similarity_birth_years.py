"""tutorials/gpu/birth_years.py runs on CPU with a tiny causal LM saved to a folder."""

import importlib.util
import json

import numpy as np
import pytest
import torch
from helpers.paths import REPO
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

from geomlens.data import stimuli

SCRIPT = REPO / "tutorials" / "gpu" / "birth_years.py"


def _load_script():
    spec = importlib.util.spec_from_file_location("birth_years", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tiny_lm_folder(tmp_path_factory):
    """A word-level tokenizer that knows the names, the years and the prompt's words, and a
    2-layer GPT-2 of width 32 over it, saved like a Hugging Face checkpoint."""
    words = [
        "<pad>",
        "<unk>",
        "<eos>",
        "was",
        "born",
        "in",
        "question",
        "who",
        "closest",
        "to",
        "answer",
        ":",
        "?",
        ".",
    ]
    names = [n.lower() for n in stimuli.first_names()[:12]]
    vocab = {w: i for i, w in enumerate(words + names + [str(y) for y in range(800, 1600)])}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.normalizer = normalizers.Lowercase()
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", unk_token="<unk>", eos_token="<eos>"
    )
    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=len(vocab), n_positions=128)
    folder = tmp_path_factory.mktemp("tiny-gpt2")
    GPT2LMHeadModel(config).eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_birth_year_protocol_runs_on_cpu(tiny_lm_folder, tmp_path):
    script = _load_script()
    out = tmp_path / "out"
    outcome = script.main(
        [
            "--model",
            str(tiny_lm_folder),
            "--device",
            "cpu",
            "--n-max",
            "4",
            "--n-step",
            "2",
            "--trials",
            "4",
            "--bins",
            "8",
            "--out",
            str(out),
        ]
    )
    result = outcome["result"]
    rows = result.tables["choice_accuracy"]
    assert {(r["test"], r["n"]) for r in rows} == {
        (t, n) for t in ("similarity", "identification") for n in (2, 4)
    }
    assert all(r["trials"] == 4 for r in rows)
    assert result["logits.first_token_options"] == 0
    summary = json.loads((out / "birth_years_fits.json").read_text())
    fits = summary["fits"]
    assert [p["n"] for p in summary["luce_prediction"]] == [2, 4]
    for p in summary["luce_prediction"]:
        assert 0 < p["p_similarity"] <= 1 and 0 < p["p_identification"] <= 1
    assert [f["family"] for f in fits] == list(script.FAMILIES)
    assert sum(f["chosen"] for f in fits) == 1
    assert (out / "birth_years.png").stat().st_size > 5_000
    assert json.loads((out / "birth_years.json").read_text())["analysis"] == "similarity"
    verdict = summary["verdict"]
    assert verdict["text"] == outcome["verdict"]["text"] and verdict["text"]
    assert verdict["resolved"] == np.isfinite(verdict["epsilon"])
    for row in rows:
        assert row["chance"] == pytest.approx(1 / row["n"])


def _rows(accuracies, low, high):
    return [
        {"test": "similarity", "n": n, "accuracy": a, "chance": 1 / n, "ci_low": lo, "ci_high": hi}
        for n, a, lo, hi in zip((2, 4), accuracies, low, high)
    ]


def _fits(epsilons, aics):
    chosen = int(np.argmin(aics))
    return [
        {"family": f, "epsilon": e, "half_width": e, "delta": 0.1, "aic": a, "chosen": k == chosen}
        for k, (f, e, a) in enumerate(zip(("step", "linear", "exponential"), epsilons, aics))
    ]


@pytest.mark.parametrize(
    "accuracy, fits, resolved, says",
    [
        # intervals reaching chance: no ε, whatever the fits say (a NaN or 531 years)
        (_rows([0.52, 0.26], [0.47, 0.23], [0.57, 0.29]), _fits([531, 3, 7], [1, 5, 6]),
         False, "too close to chance"),
        (_rows([0.51, 0.25], [0.45, 0.22], [0.56, 0.28]), _fits([np.nan] * 3, [1, 2, 3]),
         False, "too close to chance"),
        # above chance, but the best half-width lies beyond the distances measured
        (_rows([0.70, 0.45], [0.65, 0.40], [0.75, 0.50]), _fits([2000, 80, 90], [1, 9, 9]),
         False, "outside the distances measured"),
        # above chance, two families fit as well and disagree fourfold
        (_rows([0.70, 0.45], [0.65, 0.40], [0.75, 0.50]), _fits([40, 160, 90], [1, 2, 9]),
         False, "families fitting equally well"),
        (_rows([0.70, 0.45], [0.65, 0.40], [0.75, 0.50]), _fits([70, 90, 300], [1, 2, 9]),
         True, "resolution ε = 70.0 years, half-width 70.0 years"),
    ],
)  # fmt: skip
def test_the_verdict_says_whether_a_resolution_was_read(accuracy, fits, resolved, says):
    script = _load_script()
    verdict = script.resolution_verdict(accuracy, fits, np.arange(0, 800, 20.0))
    assert verdict["resolved"] is resolved
    assert says in verdict["text"]
    assert np.isfinite(verdict["epsilon"]) == resolved


def test_n_stops_at_the_single_token_names_there_are(tiny_lm_folder, tmp_path, capsys):
    script = _load_script()
    outcome = script.main(
        ["--model", str(tiny_lm_folder), "--device", "cpu", "--n-max", "40", "--n-step", "10",
         "--trials", "1", "--bins", "6", "--out", str(tmp_path)]
    )  # fmt: skip
    assert "n goes up to 12 instead of 40" in capsys.readouterr().out
    assert [p["n"] for p in outcome["luce_prediction"]] == [2, 12]
