"""What an analysis is: a typed config, mergeable state, ``update`` per batch, ``finalize``.

Parameters go in the constructor (as a Config dataclass or keyword overrides); state exists
only after batches arrive. ``merge`` folds the state of another instance that saw disjoint data
— the same code then runs data-parallel (each rank updates, states merge, one finalises).
"""

from __future__ import annotations

import dataclasses
import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from geomlens.analyses.declaration import AnalysisConfig, Declaration
from geomlens.analyses.declaration import option as option  # a public name here too
from geomlens.analyses.option_types import check_option_types
from geomlens.analyses.spec import Example, MetricSpec
from geomlens.inputs.encoding import ModelInputs
from geomlens.inputs.pooling import pool_tokens
from geomlens.models.adapter import Adapter
from geomlens.results import Result


@dataclass
class Batch:
    """One batch as the analyses see it: activations at the requested sites, the model inputs
    (masks, span) and the dataset columns of its rows."""

    activations: dict[str, torch.Tensor]
    inputs: ModelInputs
    columns: dict[str, np.ndarray]

    @property
    def attention_mask(self) -> torch.Tensor:
        return self.inputs.attention_mask

    @property
    def index(self) -> np.ndarray:
        return self.inputs.index

    def __len__(self) -> int:
        return self.inputs.batch_size

    def pooled(self, site: str, how: str = "mean") -> torch.Tensor:
        """``[B, d]``: the activation at ``site`` pooled over tokens (see ``pool_tokens``)."""
        return pool_tokens(self.activations[site], self.attention_mask, how, self.inputs.span_mask)

    def tokens(self, site: str) -> torch.Tensor:
        """``[n_real_tokens, d]``: every real (non-padding) token's activation at ``site``."""
        activation = self.activations[site]
        mask = self.attention_mask.to(activation.device).bool()
        return activation[mask]


@dataclass
class RunContext:
    """What an analysis may know about the run before the first batch."""

    adapter: Adapter
    #: None when the data is streamed from a source that does not know its length.
    num_examples: int | None
    seed: int = 0
    columns: tuple[str, ...] = ()


class Analysis(ABC):
    """Base class of analyses.

    A built-in (or a plugin that declares itself) names its declaration in the class statement,
    ``class Resolution(Analysis, declaration=DECLARATION)``, and the class takes its name,
    aliases, config, metric specs, example and reading from it; a plugin without one sets these
    as class attributes and registers with ``@register_analysis("name")``.
    """

    #: The declaration this class was built from (None for a class that sets its attributes).
    declaration: ClassVar[Declaration | None] = None
    name: ClassVar[str] = ""
    Config: ClassVar[type[AnalysisConfig]] = AnalysisConfig
    #: Other names the registry answers to (``"stats"`` for ``"activation-stats"``).
    aliases: ClassVar[tuple[str, ...]] = ()
    #: Small rows and options every contract check (:mod:`geomlens.testing`) runs it on.
    example: ClassVar[Example | None] = None
    #: Its metrics' words, units and headlines (the report and the number formatting read them).
    metric_specs: ClassVar[tuple[MetricSpec, ...]] = ()

    def __init_subclass__(cls, declaration: Declaration | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if declaration is None:
            return
        module = importlib.import_module(cls.__module__)
        declared = declaration.in_package(module.__package__ or "")
        cls.declaration = declared
        cls.name = declared.name
        cls.aliases = declared.aliases
        cls.Config = declared.config
        cls.metric_specs = declared.metrics
        cls.example = declared.load_example()
        reading = declared.load_reading()
        if reading is not None:
            cls.reading = staticmethod(reading)  # type: ignore[attr-defined]

    def __init__(self, config: AnalysisConfig | None = None, **overrides: Any) -> None:
        if config is None:
            valid = {f.name for f in dataclasses.fields(self.Config)}
            unknown = sorted(set(overrides) - valid)
            if unknown:
                raise ValueError(
                    f"Analysis {self.name!r} has no option {', '.join(map(repr, unknown))}; its "
                    f"options are {sorted(valid) or 'none'}."
                )
            config = self.Config(**overrides)
        elif overrides:
            config = dataclasses.replace(config, **overrides)
        if not isinstance(config, self.Config):
            raise TypeError(
                f"Analysis {self.name!r} takes a {self.Config.__name__}, got {type(config).__name__}."
            )
        if self.declaration is not None:  # a module it needs is missing: say what to install
            self.declaration.check_installed()
        # Wrong option types fail here, naming the option, not at the first batch.
        check_option_types(self.name, config)
        self.config = config
        self.context: RunContext | None = None

    # -- the protocol ----------------------------------------------------------------------
    @abstractmethod
    def sites(self, adapter: Adapter) -> list[str]:
        """Canonical sites this analysis needs from ``adapter`` (resolved, in forward order)."""

    def required_columns(self) -> tuple[str, ...]:
        """Dataset columns the analysis reads (checked before the first forward pass)."""
        return ()

    def default_data(self, adapter: Adapter) -> Any:
        """The data this analysis runs on when the user gives none (``geomlens run NAME``).

        Analyses with their own shipped stimuli (years, concept sets, calibration / held-out /
        OOD text) override this; anything :func:`geomlens.data.dataset.as_dataset` accepts may
        be returned. The default is the bundled English corpus (standard-library docstrings).
        """
        from geomlens.data.corpus import DEFAULT_CORPUS_SIZE, corpus_dataset

        return corpus_dataset(DEFAULT_CORPUS_SIZE)

    def setup(self, context: RunContext) -> None:
        """Called once before the first batch."""
        self.context = context

    def _run_context(self) -> RunContext:
        """The run's context, which :meth:`setup` sets before the first batch."""
        if self.context is None:
            raise RuntimeError(f"Analysis {self.name!r} was used before setup(context).")
        return self.context

    @abstractmethod
    def update(self, batch: Batch) -> None:
        """Fold one batch into the state. Must not keep references to the batch's tensors."""

    @abstractmethod
    def merge(self, other: Analysis) -> None:
        """Fold the state of ``other`` (same config, disjoint data) into this one."""

    @abstractmethod
    def finalize(self) -> Result:
        """Metrics and tables from the state (the engine adds config and provenance)."""

    @classmethod
    def plot(cls, result: Result, **kwargs: Any) -> Any:
        """A matplotlib figure of ``result``; analyses that have one override this."""
        raise NotImplementedError(f"Analysis {cls.name!r} has no plot.")

    def state_dict(self) -> dict[str, Any]:
        """The instance's state, picklable, for checkpoints and for gathering across ranks.

        Everything but the run context (which holds the model) and the config. Analyses whose
        state holds something unpicklable override this and :meth:`load_state_dict`.
        """
        return {k: v for k, v in vars(self).items() if k not in ("context", "config")}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Replace this instance's state by ``state`` (from :meth:`state_dict`)."""
        vars(self).update(state)

    def _check_mergeable(self, other: Analysis) -> None:
        if type(other) is not type(self) or other.config != self.config:
            raise ValueError(
                f"Can only merge {self.name!r} states with the same config; got "
                f"{type(other).__name__} with {getattr(other, 'config', None)!r}."
            )
