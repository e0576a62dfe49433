"""The bad-input catalogue: every case fails with a specific exception type and a message that
says what was wrong and what would be right; through the CLI, with exit code 2, one line on
stderr and no traceback. Each case lists (exception, [what was wrong, what would be right])."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers.cli_errors import error_line, message_lines
from helpers.saved_models import saved_model
from helpers.tiny_models import tiny_bert, tiny_gpt2, tiny_hooked_transformer
from sae_lens.saes.sae import SAEMetadata
from sae_lens.saes.standard_sae import StandardSAE, StandardSAEConfig
from typer.testing import CliRunner

import geomlens as gl
from geomlens.analyses.option_types import OptionTypeError, OptionValueError
from geomlens.analyses.registry import UnknownNameError
from geomlens.hooks.finite_check import NonFiniteActivationError
from geomlens.interventions.linearize import LinearizationError
from geomlens.models.adapter import UnknownSiteError
from geomlens.sae.loading import load_sae
from geomlens.theory import abstraction, resolution, ssd

SITE = "blocks.0.hook_resid_post"
RNG = np.random.default_rng(0)


@cache
def gpt2():
    """A tiny GPT-2 (2 layers, width 32) with its word-level tokenizer."""
    model, tokenizer = tiny_gpt2()
    return gl.attach(model, tokenizer=tokenizer)


def recorded(rows: int = 8, width: int = 4, **arrays: np.ndarray):
    return gl.attach(arrays or {SITE: RNG.normal(size=(rows, width))})


def concept_data(concepts: list[str], contexts: list[str]) -> dict:
    return {"concept": np.array(concepts), "context": np.array(contexts)}


def sae(d_in: int, site: str = SITE) -> StandardSAE:
    return StandardSAE(StandardSAEConfig(d_in=d_in, d_sae=8, metadata=SAEMetadata(hook_name=site)))


def with_nan(value: float) -> dict:
    activations = RNG.normal(size=(8, 4))
    activations[5, 2] = value
    return {SITE: activations}


def resume_with_other_arguments(folder: Path) -> None:
    gl.run("activation-stats", recorded(), checkpoint=folder, batch_size=2)
    gl.run("activation-stats", recorded(), checkpoint=folder, batch_size=4)


def failing_source():
    yield "the cat sat"
    raise RuntimeError("the data source lost its connection")


BEHAVIOURAL = {
    "text": ["the king sat on the", "the cat sat on the"],
    "coordinate": [1.0, 2.0],
    "options": [["mat", "red house"], ["mat", "dog"]],
    "option_coordinates": [[1.0, 2.0], [1.0, 2.0]],
    "test": ["similarity", "similarity"],
}


@dataclass
class Case:
    """``call(tmp_path)`` must raise ``error`` with every fragment in its message."""

    name: str
    call: Callable[[Path], object]
    error: type[BaseException]
    fragments: tuple[str, ...]


CASES = [
    # -- sites, analyses, options --------------------------------------------------------------
    Case("unknown site names the nearest",
         lambda _: gl.run("activation-stats", recorded(), site="blocks.0.hook_resid_pst"),
         UnknownSiteError, ("Unknown site 'blocks.0.hook_resid_pst'", "Did you mean 'blocks.0.hook_resid_post'")),
    Case("layer out of range",
         lambda _: gl.run("activation-stats", gpt2(), ["the cat"], site="blocks.7.hook_resid_post"),
         UnknownSiteError, ("Unknown site 'blocks.7.hook_resid_post'", "has 2 blocks (0..1)",
                            "blocks.1.hook_resid_post")),
    Case("unknown analysis",
         lambda _: gl.run("activation-stat", recorded()),
         UnknownNameError, ("Unknown analysis 'activation-stat'", "Did you mean 'activation-stats'")),
    Case("option of the wrong type",
         lambda _: gl.run("activation-stats", recorded(), dead_threshold="abc"),
         OptionTypeError, ("'dead_threshold'", "must be a float", "'abc'")),
    Case("option of the wrong type (list)",
         lambda _: gl.analysis_class("activation-stats")(site=3),
         OptionTypeError, ("'site'", "a string or a list of strings or None", "3 (int)")),
    Case("option out of range",
         lambda _: gl.analysis_class("abstraction")(confidence=1.5),
         OptionValueError, ("'confidence'", "between 0 and 1", "1.5")),
    Case("option below its minimum",
         lambda _: gl.analysis_class("ccgp")(folds=1),
         OptionValueError, ("'folds'", "at least 2", "got 1")),
    Case("option the analysis does not have",
         lambda _: gl.analysis_class("activation-stats")(treshold=1),
         ValueError, ("no option 'treshold'", "dead_threshold")),
    Case("option no analysis in the run takes",
         lambda _: gl.run("activation-stats", recorded(), not_an_option=1),
         ValueError, ("'not_an_option'", "not options of 'activation-stats'")),
    Case("unknown pooling",
         lambda _: gl.run("activation-stats", gpt2(), ["the cat"], pooling="median"),
         ValueError, ("Unknown pooling 'median'", "'mean', 'last', 'first' or 'span'")),
    Case("merging different configs",
         lambda _: gl.analysis_class("activation-stats")(pooling="last").merge(
             gl.analysis_class("activation-stats")()),
         ValueError, ("Can only merge", "same config")),
    # -- data -------------------------------------------------------------------------------
    Case("empty data",
         lambda _: gl.run("activation-stats", gpt2(), []),
         ValueError, ("empty", "at least one example")),
    Case("a single string as data",
         lambda _: gl.run("activation-stats", gpt2(), "the cat"),
         ValueError, ("single string", "list of strings")),
    Case("float tensor as data",
         lambda _: gl.run("activation-stats", gpt2(), torch.rand(2, 3)),
         ValueError, ("token ids [N, T] (integers)", "torch.float32")),
    Case("column of the wrong length",
         lambda _: gl.run("activation-stats", gpt2(), {"text": ["a", "b"], "concept": ["x"]}),
         ValueError, ("'concept' has 1 entries", "one entry per example")),
    Case("recorded sites with different row counts",
         lambda _: recorded(a=np.zeros((3, 2)), b=np.zeros((4, 2))),
         ValueError, ("4 rows but another site has 3", "one row per example")),
    Case("concept with one class",
         lambda _: gl.run("abstraction", recorded(), concept_data(["a"] * 8, ["x", "y"] * 4)),
         ValueError, ("concept values ['a']", "exactly two values")),
    Case("concept with three classes",
         lambda _: gl.run("ccgp", recorded(), concept_data(list("abcabcab"), ["x", "y"] * 4)),
         ValueError, ("concept values ['a', 'b', 'c']", "exactly two values")),
    Case("fewer than two contexts for CCGP",
         lambda _: gl.run("ccgp", recorded(), concept_data(["a", "b"] * 4, ["x"] * 8)),
         ValueError, ("at least two contexts", "it has ['x']")),
    Case("stimuli without coordinates",
         lambda _: gl.run("resolution", recorded()),
         ValueError, ("lacks columns", "resolution needs ['coordinate']")),
    Case("a metric that does not fit the coordinates",
         lambda _: gl.run("similarity", recorded(), {"coordinate": RNG.normal(size=(8, 2)).tolist()},
                          metric="absolute"),
         ValueError, ("needs one number per stimulus", "metric='euclidean'")),
    Case("an unknown metric",
         lambda _: gl.run("similarity", recorded(), {"coordinate": list(range(8))}, metric="circular"),
         ValueError, ("Unknown metric 'circular'", "'circular:PERIOD'")),
    Case("a [[span]] cut off by truncation",
         lambda _: gl.run("activation-stats", gpt2(), ["the cat sat on the [[mat]]"], max_length=2,
                          pooling="span"),
         ValueError, ("falls outside the tokens kept", "raise max_length")),
    Case("a [[span]] in some texts only",
         lambda _: gl.run("activation-stats", gpt2(), ["the [[cat]] sat", "the dog"], pooling="span"),
         ValueError, ("has no [[...]] span", "in every text or in none")),
    Case("options that are not single tokens, no fallback",
         lambda _: gl.run("similarity", gpt2(), BEHAVIOURAL, mode="behavioural"),
         ValueError, ("'red house' is 2 tokens", "first_token=True")),
    Case("text given to a model without a tokenizer",
         lambda _: gl.run("activation-stats", gl.attach(tiny_bert()[0]), ["the cat"]),
         ValueError, ("no tokenizer", "Pass token ids")),
    Case("a data source that raises: its own error, unchanged",
         lambda _: gl.run("activation-stats", gpt2(), failing_source(), batch_size=1),
         RuntimeError, ("lost its connection",)),
    # -- run settings -----------------------------------------------------------------------
    Case("batch size 0",
         lambda _: gl.run("activation-stats", recorded(), batch_size=0),
         ValueError, ("batch_size must be at least 1", "got 0")),
    Case("max_length 0",
         lambda _: gl.run("activation-stats", gpt2(), ["the cat"], max_length=0),
         ValueError, ("max_length must be at least 1", "None to keep every token")),
    Case("unknown padding side",
         lambda _: gl.run("activation-stats", recorded(), padding_side="top"),
         ValueError, ("'left' or 'right'", "'top'")),
    Case("NaN activations name the site and the batch",
         lambda _: gl.run("activation-stats", gl.attach(with_nan(np.nan)), batch_size=2),
         NonFiniteActivationError, (f"site '{SITE}'", "batch 2", "rows 4..5", "float32")),
    Case("Inf activations name the site and the batch",
         lambda _: gl.run("activation-stats", gl.attach(with_nan(np.inf)), batch_size=4),
         NonFiniteActivationError, (f"site '{SITE}'", "batch 1", "rows 4..7")),
    Case("a distributed run without a process group",
         lambda _: gl.run("activation-stats", recorded(), distributed=True),
         ValueError, ("process group", "torchrun")),
    Case("resuming with arguments other than the checkpoint's",
         lambda tmp: resume_with_other_arguments(tmp / "checkpoint"),
         ValueError, ("other arguments", "batch_size: the checkpoint has 2, this run has 4")),
    # -- loading ----------------------------------------------------------------------------
    Case("unknown backend",
         lambda _: gl.load(backend="jax"),
         ValueError, ("Unknown backend 'jax'", "transformer-lens, nnsight")),
    Case("unknown dtype",
         lambda _: gl.load(dtype="float7"),
         ValueError, ("Unknown dtype 'float7'", "'float32'")),
    Case("unknown device",
         lambda _: gl.load(device="gpu"),
         ValueError, ("Unknown device 'gpu'", "cpu, cuda, cuda:N or mps")),
    # -- SAEs -------------------------------------------------------------------------------
    Case("an SAE whose width differs from the site",
         lambda _: gl.run("sae-features", recorded(), {"condition": ["calibration"] * 8}, sae=sae(5)),
         ValueError, ("d_in=5", "has width 4", "use an SAE trained on this model and site")),
    Case("an SAE for a site the model lacks",
         lambda _: gl.run("sae-features", recorded(), {"condition": ["calibration"] * 8},
                          sae=sae(4, "blocks.9.hook_resid_post")),
         UnknownSiteError, ("Unknown site 'blocks.9.hook_resid_post'", "Valid sites")),
    Case("a file that is not an SAE",
         lambda _: gl.run("sae-features", recorded(), {"condition": ["calibration"] * 8},
                          sae=__file__),
         ValueError, ("is not an SAE saved by sae-lens", "cfg.json")),
    # -- linearisation ----------------------------------------------------------------------
    Case("linearising a layer with no elementwise activation",
         lambda _: gl.attach(tiny_hooked_transformer(act_fn="solu_ln")).linearize([0]).__enter__(),
         LinearizationError, ("Layer 0", "SoLU / LayerNorm", "plain or gated MLP")),
    Case("linearising a layer the model lacks",
         lambda _: gpt2().linearize([5]).__enter__(),
         ValueError, ("Layer(s) [5] do not exist", "2 blocks")),
    Case("an unknown linearisation mode",
         lambda _: gpt2().linearize([0], mode="cubic").__enter__(),
         ValueError, ("'cubic'", "'identity' or 'tangent'")),
    Case("linearising recorded activations",
         lambda _: recorded().linearize([0]).__enter__(),
         LinearizationError, ("recorded activations cannot be re-run", "Record the activations")),
    # -- theory -----------------------------------------------------------------------------
    Case("theory: a ball measure above 1",
         lambda _: resolution.p_similarity(1.5),
         ValueError, ("ball measure in [0, 1]", "1.5")),
    Case("theory: zero candidates",
         lambda _: resolution.p_identification(0.2, n=0),
         ValueError, ("n must be an integer >= 1", "got 0")),
    Case("theory: noise above 1",
         lambda _: resolution.p_similarity(0.2, delta=1.5),
         ValueError, ("noise level in [0, 1]", "1.5")),
    Case("theory: a negative inverse SNR",
         lambda _: abstraction.alpha_terminal(-1.0, 0.2),
         ValueError, ("nu_x >= 0", "-1.0")),
    Case("theory: a pool larger than the dictionary",
         lambda _: ssd.bound(P=10, m=5, N=10, V=10, risk=0.0),
         ValueError, ("0 <= P <= m = 5", "P = 10")),
    Case("theory: a one-token vocabulary",
         lambda _: ssd.bound(P=1, m=5, N=10, V=1, risk=0.0),
         ValueError, ("V >= 2", "got 1")),
    # -- results ----------------------------------------------------------------------------
    Case("an output path that is a directory",
         lambda tmp: gl.Result("activation-stats").to_json(tmp),
         IsADirectoryError, ("is a directory", "give a file path")),
    Case("an unwritable output path",
         lambda tmp: gl.Result("activation-stats").to_json(_file(tmp) / "r.json"),
         OSError, ("Cannot write", "choose a folder you can write to")),
    Case("a results file of a newer schema",
         lambda _: gl.Result.from_dict({"analysis": "x", "schema_version": 99}),
         ValueError, ("newer geomlens (schema 99)", "upgrade geomlens")),
    Case("a JSON that is not a result",
         lambda _: gl.Result.from_dict({"metrics": {}}),
         ValueError, ("Not a geomlens result", "'analysis'")),
    Case("a results file that is not JSON",
         lambda tmp: gl.Result.from_json(_written(tmp / "r.json", "metrics: 1")),
         ValueError, ("is not a geomlens result", "not valid JSON", "Result.to_json")),
    Case("a results file holding a list",
         lambda tmp: gl.Result.from_json(_written(tmp / "r.json", "[1, 2]")),
         ValueError, ("is not a geomlens result", "JSON list")),
    Case("a metric the result lacks",
         lambda _: gl.Result("x", metrics={"alpha": 1.0})["alpah"],
         KeyError, ("no metric 'alpah'", "['alpha']")),
]  # fmt: skip


# -- reliability: once silently wrong or unclear -------------------------------------------------
def _damaged_checkpoint(folder: Path, damage: Callable[[bytes], bytes]) -> None:
    """A finished checkpoint of a small run, its file then damaged, then resumed."""
    gl.run("activation-stats", recorded(), checkpoint=folder, batch_size=2)
    state = folder / "state-rank0-of-1.pt"
    state.write_bytes(damage(state.read_bytes()))
    gl.run("activation-stats", recorded(), checkpoint=folder, batch_size=2)


def _torch_bytes(value: object) -> bytes:
    import io

    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()


def _without_states(data: bytes) -> bytes:
    import io

    payload = torch.load(io.BytesIO(data), weights_only=True)
    return _torch_bytes({**payload, "states": []})


DAMAGED_CHECKPOINTS = {
    "random bytes": lambda data: bytes(
        np.random.default_rng(0).integers(0, 256, 500, dtype=np.uint8)
    ),
    "JSON": lambda data: b'{"format": 1}',
    "a list": lambda data: _torch_bytes([1, 2, 3]),
    "zero bytes": lambda data: b"",
    "truncated": lambda data: data[: len(data) // 2],
    "an empty states list": _without_states,
}


def _saved_sae(folder: Path, edit: Callable[[Path], None]) -> Path:
    StandardSAE(
        StandardSAEConfig(d_in=32, d_sae=16, metadata=SAEMetadata(hook_name=SITE))
    ).save_model(str(folder))
    edit(folder)
    return folder


def _cfg(folder: Path, **changes: object) -> None:
    config = json.loads((folder / "cfg.json").read_text())
    (folder / "cfg.json").write_text(json.dumps({**config, **changes}))


def _gpt2_folder(folder: Path, edit: Callable[[Path], None]) -> Path:
    saved_model(folder, tiny_gpt2)
    edit(folder)
    return folder


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 3])


def _config_width(folder: Path) -> None:
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "n_embd": 48}))


def _never_read():
    raise AssertionError("the data were read: the bad path was found only after the passes")
    yield


CASES += [
    Case(f"a damaged checkpoint: {kind}",
         lambda tmp, damage=damage: _damaged_checkpoint(tmp / "ck", damage),
         ValueError, ("Refused checkpoint", "state-rank0-of-1.pt", "another checkpoint directory"))
    for kind, damage in DAMAGED_CHECKPOINTS.items()
]  # fmt: skip
CASES += [
    Case("linearize calibration from a generator (not listed as accepted)",
         lambda _: gpt2().linearize([0], "tangent", calibration=(t for t in ["the cat"])).__enter__(),
         ValueError, ("Cannot use a generator here", "needed whole", "list(rows)")),
    Case("a negative seed",
         lambda _: gl.run("activation-stats", recorded(), seed=-1),
         ValueError, ("seed must be an integer from 0 to 2**63 - 1", "-1")),
    Case("a seed of 2**70",
         lambda _: gl.run("activation-stats", recorded(), seed=2**70),
         ValueError, ("seed must be an integer from 0 to 2**63 - 1", str(2**70))),
    Case("an SAE whose cfg.json d_sae disagrees with its weights",
         lambda tmp: load_sae(_saved_sae(tmp / "sae", lambda f: _cfg(f, d_sae=20))),
         ValueError, ("The SAE folder", "sae cannot be read", "cfg.json does not match its weights")),
    Case("an SAE whose cfg.json is not JSON",
         lambda tmp: load_sae(_saved_sae(tmp / "sae", lambda f: (f / "cfg.json").write_text("{d_in: 3"))),
         ValueError, ("The SAE folder", "sae cannot be read", "cfg.json is not JSON")),
    Case("a truncated SAE",
         lambda tmp: load_sae(_saved_sae(tmp / "sae", lambda f: _truncate(f / "sae_weights.safetensors"))),
         ValueError, ("The SAE folder", "sae cannot be read", "truncated")),
    Case("a truncated model.safetensors",
         lambda tmp: gl.load(_gpt2_folder(tmp / "m", lambda f: _truncate(f / "model.safetensors"))),
         ValueError, ("Could not read the weights of model", "damaged, truncated")),
    Case("a garbage model.safetensors",
         lambda tmp: gl.load(_gpt2_folder(tmp / "m", lambda f: (f / "model.safetensors").write_bytes(b"\x00" * 64))),
         ValueError, ("Could not read the weights of model", "not safetensors")),
    Case("a config.json whose width disagrees with the weights",
         lambda tmp: gl.load(_gpt2_folder(tmp / "m", _config_width)),
         ValueError, ("config.json does not match its weights", "size mismatch")),
    Case("a result whose schema_version is a string",
         lambda _: gl.Result.from_dict({"analysis": "x", "schema_version": "1"}),
         ValueError, ("'schema_version' must be an integer", "'1'")),
    Case("a result whose metrics are a list",
         lambda _: gl.Result.from_dict({"analysis": "x", "metrics": [1, 2]}),
         ValueError, ("'metrics' must be an object", "list")),
    Case("a result whose metrics are null",
         lambda _: gl.Result.from_dict({"analysis": "x", "metrics": None}),
         ValueError, ("'metrics' must be an object", "null")),
    Case("a result with a word as a metric",
         lambda _: gl.Result.from_dict({"analysis": "x", "metrics": {"a": "high"}}),
         ValueError, ("metric 'a' is 'high'", "a metric is a number")),
    Case("a result nested 100,000 deep",
         lambda tmp: gl.Result.from_json(_written(tmp / "r.json", "[" * 100_000 + "]" * 100_000)),
         ValueError, ("is not a geomlens result", "nested too deeply")),
    Case("plotting a result without its tables",
         lambda _: gl.plot(gl.Result("similarity", metrics={"a": 1.0})),
         ValueError, ("lacks", "plot a result as the analysis wrote it")),
    Case("a checkpoint path under a file, found before any pass",
         lambda tmp: gl.run("activation-stats", gpt2(), _never_read(), checkpoint=_file(tmp) / "ck"),
         ValueError, ("Checkpoint path", "a-file is a file, not a folder")),
    Case("a site given twice (would count every token twice)",
         lambda _: gl.run("activation-stats", recorded(), site=[SITE, SITE]),
         OptionValueError, (f"{SITE!r} more than once", "give each one once")),
    Case("an empty list of sites",
         lambda _: gl.run("activation-stats", recorded(), site=[]),
         OptionValueError, ("empty list", "names no site")),
    Case("a row whose text is None",
         lambda _: gl.run("activation-stats", gpt2(), [{"text": "the cat"}, {"text": None}]),
         ValueError, ("Row 1", "'text' must be a string", "None")),
    Case("a text column holding a list",
         lambda _: gl.run("activation-stats", gpt2(), {"text": ["the cat", ["the", "dog"]]}),
         ValueError, ("Row 1", "'text' must be a string", "list")),
    Case("a NaN coordinate",
         lambda _: gl.run("similarity", gpt2(), {"text": ["one", "two", "six"],
                                                 "coordinate": [1.0, float("nan"), 3.0]}),
         ValueError, ("Row 1", "coordinate nan is not finite")),
    Case("an infinite coordinate in streamed rows",
         lambda _: gl.run("similarity", gpt2(), iter([{"text": "one", "coordinate": 1.0},
                                                      {"text": "two", "coordinate": float("inf")}])),
         ValueError, ("Row 1", "coordinate inf is not finite")),
    Case("a coordinate that is a word",
         lambda _: gl.run("similarity", gpt2(), {"text": ["one", "two"], "coordinate": [1.0, "two"]}),
         ValueError, ("Row 1", "coordinate 'two' is not a number", "'coordinate' column")),
    Case("ragged coordinate vectors",
         lambda _: gl.run("similarity", gpt2(), [{"text": "one", "coordinate": [1.0, 2.0]},
                                                 {"text": "two", "coordinate": [1.0]}]),
         ValueError, ("Row 1", "coordinate [1.0] has 1 entries", "same length")),
]  # fmt: skip


def _written(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _file(folder: Path) -> Path:
    blocker = folder / "a-file"
    blocker.write_text("")
    return blocker


def test_the_catalogue_has_at_least_forty_cases():
    assert len(CASES) >= 40
    assert len({case.name for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_bad_input_says_what_was_wrong_and_what_would_be_right(case, tmp_path):
    with pytest.raises(case.error) as info:
        case.call(tmp_path)
    message = str(info.value.args[0]) if isinstance(info.value, KeyError) else str(info.value)
    for fragment in case.fragments:
        assert fragment in message, (fragment, message)


def test_no_output_when_a_run_fails(tmp_path):
    """A run that fails mid-way writes nothing (the result is written only once finished)."""
    with pytest.raises(NonFiniteActivationError):
        gl.run("activation-stats", gl.attach(with_nan(np.nan)), batch_size=2, checkpoint=tmp_path)
    # The checkpoint saved before the bad batch may exist, but never one holding NaN.
    assert not list(tmp_path.glob("*.json"))


# -- the same through the CLI: exit 2, one line on stderr, no traceback -------------------------
runner = CliRunner()


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return saved_model(tmp_path_factory.mktemp("tiny-gpt2"), tiny_gpt2)


def jsonl(folder: Path, rows: list[dict]) -> str:
    path = folder / "data.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def without_tokenizer(folder: Path) -> str:
    """A saved model folder with weights and config but no tokenizer files."""
    target = folder / "no-tokenizer"
    tiny_gpt2()[0].save_pretrained(target)
    return str(target)


CLI_CASES = [
    ("text to a model without a tokenizer", lambda m, t: ["run", "activation-stats", "--model",
                                                          without_tokenizer(t), "--out", str(t / "r.json"),
                                                          "--data", jsonl(t, [{"text": "the cat"}])],
     ("no tokenizer", "token ids")),
    ("a file that is not an SAE", lambda m, t: ["run", "sae-features", "--model", m, "--out", str(t / "r.json"),
                                                "--option", f"sae={__file__}"],
     ("is not an SAE saved by sae-lens", "cfg.json")),
    ("unknown analysis", lambda m, t: ["run", "activation-stat"], ("Unknown analysis", "Did you mean")),
    ("unknown site", lambda m, t: ["run", "activation-stats", "--model", m, "--site", "blocks.7.hook_resid_post",
                                   "--out", str(t / "r.json")], ("Unknown site", "Did you mean")),
    ("option type", lambda m, t: ["run", "activation-stats", "--option", "dead_threshold=abc"],
     ("'dead_threshold'", "float")),
    ("option range", lambda m, t: ["run", "abstraction", "--option", "confidence=2"],
     ("'confidence'", "between 0 and 1")),
    ("unknown option", lambda m, t: ["run", "activation-stats", "--option", "treshold=1"],
     ("treshold", "dead_threshold")),
    ("option without =", lambda m, t: ["run", "activation-stats", "--option", "pooling"],
     ("KEY=VALUE", "pooling=last")),
    ("one-class concept", lambda m, t: ["run", "abstraction", "--model", m, "--out", str(t / "r.json"),
                                        "--data", jsonl(t, [{"text": "the cat", "concept": "a",
                                                             "context": c} for c in "xyxy"])],
     ("concept values ['a']", "exactly two values")),
    ("text data without a text field", lambda m, t: ["run", "activation-stats", "--data",
                                                     jsonl(t, [{"txt": "the cat"}])], ("'text'",)),
    ("unknown device", lambda m, t: ["run", "activation-stats", "--device", "tpu"], ("Unknown device 'tpu'", "cpu")),
    ("unknown backend", lambda m, t: ["run", "activation-stats", "--model", m, "--backend", "jax",
                                      "--out", str(t / "r.json")], ("Unknown backend 'jax'", "nnsight")),
    ("theory: noise above 1", lambda m, t: ["theory", "pareto", "--delta", "2"], ("noise level in [0, 1]",)),
    ("theory: pool above dictionary", lambda m, t: ["theory", "ssd", "--P", "10", "--m", "5", "--N", "10",
                                                    "--V", "10"], ("P <= m",)),
    ("unwritable output", lambda m, t: ["run", "activation-stats", "--out", str(_file(t) / "r.json")],
     ("cannot write", "writable")),
]  # fmt: skip


# -- reliability: damaged or unclear inputs -------------------------------------------------------
def _lines(folder: Path, *lines: str) -> str:
    path = folder / "data.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    return str(path)


def _data_file(folder: Path) -> str:
    path = folder / "d.json"
    path.write_text(json.dumps(["the cat", "a dog"]))
    return str(path)


CLI_CASES += [
    ("--seed -1", lambda m, t: ["run", "activation-stats", "--model", m, "--seed", "-1",
                                "--out", str(t / "r.json")], ("seed must be an integer from 0",)),
    ("--out is the --data file", lambda m, t: ["run", "activation-stats", "--model", m,
                                               "--data", _data_file(t), "--out", str(t / "d.json")],
     ("--out", "would overwrite the input given by --data")),
    ("--out inside the model folder", lambda m, t: ["run", "activation-stats", "--model",
                                                    str(saved_model(t / "m", tiny_gpt2)),
                                                    "--out", str(t / "m" / "config.json")],
     ("would overwrite a file in the input given by --model",)),
    ("--out inside the checkpoint folder", lambda m, t: ["run", "activation-stats", "--model", m,
                                                         "--checkpoint", str(t / "ck"),
                                                         "--out", str(t / "ck" / "r.json")],
     ("would overwrite a file in the input given by --checkpoint",)),
    ("a site given twice", lambda m, t: ["run", "activation-stats", "--model", m, "--site", SITE,
                                         "--site", SITE, "--out", str(t / "r.json"),
                                         "--data", jsonl(t, [{"text": "the cat"}])],
     (f"{SITE!r} more than once",)),
    ("--option site=[]", lambda m, t: ["run", "activation-stats", "--model", m, "--option", "site=[]",
                                       "--out", str(t / "r.json")], ("empty list", "names no site")),
    ("a .jsonl text that is null names the line",
     lambda m, t: ["run", "activation-stats", "--model", m, "--out", str(t / "r.json"), "--data",
                   _lines(t, '{"text": "the cat"}', "", '{"text": null}')],
     ("data.jsonl:3", "'text' must be a string")),
    ("a .jsonl text that is a list names the line",
     lambda m, t: ["run", "activation-stats", "--model", m, "--out", str(t / "r.json"), "--data",
                   _lines(t, '{"text": ["the", "cat"]}')],
     ("data.jsonl:1", "'text' must be a string")),
    ("--batch-size 10**30", lambda m, t: ["run", "activation-stats", "--model", m, "--batch-size",
                                          str(10**30), "--out", str(t / "r.json")],
     ("--batch-size must be from 1 to 65536", "(31 digits)")),
    ("report --batch-size 10**30", lambda m, t: ["report", "--model", m, "--batch-size", str(10**30),
                                                 "--out", str(t / "rep")],
     ("--batch-size must be from 1 to 65536",)),
    ("--option sae=/abs/missing", lambda m, t: ["run", "sae-features", "--model", m, "--out",
                                                str(t / "r.json"), "--option", f"sae={t / 'missing'}"],
     ("The SAE folder", "missing does not exist", "release/sae_id")),
    ("a NaN coordinate names the line",
     lambda m, t: ["run", "similarity", "--model", m, "--out", str(t / "r.json"), "--data",
                   _lines(t, '{"text": "the cat", "coordinate": 1}', '{"text": "a dog", "coordinate": NaN}')],
     ("data.jsonl:2", "not finite")),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "arguments", "fragments"), CLI_CASES, ids=[c[0] for c in CLI_CASES]
)
def test_cli_bad_input_is_one_line_exit_2(name, arguments, fragments, model_dir, tmp_path):
    done = runner.invoke(gl_cli_app(), arguments(str(model_dir), tmp_path))
    # Progress bars (ours, transformers' weight loading) also go to stderr; the rest is the error.
    error_line(done, *fragments)
    assert not (tmp_path / "r.json").exists()


def gl_cli_app():
    from geomlens.cli import app

    return app


@pytest.mark.parametrize("chunk", [2**24, 7])  # one pass, and the check split into pieces
def test_nan_only_at_padding_is_not_reported(chunk, monkeypatch):
    import geomlens.hooks.finite_check

    monkeypatch.setattr(geomlens.hooks.finite_check, "_CHUNK_ELEMENTS", chunk)
    activations = RNG.normal(size=(4, 3, 2))
    mask = np.ones((4, 3), dtype=bool)
    mask[2, 2] = False
    activations[2, 2, 1] = np.nan  # a padded position: never read
    result = gl.run("activation-stats", gl.attach({SITE: activations}, attention_mask=mask))
    assert result[f"{SITE}.rows"] == 11.0
    activations[1, 0, 0] = np.inf  # a real token
    with pytest.raises(NonFiniteActivationError, match="batch 0 \\(dataset rows 0..3\\)"):
        gl.run("activation-stats", gl.attach({SITE: activations}, attention_mask=mask))


# -- Ctrl-C in report and sae train says so in one line (exit 130), like run ---------------------
def _interrupt(*args, **kwargs):
    raise KeyboardInterrupt  # what Ctrl-C raises in the middle of the work


@pytest.mark.parametrize(
    ("module", "function", "arguments", "said"),
    [
        ("geomlens.report.runner", "build_report", lambda m, t: ["report", "--model", m, "--out", str(t / "rep")],
         "interrupted; the report in"),
        ("geomlens.sae.training", "cached_sae", lambda m, t: ["sae", "train", "--model", m, "--cache-dir", str(t)],
         "interrupted; no SAE was cached"),
    ],
    ids=["report", "sae train"],
)  # fmt: skip
def test_ctrl_c_prints_one_line_and_exits_130(module, function, arguments, said, model_dir, tmp_path,
                                               monkeypatch):  # fmt: skip
    import importlib

    monkeypatch.setattr(importlib.import_module(module), function, _interrupt)
    done = runner.invoke(gl_cli_app(), arguments(str(model_dir), tmp_path))
    assert done.exit_code == 130, done.output
    lines = message_lines(done)
    assert len(lines) == 1 and lines[0].startswith(said), done.stderr


def test_sae_training_reads_no_more_positions_than_the_model_has():
    # A 64-position model: sae-features without an SAE advised --max-length 64, and training
    # still truncated at its own 128 and failed the same way.
    from helpers.tiny_models import MAX_POSITIONS

    from geomlens.sae.training import activation_batches

    hf_model, tokenizer = tiny_gpt2()
    adapter = gl.attach(hf_model, tokenizer=tokenizer, backend="nnsight")
    long_text = " ".join(["the cat sat on the mat"] * 40)
    assert len(tokenizer(long_text)["input_ids"]) > 2 * MAX_POSITIONS
    batch = next(activation_batches(adapter, SITE, [long_text] * 2, batch_tokens=16))
    assert batch.shape == (16, hf_model.config.n_embd)
