"""How geomlens touches a model: one Adapter protocol, one implementation per backend."""

from geomlens.hooks.base import (
    Adapter,
    EditFn,
    UnknownSiteError,
    canonical_sites,
    count_torch_hooks,
    layer_of,
)
from geomlens.hooks.inputs import ModelInputs, position_ids_from_mask
from geomlens.hooks.pooling import POOLINGS, pool_tokens

__all__ = [
    "Adapter",
    "EditFn",
    "ModelInputs",
    "POOLINGS",
    "UnknownSiteError",
    "canonical_sites",
    "count_torch_hooks",
    "layer_of",
    "pool_tokens",
    "position_ids_from_mask",
]
