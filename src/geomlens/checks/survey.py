"""The architecture survey: every supported Hugging Face family, built tiny, read on both backends.

Each family is built from its config with 2 layers and width 32 (seeded random weights, no
download) and attached through nnsight and through TransformerLens. On each backend that
attaches, the survey records which canonical sites are offered and why the others are refused,
compares the residual-stream sites with the model's own ``output_hidden_states`` with left and
right padding, compares the two backends site by site, and checks that the user's module is left
exactly as it was. ``python -m geomlens.checks.survey`` prints the supported-architectures table
of docs/architectures.md; a test checks that the file matches it.
"""

from __future__ import annotations

import functools
import logging
import sys
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch

from geomlens.checks.conformance import additivity_errors, hidden_state_errors
from geomlens.inputs.encoding import PaddingSide, encode_token_ids
from geomlens.models.adapter import Adapter, canonical_sites, count_torch_hooks

#: Token rows of different lengths, so that padding matters (ids exist in every tiny vocabulary).
ROWS = ([5, 6, 7, 8, 9, 10], [11, 12, 13], [14, 15, 16, 17])
VOCAB = 64
#: Agreement required with the model's own forward and between backends (float32 round-off of a
#: width-32 model is ~1e-7; a wrong position or site is ~1).
TOLERANCE = 1e-5
SHAPE = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2}
#: Config field names of the shape above in families that spell them otherwise.
RENAMED = {
    "distilbert": {
        "hidden_size": "dim",
        "intermediate_size": "hidden_dim",
        "num_hidden_layers": "n_layers",
    },
    "t5": {
        "hidden_size": "d_model",
        "intermediate_size": "d_ff",
        "num_hidden_layers": "num_layers",
    },
}
HEADS = {"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8}
HEADS_RENAMED = {
    "distilbert": {"num_attention_heads": "n_heads"},
    "t5": {"num_attention_heads": "num_heads"},
}


@dataclass(frozen=True)
class SurveyModel:
    """One surveyed model: a label, its ``model_type``, decoder or encoder, config overrides."""

    label: str
    model_type: str
    kind: Literal["decoder", "encoder"]
    config: tuple[tuple[str, Any], ...] = ()


def _m(label: str, kind: str = "decoder", model_type: str | None = None, **config: Any):
    return SurveyModel(label, model_type or label, kind, tuple(sorted(config.items())))  # type: ignore[arg-type]


SURVEY_MODELS: tuple[SurveyModel, ...] = (
    _m("gpt2"),
    _m("llama"),
    _m("mistral"),
    _m("qwen2"),
    _m("qwen3"),
    _m("gemma"),
    _m("gemma2"),
    _m("gemma3_text"),
    _m("gpt_neox"),
    _m("gpt_neox (sequential)", model_type="gpt_neox", use_parallel_residual=False),
    _m("phi"),
    _m("phi3"),
    _m("mixtral"),
    _m("qwen2_moe", moe_intermediate_size=16, shared_expert_intermediate_size=64),
    _m("falcon"),
    _m("falcon (sequential)", model_type="falcon", parallel_attn=False),
    _m(
        "falcon (new decoder)",
        model_type="falcon",
        new_decoder_architecture=True,
        num_kv_heads=2,
    ),
    _m("gptj", rotary_dim=4),
    _m("gpt_bigcode"),
    _m("opt", ffn_dim=64, word_embed_proj_dim=32),
    _m(
        "opt (post-LN)",
        model_type="opt",
        ffn_dim=64,
        word_embed_proj_dim=32,
        do_layer_norm_before=False,
    ),
    _m("bloom"),
    _m("mpt"),
    _m("olmo"),
    _m("olmo2"),
    _m("stablelm"),
    _m("starcoder2"),
    _m("cohere"),
    _m("gpt_neo", attention_types=((("global", "local"), 1),)),
    _m("granite"),  # no table: the discovered residual-stream fallback
    _m("bert", "encoder"),
    _m("roberta", "encoder"),
    _m("xlm-roberta", "encoder"),
    _m("camembert", "encoder"),
    _m("mpnet", "encoder"),
    _m("distilbert", "encoder"),
    _m("electra", "encoder", embedding_size=16),
    _m("deberta-v2", "encoder"),
    _m("albert", "encoder", embedding_size=16),
    _m("t5", "encoder", d_kv=8),
)


def _settable(config: Any, key: str) -> bool:
    attribute = getattr(type(config), key, None)
    read_only = isinstance(attribute, property) and attribute.fset is None
    return hasattr(config, key) and not read_only


def unavailable(model: SurveyModel) -> str:
    """Why the installed transformers cannot build ``model`` ("" when it can)."""
    from transformers import CONFIG_MAPPING

    if model.model_type not in CONFIG_MAPPING:
        import transformers

        return f"model type {model.model_type!r} is not in transformers {transformers.__version__}"
    return ""


def build(model: SurveyModel, seed: int = 0) -> torch.nn.Module:
    """The tiny seeded Hugging Face model of a survey entry, in eval mode."""
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, T5EncoderModel

    defaults = AutoConfig.for_model(model.model_type)
    names = {**RENAMED.get(model.model_type, {}), **HEADS_RENAMED.get(model.model_type, {})}
    fields: dict[str, Any] = {
        "vocab_size": VOCAB,
        "pad_token_id": 0,
        "bos_token_id": 2,
        "eos_token_id": 3,
        # RoBERTa-style positions start after the padding index: leave room for it.
        "max_position_embeddings": 64,
    }
    for key, value in {**SHAPE, **HEADS}.items():
        name = names.get(key, key)
        if _settable(defaults, name):
            fields[name] = value
    fields.update(dict(model.config))
    config = AutoConfig.for_model(model.model_type, **fields)
    torch.manual_seed(seed)
    if model.model_type == "t5":
        # AutoConfig.for_model("t5") builds a T5Config; its return type names the base class.
        return T5EncoderModel(config).eval()  # type: ignore[arg-type]
    loader = AutoModelForCausalLM if model.kind == "decoder" else AutoModel
    return loader.from_config(config).eval()


@dataclass
class BackendReport:
    """What one backend made of one model."""

    backend: str
    attached: bool
    reason: str = ""  # why it did not attach
    family: str = ""
    sites: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    silent: list[str] = field(default_factory=list)  # neither offered nor refused with a reason
    hidden_error: float | None = None  # max over left/right padding, all residual sites
    hidden_note: str = ""
    additivity_error: float | None = None
    module_unchanged: bool = True

    def block_refusals(self) -> dict[str, str]:
        """Refused per-block site names (``blocks.0.`` prefix dropped) and ``hook_embed`` /
        ``logits``, each with its reason."""
        out: dict[str, str] = {}
        for site, reason in self.refused.items():
            if site.startswith("blocks.") and not site.startswith("blocks.0."):
                continue
            out[site.removeprefix("blocks.0.")] = reason
        return out


@dataclass
class SurveyRow:
    model: SurveyModel
    nnsight: BackendReport
    transformer_lens: BackendReport
    cross_backend_error: float | None = None  # max over common sites, left and right padding
    common_sites: int = 0


def _snapshot(module: torch.nn.Module) -> tuple[dict[str, torch.Tensor], int, list[bool]]:
    state = {k: v.detach().clone() for k, v in module.state_dict().items()}
    return state, count_torch_hooks(module), [m.training for m in module.modules()]


def _unchanged(module: torch.nn.Module, before: tuple[dict, int, list[bool]]) -> bool:
    state, hooks, modes = before
    after = module.state_dict()
    same_weights = state.keys() == after.keys() and all(
        torch.equal(state[k], after[k]) for k in state
    )
    return (
        same_weights
        and count_torch_hooks(module) == hooks
        and modes == [m.training for m in module.modules()]
    )


def _inputs(side: PaddingSide):
    return encode_token_ids([list(r) for r in ROWS], np.arange(len(ROWS)), padding_side=side)


def _read(
    adapter: Adapter, report: BackendReport, reference: torch.nn.Module
) -> dict[str, dict[str, torch.Tensor]]:
    """Capture every offered site with left and right padding; fill in the agreements."""
    captured = {}
    worst_hidden, worst_sum = 0.0, 0.0
    for side in ("left", "right"):
        inputs = _inputs(side)
        acts = adapter.capture(inputs, report.sites)
        captured[side] = acts
        hidden = hidden_state_errors(adapter, inputs, acts, reference)
        if isinstance(hidden, str):
            report.hidden_note = hidden
        else:
            worst_hidden = max(worst_hidden, *hidden.values(), 0.0)
        sums = additivity_errors(adapter, inputs, acts)
        if sums:
            worst_sum = max(worst_sum, *sums.values())
            report.additivity_error = worst_sum
    if not report.hidden_note:
        report.hidden_error = worst_hidden
    return captured


def _attach(backend: str, hf_model: torch.nn.Module) -> Adapter:
    if backend == "nnsight":
        from geomlens.models.nnsight import NNsightAdapter

        return NNsightAdapter(hf_model)
    from geomlens.models.transformer_lens import TransformerLensAdapter

    return TransformerLensAdapter.from_hf(hf_model)


@functools.cache
def survey_model(model: SurveyModel) -> SurveyRow:
    """Build one model and read it on both backends (cached: tests and the docs share it)."""
    hf_model = build(model)
    # transformers installs output-recording hooks of its own, for good, the first time hidden
    # states are asked for; the reference pass below would otherwise count as a change.
    with torch.no_grad():
        hf_model(input_ids=torch.tensor([ROWS[1]]), output_hidden_states=True)
    before = _snapshot(hf_model)
    reports, captured = {}, {}
    for backend in ("nnsight", "transformer-lens"):
        report = BackendReport(backend, attached=False)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                adapter = _attach(backend, hf_model)
        except (ValueError, TypeError, KeyError, NotImplementedError) as error:
            report.reason = str(error).split(". ")[0]
        else:
            report.attached = True
            report.family = getattr(getattr(adapter, "table", None), "family", "") or getattr(
                getattr(getattr(adapter, "model", None), "adapter", None), "__class__", type(None)
            ).__name__.removesuffix("ArchitectureAdapter")
            report.sites = adapter.sites()
            report.refused = adapter.refused_sites()
            expected = canonical_sites(adapter.n_layers)
            report.silent = [
                s for s in expected if s not in report.sites and s not in report.refused
            ]
            captured[backend] = _read(adapter, report, hf_model)
        report.module_unchanged = _unchanged(hf_model, before)
        reports[backend] = report
    row = SurveyRow(model, reports["nnsight"], reports["transformer-lens"])
    if len(captured) == 2:
        common = [s for s in row.nnsight.sites if s in row.transformer_lens.sites]
        row.common_sites = len(common)
        worst = 0.0
        for side in ("left", "right"):
            mask = _inputs(side).attention_mask
            for site in common:
                a, b = captured["nnsight"][side][site], captured["transformer-lens"][side][site]
                worst = max(worst, (a[mask] - b[mask]).abs().max().item())
        row.cross_backend_error = worst
    return row


def survey(models: Iterable[SurveyModel] = SURVEY_MODELS) -> tuple[list[SurveyRow], list[str]]:
    """Every available model's row, and a line per model skipped (not in this transformers)."""
    rows, skipped = [], []
    for model in models:
        reason = unavailable(model)
        if reason:
            skipped.append(f"{model.label}: skipped, {reason}")
            continue
        rows.append(survey_model(model))
    return rows, skipped


# -- the docs table --------------------------------------------------------------------------
def _agreement(report: BackendReport) -> str:
    if not report.attached:
        return "—"
    if report.hidden_error is None:
        return f"not compared ({report.hidden_note})"
    return "equal (≤ 1e-5)" if report.hidden_error <= TOLERANCE else "**DIFFERS**"


def _sites_cell(report: BackendReport, per_block_total: int = 7) -> str:
    if not report.attached:
        return f"refused: {report.reason}"
    blocks = {s.split(".", 2)[2] for s in report.sites if s.startswith("blocks.0.")}
    extras = [s for s in ("hook_embed", "logits") if s in report.sites]
    refused = sorted(report.block_refusals())
    text = f"{len(blocks)}/{per_block_total} per block" + (
        (" + " + ", ".join(extras)) if extras else ""
    )
    return text + (f"; refused: {', '.join(refused)}" if refused else "")


def _notes(row: SurveyRow) -> str:
    """Each refusal reason once, with the sites and backends it applies to."""
    by_reason: dict[str, tuple[list[str], list[str]]] = {}
    for report in (row.nnsight, row.transformer_lens):
        for site, reason in report.block_refusals().items():
            if site == "logits":
                continue
            sites, backends = by_reason.setdefault(reason.rstrip("."), ([], []))
            if site not in sites:
                sites.append(site)
            if report.backend not in backends:
                backends.append(report.backend)
    return "; ".join(
        f"{', '.join(sites)} ({' and '.join(backends)}): {reason}"
        for reason, (sites, backends) in by_reason.items()
    )


def markdown(rows: list[SurveyRow]) -> str:
    """The supported-architectures table (the generated part of docs/architectures.md)."""
    lines = [
        "| model type | nnsight table | nnsight sites | nnsight = own forward | "
        "TransformerLens sites | TransformerLens = own forward | backends agree | notes |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        nn, tl = row.nnsight, row.transformer_lens
        agree = (
            "—"
            if row.cross_backend_error is None
            else (
                f"yes, {row.common_sites} sites (≤ 1e-5)"
                if row.cross_backend_error <= TOLERANCE
                else "**NO**"
            )
        )
        cells = [
            f"`{row.model.label}`",
            nn.family or "—",
            _sites_cell(nn),
            _agreement(nn),
            _sites_cell(tl),
            _agreement(tl),
            agree,
            _notes(row).replace("|", "/"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


BEGIN = "<!-- survey:begin (generated by `python -m geomlens.checks.survey`; do not edit) -->"
END = "<!-- survey:end -->"


def main(argv: list[str] | None = None) -> int:
    """Print the table (between its markers) to stdout; skipped models to stderr."""
    logging.disable(logging.WARNING)
    rows, skipped = survey()
    for line in skipped:
        print(line, file=sys.stderr)
    print(BEGIN)
    print(markdown(rows), end="")
    print(END)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = [
    "SURVEY_MODELS",
    "SurveyModel",
    "SurveyRow",
    "build",
    "markdown",
    "survey",
    "survey_model",
]
