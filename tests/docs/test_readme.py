"""Every Python block and every shell command of README.md runs as written, so the README cannot
drift from the code.

Conventions the README keeps (README authors: see the notes here):

- Fenced ```python blocks run in order in one namespace (a block may use what an earlier block
  defined), in a fresh process whose working folder is a scratch folder. Names a block may use
  without defining: ``texts`` (a few English paragraphs), ``responses`` (a [200, 16] array of
  recorded activations), ``hf_model`` and ``tokenizer`` (the bundled all-MiniLM-L6-v2 loaded
  with ``transformers``: 6 layers), ``distances`` and ``similarities`` (a 12-stimulus circle
  and a step similarity on it).
- Fenced ```bash / ```sh / ```console blocks: each line is a command (``$ `` prompts and
  ``# comments`` are dropped). Environment set-up steps joined by ``&&`` (``python3 -m venv``,
  activating it, ``pip install``) are what CI does itself; they are checked to be the commands
  of ``.ci/run`` and not repeated. The test command (``ruff``, ``mypy``, then ``pytest …``)
  is checked to be the one ``.ci/run`` runs, verbatim, and not run again from inside the
  suite. Every other command runs with this environment's ``geomlens``.
- Indented blocks (4 spaces) are synopses with placeholders and are not run.
- The bundled MiniLM and the embedded causal LMs (``smollm2-135m-instruct``, ``gemma-3-270m``)
  run as written. Stand-ins: a hub model named in a block (``from_pretrained("gpt2")``, ``--model gpt2``,
  ``gl.load("gpt2")``) runs with a tiny 6-layer GPT-2 saved to a folder
  (``HookedTransformer.from_pretrained(...)`` with a tiny 6-layer HookedTransformer);
  ``geomlens report`` runs with ``--quick`` (the full report is measured, not run in the
  suite), once per suite: the shared ``quick_report_run`` fixture (tests/conftest.py) runs it
  through the CLI and tests/e2e/test_report.py reads the page it wrote.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers.paths import REPO
from helpers.xdist_groups import QUICK_REPORT

ROOT = REPO
#: The README under test; point GEOMLENS_README at a draft to check it before it replaces README.md.
README = Path(os.environ.get("GEOMLENS_README", ROOT / "README.md"))
FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
SHELL_LANGUAGES = ("bash", "sh", "shell", "console")
BUNDLED_NAMES = ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2", "minilm")
SETUP_STEPS = re.compile(r"^(python3? -m venv|\. \S+/activate|source \S+/activate|pip install)")

PRELUDE = textwrap.dedent(
    """
    import sys
    import numpy as np
    sys.path.insert(0, {tests!r})
    from helpers.tiny_models import tiny_tokenizer
    from transformers import AutoModel, AutoTokenizer
    from geomlens.data.corpus import stdlib_paragraphs
    from geomlens.models.attach import resolve_model_path

    def standin_hooked_transformer():
        from transformer_lens import HookedTransformer, HookedTransformerConfig
        config = HookedTransformerConfig(
            n_layers=6, d_model=32, n_heads=4, d_head=8, d_mlp=64, n_ctx=64, act_fn="gelu",
            d_vocab=len(tiny_tokenizer()), normalization_type="LN", seed=0,
        )
        return HookedTransformer(config, tokenizer=tiny_tokenizer()).eval()

    texts = stdlib_paragraphs(6)
    responses = np.random.default_rng(0).normal(size=(200, 16))
    _minilm = resolve_model_path(None)[0]
    hf_model, tokenizer = AutoModel.from_pretrained(_minilm).eval(), AutoTokenizer.from_pretrained(_minilm)
    _angles = np.arange(12) / 12
    distances = np.minimum(abs(_angles[:, None] - _angles), 1 - abs(_angles[:, None] - _angles))
    similarities = (distances < 0.2).astype(float)
    """
)


def readme_blocks() -> list[tuple[str, str]]:
    return [(language.lower(), body) for language, body in FENCE.findall(README.read_text())]


def is_hub_name(name: str) -> bool:
    """A name that would need the hub (the bundled MiniLM and the embedded causal LMs load
    offline, so they run as written)."""
    from geomlens.models.embedded_lms import embedded_lm

    return name not in BUNDLED_NAMES and embedded_lm(name) is None and not Path(name).exists()


def with_stand_ins(code: str, standin_folder: Path) -> str:
    """Replace hub models named in Python code by the tiny stand-ins (see the module docstring)."""
    code = re.sub(
        r"HookedTransformer\.from_pretrained\([^)]*\)", "standin_hooked_transformer()", code
    )

    def local(match: re.Match) -> str:
        call, quote, name = match.groups()
        return f"{call}({quote}{standin_folder}{quote}" if is_hub_name(name) else match.group(0)

    return re.sub(r"(from_pretrained|gl\.load)\(\s*([\"'])([^\"']+)\2", local, code)


def shell_commands(body: str) -> list[str]:
    lines = []
    for line in body.splitlines():
        line = line.strip()
        if line.startswith("$ "):
            line = line[2:]
        if line and not line.startswith("#"):
            lines.append(line)
    return lines


def ci_commands() -> list[str]:
    return [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]


@pytest.fixture(scope="module")
def standin_folder(tmp_path_factory) -> Path:
    """A tiny 6-layer GPT-2 and its tokenizer saved as a model folder: the hub stand-in."""
    import torch
    from helpers.tiny_models import MAX_POSITIONS, tiny_tokenizer
    from transformers import GPT2Config, GPT2LMHeadModel

    tokenizer = tiny_tokenizer()
    config = GPT2Config(
        n_layer=6, n_embd=32, n_head=4, n_positions=MAX_POSITIONS, vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config).eval()
    folder = tmp_path_factory.mktemp("standin-gpt2")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _environment() -> dict[str, str]:
    bin_folder = str(Path(sys.executable).parent)
    return {
        **os.environ,
        "PATH": bin_folder + os.pathsep + os.environ.get("PATH", ""),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "MPLBACKEND": "Agg",
    }


def test_readme_has_runnable_blocks():
    languages = [language for language, _ in readme_blocks()]
    assert "python" in languages and any(lang in SHELL_LANGUAGES for lang in languages)


def test_python_blocks_run_as_written(tmp_path, standin_folder):
    blocks = [body for language, body in readme_blocks() if language in ("python", "py")]
    script = PRELUDE.format(tests=str(ROOT / "tests"))
    for number, body in enumerate(blocks, 1):
        code = with_stand_ins(body, standin_folder)
        script += f"\n# --- README python block {number}\nexec(compile({code!r}, 'README block {number}', 'exec'))\n"
    ran = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
        env=_environment(), timeout=900,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-4000:]


def _commands() -> list[str]:
    return [
        command
        for language, body in readme_blocks()
        if language in SHELL_LANGUAGES
        for command in shell_commands(body)
    ]


#: The command the shared quick report is (tests/conftest.py ``quick_report_run``).
SHARED_REPORT = "geomlens report --quick"


def _quick(runnable: str) -> str:
    """``geomlens report`` runs as ``--quick`` (the full report is measured, not run here)."""
    words = shlex.split(runnable)
    if words[:2] == ["geomlens", "report"] and "--quick" not in words:
        return runnable + " --quick"
    return runnable


def _command_params() -> list:
    """The commands; the one whose last step runs as the shared quick report joins the
    quick-report group, so that the worker that built it reads it (see the test)."""
    return [
        pytest.param(
            command,
            id=f"command{number}",
            marks=[pytest.mark.xdist_group(QUICK_REPORT)]
            if _quick(command.split("&&")[-1].strip()) == SHARED_REPORT
            else [],
        )
        for number, command in enumerate(_commands())
    ]


@pytest.mark.parametrize("command", _command_params())
def test_shell_command_runs_as_written(command, tmp_path, standin_folder, request):
    steps = [step.strip() for step in command.split("&&")]
    setup = [step for step in steps if SETUP_STEPS.match(step)]
    rest = [step for step in steps if not SETUP_STEPS.match(step)]
    if setup:  # CI creates the environment itself: the README must say what CI does
        ci_text = "\n".join(ci_commands())
        for step in setup:
            if not step.startswith(("pip install", ". ", "source ")):
                assert step in ci_text, f"set-up step {step!r} is not what .ci/run does"
    if rest and rest[-1].startswith("pytest"):  # lint and type checks, then the tests
        assert command in ci_commands() or any(command in line for line in ci_commands()), (
            f"the README's test command {command!r} must be the one .ci/run runs"
        )
        return
    if not rest:
        return
    runnable = " && ".join(rest)
    words = shlex.split(runnable)
    if "--model" in words:
        name = words[words.index("--model") + 1]
        if is_hub_name(name):
            runnable = runnable.replace(f"--model {name}", f"--model {standin_folder}")
    runnable = _quick(runnable)
    if runnable == SHARED_REPORT:
        # The same command tests/e2e/test_report.py reads the page of: run once, through the CLI
        # in a scratch folder, by the shared fixture (tests/conftest.py), not a second time here.
        result, _ = request.getfixturevalue("quick_report_run")
        assert result.exit_code == 0, f"{runnable}\n{result.output[-3000:]}"
        assert "wrote " in result.output and "index.html" in result.output, result.output[-2000:]
        return
    ran = subprocess.run(
        ["bash", "-c", runnable], cwd=tmp_path, capture_output=True, text=True,
        env=_environment(), timeout=900,
    )  # fmt: skip
    assert ran.returncode == 0, f"{runnable}\n{ran.stdout[-2000:]}\n{ran.stderr[-3000:]}"
