"""``geomlens check`` (does a model satisfy the Adapter contract) and ``geomlens sites``."""

from __future__ import annotations

import typer

from geomlens.cli.errors import one_line_errors
from geomlens.cli.options import (
    DEFAULT_BACKEND,
    DEFAULT_MODEL,
    BackendOption,
    DeviceOption,
    ModelArgument,
    TrustRemoteCodeOption,
)


def check_command(
    model: ModelArgument = DEFAULT_MODEL,
    backend: BackendOption = DEFAULT_BACKEND,
    device: DeviceOption = None,
    trust_remote_code: TrustRemoteCodeOption = False,
) -> None:
    """Conformance, per site: resolves, shape and width, padded batch == one-by-one, equal to
    the model's own hidden states, sub-layers add up (docs/architectures.md).

    Without MODEL it checks the bundled all-MiniLM-L6-v2. It names the model it checked, and
    says which checks do not apply (post-LayerNorm blocks, e.g. BERT, normalise the sums, so
    their sub-layers do not add up by design).
    """
    import geomlens as gl
    from geomlens.checks.conformance import all_passed, check_adapter

    with one_line_errors():
        adapter = gl.load(
            model, backend=backend, device=device, trust_remote_code=trust_remote_code
        )
        typer.echo(f"checking {adapter.model_id} ({adapter.backend} backend, {adapter.device})")
        checks = check_adapter(adapter)
    for check in checks:
        mark = (
            typer.style("PASS", fg=typer.colors.GREEN)
            if check.passed
            else typer.style("FAIL", fg=typer.colors.RED)
        )
        typer.echo(f"{mark}  {check.name}: {check.detail}")
    layout = getattr(adapter, "residual_layout", lambda: None)()
    if layout not in ("sequential", "parallel"):
        why = (
            "post-LayerNorm blocks normalise the sums"
            if layout == "post_ln"
            else "the architecture table does not say how its sub-layers compose"
        )
        typer.echo(f"SKIP  sub-layers add up: not checked, {why}")
    if not all_passed(checks):
        raise typer.Exit(code=1)


def sites_command(
    model: ModelArgument = DEFAULT_MODEL,
    backend: BackendOption = DEFAULT_BACKEND,
    device: DeviceOption = None,
    trust_remote_code: TrustRemoteCodeOption = False,
) -> None:
    """List the model's capture sites in forward order (names for --site)."""
    import geomlens as gl

    with one_line_errors():
        adapter = gl.load(
            model, backend=backend, device=device, trust_remote_code=trust_remote_code
        )
    sites = adapter.sites()
    typer.echo(f"{adapter.model_id} ({adapter.backend}): {len(sites)} sites, in forward order")
    for name in sites:
        typer.echo(f"  {name}")
