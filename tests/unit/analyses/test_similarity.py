"""similarity: stimulus sets and metrics, g(d) on planted representations, merging, and the
behavioural mode on planted option logits and on a tiny causal LM through both backends."""

import json

import numpy as np
import pytest
from helpers.planted_kernels import kernel_features
from helpers.tiny_models import tiny_gpt2

import geomlens as gl
from geomlens.analyses.similarity import Similarity
from geomlens.analyses.similarity.choices import recover_similarity
from geomlens.data import distances, stimuli
from geomlens.data.dataset import Dataset, as_dataset
from geomlens.data.prompts import choice_prompts
from geomlens.data.stimulus_files import load_stimuli
from geomlens.engine import stream
from geomlens.models.nnsight import NNsightAdapter
from geomlens.models.recorded import RecordedAdapter
from geomlens.models.transformer_lens import TransformerLensAdapter

SITE = "blocks.0.hook_resid_post"


# -- stimulus sets and metrics ----------------------------------------------------------------


def test_metrics_by_hand():
    assert distances.distance_matrix([1630, 1700, 1500])[0].tolist() == [0, 70, 130]
    assert distances.distance_matrix([10, 350, 180], "circular:360")[0].tolist() == [0, 20, 170]
    assert distances.distance_matrix([[0, 0], [3, 4]], "euclidean")[0, 1] == 5
    manhattan = distances.distance_matrix([[0, 0], [3, 4]], lambda a, b: np.abs(a - b).sum())
    assert manhattan[1, 0] == 7


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: distances.distance_matrix([1, 2], "circular:-3"), "positive number"),
        (lambda: distances.distance_matrix([1, 2], "cosine"), "Unknown metric 'cosine'"),
        (lambda: distances.distance_matrix([[1, 2], [3, 4]], "absolute"), "euclidean"),
        (lambda: stimuli.render("The year.", [1]), "'{value}' placeholder"),
        (lambda: stimuli.years(step=0), "step > 0"),
    ],
)
def test_bad_stimulus_input_says_what_would_be_right(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_shipped_sets_mark_their_stimulus_and_carry_a_metric():
    years = stimuli.years()
    assert len(stimuli.templates("years")) >= 3
    assert years.texts[0] == "It happened in the year [[1500]]."
    assert years.coordinates.min() == 1500 and years.coordinates.max() == 2000
    hue = stimuli.hue_circle()
    assert hue.metric == "circular:360" and "The wall was painted [[red]]." in hue.texts
    assert (
        hue.distances()[
            hue.texts.index("The wall was painted [[red]]."),
            hue.texts.index("The wall was painted [[rose]]."),
        ]
        == 30
    )
    assert stimuli.months().distances().max() == 6
    assert stimuli.weekdays().distances().max() == 3
    grid = stimuli.grid_positions(3)
    assert grid.coordinates.shape == (18, 2) and "Move the piece to [[c3]]." in grid.texts
    for stimulus_set in (years, hue, grid, stimuli.numbers()):
        assert all(text.count("[[") == 1 for text in stimulus_set.texts)


def test_load_users_stimuli_from_csv_and_jsonl(tmp_path):
    csv_path = tmp_path / "hues.csv"
    csv_path.write_text(
        "text,coordinate,metric\nA [[red]] car.,0,circular:360\nA [[rose]] car.,330,circular:360\n"
        "A [[green]] car.,120,circular:360\n"
    )
    loaded = load_stimuli(csv_path)
    assert loaded.metric == "circular:360"
    assert loaded.distances()[0, 1] == 30
    jsonl = tmp_path / "grid.jsonl"
    rows = [
        {"text": f"On [[{c}]].", "coordinate": xy} for c, xy in (("a1", [0, 0]), ("b2", [1, 1]))
    ]
    jsonl.write_text("\n".join(json.dumps(r) for r in rows))
    grid = load_stimuli(jsonl)
    assert grid.metric == "euclidean" and grid.distances()[0, 1] == pytest.approx(np.sqrt(2))
    bad = tmp_path / "bad.csv"
    bad.write_text("text,year\nx,1\n")
    with pytest.raises(ValueError, match="'text' and 'coordinate'"):
        load_stimuli(bad)


# -- representational mode -------------------------------------------------------------------


def test_cosine_profile_is_the_planted_kernel():
    x = np.arange(0.0, 60.0, 3.0)
    representations = kernel_features(x, "gaussian", 9.0, 0.2, features=8192)
    result = gl.run(
        "similarity",
        {SITE: representations.astype(np.float32)},
        {"coordinate": x},
        similarity="cosine",
        progress=False,
    )
    rows = result.tables["g_of_d"]
    d = np.array([r["distance"] for r in rows])
    planted = 0.8 * np.exp(-(d**2) / (2 * 9.0**2)) + 0.2
    np.testing.assert_allclose([r["mean"] for r in rows], planted, atol=5e-3)
    assert [r["count"] for r in rows][:2] == [19, 18]  # pairs 3 and 6 apart among 20 stimuli


def test_centred_cosine_and_template_averaging_by_hand():
    rng = np.random.default_rng(0)
    coordinates = np.array([1.0, 2.0, 4.0, 1.0, 2.0, 4.0])  # two templates of three stimuli
    rows = rng.normal(size=(6, 5))
    result = gl.run("similarity", {SITE: rows}, {"coordinate": coordinates}, progress=False)
    stimulus = (rows[:3] + rows[3:]) / 2
    centred = stimulus - stimulus.mean(0)
    unit = centred / np.linalg.norm(centred, axis=1, keepdims=True)
    cosine = unit @ unit.T
    got = {r["distance"]: r["mean"] for r in result.tables["g_of_d"]}
    assert got == pytest.approx({1.0: cosine[0, 1], 2.0: cosine[1, 2], 3.0: cosine[0, 2]})
    assert result.config["similarity"] == "centred-cosine"
    with_matrix = gl.run(
        "similarity",
        {SITE: rows},
        {"coordinate": coordinates},
        full_matrix=True,
        similarity="negative-distance",
        progress=False,
    )
    entry = with_matrix.tables["similarity_matrix"][2]
    assert entry["stimulus_a"] == 1.0 and entry["stimulus_b"] == 4.0
    assert entry["similarity"] == pytest.approx(-np.linalg.norm(stimulus[0] - stimulus[2]))


def test_merging_halves_equals_one_pass():
    x = np.repeat(np.arange(12.0), 2)
    representations = np.random.default_rng(1).normal(size=(24, 8)).astype(np.float32)
    adapter = RecordedAdapter({SITE: representations})
    dataset = as_dataset({"coordinate": x}, num_rows=24)
    whole, first, second = Similarity(), Similarity(), Similarity()
    stream([whole], adapter, dataset, batch_size=5, progress=False)
    stream([first], adapter, dataset, batch_size=4, rows=np.arange(0, 9), progress=False)
    stream([second], adapter, dataset, batch_size=6, rows=np.arange(9, 24), progress=False)
    second.merge(first)  # either order, either side
    assert whole.finalize().tables == second.finalize().tables


def test_too_few_stimuli_and_missing_coordinates_are_clear():
    with pytest.raises(ValueError, match="at least 3 distinct coordinates"):
        gl.run("similarity", {SITE: np.eye(4)}, {"coordinate": [1, 1, 2, 2]}, progress=False)
    with pytest.raises(ValueError, match="coordinate"):
        gl.run("similarity", {SITE: np.eye(4)}, progress=False)


# -- behavioural mode ------------------------------------------------------------------------


def _planted_choice_logits(g, trials, vocabulary=50, seed=0):
    """Recorded logits whose option tokens follow the Luce rule for ``g``: each option's logit
    is log g(d) plus a per-row constant; the other tokens are noise (renormalised away)."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(len(trials), vocabulary))
    token_ids = []
    for row, (probe, options) in enumerate(trials):
        ids = rng.choice(vocabulary, len(options), replace=False)
        logits[row, ids] = np.log(g(np.abs(np.asarray(options) - probe))) + rng.normal()
        token_ids.append(ids.tolist())
    return logits, token_ids


def _planted_choices(g, prompts) -> tuple[np.ndarray, Dataset]:
    """Logits of a planted behavioural similarity ``g`` on ``prompts``' choice trials, and the
    trials as data with each option's token ids."""
    trials = list(zip(prompts.columns["coordinate"], prompts.columns["option_coordinates"]))
    logits, token_ids = _planted_choice_logits(g, trials)
    columns = dict(prompts.columns)
    columns["option_token_ids"] = np.empty(len(token_ids), dtype=object)
    columns["option_token_ids"][:] = token_ids
    return logits, Dataset(num_rows=len(token_ids), columns=columns)


def test_behavioural_maths_recovers_the_planted_g_and_accuracy():
    g = lambda d: 0.3 + 0.7 * np.exp(-d / 4.0)  # noqa: E731
    prompts = choice_prompts(range(20), candidates=(2, 3, 5), trials=40, seed=3)
    probes = prompts.columns["coordinate"]
    options = prompts.columns["option_coordinates"]
    logits, data = _planted_choices(g, prompts)
    result = gl.run("similarity", {"logits": logits}, data, mode="behavioural", progress=False)
    rows = result.tables["g_of_d"]
    d = np.array([r["distance"] for r in rows])
    assert d[0] == 0  # identification trials put the probe itself among the options
    np.testing.assert_allclose([r["mean"] for r in rows], g(d) / g(0), rtol=1e-9)
    # p_S^n, p_I^n by hand from the planted g
    for n in (2, 3, 5):
        expected = {"similarity": [], "identification": []}
        for probe, opts, test in zip(probes, options, prompts.columns["test"]):
            if len(opts) != n:
                continue
            dist = np.abs(np.asarray(opts, float) - probe)
            share = g(dist) / g(dist).sum()
            right = dist == (dist.min() if test == "similarity" else 0)
            expected[test].append(share[right].mean())
        assert result[f"logits.p_similarity_n{n}"] == pytest.approx(np.mean(expected["similarity"]))
        assert result[f"logits.p_identification_n{n}"] == pytest.approx(
            np.mean(expected["identification"])
        )
    assert result["logits.p_similarity"] == result["logits.p_similarity_n2"]
    figure = gl.Result.from_json(result.to_json()).plot()
    assert len(figure.axes) == 2  # g(d) and accuracy against n


def test_recovery_needs_options_at_several_distances():
    with pytest.raises(ValueError, match="several distances"):
        recover_similarity([np.array([1.0, 1.0])], [np.log([0.5, 0.5])])


WORDS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]


@pytest.fixture(scope="module")
def tiny_lm():
    model, tokenizer = tiny_gpt2()
    return model, tokenizer


def _word_prompts(**kwargs):
    return choice_prompts(
        WORDS,
        coordinates=range(1, 11),
        candidates=(2, 3),
        trials=6,
        similarity_template="the year closest to {probe} : {options} ?",
        identification_template="the year {probe} : {options} ?",
        **kwargs,
    )


def test_behavioural_mode_end_to_end_on_both_backends(tiny_lm):
    model, tokenizer = tiny_lm
    results = []
    for adapter in (
        NNsightAdapter(model, tokenizer=tokenizer),
        TransformerLensAdapter.from_hf(model, tokenizer),
    ):
        results.append(
            gl.run("similarity", adapter, _word_prompts(), mode="behavioural", progress=False)
        )
    nnsight, bridge = results
    assert set(nnsight.metrics) == set(bridge.metrics)
    for key, value in nnsight.metrics.items():
        assert bridge[key] == pytest.approx(value, abs=1e-5)
    assert 0 < nnsight["logits.p_identification_n3"] < 1
    assert nnsight["logits.first_token_options"] == 0


def test_multi_token_options_are_refused_or_scored_by_first_token(tiny_lm):
    model, tokenizer = tiny_lm
    adapter = NNsightAdapter(model, tokenizer=tokenizer)
    prompts = _word_prompts()
    two_tokens = np.empty(len(prompts.texts), dtype=object)  # " eight year": two words
    two_tokens[:] = [[o + " year" for o in row] for row in prompts.columns["options"]]
    prompts.columns["options"] = two_tokens
    with pytest.raises(ValueError, match="first_token=True"):
        gl.run("similarity", adapter, prompts, mode="behavioural", progress=False)
    result = gl.run(
        "similarity", adapter, prompts, mode="behavioural", first_token=True, progress=False
    )
    assert result["logits.first_token_options"] == 10
    assert result.tables["first_token_options"][0] == {"option": " eight year"}
    # Options that share their first token cannot be told apart: refused, with first_token too.
    shared = _word_prompts(option_prefix=" the ")
    with pytest.raises(ValueError, match="share a scoring token"):
        gl.run("similarity", adapter, shared, mode="behavioural", first_token=True, progress=False)


def test_behavioural_mode_needs_an_lm_head():
    from helpers.tiny_models import tiny_bert

    model, tokenizer = tiny_bert()
    with pytest.raises(ValueError, match="no LM head"):
        gl.run(
            "similarity",
            NNsightAdapter(model, tokenizer=tokenizer),
            _word_prompts(),
            mode="behavioural",
            progress=False,
        )


def test_the_metric_used_is_recorded_and_a_chosen_one_is_kept():
    grid = np.array([[0, 0], [0, 1], [1, 0], [3, 4]], dtype=float)
    data = {"coordinate": grid.tolist()}
    by_default = gl.run("similarity", {SITE: np.eye(4)}, data, progress=False)
    assert by_default.tables["metric"] == [{"metric": "euclidean", "from": "default"}]
    assert max(r["distance"] for r in by_default.tables["g_of_d"]) == 5
    with pytest.raises(ValueError, match="use metric='euclidean'"):
        gl.run("similarity", {SITE: np.eye(4)}, data, metric="absolute", progress=False)
    hues = stimuli.hue_circle(step=90, words=False)
    circular = gl.run("similarity", {SITE: np.eye(4)}, hues.as_data(), progress=False)
    assert circular.tables["metric"] == [{"metric": "circular:360", "from": "data"}]


def test_behavioural_recovery_on_200_stimuli_keeps_the_grid():
    """Past 128 distinct option distances the recovery bins as the representational profile
    does: d₁ is the smallest distance offered (1 on integers 0–199, where equal-width bins
    would pool 0–4 into one) and the planted half-width comes back."""
    scale = 8.0
    g = lambda d: np.exp(-d / scale)  # noqa: E731  half-width ln 2 · 8 = 5.55
    prompts = choice_prompts(range(200), candidates=(2, 4), trials=600, seed=5)
    probes = prompts.columns["coordinate"]
    options = prompts.columns["option_coordinates"]
    logits, data = _planted_choices(g, prompts)
    offered = {abs(o - p) for p, opts in zip(probes, options) for o in opts}
    assert len(offered) > 128  # the case the binning rule is about
    result = gl.run("similarity", {"logits": logits}, data, mode="behavioural", progress=False)
    rows = result.tables["g_of_d"]
    d = np.array([r["distance"] for r in rows])
    g_hat = np.array([r["mean"] for r in rows])
    assert d[0] == 0 and d[1] == 1  # d₁: the grid's first distance, its own bin
    below = np.flatnonzero(g_hat < 0.5)[0]
    half = np.interp(0.5, g_hat[below - 1 : below + 1][::-1], d[below - 1 : below + 1][::-1])
    assert half == pytest.approx(scale * np.log(2), rel=0.05)
