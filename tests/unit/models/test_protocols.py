"""``inputs.adapter_protocol.ModelAdapter`` is the part of ``Adapter`` that the batch loop, the
linearisation and the resumed pass read (they name the protocol so as not to import the class).
Every member the protocol declares must be on ``Adapter`` with the same signature (attributes
and properties with the same type), so that a member added to the protocol alone, or a signature changed on
one side only, fails here rather than at a user's run. ``Adapter`` may have more members: the
protocol is deliberately the subset those modules use."""

from __future__ import annotations

import inspect
from typing import Protocol

import torch

from geomlens.inputs.adapter_protocol import ModelAdapter
from geomlens.inputs.encoding import ModelInputs
from geomlens.models.adapter import Adapter


def public_members(cls: type) -> dict[str, str]:
    """Each public member of ``cls`` and its shape: ``attribute: TYPE`` for annotated attributes
    and properties alike (both are read as ``adapter.name``), ``method(SIGNATURE)`` else."""
    members: dict[str, str] = {}
    for klass in reversed([k for k in cls.__mro__ if k not in (object, Protocol)]):
        for name, annotation in vars(klass).get("__annotations__", {}).items():
            if not name.startswith("_"):
                members[name] = f"attribute: {annotation}"
        for name, value in vars(klass).items():
            if name.startswith("_"):
                continue
            if isinstance(value, property):
                returned = inspect.signature(value.fget).return_annotation
                members[name] = f"attribute: {returned}"
            elif inspect.isfunction(value):
                members[name] = f"method{inspect.signature(value)}"
    return members


def drift(protocol: type, implementation: type) -> list[str]:
    """The protocol's members that ``implementation`` lacks or has with another shape."""
    theirs = public_members(implementation)
    return [
        f"{name}: protocol {shape!r}, {implementation.__name__} {theirs.get(name, 'missing')!r}"
        for name, shape in public_members(protocol).items()
        if theirs.get(name) != shape
    ]


def test_every_protocol_member_is_on_the_adapter_with_the_same_signature():
    assert public_members(ModelAdapter)  # the protocol's members were found at all
    assert drift(ModelAdapter, Adapter) == []


def test_a_member_added_to_one_side_or_a_changed_signature_is_named():
    class WithAnExtraMember(ModelAdapter, Protocol):
        def tokens_seen(self) -> int: ...

    class WithAnotherCapture(ModelAdapter, Protocol):
        def capture(
            self, inputs: ModelInputs, sites: list[str], *, strict: bool = True
        ) -> dict[str, torch.Tensor]: ...

    class WithAnotherDeviceType(ModelAdapter, Protocol):
        device: str

    assert [line.split(":")[0] for line in drift(WithAnExtraMember, Adapter)] == ["tokens_seen"]
    assert [line.split(":")[0] for line in drift(WithAnotherCapture, Adapter)] == ["capture"]
    assert [line.split(":")[0] for line in drift(WithAnotherDeviceType, Adapter)] == ["device"]
