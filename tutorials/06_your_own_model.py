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
# # Attaching your own Hugging Face model, on both backends
#
# geomlens takes a model you already have: a `transformers` module with its tokenizer, a
# TransformerLens `HookedTransformer` or `TransformerBridge`, or an nnsight model. The same
# analysis code runs on every backend, and sites are TransformerLens hook names everywhere.
# Here the "own model" is the all-MiniLM-L6-v2 that ships with geomlens, loaded with plain
# `transformers` from its folder; set `MODEL` to a hub name (e.g. "gpt2") where the hub is
# reachable, or to your own fine-tuned folder.

# %% tags=["parameters"]
MODEL = None  # None: the bundled MiniLM folder; or a hub name / local folder
DEVICE = "cpu"
SITE = "blocks.2.hook_resid_post"

# %%
import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer

import geomlens as gl
from geomlens.data.corpus import stdlib_paragraphs
from geomlens.models.attach import resolve_model_path

folder, model_id = resolve_model_path(MODEL)
tokenizer = AutoTokenizer.from_pretrained(folder)
hf_model = AutoModel.from_pretrained(folder).to(DEVICE).eval()
before = {name: p.detach().clone() for name, p in hf_model.state_dict().items()}

# %% [markdown]
# **nnsight backend** (the default for a plain module): the module is used as it is, with
# hooks that are removed after every pass.

# %%
on_nnsight = gl.attach(hf_model, tokenizer=tokenizer, model_id=model_id)
print(on_nnsight.backend, on_nnsight.sites()[:4])

# %% [markdown]
# **TransformerLens backend**: the module is wrapped in a `TransformerBridge` (on a copy, so
# your module is never modified). Results record the numerics mode (raw HF weights here).

# %%
on_bridge = gl.attach(hf_model, tokenizer=tokenizer, backend="transformer-lens", model_id=model_id)
print(on_bridge.backend, on_bridge.describe().get("numerics"))

# %% [markdown]
# The same analysis on the same weights through both backends gives the same numbers.

# %%
texts = stdlib_paragraphs(12)
stats = {
    adapter.backend: gl.run("activation-stats", adapter, texts, site=SITE, batch_size=4)
    for adapter in (on_nnsight, on_bridge)
}
norms = {backend: result[SITE + ".mean_norm"] for backend, result in stats.items()}
print(norms)
assert np.isclose(norms["nnsight"], norms["transformer-lens"], rtol=1e-4)

# %% [markdown]
# Your model is left as it was: no hooks, the same weights.

# %%
after = hf_model.state_dict()
assert all(torch.equal(before[name], after[name]) for name in before)
assert on_nnsight.hook_count() == 0

# %% [markdown]
# `geomlens check MODEL` (or `geomlens.checks.conformance.check_adapter(adapter)`) verifies on your
# model that every canonical site resolves, shapes agree and padded batches equal one-by-one
# runs. With a GPU, pass `device="cuda"` to `gl.load` or move the module first.

# %%
from geomlens.checks.conformance import all_passed, check_adapter

checks = check_adapter(on_nnsight)
for check in checks:
    print("PASS" if check.passed else "FAIL", check.name)
assert all_passed(checks)
