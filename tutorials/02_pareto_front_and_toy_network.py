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
# # The Pareto front of semantic resolution, and the toy ReLU network
#
# A system that compares stimuli by a similarity g with a finite resolution ε cannot be good
# at both generalising (the similarity test, accuracy p_S) and telling stimuli apart (the
# identification test, p_I). With b the fraction of stimuli inside a probe's ε-ball, the best
# it can do is the universal front (1/2 + b − b², 1 − b/2) (Theorem 1). The formulas and the
# paper are in docs/theory.md. Everything here is numpy/scipy, plus a small torch network.

# %% tags=["parameters"]
EPOCHS = 40  # the paper trains 500; 40 already shows the rise toward the front
STIMULI = 50  # l one-hot stimuli on a circle
HIDDEN = 10  # m hidden units

# %%
# %matplotlib inline
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from geomlens.theory import finite_sets, resolution, toy

b = np.linspace(0, 1, 201)
front = resolution.pareto_front(201)
optimum = resolution.similarity_optimum()
print(f"best similarity accuracy p_S = {float(optimum.p_s):.3f} at b = {float(optimum.b):.3f}")
assert abs(float(optimum.p_s) - 0.75) < 1e-6

# %% [markdown]
# Noise Δ (a floor of similarity between unlike stimuli) pulls the front down (Theorem 2);
# linear-decay similarity on a circle gives Proposition 1's curve. Regimes: fine resolution
# (b < 1/4), trade-off, interference (b > 1/2).

# %%
noisy = {delta: resolution.pareto_front(201, delta=delta) for delta in resolution.NOISE_CURVES}
decay_s, decay_i = resolution.linear_decay_circle(b)
for value in (0.1, 0.3, 0.7):
    print(value, resolution.regime(value))

# %% [markdown]
# The same accuracies for *any* finite stimulus set: here 40 points on a circle with a step
# similarity of radius ε = 0.0875 (each ball holds 7 of the 40 points, b = 0.175). Every
# neighbourhood has the same size, so Theorem 1 says the point lies exactly on the front.

# %%
points = 40
angles = np.arange(points) / points
gap = np.abs(angles[:, None] - angles[None, :])
distances = np.minimum(gap, 1 - gap)
similarity = (distances < 0.0875).astype(float)
measured = finite_sets.evaluate(distances, similarity, n=2)
print(measured)
assert abs(measured.p_s - float(resolution.p_similarity(0.175))) < 1e-9
assert abs(measured.p_i - float(resolution.p_identification(0.175))) < 1e-9

# %% [markdown]
# ## The toy ReLU network
#
# One-hot stimuli on a circle, W ∈ R^{m×l}, learned similarity ReLU(⟨W x_i, W x_j⟩), trained on
# 3-item similarity trials. Its exact (p_S, p_I) per epoch rises toward the front.

# %%
run = toy.train_toy(toy.ToyConfig(stimuli=STIMULI, hidden=HIDDEN, epochs=EPOCHS))
print(f"p_S {run.p_s[0]:.3f} -> {run.p_s[-1]:.3f}, p_I {run.p_i[0]:.3f} -> {run.p_i[-1]:.3f}")
assert run.p_s[-1] > run.p_s[0], "training on similarity trials raises p_S"

# %%
figure = Figure(figsize=(6.5, 4.5), layout="constrained")
FigureCanvasAgg(figure)
axes = figure.subplots()
axes.plot(front.p_s, front.p_i, "k", label="universal front (Δ = 0)")
for (delta, curve), style in zip(noisy.items(), (":", "-.", (0, (1, 3)))):
    axes.plot(curve.p_s, curve.p_i, color="grey", linestyle=style, label=f"front, Δ = {delta}")
axes.plot(decay_s, decay_i, "--", label="linear decay on the circle (Prop. 1)")
axes.plot(run.p_s, run.p_i, ".-", markersize=3, label=f"toy network, {EPOCHS} epochs")
axes.set_xlabel(resolution.PLANE_AXES[0])  # p_S on x, p_I on y: as in every geomlens figure
axes.set_ylabel(resolution.PLANE_AXES[1])
axes.set_title("n = 2: each test trial offers two candidates")
axes.legend()
figure
