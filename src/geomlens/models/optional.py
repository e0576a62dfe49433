"""The optional dependencies, each installed by an extra of pyproject.toml, and the one error that
says which extra to install when one is missing.

TransformerLens and sae-lens are extras, not core dependencies: sae-lens pins
``transformer-lens<4``, so as core dependencies they would keep every install off
TransformerLens 4. The modules that need them import them at the top, inside
``try: ... except ModuleNotFoundError as missing: raise missing_extra(missing) from None``.
"""

from __future__ import annotations

#: Import name -> (what needs it, the install that brings it).
EXTRAS: dict[str, tuple[str, str]] = {
    "transformer_lens": (
        "The TransformerLens backend",
        "pip install 'geomlens[transformer-lens]' (or 'geomlens[sae]', whose sae-lens brings "
        "TransformerLens 3), or use the nnsight backend (backend='nnsight', --backend nnsight)",
    ),
    "sae_lens": (
        "SAEs (sae-features, `geomlens sae`, loading and training an SAE)",
        "pip install 'geomlens[sae]' (sae-lens pins transformer-lens<4, so TransformerLens "
        "stays at 3 beside it)",
    ),
}


def missing_extra(missing: ModuleNotFoundError) -> ModuleNotFoundError:
    """The error to raise for ``missing``: one that names the extra when the missing module is
    an optional dependency itself, ``missing`` unchanged otherwise (a dependency of that
    dependency being absent is another problem, better shown as it is)."""
    if missing.name not in EXTRAS:
        return missing
    needs, install = EXTRAS[missing.name]
    package = missing.name.replace("_", "-")
    return ModuleNotFoundError(
        f"{needs} needs {package}, which is not installed: {install}.", name=missing.name
    )
