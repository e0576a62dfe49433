"""CONTRIBUTING.md, followed literally: a newcomer's analysis folder, made in a copy of the package
by the steps written there and no other file touched, is a built-in that passes every check of
the contract; and the list of what a built-in touches is the folder and its README line."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import geomlens.analyses
from geomlens.analyses.registry import builtin_analyses
from geomlens.testing import CHECKS

ROOT = Path(__file__).resolve().parents[2]
CONTRIBUTING = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")


def touch_points() -> list[str]:
    block = CONTRIBUTING.split("<!-- touch-points -->")[1].split("<!-- /touch-points -->")[0]
    return re.findall(r"^- `([^`]+)`", block, flags=re.M)


def test_a_builtin_touches_its_folder_and_the_readme():
    assert touch_points() == ["src/geomlens/analyses/<name>/", "README.md"]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for name in builtin_analyses():
        assert f"`{name}`" in readme, f"name {name} in README.md"


def test_the_template_folder_named_in_contributing_exists():
    template = re.search(r"Copy `(src/geomlens/analyses/\w+/)`", CONTRIBUTING)
    assert template is not None
    folder = ROOT / template.group(1)
    assert {"__init__.py", "analysis.py", "example.py", "metrics.py", "reading.py"} <= {
        p.name for p in folder.iterdir()
    }


NEWCOMER = """
import json, sys
sys.path[:0] = [{source!r}, {tests!r}]
import geomlens
assert geomlens.__file__.startswith({source!r}), geomlens.__file__
import geomlens as gl
from geomlens.analyses.registry import analysis_class, builtin_analyses
from geomlens.testing import CHECKS, CheckSkipped, example_subject
from helpers.tiny_models import tiny_gpt2

assert "my-analysis" in builtin_analyses(), builtin_analyses()
cls = analysis_class("my-analysis")
assert cls.__name__ == "MyAnalysis" and cls.__module__ == "geomlens.analyses.my_analysis.analysis"
model, tokenizer = tiny_gpt2()
adapter = gl.attach(model, backend="nnsight", tokenizer=tokenizer)
outcome = {{}}
for check in CHECKS:
    try:
        check(example_subject(cls, adapter))
        outcome[check.name] = "passed"
    except CheckSkipped as reason:
        outcome[check.name] = f"skipped: {{reason}}"
print(json.dumps(outcome))
"""


def test_a_newcomers_folder_passes_every_contract_check(tmp_path):
    source = tmp_path / "src"
    package = Path(geomlens.analyses.__file__).resolve().parents[1]
    shutil.copytree(package, source / "geomlens", ignore=shutil.ignore_patterns("__pycache__"))
    analyses = source / "geomlens" / "analyses"
    # 1. Copy the template folder.
    shutil.copytree(analyses / "activation_stats", analyses / "my_analysis")
    # 2. The declaration's name and aliases (its summary may stay for now).
    declared = analyses / "my_analysis" / "__init__.py"
    text = declared.read_text(encoding="utf-8")
    assert 'name="activation-stats"' in text
    text = text.replace('name="activation-stats"', 'name="my-analysis"')
    declared.write_text(re.sub(r"\n    aliases=\(.*\),", "", text), encoding="utf-8")
    # 3. The class renamed inside the folder (its pointer in the declaration with it).
    for path in (analyses / "my_analysis").glob("*.py"):
        path.write_text(path.read_text(encoding="utf-8").replace("ActivationStats", "MyAnalysis"))
    # 4. Example, metric specs and reading: the template's serve as they are.
    script = NEWCOMER.format(source=str(source), tests=str(ROOT / "tests"))
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                   "MPLBACKEND": "Agg"}  # fmt: skip
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True,
                          text=True, env=environment, timeout=600, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert list(outcome) == [check.name for check in CHECKS]
    assert outcome.pop("cross-backend").startswith("skipped: no adapter")
    assert set(outcome.values()) == {"passed"}, outcome


def _python_blocks(text: str, heading: str) -> list[str]:
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_the_plugins_page_register_example_leaves_the_builtins_alone():
    """docs/plugins.md's ``@register_analysis`` example runs as written: it registers its own
    name, and every built-in still answers to its names."""
    import geomlens as gl
    from geomlens.analyses.registry import ANALYSES

    plugins = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    (block,) = _python_blocks(plugins, "## 9. Registering without an entry point")
    before = {name: gl.analysis_class(name) for name in builtin_analyses()}
    namespace: dict = {}
    try:
        exec(compile(block, "docs/plugins.md", "exec"), namespace)
        registered = gl.analysis_class("mean-token-norm")
        assert registered.__name__ == "MeanTokenNorm"
        assert {name: gl.analysis_class(name) for name in before} == before
        assert gl.analysis_class("stats") is before["activation-stats"]
    finally:
        ANALYSES.remove("mean-token-norm")


def test_the_plugins_page_check_analysis_example_defines_what_it_calls():
    """Every name docs/plugins.md's contract snippets call is imported or defined there (no
    undefined ``tiny_model()``)."""
    import ast
    import builtins

    plugins = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    for block in _python_blocks(plugins, "## 8. The analysis contract"):
        tree = ast.parse(block)
        defined = set(dir(builtins))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                defined |= {(a.asname or a.name).split(".")[0] for a in node.names}
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                defined.add(node.name)
                defined |= {a.arg for a in node.args.args} if hasattr(node, "args") else set()
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                defined.add(node.id)
            elif isinstance(node, ast.Lambda):
                defined |= {a.arg for a in node.args.args}
            elif isinstance(node, ast.comprehension):
                defined |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
        used = {
            n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
        }
        assert used <= defined, sorted(used - defined)
