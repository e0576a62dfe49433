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
# # Quickstart: attach a model, run an analysis, read the result
#
# geomlens attaches representation-geometry analyses to a model and streams its activations
# through them, one forward pass per batch. This notebook uses the bundled
# all-MiniLM-L6-v2 (a real pretrained 6-layer BERT that ships with the package, so nothing is
# downloaded) on the CPU.

# %% tags=["parameters"]
MODEL = "all-MiniLM-L6-v2"  # any Hugging Face name or local folder
BACKEND = "nnsight"  # or "transformer-lens"
TEXTS = 24  # paragraphs of the bundled English corpus to run on

# %%
# %matplotlib inline
import tempfile
from pathlib import Path

import geomlens as gl
from geomlens.data.corpus import stdlib_paragraphs

adapter = gl.load(MODEL, backend=BACKEND)
print(adapter.model_id, adapter.backend, adapter.n_layers, "layers")
adapter.sites()[:8]

# %% [markdown]
# Sites are TransformerLens hook names on every backend: `hook_embed`, then per block
# `blocks.L.hook_resid_pre`, `...hook_attn_out`, `...mlp.hook_post`, `...hook_resid_post`, …
#
# `gl.list_analyses()` lists every analysis, built-in and installed plugins.

# %%
gl.list_analyses()

# %% [markdown]
# Run one analysis on some texts. A text may mark one word with `[[...]]`; `pooling="span"`
# then averages the tokens of that word.

# %%
texts = stdlib_paragraphs(TEXTS)
result = gl.run("activation-stats", adapter, texts, batch_size=8)
result

# %% [markdown]
# A `Result` holds flat `metrics`, `tables` (lists of plain rows), the `config` used and the
# `provenance` (model, backend, sites, seed, library versions, timings).

# %%
frame = result.to_frame()
print(frame.head(8))
print(result.provenance["model_id"], result.provenance["num_examples"], "inputs")
assert result.provenance["num_examples"] == TEXTS

# %%
marked = ["It happened in the year [[1630]].", "It happened in the year [[1920]]."]
span = gl.run("activation-stats", adapter, marked, site="blocks.3.hook_resid_post", pooling="span")
span["blocks.3.hook_resid_post.rows"]

# %% [markdown]
# Several analyses run **fused**: one forward pass per batch serves them all.

# %%
years = [f"It happened in the year [[{year}]]." for year in range(1500, 2001, 50)]
both = gl.run(
    ["activation-stats", "similarity"],
    adapter,
    {"text": years, "coordinate": list(range(1500, 2001, 50))},
)
print(sorted(both), both["similarity"].to_frame("g_of_d").head())

# %% [markdown]
# Save the result (written atomically; here in a temporary folder, so running the notebook
# leaves no file behind) and draw its figure through its analysis: `plot()` returns the
# figure, which the notebook shows; `plot("stats.png")` would also save it.

# %%
saved = Path(tempfile.mkdtemp(prefix="geomlens-quickstart-")) / "stats.json"
result.to_json(saved)
again = gl.Result.from_json(saved)
assert again.metrics == result.metrics
again.plot()

# %% [markdown]
# Next: `geomlens report` runs every analysis on its shipped data and writes a web page
# (`geomlens report --quick` for a first look); the other tutorials go through each analysis.
