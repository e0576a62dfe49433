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
# # The resolution of year representations
#
# How far apart must two years be before a model represents them as unalike? The
# `similarity` analysis measures g(d), the mean similarity of two stimuli at distance d, from a
# model's representations; `resolution` fits g(d), keeping the measured g(0) = 1, with step,
# linear, exponential, Gaussian and two-scale families, picks one by AIC, reports ε, the
# half-width, the floor Δ and the centring offset with
# bootstrap intervals, and places each layer in the (p_S, p_I) plane against the theory's
# front (docs/theory.md, docs/similarity.md).

# %% tags=["parameters"]
MODEL = "all-MiniLM-L6-v2"
STEP = 20  # years between stimuli (the shipped default is 10)
BOOTSTRAP = 50  # resamples for the intervals (the default is 200)
SITES = ["blocks.1.hook_resid_post", "blocks.3.hook_resid_post", "blocks.5.hook_resid_post"]

# %%
# %matplotlib inline
import geomlens as gl
from geomlens.data import stimuli

adapter = gl.load(MODEL)
years = stimuli.years(1500, 2000, STEP)
print(len(years.texts), "texts, e.g.", years.texts[:3])

# %% [markdown]
# Both analyses read the same stimuli, so they run fused: one forward pass per batch.
# `similarity="centred-cosine"` (the default) subtracts the stimulus-set mean before the cosine;
# the choice is recorded in the result.

# %%
results = gl.run(
    ["similarity", "resolution"], adapter, years.as_data(), site=SITES, bootstrap=BOOTSTRAP
)
g_of_d = results["similarity"].to_frame("g_of_d")
print(g_of_d[g_of_d.site == SITES[-1]].head(10))

# %%
resolution = results["resolution"]
for site in SITES:
    print(
        f"{site}: ε = {resolution[site + '.epsilon']:.1f} years "
        f"[{resolution[site + '.epsilon_ci_low']:.1f}, {resolution[site + '.epsilon_ci_high']:.1f}], "
        f"Δ = {resolution[site + '.delta']:.2f}, p_S = {resolution[site + '.p_similarity']:.3f}, "
        f"p_I = {resolution[site + '.p_identification']:.3f}"
    )
print(resolution.to_frame("fits").query("chosen"))

# %% [markdown]
# The figures: g(d) per layer with the fitted curves, and the layers' (p_S, p_I) points
# against the universal front. `plot()` returns the figure (the notebook shows it);
# `plot("file.png")` saves it too.

# %%
results["similarity"].plot()

# %%
resolution.plot()
