"""Small sae-lens SAEs with known weights, built in memory for the sae-features tests."""

from __future__ import annotations

import torch
from sae_lens.saes.sae import SAEMetadata
from sae_lens.saes.standard_sae import StandardSAE, StandardSAEConfig


def identity_sae(d: int, site: str) -> StandardSAE:
    """Latent j = relu(x_j): active exactly where coordinate j is positive."""
    sae = StandardSAE(StandardSAEConfig(d_in=d, d_sae=d, metadata=SAEMetadata(hook_name=site)))
    with torch.no_grad():
        sae.W_enc.copy_(torch.eye(d))
        sae.W_dec.copy_(torch.eye(d))
        sae.b_enc.zero_()
        sae.b_dec.zero_()
    return sae


def random_sae(d_in: int, site: str, d_sae: int = 48, seed: int = 0) -> StandardSAE:
    """sae-lens's own seeded initialisation, with encoder biases drawn from [-0.2, 0.1) so that
    some latents fire on every token and others rarely."""
    torch.manual_seed(seed)
    sae = StandardSAE(
        StandardSAEConfig(d_in=d_in, d_sae=d_sae, metadata=SAEMetadata(hook_name=site))
    )
    with torch.no_grad():
        sae.b_enc.uniform_(-0.2, 0.1)
    return sae
