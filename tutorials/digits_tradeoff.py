# %% [markdown]
# # The generalisation–identification trade-off in a CNN, on handwritten digits
#
# The semantic-resolution paper (ICLR 2026) trains a ResNet on bird images with the loss
# L = (1 − λ) L_identification + λ L_similarity and shows that raising λ trades identification
# for generalisation, along a universal front in the (p_S, p_I) plane. This notebook repeats the
# experiment offline, on CPU, in a few minutes: scikit-learn's bundled 8×8 digits (no download),
# a small CNN, and the class distance |a − b| between digits.
#
# - **identification** (L_identification): which digit is this? (cross-entropy of a read-out)
# - **similarity** (L_similarity): of two images, which digit is closer to the probe's digit?
#   (the Luce choice over a learned similarity of the embeddings)
#
# Each trained net is then read through geomlens at its embedding layer (`module:embed`, a
# module-path site: any torch module works) and placed on the theory's front. See
# docs/vision.md for the definitions.

# %% tags=["parameters"]
SIMILARITY_WEIGHTS = [0.0, 0.25, 0.5, 0.75, 0.9, 1.0]  # λ of each net
EPOCHS = 30  # training epochs per net
WIDTH = 16  # channels of the first conv layer
SEED = 0
FIGURE = "digits_tradeoff.png"

# %%
# ruff: noqa: E402 (a notebook imports in the cell that first needs each library)
import numpy as np
import torch

import geomlens as gl
from geomlens.experiments.digits import (
    digit_distance,
    load_digits_split,
    measure_digits_model,
    train_digits_cnn,
)
from geomlens.theory import resolution

torch.set_num_threads(1)  # small convolutions: one thread is as fast and shares the machine
split = load_digits_split(seed=SEED)
print(len(split.train_images), "training images,", len(split.test_images), "held out")

# %% [markdown]
# Train one net per λ. λ = 0 is a plain classifier; λ = 1 never sees a class label, only which
# of two digits is closer to a third.

# %%
nets = {
    weight: train_digits_cnn(weight, split, epochs=EPOCHS, width=WIDTH, seed=SEED, progress=True)
    for weight in SIMILARITY_WEIGHTS
}

# %% [markdown]
# Read each net's embedding of the held-out images through geomlens and measure its empirical
# (p_S, p_I): the class-level similarity is the mean max(0, cos) between embeddings of two
# digits, and `theory.finite_sets.evaluate` turns it and the distances |a − b| into the expected
# accuracies of the two tests.

# %%
points = {weight: measure_digits_model(net, split) for weight, net in nets.items()}
for weight, point in points.items():
    print(
        f"λ = {weight:4.2f}: p_S = {point.p_s:.3f}, p_I = {point.p_i:.3f}, distance to the "
        f"front {point.front_distance:.3f} (nearest b = {point.front_b:.2f}, {point.regime})"
    )

# %% [markdown]
# The `resolution` analysis runs on the same nets through the same site. It treats each digit's
# mean embedding as one stimulus, fits g(d) over digit distance with four families (step,
# linear, exponential, Gaussian; by AIC) and reports the resolution scale ε in digits — "flat"
# when similarity does not fall with distance at all, as for a pure classifier.

# %%
for weight, net in nets.items():
    fitted = gl.run(
        "resolution",
        net,
        {"pixel_values": split.test_images, "coordinate": split.test_labels},
        site="module:embed",
        similarity="cosine",
        bootstrap=0,
        progress=False,
    )
    chosen = next(fit for fit in fitted.tables["fits"] if fit["chosen"])
    print(f"λ = {weight:4.2f}: g(d) is {chosen['family']}, ε = {chosen['epsilon']:.2f} digits")

# %% [markdown]
# The same reading works for any model of yours: `geomlens.experiments.tradeoff.measure_tradeoff`
# takes the model, its inputs, labels, your class distance and a site.

# %%
from geomlens.experiments.tradeoff import measure_tradeoff

check = measure_tradeoff(
    nets[SIMILARITY_WEIGHTS[0]],
    split.test_images,
    split.test_labels,
    digit_distance,
    site="module:embed",
)
assert np.isclose(check.p_s, points[SIMILARITY_WEIGHTS[0]].p_s)

# %% [markdown]
# Where the nets sit against the universal front (Theorem 1) and its noisy versions
# (Theorem 2).

# %%
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from geomlens.atomic_files import atomic_save_figure

figure, ax = plt.subplots(figsize=(5.5, 4.5))
front = resolution.pareto_front(401)
ax.plot(front.p_s, front.p_i, "k-", lw=1.5, label="universal front (Δ = 0)")
for delta in (0.1, 0.3):
    noisy = resolution.pareto_front(401, delta=delta)
    ax.plot(noisy.p_s, noisy.p_i, "k--", lw=0.7, alpha=0.5, label=f"Δ = {delta}")
colours = plt.cm.viridis(np.linspace(0, 0.9, len(points)))
for (weight, point), colour in zip(points.items(), colours):
    ax.plot(point.p_s, point.p_i, "o", color=colour, ms=7, label=f"λ = {weight:g}")
ax.set_xlabel("p_S (generalisation)")
ax.set_ylabel("p_I (identification)")
ax.legend(fontsize=7, loc="upper right")
ax.set_title("digits CNN: the loss weight λ moves the net along the front")
figure.tight_layout()
atomic_save_figure(figure, FIGURE, dpi=120)
print("wrote", FIGURE)

# %% [markdown]
# Reading: the plain classifier (λ = 0) sits in the identification corner — high p_I, p_S
# near chance — and nets trained with the similarity loss move toward the optimum p_S = 3/4
# at b = 1/2 while giving up identification. gl.attach left every net as it was: no hooks,
# the same weights.

# %%
from geomlens.models.adapter import count_torch_hooks

assert all(count_torch_hooks(net) == 0 for net in nets.values())
gl.attach(nets[SIMILARITY_WEIGHTS[0]]).sites()[:6]
