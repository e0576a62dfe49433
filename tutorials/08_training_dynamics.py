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
# # Geometry across training: `gl.sweep` over checkpoints, with the theory overlaid
#
# Every analysis measures one snapshot; `gl.sweep` runs analyses on every checkpoint of a
# training run (each through the ordinary fused `gl.run`), caches one Result per checkpoint,
# and rebuilds a trajectory table from those files with the theory beside it
# (docs/dynamics.md). Here, all offline:
#
# 1. a tiny GPT-2 trained from scratch on templated sentences with two binary factors (the
#    noun's gender, the tense), about 20 checkpoints, swept with `abstraction` + `ccgp` on both
#    backends;
# 2. the minimal two-factor linear network of the abstraction-dynamics paper, whose exact α(t)
#    the sweep overlays (α_max, α_∞, the per-layer law);
# 3. the toy ReLU network walking to the generalisation–identification front.

# %% tags=["parameters"]
STEPS = 240  # training steps of the tiny GPT-2 (about a minute on one CPU thread)
CHECKPOINTS = "every:12"  # which steps to save: every:K or log:N
LINEAR_STEPS = 3000  # gradient-descent steps of the linear network (t = Σ lr = 30)
TOY_EPOCHS = 30  # epochs of the toy network

# %%
# %matplotlib inline
import torch
from IPython.display import Image, display

import geomlens as gl
from geomlens.experiments import abstraction_dynamics, toy_network, two_factor_lm
from geomlens.theory.toy import ToyConfig

torch.set_num_threads(1)  # tiny models run fastest on one thread

# %% [markdown]
# ## 1. A tiny GPT-2, trained here
#
# `two_factor_lm.train` writes `checkpoint-N/` folders as a Hugging Face Trainer does
# (weights, config, tokenizer, `trainer_state.json`); `gl.series` reads them in step order.

# %%
run = two_factor_lm.train(
    two_factor_lm.TinyLMConfig(layers=3, steps=STEPS, checkpoints=CHECKPOINTS), "lm-run"
)
print(f"{len(run)} checkpoints; loss {run[1]['loss']:.2f} → {run[-1]['loss']:.2f}")
series = gl.series("lm-run")
series

# %%
data = two_factor_lm.concept_data()  # "today the [[king]]", concept = gender, context = tense
print(data["text"][:2], data["text"][-2:])
fast = {"n_bootstrap": 200, "n_shuffles": 20}
sweeps = {
    backend: gl.sweep(
        ["abstraction", "ccgp"],
        gl.series("lm-run", backend=backend),
        data,
        out=f"lm-sweep-{backend}",
        **fast,
    )  # fmt: skip
    for backend in ("nnsight", "transformer-lens")
}
table = sweeps["nnsight"].to_frame()
table[table.metric == "alpha"].tail(6)

# %%
# The training record beside the geometry: each checkpoint's loss from its
# trainer_state.json (a Trainer that logs the learning rate also gives `learning_rate`,
# and Σ lr for `time="lr-sum"`); the figure draws it in a panel under the trajectory.
table[["checkpoint", "step", "train_loss"]].drop_duplicates().tail(4)

# %%
# Both backends read the same weights: the trajectories agree.
lens = sweeps["transformer-lens"].to_frame()
print("largest |nnsight − TransformerLens|:", float((table.value - lens.value).abs().max()))

# %% [markdown]
# The figure: α against training step at every layer (band: bootstrap interval over
# contexts, none with two contexts), and across layers at three checkpoints with the per-layer
# artanh law drawn through the first and last layer. That law is exact for a balanced deep
# linear network; a trained transformer need not follow it, and the sweep reports it as a
# diagnostic only (`theory_layer_law`, `residual_layer_law`).

# %%
Image(filename="lm-sweep-nnsight/abstraction.png")

# %%
# A rerun measures nothing: every Result is cached under a key of the analyses, their
# options, the data, the sites, the seed and the weights' bytes.
again = gl.sweep(["abstraction", "ccgp"], series, data, out="lm-sweep-nnsight", **fast)
print("checkpoints measured again:", len(again.measured))

# %% [markdown]
# ### λ̂(t) beside α(t)
#
# `llc` is the local learning coefficient at each checkpoint's weights, by devinterp's own
# SGLD estimator (`pip install "geomlens[devinterp]"`): swept with `abstraction`, it is a row
# of the same table on the same time axis (site `summary`, its interval over chains), and
# `abstraction.png` draws it on a right-hand scale. The probe set is short (96 tokens), so the
# sampler takes sequences of 8 tokens, 4 at a time; λ̂ is compared across checkpoints at one
# setting, never across settings (docs/dynamics.md).

# %%
import importlib.util

if importlib.util.find_spec("devinterp") is None:
    print('llc needs devinterp: pip install "geomlens[devinterp]"')
else:
    with_llc = gl.sweep(
        ["abstraction", "llc"], gl.series("lm-run", select="log:8"), data, out="lm-sweep-llc",
        n_bootstrap=0, n_shuffles=0, sequence_length=8, sgld_batch_size=4, draws=40,
    )  # fmt: skip
    llc_table = with_llc.to_frame()
    print(llc_table[llc_table.analysis == "llc"][["step", "value", "ci_low", "ci_high"]])
    display(Image(filename="lm-sweep-llc/abstraction.png"))

# %% [markdown]
# ## 2. The exact theory: the two-factor linear network
#
# `abstraction_dynamics.train` (or `geomlens experiment abstraction-dynamics`) trains the
# paper's minimal network by gradient descent with the ridge readout solved exactly, from the
# aligned start of scale κ, and writes its setup to `run.json`: Σx, Σy, γ, κ, the depth and
# Σ lr per checkpoint. The sweep then overlays the exact α(t) at t = Σ lr.

# %%
config = abstraction_dynamics.AbstractionDynamicsConfig(steps=LINEAR_STEPS, checkpoints="log:40")
abstraction_dynamics.train(config, "linear-run")
exact = gl.sweep("abstraction", "linear-run", out="linear-sweep", n_bootstrap=0, n_shuffles=0)
summary = exact.theory["exact"]
for name in ("alpha_max", "peak_time", "alpha_infinity", "peak_resolved",
             "largest_measured_alpha", "max_abs_residual", "clock_ratio"):  # fmt: skip
    print(f"{name:>24}: {summary[name]}")

# %%
Image(filename="linear-sweep/abstraction.png")

# %% [markdown]
# Checkpoints too far apart miss the peak. At lr 0.1 with a checkpoint every 100 steps
# (t = 0, 10, 20, 30) the peak at t ≈ 2.47 falls between the first two: the figure still
# draws the exact curve through 400 times between the checkpoints, marks the peak and names
# it, and α_max is not compared with the measurements.

# %%
coarse = abstraction_dynamics.AbstractionDynamicsConfig(
    learning_rate=0.1, steps=300, checkpoints="every:100"
)
abstraction_dynamics.train(coarse, "coarse-run")
missed = gl.sweep("abstraction", "coarse-run", out="coarse-sweep", n_bootstrap=0, n_shuffles=0)
print(missed.theory["exact"]["peak_note"])
Image(filename="coarse-sweep/abstraction.png")

# %% [markdown]
# ## 3. The toy network and the generalisation–identification front
#
# The toy ReLU network's (p_S, p_I), measured by the `resolution` analysis at every epoch,
# starts far from the front of its linear-decay proposition and walks onto it.

# %%
toy_network.train(ToyConfig(epochs=TOY_EPOCHS), "toy-run")
toy = gl.sweep("resolution", "toy-run", out="toy-sweep", bootstrap=0)
points = toy.theory["toy_front"]["points"]
print("distance to the front: epoch 0", round(points[0]["front_distance"], 3),
      "→ last", round(points[-1]["front_distance"], 3))  # fmt: skip
Image(filename="toy-sweep/resolution.png")
