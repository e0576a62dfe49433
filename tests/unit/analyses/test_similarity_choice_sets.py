"""Behavioural similarity on real-tokenizer terms: labelled options in every rotation, shipped
choice sets as default data (CLI included), chat templates, chance levels and intervals."""

import numpy as np
import pytest
from helpers.tiny_models import tiny_llama
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
from transformers import LlamaForCausalLM, PreTrainedTokenizerFast
from typer.testing import CliRunner

import geomlens as gl
from geomlens.analyses.similarity.choices import _by_trial, _trial_bootstrap, choice_accuracy
from geomlens.data import choice_sets, stimuli
from geomlens.data.dataset import Dataset
from geomlens.data.prompts import choice_prompts
from geomlens.models.nnsight import NNsightAdapter

CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}<assistant> {% endif %}"
)


def _tokenizer(chat: bool, adds_bos: bool = False) -> PreTrainedTokenizerFast:
    """Word-level: the prompt words, letters a-d, the months, digits; optional chat template."""
    words = [
        "<pad>",
        "<unk>",
        "<bos>",
        "<eos>",
        "<user>",
        "<assistant>",
        "which",
        "year",
        "is",
        "closest",
        "to",
        "answer",
        "reply",
        "with",
        "the",
        "only",
        "month",
        ":",
        "?",
        ".",
        ",",
        "or",
        "a",
        "b",
        "c",
        "d",
    ]
    words += [m.lower() for m in stimuli.shipped_lines("months.txt")]
    words += [str(y) for y in range(1500, 2001, 10)]
    vocab = {w: i for i, w in enumerate(dict.fromkeys(words))}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.normalizer = normalizers.Lowercase()
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split("<bos>", "isolated"), pre_tokenizers.Whitespace()]
    )
    if adds_bos:
        backend.post_processor = processors.TemplateProcessing(
            single="<bos> $A", special_tokens=[("<bos>", vocab["<bos>"])]
        )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        unk_token="<unk>",
        bos_token="<bos>",
        eos_token="<eos>",
    )
    if chat:
        tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def _tiny_llama(tokenizer: PreTrainedTokenizerFast) -> LlamaForCausalLM:
    return tiny_llama(tokenizer=tokenizer)[0]


# -- rendering --------------------------------------------------------------------------------


def test_letter_labels_score_the_letters_and_rotations_show_every_position():
    data = choice_prompts(
        [1700, 1760, 1910, 1950], candidates=(3,), trials=2, labels="letters", rotations=True
    )
    assert len(data.texts) == 2 * 2 * 3  # two tests x two trials x three rotations
    assert data.texts[0].splitlines()[1].startswith("A: ")
    assert all(list(o) == [" A", " B", " C"] for o in data.columns["options"])
    trial = data.columns["trial"]
    for t in np.unique(trial):
        shown = [data.columns["option_coordinates"][k] for k in np.nonzero(trial == t)[0]]
        # every value at every position once: the columns of the rotations are permutations
        assert all(len(set(position)) == 3 for position in zip(*shown))
        assert all(sorted(s) == sorted(shown[0]) for s in shown)


def test_chat_template_wraps_the_question_and_drops_the_doubled_bos():
    tokenizer = _tokenizer(chat=True, adds_bos=True)
    data = choice_sets.shipped_choice_set("years", tokenizer=tokenizer, trials=1)
    first = data.texts[0]
    assert first.startswith("<user> Which year is closest to")
    assert first.rstrip().endswith(f"{choice_sets.CHAT_INSTRUCTION} <assistant>")
    assert list(data.columns["options"][0]) == ["A", "B"]  # the assistant's turn starts afresh
    assert set(data.columns["prompt_format"]) == {"chat"}
    ids = tokenizer(first)["input_ids"]
    assert ids.count(tokenizer.bos_token_id) == 1
    plain = choice_sets.shipped_choice_set("years", tokenizer=_tokenizer(chat=False), trials=1)
    assert set(plain.columns["prompt_format"]) == {"plain"}
    assert plain.texts[0].endswith("Answer:")
    with pytest.raises(ValueError, match="chat template"):
        choice_sets.shipped_choice_set("years", tokenizer=_tokenizer(chat=False), chat=True)
    with pytest.raises(ValueError, match="No shipped choice set"):
        choice_sets.shipped_choice_set("colours")


# -- maths on planted choices ------------------------------------------------------------------


def _planted(data, g, position_bias):
    """Option logits log g(d) + a preference for the option listed first."""
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(len(data), 30))
    ids = []
    for row, (probe, coordinates) in enumerate(
        zip(data.columns["coordinate"], data.columns["option_coordinates"])
    ):
        d = np.abs(np.asarray(coordinates, float) - probe)
        picked = rng.choice(30, len(d), replace=False)
        logits[row, picked] = np.log(g(d)) + rng.normal()
        logits[row, picked[0]] += position_bias
        ids.append(picked.tolist())
    columns = dict(data.columns)
    columns["option_token_ids"] = np.empty(len(ids), dtype=object)
    columns["option_token_ids"][:] = ids
    return {"logits": logits}, Dataset(num_rows=len(ids), columns=columns)


@pytest.mark.parametrize("rotations", [True, False])
def test_rotations_cancel_a_position_preference_in_the_recovered_g(rotations):
    g = lambda d: 0.2 + 0.8 * np.exp(-d / 60.0)  # noqa: E731
    data = choice_prompts(
        range(1500, 2001, 10), candidates=(2, 3), trials=40, labels="letters",
        rotations=rotations, seed=2,
    )  # fmt: skip
    activations, planted = _planted(data, g, position_bias=2.0)
    result = gl.run("similarity", activations, planted, mode="behavioural", progress=False)
    rows = result.tables["g_of_d"]
    d = np.array([r["distance"] for r in rows])
    error = np.max(np.abs(np.log([r["mean"] for r in rows]) - np.log(g(d) / g(0))))
    preference = {r["n"]: r["first_option_share"] for r in result.tables["position_preference"]}
    assert preference[2] > 0.75  # the planted preference is seen
    if rotations:
        assert error < 1e-6  # balanced positions: the bias drops out of the least squares
    else:
        assert error > 0.05


def test_accuracy_rows_give_chance_and_a_trial_clustered_interval():
    # A model that always picks the option listed first, in both rotations of each trial:
    # every trial scores exactly 1/2, so its bootstrap is a point, while the prompts alone vary.
    trials = []
    rng = np.random.default_rng(0)
    for _ in range(30):
        d = rng.permutation([0.0, 5.0])
        trials += [("identification", np.array([1.0, 0.0]), d),
                   ("identification", np.array([1.0, 0.0]), d[::-1])]  # fmt: skip
    ids = np.repeat(np.arange(30), 2)
    values = np.array([p[d == 0][0] for _, p, d in trials])
    clustered = _trial_bootstrap(_by_trial(ids.tolist(), values), np.random.default_rng(0))
    assert clustered[1] - clustered[0] < 1e-12
    unclustered = _trial_bootstrap(_by_trial(list(range(60)), values), np.random.default_rng(0))
    assert unclustered[1] - unclustered[0] > 0.2
    (row,) = choice_accuracy(trials, ids.tolist())
    assert row["chance"] == 0.5 and row["accuracy"] == pytest.approx(0.5)
    # the interval is never narrower than the standard error shown beside it
    assert row["ci_high"] - row["ci_low"] >= 2 * 1.96 * row["se"]
    assert row["above_chance"] is False
    assert row["trials"] == 30 and row["prompts"] == 60
    # a model that is right 80% of the time in expectation: interval above chance, covering 0.8
    good = [("similarity", np.array([0.8, 0.2]), np.array([1.0, 9.0]))] * 20
    (row,) = choice_accuracy(good + [("similarity", np.array([0.7, 0.3]), np.array([1.0, 9.0]))])
    assert row["above_chance"] and row["ci_low"] <= row["accuracy"] <= row["ci_high"]


@pytest.mark.parametrize("seed", range(20))
def test_chance_level_choices_over_few_trials_contain_chance(seed):
    # A position-biased model at chance (it prefers the first-listed option by a random amount,
    # plus noise) over two trials, each in both rotations: the rotations average each trial out
    # to about one half, so the two trial means nearly agree and a bootstrap over them alone
    # is a sliver that misses 1/2 by the seed's luck. The interval must contain chance.
    rng = np.random.default_rng(seed)
    first = rng.uniform(0.6, 0.95)
    trials, ids = [], []
    for trial in range(2):
        d = rng.permutation([0.0, 5.0])
        for order in (d, d[::-1]):
            p_first = float(np.clip(first + rng.normal(0, 0.01), 0.01, 0.99))
            trials.append(("similarity", np.array([p_first, 1 - p_first]), order))
            ids.append(trial)
    (row,) = choice_accuracy(trials, ids, seed=seed)
    assert row["ci_low"] <= 0.5 <= row["ci_high"], row
    assert row["above_chance"] is False
    right = np.array([p[d == d.min()][0] for _, p, d in trials])
    bootstrap = _trial_bootstrap(_by_trial(ids, right), rng)
    assert bootstrap[1] - bootstrap[0] < 0.05  # what the interval was before: a sliver


# -- end to end -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def chat_llama_folder(tmp_path_factory):
    tokenizer = _tokenizer(chat=True)
    folder = tmp_path_factory.mktemp("chat-llama")
    _tiny_llama(tokenizer).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_cli_runs_behavioural_similarity_on_its_default_data(chat_llama_folder, tmp_path):
    from geomlens.cli import app

    out = tmp_path / "behavioural.json"
    outcome = CliRunner().invoke(
        app,
        ["run", "similarity", "--model", str(chat_llama_folder), "--option", "mode=behavioural",
         "--out", str(out)],
    )  # fmt: skip
    assert outcome.exit_code == 0, outcome.output
    result = gl.Result.from_json(out)
    assert result.tables["prompts"] == [{"labels": "letters", "prompt_format": "chat"}]
    for row in result.tables["choice_accuracy"]:
        assert row["chance"] == pytest.approx(1 / row["n"])
        assert row["ci_low"] <= row["accuracy"] <= row["ci_high"]
        assert row["trials"] == 12 and row["prompts"] == 12 * row["n"]
    assert {(r["test"], r["n"]) for r in result.tables["choice_accuracy"]} == {
        (t, n) for t in ("similarity", "identification") for n in (2, 4)
    }
    assert result["logits.first_token_options"] == 0


def test_months_are_scored_by_name_on_a_circle(chat_llama_folder):
    tokenizer = _tokenizer(chat=False)
    adapter = NNsightAdapter(_tiny_llama(tokenizer), tokenizer=tokenizer)
    analysis = gl.analysis_class("similarity")(mode="behavioural", choice_set="months")
    data = analysis.default_data(adapter)
    assert data.columns["options"][0][0].startswith(" ")
    result = gl.run("similarity", adapter, data, mode="behavioural", progress=False)
    assert result.tables["metric"] == [{"metric": "circular:12", "from": "data"}]
    assert max(r["distance"] for r in result.tables["g_of_d"]) <= 6
    assert result.tables["prompts"] == [{"labels": "values", "prompt_format": "plain"}]


def test_an_option_the_tokenizer_does_not_know_is_refused():
    tokenizer = _tokenizer(chat=False)
    adapter = NNsightAdapter(_tiny_llama(tokenizer), tokenizer=tokenizer)
    data = choice_prompts(range(1500, 1600, 10), trials=2, labels="numbers")
    with pytest.raises(ValueError, match="unknown token"):
        gl.run("similarity", adapter, data, mode="behavioural", progress=False)


def test_the_reports_helpers_read_p_s_and_p_i_against_chance(chat_llama_folder):
    from geomlens.experiments.causal_lm import behavioural_choices, choice_summary

    adapter = gl.load(str(chat_llama_folder), device="cpu")
    result = behavioural_choices(adapter, candidates=(2,), trials=6)
    summary = choice_summary(result)
    assert summary["p_similarity"] == result["logits.p_similarity"]
    assert summary["p_identification"] == result["logits.p_identification"]
    assert summary["prompts"] == [{"labels": "letters", "prompt_format": "chat"}]
    assert "chance 0.50" in summary["text"] and summary["text"].startswith("p_S^2 = ")
