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
# # SAE feature explosion and the sparse-semantic-dimension bound
#
# A sparse autoencoder (SAE) rewrites a model's activation at a site as a few active latents.
# On text like its training data a token switches on k latents; on out-of-distribution input
# (random tokens, corrupted text, code) k rises: *feature explosion*, which alone detects OOD
# input. The latents used on a calibration stream form a pool of size P; its sparse semantic
# dimension SSD = P ln(e m / P) enters a generalisation bound U (docs/theory.md, docs/sae.md).
#
# geomlens uses sae-lens SAEs as they are. Offline, `sae-features` trains a small SAE on the
# bundled English corpus (cached for the next run); on a GPU, pass a published one
# (`sae="gpt2-small-res-jb/blocks.6.hook_resid_pre"`, see tutorials/gpu/).

# %% tags=["parameters"]
MODEL = "all-MiniLM-L6-v2"
SITE = "blocks.3.hook_resid_post"
TRAINING = {"d_sae": 256, "tokens": 4000}  # the default is 1536 latents, 20,000 tokens
ROWS = {"calibration_rows": 32, "heldout_rows": 24, "max_tokens": 64}

# %%
# %matplotlib inline
import geomlens as gl
from geomlens.data.ood import feature_explosion_data
from geomlens.theory import ssd

adapter = gl.load(MODEL)
data = feature_explosion_data(adapter.tokenizer, **ROWS)
print(sorted(set(data["condition"])), len(data["token_ids"]), "rows")

# %% [markdown]
# Rows say which part they belong to through the `condition` column: `calibration` builds
# the pool, `heldout` gives the bound's empirical terms, every other condition is an OOD set
# scored against `heldout`.

# %%
result = gl.run("sae-features", adapter, data, site=SITE, training=TRAINING, batch_size=16)
for condition in ("heldout", "random_tokens", "replaced_15pct", "python_source"):
    mean_k = result[f"{SITE}.mean_k.{condition}"]
    auroc = result.metrics.get(f"{SITE}.auroc.{condition}", float("nan"))
    print(f"{condition:>15}: mean k = {mean_k:6.1f}   AUROC vs held-out = {auroc:.3f}")

# %%
print(f"pool P = {result[SITE + '.pool_size']:.0f} of m = {result[SITE + '.dictionary_size']:.0f}")
print(f"SSD = {result[SITE + '.ssd']:.1f}")
print({k: round(v, 4) for k, v in result.metrics.items() if "epsilon_loss" in k})
result.plot()

# %% [markdown]
# MiniLM is an encoder: it has no next-token loss, so the bound (which bounds that loss) is
# not computed and the SAE's fidelity is measured on the output instead (named in the result).
# A causal LM (GPT-2 in tutorials/gpu/sae_feature_explosion.py) gets the bound term by term.

# %% [markdown]
# ## The bound by hand
#
# U = R̂ + ε̂_loss + B η̂ + B √((SSD + ln(2/δ)) / (2N)) + B √(ln(4/δ) / (2N)) and the held-out
# size N* from which U beats guessing (log2 V). Here with this run's pool P and dictionary m,
# and a GPT-2-like vocabulary and losses (illustrative values, not measured):

# %%
measured = {"P": result[SITE + ".pool_size"], "m": result[SITE + ".dictionary_size"]}
illustrative = {"V": 50257, "risk": 3.1, "eps_loss": 0.4, "eta": 0.01}
terms = ssd.bound(**measured, **illustrative, N=2000)
print(terms)
print("N* =", ssd.crossing_size(**measured, **illustrative))
assert terms.total > terms.empirical_risk
