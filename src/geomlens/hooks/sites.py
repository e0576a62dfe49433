"""Site names, where activations are read and edited: the canonical names (TransformerLens hook
names) and what a name says (its block, its order), and ``module:PATH`` sites.

Below ``models/`` and ``interventions/``: the adapters, the architecture tables, linearisation
and the resumed pass all read these names, so this module imports nothing of geomlens.
"""

from __future__ import annotations

import re

#: Canonical per-layer site templates, in forward order (TransformerLens hook names).
LAYER_SITE_TEMPLATES: tuple[str, ...] = (
    "blocks.{layer}.hook_resid_pre",
    "blocks.{layer}.hook_attn_out",
    "blocks.{layer}.hook_resid_mid",
    "blocks.{layer}.mlp.hook_pre",
    "blocks.{layer}.mlp.hook_post",
    "blocks.{layer}.hook_mlp_out",
    "blocks.{layer}.hook_resid_post",
)
EMBED_SITE = "hook_embed"
#: The model's output logits [B, T, vocab]: offered (last in forward order) only by models with
#: an LM head; what the model's own forward returns as ``logits``.
LOGITS_SITE = "logits"
#: Each token's log-probability of the token after it, ``[B, T]`` float64, scored from the LM
#: head chunk by chunk inside the pass (the ``[B, T, vocab]`` logits never exist at once); 0
#: where there is no real next token. Accepted wherever ``logits`` is offered, not listed among
#: the sites (it is a reduction of one, see :mod:`geomlens.models.next_token`).
NEXT_TOKEN_SITE = "logits.next_token_logprob"
#: The logits at each input's last real token, ``[B, vocab]`` (a next-token choice), made from
#: the LM head's input at that token alone; accepted and not listed, like ``NEXT_TOKEN_SITE``.
LAST_LOGITS_SITE = "logits.last"
#: The reductions of the logits the adapters score inside the pass.
HEAD_SITES = (NEXT_TOKEN_SITE, LAST_LOGITS_SITE)


def canonical_sites(n_layers: int) -> list[str]:
    """All canonical site names of a model with ``n_layers`` blocks, in forward order."""
    sites = [EMBED_SITE]
    for layer in range(n_layers):
        sites.extend(t.format(layer=layer) for t in LAYER_SITE_TEMPLATES)
    return sites


def layer_of(site: str) -> int | None:
    """The block index a canonical site belongs to, or None for ``hook_embed``."""
    match = re.match(r"blocks\.(\d+)\.", site)
    return int(match.group(1)) if match else None


#: A site ``module:PATH`` is the output of the submodule at torch path ``PATH``, in any model
#: (see :mod:`geomlens.models.module_sites`).
MODULE_SITE_PREFIX = "module:"


def is_module_site(site: str) -> bool:
    """Whether ``site`` names a module path (``module:PATH``) rather than a canonical site."""
    return site.startswith(MODULE_SITE_PREFIX)


def module_site(path: str) -> str:
    """The site name of the submodule at torch path ``path``."""
    return MODULE_SITE_PREFIX + path


def module_path(site: str) -> str:
    """The torch path a ``module:PATH`` site names."""
    if not is_module_site(site):
        raise ValueError(f"{site!r} is not a module site; module sites read 'module:PATH'.")
    return site[len(MODULE_SITE_PREFIX) :]
