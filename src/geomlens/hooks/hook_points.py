"""TransformerLens HookPoint hooks added for one block of code and removed exactly on exit."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any


@contextlib.contextmanager
def hooks_added(hooks: list[tuple[Any, Callable[..., Any]]]) -> Iterator[None]:
    """Add forward hooks through TransformerLens (so ``list_hooks()`` shows them) and remove
    exactly these handles on exit, whatever happens; hooks that were there before stay."""
    added: list[tuple[Any, Any]] = []
    try:
        for hook_point, hook in hooks:
            hook_point.add_hook(hook, dir="fwd")
            added.append((hook_point, hook_point.fwd_hooks[-1]))
        yield
    finally:
        for hook_point, handle in added:
            handle.hook.remove()
            hook_point.fwd_hooks.remove(handle)
