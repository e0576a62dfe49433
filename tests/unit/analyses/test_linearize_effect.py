"""linearization-effect on tiny models: both conditions, fidelity against a hand computation,
unaffected sites identical; TransformerLens and nnsight agree on α and CCGP; the CLI flag."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch
from helpers.tiny_models import tiny_bert, tiny_gpt2
from typer.testing import CliRunner

import geomlens as gl

PAIRS = {
    "gender": (
        "the [[{}]] sat",
        [("king", "queen"), ("man", "woman"), ("boy", "girl"), ("he", "she")],
    ),
    "size": (
        "the [[{}]] house",
        [("big", "small"), ("old", "new"), ("first", "last"), ("one", "two")],
    ),
}


def tiny_concepts() -> dict[str, list[str]]:
    """Two tasks of four word pairs, in the tiny tokenizer's vocabulary."""
    columns: dict[str, list[str]] = {"text": [], "concept": [], "context": [], "task": []}
    for task, (frame, pairs) in PAIRS.items():
        for pair in pairs:
            for concept, word in zip(("first", "second"), pair):
                for column, value in zip(
                    columns, (frame.format(word), concept, "/".join(pair), task)
                ):
                    columns[column].append(value)
    return columns


def replaced_act(model: torch.nn.Module, path: str) -> torch.nn.Module:
    twin = copy.deepcopy(model)
    parent, name = path.rsplit(".", 1)
    setattr(twin.get_submodule(parent), name, torch.nn.Identity())
    return twin


def plain_texts(data) -> list[str]:
    return [t.replace("[[", "").replace("]]", "") for t in data["text"]]


def lm_loss(model, tokenizer, texts) -> float:
    """Next-token loss over all (token, next token) pairs, one text at a time (no padding)."""
    total, count = 0.0, 0
    with torch.no_grad():
        for text in texts:
            ids = tokenizer(text, return_tensors="pt")["input_ids"]
            loss = model(ids, labels=ids).loss.item()
            total += loss * (ids.shape[1] - 1)
            count += ids.shape[1] - 1
    return total / count


def test_decoder_reports_lm_loss_change_and_both_conditions():
    model, tokenizer = tiny_gpt2()
    data = tiny_concepts()
    adapter = gl.attach(model, tokenizer=tokenizer)
    result = gl.run("linearization-effect", adapter, data, n_bootstrap=50, n_shuffles=20)
    (info,) = result.tables["linearization"]
    assert info["layers"] == [0] and info["mode"] == "identity"  # the penultimate of 2 blocks
    assert info["fidelity_measure"] == "lm_loss_change"
    texts = plain_texts(data)
    expected_base = lm_loss(model, tokenizer, texts)
    expected_linearized = lm_loss(replaced_act(model, "transformer.h.0.mlp.act"), tokenizer, texts)
    m = result.metrics
    assert m["fidelity.lm_loss_base"] == pytest.approx(expected_base, rel=1e-5)
    assert m["fidelity.lm_loss_linearized"] == pytest.approx(expected_linearized, rel=1e-5)
    assert m["fidelity.lm_loss_change"] == pytest.approx(
        expected_linearized - expected_base, abs=1e-5
    )
    assert {r["condition"] for r in result.tables["per_task"]} == {"base", "linearized"}
    assert m["summary.n_tasks"] == 2

    # The linearised condition is what abstraction and ccgp measure under adapter.linearize.
    with adapter.linearize([0]):
        alpha = gl.run("abstraction", adapter, data, n_bootstrap=50, n_shuffles=20)
        probe = gl.run("ccgp", adapter, data)
    linearized = {
        (r["site"], r["task"]): r
        for r in result.tables["per_task"]
        if r["condition"] == "linearized"
    }
    for row in alpha.tables["per_task"]:
        assert linearized[(row["site"], row["task"])]["alpha"] == pytest.approx(
            row["alpha"], abs=1e-9
        )
    for row in probe.tables["per_task"]:
        assert linearized[(row["site"], row["task"])]["ccgp"] == pytest.approx(
            row["ccgp"], abs=1e-9
        )


def test_encoder_reports_output_embedding_cosine_and_unaffected_sites_agree():
    model, tokenizer = tiny_bert()
    data = tiny_concepts()
    adapter = gl.attach(model, tokenizer=tokenizer)
    result = gl.run(
        "linearization-effect", adapter, data, layers=[1], n_bootstrap=50, n_shuffles=20
    )
    (info,) = result.tables["linearization"]
    assert info["fidelity_measure"] == "output_embedding_cosine"
    reference = replaced_act(model, "encoder.layer.1.intermediate.intermediate_act_fn")
    cosines = []
    with torch.no_grad():
        for text in plain_texts(data):
            ids = tokenizer(text, return_tensors="pt")
            base = model(**ids).last_hidden_state.mean(dim=1)
            linearized = reference(**ids).last_hidden_state.mean(dim=1)
            cosines.append(torch.nn.functional.cosine_similarity(base, linearized).item())
    assert result.metrics["fidelity.output_embedding_cosine"] == pytest.approx(
        np.mean(cosines), abs=1e-5
    )
    rows = {(r["condition"], r["site"], r["task"]): r for r in result.tables["per_task"]}
    for task in PAIRS:
        before = rows[("base", "blocks.0.hook_resid_post", task)]
        after = rows[("linearized", "blocks.0.hook_resid_post", task)]
        assert before["alpha"] == after["alpha"] and before["ccgp"] == after["ccgp"]
    assert result.tables["linearization"][0]["summary_site"] == "blocks.1.hook_resid_post"


def test_recorded_activations_are_refused_before_any_batch():
    recorded = gl.attach({"blocks.0.hook_resid_post": np.zeros((4, 8), dtype=np.float32)})
    data = {"concept": ["a", "b"] * 2, "context": ["x", "x", "y", "y"]}
    with pytest.raises(ValueError, match="recorded"):
        gl.run("linearization-effect", recorded, data)


def test_running_inside_a_linearisation_is_refused():
    model, tokenizer = tiny_gpt2()
    adapter = gl.attach(model, tokenizer=tokenizer)
    with pytest.raises(ValueError, match="outside adapter.linearize"), adapter.linearize([1]):
        gl.run("linearization-effect", adapter, tiny_concepts())


def test_transformer_lens_and_nnsight_agree_on_alpha_and_ccgp():
    model, tokenizer = tiny_gpt2()
    data = tiny_concepts()
    results = {}
    for backend in ("nnsight", "transformer-lens"):
        adapter = gl.attach(model, tokenizer=tokenizer, backend=backend)
        results[backend] = gl.run(
            ["abstraction", "ccgp"], adapter, data, n_bootstrap=50, n_shuffles=20
        )
    for name in ("abstraction", "ccgp"):
        nnsight_metrics = results["nnsight"][name].metrics
        lens_metrics = results["transformer-lens"][name].metrics
        assert nnsight_metrics.keys() == lens_metrics.keys()
        for key, value in nnsight_metrics.items():
            assert lens_metrics[key] == pytest.approx(value, abs=1e-4, nan_ok=True), key


@pytest.fixture(scope="module")
def saved_gpt2(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-gpt2")
    model, tokenizer = tiny_gpt2()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_cli_linearize_flag_and_linearization_effect(saved_gpt2, tmp_path):
    from geomlens.cli import app

    runner = CliRunner()
    data = tmp_path / "concepts.jsonl"
    columns = tiny_concepts()
    rows = [dict(zip(columns, values)) for values in zip(*columns.values())]
    data.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    out = tmp_path / "alpha.json"
    done = runner.invoke(
        app,
        ["run", "abstraction", "--model", str(saved_gpt2), "--data", str(data),
         "--linearize", "1:tangent", "--out", str(out), "--option", "n_bootstrap=20"],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    (entry,) = gl.Result.from_json(out).provenance["linearizations"]
    assert entry["layers"] == [1] and entry["mode"] == "tangent"
    out = tmp_path / "effect.json"
    done = runner.invoke(
        app,
        ["run", "linearization-effect", "--model", str(saved_gpt2), "--data", str(data),
         "--out", str(out), "--plot", str(tmp_path / "effect.png"), "--option", "n_bootstrap=20"],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    assert (tmp_path / "effect.png").stat().st_size > 0
    bad = runner.invoke(
        app, ["run", "abstraction", "--model", str(saved_gpt2), "--linearize", "x:y"]
    )
    assert bad.exit_code == 2 and "mode must be" in bad.output


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["identity", "tangent"])
@pytest.mark.parametrize("backend", ["nnsight", "transformer-lens"])
def test_linearised_pass_starts_at_the_linearised_layer(backend, mode, monkeypatch):
    """Block 0 runs once per batch (the base pass only), and every number equals the result of
    re-running the whole model for the linearised condition."""
    import geomlens.analyses.linearization_effect.analysis as module

    model, tokenizer = tiny_gpt2()
    data = tiny_concepts()
    options = {"layers": [1], "mode": mode, "calibration_texts": 4, "batch_size": 4}
    calls = []
    adapter = gl.attach(model, tokenizer=tokenizer, backend=backend)
    # The module that runs: the bridge works on a copy of the model.
    blocks = adapter.model.transformer.h if backend == "nnsight" else adapter.model.blocks
    handle = blocks[0].attn.register_forward_hook(lambda *a: calls.append(1))
    try:
        resumed = gl.run("linearization-effect", adapter, data, n_bootstrap=20, **options)
        batches = -(-len(data["text"]) // 4)
        # One base pass per batch, one look at block 0's output form on the first resumed pass,
        # and in tangent mode the calibration pass for x0 (the full rerun would add `batches`).
        assert len(calls) == batches + 1 + (1 if mode == "tangent" else 0)
        monkeypatch.setattr(
            module,
            "capture_from_layer",
            lambda adapter, inputs, sites, *_: adapter.capture(inputs, sites),
        )
        full = gl.run("linearization-effect", adapter, data, n_bootstrap=20, **options)
    finally:
        handle.remove()
    assert resumed.metrics.keys() == full.metrics.keys()
    for key, value in full.metrics.items():
        assert resumed.metrics[key] == pytest.approx(value, rel=1e-6, abs=1e-9, nan_ok=True), key


def test_alpha_and_pooled_rows_are_those_of_the_hf_hidden_states():
    """abstraction's α, linearization-effect's base α and the rows ccgp's probes read, against
    the Hugging Face model's own hidden states at the marked word, one text at a time."""
    from geomlens.analyses.ccgp import CCGP
    from geomlens.engine import stream

    model, tokenizer = tiny_gpt2()
    data = tiny_concepts()
    adapter = gl.attach(model, tokenizer=tokenizer)
    options = {"n_bootstrap": 20, "n_shuffles": 10, "batch_size": 3}
    alpha = gl.run("abstraction", adapter, data, **options)
    effect = gl.run("linearization-effect", adapter, data, **options)
    probe = CCGP()
    stream([probe], adapter, gl.data.as_dataset(data), batch_size=3)
    # Per text: [layers, d], each block's output at the marked word (position 1 of "the [[w]]
    # ..."), read by plain torch hooks (hidden_states[-1] has the final layer norm applied).
    outputs: list[torch.Tensor] = []
    blocks = model.transformer.h

    def keep(module, args, out):
        outputs.append(out[0] if isinstance(out, tuple) else out)

    handles = [block.register_forward_hook(keep) for block in blocks]
    hidden = []
    try:
        with torch.no_grad():
            for text in plain_texts(data):
                outputs.clear()
                model(tokenizer(text, return_tensors="pt")["input_ids"])
                hidden.append(np.stack([out[0, 1].double().numpy() for out in outputs]))
    finally:
        for handle in handles:
            handle.remove()
    hidden = np.stack(hidden)
    tasks, concepts = np.asarray(data["task"]), np.asarray(data["concept"])
    base = {
        (r["site"], r["task"]): r["alpha"]
        for r in effect.tables["per_task"]
        if r["condition"] == "base"
    }
    for layer in range(2):
        site = f"blocks.{layer}.hook_resid_post"
        for task in PAIRS:
            mine = tasks == task
            rows = hidden[mine, layer]
            # One row per (concept, context), contexts in data order: the differences' cosines.
            differences = rows[concepts[mine] == "second"] - rows[concepts[mine] == "first"]
            unit = differences / np.linalg.norm(differences, axis=1, keepdims=True)
            cosines = unit @ unit.T
            expected = cosines[np.triu_indices(len(unit), k=1)].mean()
            got = next(
                r["alpha"]
                for r in alpha.tables["per_task"]
                if (r["site"], r["task"]) == (site, task)
            )
            assert got == pytest.approx(expected, rel=1e-5, abs=1e-6)
            assert base[(site, task)] == pytest.approx(expected, rel=1e-5, abs=1e-6)
            pooled, concept, _ = probe.state.pooled(site, task)
            np.testing.assert_allclose(pooled, rows, rtol=1e-5, atol=1e-5)
            assert list(concept) == list(concepts[mine])
