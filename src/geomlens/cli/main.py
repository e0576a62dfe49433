"""The ``geomlens`` command tree: ``list``, ``run``, ``check``, ``sites``, then ``theory``,
``report``, ``new-plugin`` and ``sae``, each from its own module (in the order ``--help`` lists
them)."""

from __future__ import annotations

from geomlens.cli.app import app
from geomlens.cli.check import check_command, sites_command
from geomlens.cli.run import RunCommand, list_command, run_command

__all__ = ["app"]

app.command("list")(list_command)
app.command("run", cls=RunCommand)(run_command)
app.command("check")(check_command)
app.command("sites")(sites_command)


def _mount_theory() -> None:
    try:
        from geomlens.cli.theory import app as theory_app
    except ImportError:  # the theory CLI is optional until its module lands
        return
    app.add_typer(
        theory_app, name="theory", help="Reference curves of the theory (tables and plots)."
    )


_mount_theory()


def _mount_report() -> None:
    from geomlens.cli.report import report_command

    app.command("report")(report_command)
    from geomlens.cli.scaffold import new_plugin_command

    app.command("new-plugin")(new_plugin_command)


_mount_report()


def _mount_sae() -> None:
    from geomlens.cli.sae import app as sae_app

    app.add_typer(
        sae_app, name="sae", help="Sparse autoencoders: train offline (sae-lens), cached."
    )


_mount_sae()


def _mount_dynamics() -> None:
    from geomlens.cli.dynamics import experiment_app, sweep_command

    app.command("sweep")(sweep_command)
    app.add_typer(experiment_app, name="experiment", help="Train a theory's network, checkpointed.")


_mount_dynamics()
