"""Names a package lends from its modules, imported on first use (one mechanism for all).

``geomlens`` lends ``run``, ``attach``, … so that ``import geomlens.theory`` stays light;
``geomlens.analyses`` lends its base class; an analysis folder lends its class module's names
(``from geomlens.analyses.resolution import Resolution``) while its ``__init__`` holds only the
declaration, which listing and ``--help`` read without importing torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes", "lent"]


def lent(module: str, *names: str) -> dict[str, str]:
    """``{name: module}`` for each of ``names``: the export table's entries of one module."""
    return dict.fromkeys(names, module)


def lazy_attributes(
    package: str, exports: Mapping[str, str] | None = None, fallback: tuple[str, ...] = ()
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``exports`` maps a name to the module that
    holds it; any other public name is looked up in the ``fallback`` modules in turn (relative
    ones, ``.x``, resolve in ``package``)."""
    known = dict(exports or {})

    def __getattr__(name: str) -> Any:
        if name == "__all__" and fallback:  # ``import *``: the union of the modules' lists
            modules = [importlib.import_module(target, package) for target in fallback]
            return [n for module in modules for n in getattr(module, "__all__", ())]
        if name in known:
            return getattr(importlib.import_module(known[name], package), name)
        for target in () if name.startswith("_") else fallback:
            module = importlib.import_module(target, package)
            if hasattr(module, name):
                return getattr(module, name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
