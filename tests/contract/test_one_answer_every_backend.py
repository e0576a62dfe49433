"""One model, one answer, on every backend: every built-in analysis, run on its example through
nnsight and through TransformerLens on the same weights, gives the same metrics and tables
(relative 1e-5; a count — any value whole on both sides — exactly), or refuses it alike on both
(llc an encoder), on a tiny causal LM, a tiny encoder and the bundled MiniLM; and the defaults and the SAE cache key are decided by the
model, not the backend."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from helpers.tiny_models import tiny_bert, tiny_gpt2

import geomlens as gl
from geomlens.analyses.registry import builtin_analyses
from geomlens.models.fingerprint import weights_fingerprint
from geomlens.testing import first_difference

BACKENDS = ("nnsight", "transformer-lens")
TOLERANCE = 1e-5
NEEDS_SAE_LENS = {"sae-features"}


def _tiny(factory: Any) -> dict[str, gl.Adapter]:
    model, tokenizer = factory()
    return {b: gl.attach(model, backend=b, tokenizer=tokenizer) for b in BACKENDS}


@pytest.fixture(scope="module")
def tiny_models() -> dict[str, dict[str, gl.Adapter]]:
    return {"tiny-gpt2": _tiny(tiny_gpt2), "tiny-bert": _tiny(tiny_bert)}


@pytest.fixture(scope="module")
def minilm() -> dict[str, gl.Adapter]:
    return {b: gl.load(backend=b) for b in BACKENDS}


def seeded_sae(adapter: gl.Adapter, site: str) -> Any:
    """A seeded sae-lens SAE of the model's width at ``site`` (the example's is 32 wide)."""
    import torch
    from sae_lens.saes.sae import SAEMetadata
    from sae_lens.saes.standard_sae import StandardSAE, StandardSAEConfig

    generator = torch.Generator().manual_seed(0)
    width = int(adapter.config.hidden_size)
    config = StandardSAEConfig(d_in=width, d_sae=2 * width, metadata=SAEMetadata(hook_name=site))
    sae = StandardSAE(config)
    with torch.no_grad():
        for parameter in sae.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.1)
    return sae.eval()


def counts_differ(got: gl.Result, expected: gl.Result) -> str | None:
    """The first value whole on both sides (a count) that is not equal."""
    a, b = json.loads(got.to_json()), json.loads(expected.to_json())

    def whole(value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and \
            math.isfinite(value) and float(value).is_integer()  # fmt: skip

    for name, value in b["metrics"].items():
        if whole(value) and whole(a["metrics"].get(name)) and a["metrics"][name] != value:
            return f"count {name} is {a['metrics'][name]}, not {value}"
    for table, rows in b["tables"].items():
        for number, (mine, theirs) in enumerate(zip(a["tables"][table], rows)):
            for key, value in theirs.items():
                if whole(value) and whole(mine.get(key)) and mine[key] != value:
                    return f"table {table} row {number} {key} is {mine[key]}, not {value}"
    return None


#: The built-in analyses, those that need sae-lens marked ``sae`` (run where it is installed).
ANALYSES = [
    pytest.param(name, marks=pytest.mark.sae) if name in NEEDS_SAE_LENS else name
    for name in builtin_analyses()
]


def one_answer(name: str, adapters: dict[str, gl.Adapter], **extra: Any) -> None:
    cls = gl.analysis_class(name)
    options = {**cls.example.run_options(), **extra}
    results, refusals = {}, {}
    for backend in BACKENDS:
        try:
            results[backend] = gl.run(name, adapters[backend], cls.example.rows(), **options)
        except ValueError as error:  # a model the analysis cannot read (llc: an encoder)
            refusals[backend] = str(error).replace(repr(adapters[backend].model_id), "MODEL")
    if refusals:  # the one answer is then the same refusal on every backend
        assert set(refusals) == set(BACKENDS), f"{name}: refused on {sorted(refusals)} only"
        assert refusals["nnsight"] == refusals["transformer-lens"], refusals
        return
    problem = first_difference(results["transformer-lens"], results["nnsight"], TOLERANCE)
    problem = problem or counts_differ(results["transformer-lens"], results["nnsight"])
    known = cls.example.known_failures.get("cross-backend")
    if problem is not None and known is not None:
        pytest.xfail(f"declared: {known} ({problem})")
    assert problem is None, f"{name}: transformer-lens against nnsight: {problem}"


@pytest.mark.parametrize("model", ["tiny-gpt2", "tiny-bert"])
@pytest.mark.parametrize("name", ANALYSES)
def test_every_builtin_gives_one_answer_on_a_tiny_model(name, model, tiny_models):
    one_answer(name, tiny_models[model])


@pytest.mark.slow
@pytest.mark.parametrize("name", ANALYSES)
def test_every_builtin_gives_one_answer_on_minilm(name, minilm):
    extra: dict[str, Any] = {}
    if name == "sae-features":  # the example's SAE is the tiny models' width
        extra["sae"] = seeded_sae(minilm["nnsight"], "blocks.3.hook_resid_post")
    one_answer(name, minilm, **extra)


@pytest.mark.sae
@pytest.mark.parametrize("model", ["tiny-gpt2", "tiny-bert", "minilm"])
def test_the_model_decides_the_defaults_and_the_cache_key(model, tiny_models, request):
    """An encoder is no causal LM through TransformerLens either (it got the causal-LM SAE
    recipe there), and the same weights get one SAE cache entry, not one per backend."""
    from geomlens.sae.config import default_training
    from geomlens.sae.training import cache_key

    adapters = request.getfixturevalue("minilm") if model == "minilm" else tiny_models[model]
    expected_causal = model == "tiny-gpt2"
    for backend in BACKENDS:
        assert adapters[backend].is_causal_lm is expected_causal, backend
    recipes = {b: default_training(adapters[b].is_causal_lm) for b in BACKENDS}
    assert recipes["nnsight"] == recipes["transformer-lens"]
    prints = {b: weights_fingerprint(adapters[b]) for b in BACKENDS}
    assert prints["nnsight"] == prints["transformer-lens"]
    site = adapters["nnsight"].residual_sites()[0]
    keys = {b: cache_key(adapters[b], site, "corpus", recipes[b][0]) for b in BACKENDS}
    assert keys["nnsight"] == keys["transformer-lens"]


def test_the_fingerprint_still_tells_weights_apart(tiny_models):
    """Taken without names, the fingerprint still changes with one weight."""
    import torch

    model, tokenizer = tiny_gpt2()
    before = weights_fingerprint(gl.attach(model, backend="nnsight", tokenizer=tokenizer))
    with torch.no_grad():
        next(model.parameters()).view(-1)[0] += 1e-3
    after = weights_fingerprint(gl.attach(model, backend="nnsight", tokenizer=tokenizer))
    assert before != after
