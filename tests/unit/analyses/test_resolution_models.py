"""resolution on real models: the same weights through TransformerLens and nnsight give the
same g(d) and ε; the default run on the bundled MiniLM gives a profile, an ε and a point on the
(p_S, p_I) plane for every layer."""

import numpy as np
import pytest
from helpers.tiny_models import tiny_gpt2

import geomlens as gl
from geomlens.data import stimuli
from geomlens.models.nnsight import NNsightAdapter
from geomlens.models.transformer_lens import TransformerLensAdapter


def test_both_backends_give_the_same_profile_and_epsilon():
    model, tokenizer = tiny_gpt2()
    # Stimulus x is x "red" then 10 - x "blue": even random weights then represent x in a way
    # that varies smoothly with x, so g(d) falls and every family has a finite ε to compare.
    texts = [" ".join(["red"] * x + ["blue"] * (10 - x)) for x in range(11)]
    mixtures = {"text": texts, "coordinate": list(range(11))}
    results = [
        gl.run("resolution", adapter, mixtures, bootstrap=30, progress=False)
        for adapter in (
            NNsightAdapter(model, tokenizer=tokenizer),
            TransformerLensAdapter.from_hf(model, tokenizer),
        )
    ]
    nnsight, bridge = results
    assert nnsight.provenance["backend"] != bridge.provenance["backend"]
    assert len(nnsight.tables["g_of_d"]) == 2 * 10  # two layers, distances 1..10
    for a, b in zip(nnsight.tables["g_of_d"], bridge.tables["g_of_d"]):
        assert (a["site"], a["distance"], a["count"]) == (b["site"], b["distance"], b["count"])
        assert a["mean"] == pytest.approx(b["mean"], abs=1e-5)
    # Every family's ε, and the same family chosen.
    epsilons = [[r["epsilon"] for r in result.tables["fits"]] for result in results]
    assert np.isfinite(np.array(epsilons[0], dtype=float)).sum() == 8  # 4 families, 2 sites
    assert epsilons[0] == pytest.approx(epsilons[1], rel=1e-4, nan_ok=True)
    chosen = [[r["family"] for r in result.tables["fits"] if r["chosen"]] for result in results]
    assert chosen[0] == chosen[1]
    for site in ("blocks.0.hook_resid_post", "blocks.1.hook_resid_post"):
        assert nnsight[f"{site}.epsilon"] == pytest.approx(bridge[f"{site}.epsilon"], rel=1e-4)


def test_default_run_on_minilm_gives_every_layer_a_resolution(tmp_path):
    adapter = gl.load()
    # The shipped years set, coarser than the default so the test stays quick.
    data = stimuli.years(step=25).as_data()
    result = gl.run("resolution", adapter, data, bootstrap=30, progress=False)
    sites = [s for s in adapter.sites() if s.endswith("hook_resid_post")]
    assert len(sites) == 6
    for site in sites:
        profile = [r["mean"] for r in result.tables["g_of_d"] if r["site"] == site]
        assert np.mean(profile[:4]) > np.mean(profile[-8:])  # similarity falls with |Δyear|
        low, eps, high = (result[f"{site}.epsilon{k}"] for k in ("_ci_low", "", "_ci_high"))
        assert 0 < low <= eps <= high
        assert 0.5 <= result[f"{site}.p_similarity"] <= 1
        assert 0.5 <= result[f"{site}.p_identification"] <= 1
    result.plot(tmp_path / "minilm.png")
    assert (tmp_path / "minilm.png").stat().st_size > 10_000
