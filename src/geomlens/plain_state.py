"""Analysis states as tensors and plain data, so that reading a checkpoint never runs code.

A checkpoint file and the bytes ranks exchange in a distributed run hold only tensors and plain
values (None, bools, numbers, strings, lists and string-keyed dicts), written with ``torch.save``
and read back with ``torch.load(weights_only=True)``, whose unpickler builds nothing else: a
file whose pickle would call a function or build another object is refused before any of it
runs. The richer values analyses keep (tuples, sets, numpy arrays and scalars, dicts with other
keys, and the small dataclasses that hold their sufficient statistics) are written as tagged
plain values and rebuilt here. An object is rebuilt only when its class was registered with
:func:`state_class` in this process — the file names the class, it never chooses the code —
and it is built without calling any of its methods (``object.__new__``, then its fields).
"""

from __future__ import annotations

import io
import os
import pickle
from dataclasses import is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

if TYPE_CHECKING:  # torch is imported where state is encoded or read, not to import Result
    import torch

_CLASSES: dict[str, type] = {}
_TAG = "__geomlens_plain__"
T = TypeVar("T", bound=type)


class UnsafeStateError(ValueError):
    """Bytes that are not geomlens plain state (a pickle that would build other objects,
    a damaged or foreign file)."""


def state_class(cls: T) -> T:
    """Register ``cls`` (a class whose instances live in an analysis state) so that checkpoints
    and distributed gathers can rebuild it. Its instances are saved as their fields
    (``vars(obj)``) and rebuilt without calling ``__init__``."""
    if cls.__new__ is not object.__new__:
        raise TypeError(f"{cls.__qualname__} defines __new__; a state class cannot.")
    _CLASSES[_class_name(cls)] = cls
    return cls


def _class_name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _tagged(kind: str, **fields: Any) -> dict[str, Any]:
    return {_TAG: kind, **fields}


def encode(value: Any, where: str = "state") -> Any:
    """``value`` as tensors and plain values (see the module docstring); ``where`` names the
    part of the state in an error."""
    if value is None or type(value) in (bool, int, float, str):
        return value  # exact types: numpy's float64 subclasses float and pickles as numpy
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "biufc":
            return _tagged("ndarray", data=torch.from_numpy(np.ascontiguousarray(value)))
        if value.dtype.kind in "US":
            return _tagged("strings", items=value.tolist(), dtype=value.dtype.str)
        return _tagged(
            "objects",
            items=[encode(v, f"{where}[{i}]") for i, v in enumerate(value.ravel().tolist())],
            shape=list(value.shape),
        )
    if isinstance(value, np.generic):
        return _tagged("scalar", value=value.item(), dtype=value.dtype.str)
    for base in (bool, int, float, str):  # a subclass (an IntEnum, ...): its plain value
        if isinstance(value, base):
            return base(value)
    if isinstance(value, list):
        return [encode(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, tuple):
        return _tagged("tuple", items=[encode(v, f"{where}[{i}]") for i, v in enumerate(value)])
    if isinstance(value, (set, frozenset)):
        items = [encode(v, f"{where}{{}}") for v in value]
        return _tagged("frozenset" if isinstance(value, frozenset) else "set", items=items)
    if isinstance(value, Path):
        return _tagged("path", value=str(value))
    if isinstance(value, dict):
        if all(isinstance(k, str) and k != _TAG for k in value):
            return {k: encode(v, f"{where}.{k}") for k, v in value.items()}
        return _tagged(
            "dict",
            items=[[encode(k, where), encode(v, f"{where}[{k!r}]")] for k, v in value.items()],
        )
    name = _class_name(type(value))
    if _CLASSES.get(name) is type(value):
        return _tagged("object", cls=name, fields=encode(dict(vars(value)), where))
    hint = " (a dataclass)" if is_dataclass(value) else ""
    raise TypeError(
        f"{where} holds a {type(value).__qualname__}{hint}, which a checkpoint cannot hold: "
        "keep tensors, numbers, strings, lists, dicts, tuples, sets and numpy arrays in an "
        "analysis state, or register the class with geomlens.plain_state.state_class."
    )


def decode(value: Any) -> Any:
    """Inverse of :func:`encode`."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    kind = value.get(_TAG)
    if kind is None:
        return {k: decode(v) for k, v in value.items()}
    if kind == "ndarray":
        return value["data"].numpy()
    if kind == "strings":
        return np.asarray(value["items"], dtype=np.dtype(value["dtype"]))
    if kind == "objects":
        flat = np.empty(len(value["items"]), dtype=object)
        flat[:] = [decode(v) for v in value["items"]] if value["items"] else []
        return flat.reshape(value["shape"])
    if kind == "scalar":
        return np.dtype(value["dtype"]).type(value["value"])
    if kind == "tuple":
        return tuple(decode(v) for v in value["items"])
    if kind in ("set", "frozenset"):
        items = (decode(v) for v in value["items"])
        return set(items) if kind == "set" else frozenset(items)
    if kind == "path":
        return Path(value["value"])
    if kind == "dict":
        return {decode(k): decode(v) for k, v in value["items"]}
    if kind == "object":
        cls = _CLASSES.get(value["cls"])
        if cls is None:
            raise UnsafeStateError(
                f"the state names class {value['cls']!r}, which is not a registered state class "
                "of this process (import the plugin that defines it)"
            )
        obj: Any = object.__new__(cls)
        vars(obj).update(decode(value["fields"]))
        return obj
    raise UnsafeStateError(f"unknown tagged value {kind!r}")


def to_bytes(obj: Any) -> bytes:
    """``obj`` encoded as plain state, in ``torch.save`` format."""
    import torch

    buffer = io.BytesIO()
    torch.save(encode(obj), buffer)
    return buffer.getvalue()


def from_bytes(data: bytes, device: torch.device | str, source: str = "the data") -> Any:
    """Inverse of :func:`to_bytes`, tensors moved to ``device``. Reads with
    ``weights_only=True``: anything but tensors and plain values is refused, unrun."""
    import torch

    try:
        loaded = torch.load(io.BytesIO(data), map_location=device, weights_only=True)
        return decode(loaded)
    except UnsafeStateError as error:
        raise UnsafeStateError(f"{source} is not a geomlens state: {error}.") from None
    except pickle.UnpicklingError:
        # torch's own message advises loading with weights_only=False: exactly what not to do.
        raise UnsafeStateError(
            f"{source} holds objects other than tensors and plain data (a pickle that could "
            "run code, which geomlens never unpickles)."
        ) from None
    except (
        RuntimeError,
        EOFError,
        ValueError,
        KeyError,
        TypeError,
        AttributeError,
        IndexError,
        OSError,
    ) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise UnsafeStateError(
            f"{source} is not a geomlens state of tensors and plain data (damaged or foreign: "
            f"{first[:160]})."
        ) from None


def read_file(path: str | os.PathLike[str], device: torch.device | str) -> Any:
    """The plain state saved in ``path`` (see :func:`from_bytes`); the error names the file."""
    return from_bytes(Path(path).read_bytes(), device, source=str(path))
