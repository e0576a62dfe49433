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
# # Abstraction, CCGP and GELU linearisation
#
# Does a model code "male vs female" as one direction whatever the word pair? The abstraction
# cosine α is the mean cosine between the difference vectors (king − queen, actor − actress,
# …) across contexts; CCGP trains a linear probe on some word pairs and tests it on others.
# The abstraction-dynamics theory says that an elementwise nonlinearity attenuates α, so
# replacing one MLP's GELU by the identity should raise it (docs/theory.md, docs/abstraction.md).

# %% tags=["parameters"]
MODEL = "all-MiniLM-L6-v2"
TASKS = ["gender", "number"]  # of the shipped English sets; None for all of them
N_BOOTSTRAP = 100  # resamples of contexts (the default is 1000)
N_SHUFFLES = 20  # label shuffles for the null (the default is 200)

# %%
# %matplotlib inline
import geomlens as gl
from geomlens.data.concepts import english_concepts
from geomlens.theory import abstraction as theory

adapter = gl.load(MODEL)
concepts = english_concepts(TASKS)
print(len(concepts["text"]), "rows, e.g.", concepts["text"][:2], concepts["context"][:2])

# %%
options = {"n_bootstrap": N_BOOTSTRAP, "n_shuffles": N_SHUFFLES}
results = gl.run(["abstraction", "ccgp"], adapter, concepts, **options)
per_task = results["abstraction"].to_frame("per_task")
print(per_task[["site", "task", "alpha", "alpha_ci_low", "alpha_ci_high", "alpha_null"]].head(12))

# %%
probe = results["ccgp"].to_frame("per_task")
columns = ["site", "task", "ccgp", "within_context_accuracy", "mixed_context_accuracy"]
print(probe[columns].tail(6))  # within-context: NaN where a context has one row per value

# %% [markdown]
# ## Local linearisation
#
# `adapter.linearize(layers, mode)` replaces the MLP activation of those layers by the
# identity (or by its tangent at the mean pre-activation) for passes run inside the block;
# the model is bitwise unchanged afterwards. `linearization-effect` runs both conditions in
# one pass and reports the fidelity cost.

# %%
penultimate = adapter.n_layers - 2
with adapter.linearize([penultimate], mode="identity"):
    linear = gl.run("abstraction", adapter, concepts, **options)
last = f"blocks.{adapter.n_layers - 1}.hook_resid_post"
print(
    f"α at {last}: {results['abstraction'][last + '.alpha']:.3f} -> {linear[last + '.alpha']:.3f}"
)
assert linear.provenance["linearizations"], "the result records that it ran linearised"
print(linear.provenance["linearizations"])

# %%
effect = gl.run("linearization-effect", adapter, concepts, layers=[penultimate], **options)
print({k: round(v, 4) for k, v in effect.metrics.items() if "." not in k})
effect.plot()

# %% [markdown]
# ## The theory's numbers
#
# In the two-factor model α = (1 − ν)/(1 + ν) for an inverse SNR ν; a trained two-layer linear
# network ends at α_∞ = (1 − √ν̄)/(1 + √ν̄); with depth, α moves toward the target's.

# %%
print("α from ν = 0.5:", theory.alpha_from_nu(0.5))
print("α_∞ for ν_x = 0.5, ν_y = 0.1:", theory.alpha_terminal(0.5, 0.1))
print("depth L = 4:", theory.depth_terminal(0.2, 0.8, 4))
