# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: tags,-all
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
# ---

# %% [markdown]
# # Writing and publishing a plugin
#
# An analysis of your own becomes a plugin: a small package with one entry point. Installed,
# it is listed by `geomlens list`, fuses with the built-in analyses into one forward pass,
# runs data-parallel and appears in `geomlens report --analysis NAME`. The full guide is
# docs/plugins.md; this notebook goes through the scaffold.

# %% tags=["parameters"]
NAME = "participation"  # the analysis name of the new plugin
WORKDIR = None  # where to write it; None: a temporary folder

# %%
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

workdir = Path(WORKDIR or tempfile.mkdtemp(prefix="geomlens-plugin-"))

# %% [markdown]
# `geomlens new-plugin NAME --dir DIR` writes the package (the same as
# `geomlens.scaffold.new_plugin`): a pyproject with the entry point, an analysis with a config
# (the participation ratio of pooled representations), and its tests.

# %%
made = subprocess.run(
    [sys.executable, "-m", "geomlens", "new-plugin", NAME, "--dir", str(workdir)],
    capture_output=True, text=True, check=True,
)  # fmt: skip
root = workdir / f"geomlens-{NAME}"
print(made.stdout)
print((root / "pyproject.toml").read_text())

# %% [markdown]
# The analysis: a config of `option` fields, `sites`, `update` (fold a batch into sums, keep
# no batch tensor), `merge` (add another worker's sums; either side may be empty),
# `finalize` (metrics from the sums), `plot` and a plain-words `reading` for the report.

# %%
package = root / "src" / f"geomlens_{NAME.replace('-', '_')}" / "__init__.py"
print(package.read_text()[:2500])

# %% [markdown]
# Install it. For development `pip install -e ".[test]"` in its folder; here, without
# touching this environment, into a folder put on the path.

# %%
target = workdir / "site"
subprocess.run(
    [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
     "--target", str(target), str(root)],
    check=True,
)  # fmt: skip
sys.path.insert(0, str(target))

import geomlens as gl  # noqa: E402  (after the plugin's folder is on the path)

assert NAME in gl.list_analyses()

# %% [markdown]
# Run it on recorded activations with a planted answer: variance spread evenly over 5 of 16
# directions gives a participation ratio of about 5.

# %%
rng = np.random.default_rng(0)
basis = np.linalg.qr(rng.normal(size=(16, 16)))[0][:, :5]
recorded = {"blocks.0.hook_resid_post": rng.normal(size=(3000, 5)) @ basis.T}
planted = gl.run(NAME, recorded, batch_size=500)
print(planted["participation_ratio"])
assert abs(planted["participation_ratio"] - 5) < 0.3

# %% [markdown]
# And on a model, fused with a built-in analysis in one pass.

# %%
from geomlens.data.corpus import stdlib_paragraphs  # noqa: E402

adapter = gl.load()
fused = gl.run([NAME, "activation-stats"], adapter, stdlib_paragraphs(16), batch_size=8)
print(fused[NAME], gl.analysis_class(NAME).reading(fused[NAME]))

# %% [markdown]
# The generated tests show the patterns to keep: planted data on recorded arrays, a numpy
# reference fed in the same pass, the analysis contract (`geomlens.testing.check_analysis`), and
# the entry point seen from a fresh process. Run one of them here:

# %%
tested = subprocess.run(
    [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "planted"],
    cwd=root, capture_output=True, text=True,
    # The plugin, and the geomlens this tutorial runs on (ahead of an installed one).
    env={**os.environ, "PYTHONPATH": os.pathsep.join([str(target), str(Path(gl.__file__).parents[1])])},
)  # fmt: skip
print(tested.stdout[-300:])
assert tested.returncode == 0

# %% [markdown]
# **Publishing**: `python -m build` in the plugin folder, then `twine upload dist/*`. Users
# `pip install geomlens-NAME` and the analysis appears in `geomlens list`.
