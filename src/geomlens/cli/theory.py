"""``geomlens theory``: print the theory's reference curves as tables, and plot them.

Each command computes its curve with the public functions of `resolution`, `abstraction` or
`ssd`, prints it, and with ``--plot PATH`` draws it (see `plots`, imported only then so that
a table never pays for matplotlib). Invalid arguments end with ``error: …`` and exit code 2.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from geomlens.cli.errors import one_line_errors
from geomlens.theory import ssd  # numpy only; the others import scipy, when a command runs

app = typer.Typer(
    help="Reference curves of the theory: tables, and figures with --plot.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    # Markdown: a docstring's hard-wrapped lines join into one paragraph, as written.
    rich_markup_mode="markdown",
)

PlotOption = Annotated[
    Path | None, typer.Option("--plot", help="Also write a figure here (.png, .pdf, .svg).")
]
#: Δ of the resolution commands (pareto, collapse); ssd's --delta is another quantity (δ).
SimilarityDeltaOption = Annotated[
    float, typer.Option("--delta", help="Similarity Δ outside the ball, in [0, 1].")
]

# Points per curve in the figures: enough for smooth curves, few enough to draw instantly.
_CURVE_POINTS = 201


def _invalid_arguments_exit() -> contextlib.AbstractContextManager[None]:
    """Turn the library's ValueError (which says what was expected) into a clean CLI error."""
    return one_line_errors((ValueError,))


def _figure_errors_exit(path: Path) -> contextlib.AbstractContextManager[None]:
    """Report a figure that cannot be written (bad format, unwritable place) as a CLI error."""
    return one_line_errors((ValueError, OSError), context=f"could not write the figure {path}: ")


def _print_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """Print aligned columns: text to the left, numbers to the right."""
    cells = [[_cell(value) for value in row] for row in rows]
    widths = [max(len(text) for text in column) for column in zip(header, *cells)]
    numeric = [all(_is_number(row[column]) for row in rows) for column in range(len(header))]
    for line in (header, *cells):
        aligned = (
            text.rjust(width) if right else text.ljust(width)
            for text, width, right in zip(line, widths, numeric)
        )
        typer.echo("  ".join(aligned).rstrip())


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def _cell(value: object) -> str:
    if isinstance(value, (float, np.floating)):
        return f"{value:.6g}"
    return str(value)


def _wrote(path: Path) -> None:
    typer.echo(f"figure: {path}")


@app.command()
def pareto(
    delta: SimilarityDeltaOption = 0.0,
    num: Annotated[int, typer.Option("--num", help="Rows: values of b evenly in [0, 1].")] = 11,
    plot: PlotOption = None,
) -> None:
    """The p_S / p_I front of constant similarity (Theorems 1-2), its regimes and optimum.

    The figure shows the universal front (Δ = 0), the front for --delta when Δ > 0, and
    Proposition 1's linear-decay curve on the circle.
    """
    from geomlens.theory import resolution

    with _invalid_arguments_exit():
        front = resolution.pareto_front(num, delta=delta)
        regimes = resolution.regime(front.b)
        optimum = resolution.similarity_optimum(delta=delta)
    typer.echo(f"Front of the n = 2 tests, constant similarity, Δ = {delta:g}")
    _print_table(
        ("b", "p_S", "p_I", "regime"),
        list(zip(front.b, front.p_s, front.p_i, regimes)),
    )
    typer.echo(f"optimum: b* = {optimum.b:.6g}, p_S = {optimum.p_s:.6g}, p_I = {optimum.p_i:.6g}")
    if plot is not None:
        from geomlens.theory import plots

        universal = resolution.pareto_front(_CURVE_POINTS)
        noisy = resolution.pareto_front(_CURVE_POINTS, delta=delta) if delta > 0 else None
        linear_decay = resolution.linear_decay_front(_CURVE_POINTS)
        with _figure_errors_exit(plot):
            written = plots.plot_pareto(
                plot,
                universal=(universal.p_s, universal.p_i),
                noisy=None if noisy is None else (noisy.p_s, noisy.p_i),
                delta=delta,
                linear_decay=(linear_decay.p_s, linear_decay.p_i),
                optimum=(optimum.p_s, optimum.p_i),
                universal_b=universal.b,
            )
        _wrote(written)


# The collapse table lists about this many values of n, log-spaced, plus every turning point.
_COLLAPSE_ROWS = 30


@app.command()
def collapse(
    b: Annotated[
        list[float] | None,
        typer.Option("--b", help="Ball measure b in [0, 1]; repeat for several curves."),
    ] = None,
    n_max: Annotated[int, typer.Option("--n-max", help="Largest number of candidates n.")] = 200,
    delta: SimilarityDeltaOption = 0.0,
    plot: PlotOption = None,
) -> None:
    """p_S^n and p_I^n against the number of candidates n (Theorem 3).

    p_I^n collapses like 1/(n b); for small b, p_S^n is not monotone in n (it falls, rises
    near n ~ 1/b, then falls). Rows are log-spaced in n and include every turning point of
    p_S^n, which are also listed per b.
    """
    from geomlens.theory import resolution

    ball_measures = list(dict.fromkeys(b or [0.01, 0.05, 0.2, 0.5]))
    with _invalid_arguments_exit():
        profiles = {
            measure: resolution.candidate_profile(measure, n_max, delta)
            for measure in ball_measures
        }
        turns = {
            measure: resolution.similarity_turning_points(measure, n_max, delta)
            for measure in ball_measures
        }
    shown = set(np.unique(np.rint(np.geomspace(1, n_max, _COLLAPSE_ROWS)).astype(int)).tolist())
    shown.update(n for points in turns.values() for n in points)
    header = ["n"]
    for measure in ball_measures:
        header += [f"p_S^n(b={measure:g})", f"p_I^n(b={measure:g})"]
    rows = []
    for n in sorted(shown):
        row: list[object] = [n]
        for measure in ball_measures:
            profile = profiles[measure]
            row += [profile.p_s[n - 1], profile.p_i[n - 1]]
        rows.append(row)
    typer.echo(f"Accuracy against the number of candidates n, constant similarity, Δ = {delta:g}")
    _print_table(header, rows)
    for measure in ball_measures:
        profile = profiles[measure]
        described = [
            f"{'min' if _is_minimum(profile.p_s, n) else 'max'} at n = {n}"
            f" (p_S^n = {profile.p_s[n - 1]:.6g})"
            for n in turns[measure]
        ]
        typer.echo(f"b = {measure:g}: p_S^n turns: {', '.join(described) or 'none (monotone)'}")
    if plot is not None:
        from geomlens.theory import plots

        with _figure_errors_exit(plot):
            written = plots.plot_collapse(
                plot,
                candidates=profiles[ball_measures[0]].n,
                curves={m: (profile.p_s, profile.p_i) for m, profile in profiles.items()},
                asymptotes={
                    m: [resolution.identification_asymptote(m, n, delta) for n in profile.n]
                    for m, profile in profiles.items()
                },
                delta=delta,
            )
        _wrote(written)


def _is_minimum(values: np.ndarray, n: int) -> bool:
    return values[n - 1] < values[n - 2]


# The abstraction table lists α at t = 0, at this many log-spaced times, and at t = ∞.
_ABSTRACTION_ROWS = 25


@app.command("abstraction")
def abstraction_command(
    nu_x: Annotated[
        float, typer.Option("--nu-x", help="Inverse SNR ν(Σ_x) = λ_SC / λ_S of the inputs.")
    ] = 0.5,
    nu_y: Annotated[
        float, typer.Option("--nu-y", help="Inverse SNR ν(Σ_y) = λ_SC / λ_S of the targets.")
    ] = 0.2,
    kappa: Annotated[
        float, typer.Option("--kappa", help="Scale κ of the small initial first layer.")
    ] = 1e-3,
    gamma: Annotated[float, typer.Option("--gamma", help="Inverse ridge penalty γ.")] = 1.0,
    plot: PlotOption = None,
) -> None:
    """Abstraction α(t) of the two-layer linear network's hidden layer (docs/theory.md).

    The 2FS kernels have λ_S = 1 and λ_SC = ν (λ_G = λ_C = 1: those modes do not enter α).
    α starts at α(Σ_x), rises to a near-perfect plateau whose height α_max grows toward 1 as
    κ shrinks, and settles at α_∞ = (1 − √(ν_x ν_y)) / (1 + √(ν_x ν_y)).
    """
    from geomlens.theory import abstraction

    with _invalid_arguments_exit():
        terminal = abstraction.alpha_terminal(nu_x, nu_y)
        sigma_x = abstraction.two_factor_kernel([1.0, 1.0, 1.0, nu_x])
        sigma_y = abstraction.two_factor_kernel([1.0, 1.0, 1.0, nu_y])
        peak = abstraction.alpha_max(sigma_x, sigma_y, gamma, kappa)
        plateau = abstraction.plateau_length(sigma_x, sigma_y, gamma, kappa)
        earliest, latest = _abstraction_time_span(nu_x, nu_y, gamma, kappa)
        times = np.concatenate(
            [[0.0], np.geomspace(earliest, latest, _ABSTRACTION_ROWS), [math.inf]]
        )
        alpha = abstraction.alpha_trajectory(sigma_x, sigma_y, gamma, kappa, times)
    typer.echo(
        f"Abstraction of the two-layer linear network: ν_x = {nu_x:g}, ν_y = {nu_y:g}, "
        f"κ = {kappa:g}, γ = {gamma:g}"
    )
    _print_table(("t", "alpha(t)"), list(zip(times, alpha)))
    typer.echo(f"alpha_terminal = {terminal:.6g}")
    typer.echo(f"alpha_max = {peak:.6g}")
    typer.echo(f"plateau (alpha >= 0.95) lasts t = {plateau:.6g}")
    if plot is not None:
        from geomlens.theory import plots

        curve_times = np.geomspace(earliest, latest, _CURVE_POINTS)
        with _figure_errors_exit(plot):
            written = plots.plot_abstraction(
                plot,
                times=curve_times,
                alpha=abstraction.alpha_trajectory(sigma_x, sigma_y, gamma, kappa, curve_times),
                alpha_terminal=terminal,
                alpha_max=peak,
                parameters={"ν_x": nu_x, "ν_y": nu_y, "κ": kappa, "γ": gamma},
            )
        _wrote(written)


def _abstraction_time_span(
    nu_x: float, nu_y: float, gamma: float, kappa: float
) -> tuple[float, float]:
    """Times from well before the signal mode S rises to well after the interaction mode SC.

    A mode rises when its clock F(γλ) reaches F(1); the clock advances at the mode's rate, so
    the rise takes (F(1) − F(γκλ^x)) / rate (at least 1 / rate, for a large κ). α is flat
    before S rises and approaches α_∞ only slowly after SC does, hence the wide margins.
    """
    from geomlens.theory import abstraction

    input_modes = np.array([1.0, nu_x])
    rates = abstraction.mode_rate(input_modes, [1.0, nu_y], gamma)
    distance = np.maximum(
        abstraction.clock(1.0) - abstraction.clock(gamma * kappa * input_modes), 1.0
    )
    signal_rise = distance[0] / rates[0]
    # With ν_x ν_y = 0 the SC mode never rises and α tends to 1 after S alone.
    interaction_rise = distance[1] / rates[1] if rates[1] > 0 else signal_rise
    return 1e-2 * signal_rise, 1e3 * interaction_rise


@app.command("ssd")
def ssd_command(
    pool_size: Annotated[
        int, typer.Option("--P", help="Pool size P: latents active on the calibration stream.")
    ],
    dictionary_size: Annotated[int, typer.Option("--m", help="SAE dictionary size m.")],
    held_out: Annotated[int, typer.Option("--N", help="Held-out sequences N.")],
    vocabulary_size: Annotated[int, typer.Option("--V", help="Vocabulary size V.")],
    risk: Annotated[
        float, typer.Option("--risk", help="Empirical risk R̂ of the proxy, smoothed bits/token.")
    ] = 0.0,
    eps_loss: Annotated[
        float, typer.Option("--eps-loss", help="Mean |loss gap| ε̂ between model and proxy.")
    ] = 0.0,
    eta: Annotated[
        float, typer.Option("--eta", help="Pool mismatch η̂: fraction of sequences leaving G.")
    ] = 0.0,
    delta: Annotated[float, typer.Option("--delta", help="Failure probability δ.")] = ssd.DELTA,
    plot: PlotOption = None,
) -> None:
    """The SSD generalisation bound U term by term, and the crossing size N* (docs/theory.md)."""
    arguments = dict(
        P=pool_size,
        m=dictionary_size,
        V=vocabulary_size,
        risk=risk,
        eps_loss=eps_loss,
        eta=eta,
        delta=delta,
    )
    with _invalid_arguments_exit():
        terms = ssd.bound(N=held_out, **arguments)
        crossing = ssd.crossing_size(**arguments)
    typer.echo(
        f"SSD bound: P = {pool_size}, m = {dictionary_size}, N = {held_out}, "
        f"V = {vocabulary_size}, δ = {delta:g}, a = {ssd.SMOOTHING:g}"
    )
    _print_table(
        ("term", "value"),
        [
            ("SSD = P ln(e m / P)", terms.ssd),
            ("B = log2(V / a)", terms.loss_bound),
            ("empirical risk R̂", terms.empirical_risk),
            ("loss gap ε̂_loss", terms.eps_loss),
            ("pool mismatch B η̂", terms.pool_mismatch),
            ("complexity B √((SSD + ln(2/δ)) / 2N)", terms.complexity),
            ("confidence B √(ln(4/δ) / 2N)", terms.confidence),
            ("bound U", terms.total),
            ("vacuity threshold log2 V", terms.vacuity_threshold),
            ("crossing size N*", crossing),
        ],
    )
    typer.echo(f"non-vacuous (U < log2 V): {'yes' if terms.non_vacuous else 'no'}")
    if math.isinf(crossing):
        typer.echo("N* = inf: R̂ + ε̂_loss + B η̂ already reaches log2 V, no N certifies.")
    if plot is not None:
        from geomlens.theory import plots

        largest = 10.0 * max(held_out, crossing if math.isfinite(crossing) else held_out)
        sizes = np.geomspace(1.0, largest, _CURVE_POINTS)
        with _figure_errors_exit(plot):
            written = plots.plot_ssd(
                plot,
                sizes=sizes,
                totals=[ssd.bound(N=size, **arguments).total for size in sizes],
                floor=terms.empirical_risk + terms.eps_loss + terms.pool_mismatch,
                threshold=terms.vacuity_threshold,
                crossing=crossing,
                evaluated=(held_out, terms.total),
                parameters={
                    "P": pool_size,
                    "m": dictionary_size,
                    "N": held_out,
                    "V": vocabulary_size,
                    "δ": delta,
                },
            )
        _wrote(written)
