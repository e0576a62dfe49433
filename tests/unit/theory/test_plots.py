"""The theory figures: parameters in titles, b along the front, regimes, every symbol defined in
the legend, and measured points / curves overlaid where they belong."""

import numpy as np
import pytest

from geomlens.theory import abstraction, plots, resolution, ssd


def legend_texts(axes) -> list[str]:
    return [text.get_text() for text in axes.get_legend().get_texts()]


def pareto(**extra):
    universal = resolution.pareto_front(201)
    decay = resolution.linear_decay_front(201)
    noisy = resolution.pareto_front(201, delta=0.3)
    return plots.pareto_figure(
        universal=(universal.p_s, universal.p_i),
        linear_decay=(decay.p_s, decay.p_i),
        noisy=(noisy.p_s, noisy.p_i),
        delta=0.3,
        universal_b=universal.b,
        **extra,
    )


def test_pareto_marks_b_along_the_front_at_the_closed_form_points():
    axes = pareto().axes[0]
    marks = {a.get_text(): a.xy for a in axes.texts if a.get_text().startswith("b = ")}
    assert set(marks) == {"b = 0", "b = 0.1", "b = 0.25", "b = 0.5", "b = 0.75", "b = 1"}
    for label, (p_s, p_i) in marks.items():  # p_S on x, p_I on y
        b = float(label.split("=")[1])
        # Theorem 1 at n = 2: p_S = 1/2 + b − b², p_I = 1 − b/2 (written out, not the module).
        assert p_s == pytest.approx(0.5 + b - b * b, abs=1e-9)
        assert p_i == pytest.approx(1 - b / 2, abs=1e-9)


def test_pareto_colours_the_three_regimes_over_their_b_ranges():
    axes = pareto().axes[0]
    lines = {line.get_label(): line for line in axes.get_lines()}
    identification = lines["identification regime (b < 1/4)"].get_ydata()
    trade_off = lines["trade-off regime (1/4 ≤ b ≤ 1/2)"].get_ydata()
    interference = lines["interference regime (b > 1/2)"].get_ydata()
    # y is p_I = 1 − b/2: b < 1/4 ⇔ p_I > 7/8, b > 1/2 ⇔ p_I < 3/4.
    assert identification.min() >= 0.875 - 1e-9
    assert trade_off.min() >= 0.75 - 1e-9 and trade_off.max() <= 0.875 + 1e-9
    assert interference.max() <= 0.75 + 1e-9


def test_pareto_title_and_legend_name_every_parameter_and_symbol():
    axes = pareto().axes[0]
    assert "Δ = 0.3" in axes.get_title() and "n = 2" in axes.get_title()
    legend = " ".join(legend_texts(axes))
    for symbol in ("p_S:", "p_I:", "b:", "Δ:"):
        assert symbol in legend


def test_measured_point_and_curve_land_at_their_coordinates():
    figure = pareto(
        measured=[
            plots.pareto_point(0.62, 0.9, "layer 3"),
            plots.pareto_point([0.55, 0.6], [0.95, 0.9], "training run"),
        ]
    )
    lines = {line.get_label(): line for line in figure.axes[0].get_lines()}
    assert lines["layer 3"].get_xdata().tolist() == [0.62]  # p_S on x
    assert lines["layer 3"].get_ydata().tolist() == [0.9]
    assert lines["training run"].get_ydata().tolist() == [0.95, 0.9]
    assert lines["training run"].get_linestyle() == "-"
    assert "layer 3" in legend_texts(figure.axes[0])


def test_collapse_overlay_goes_to_the_panel_asked_for():
    profile = resolution.candidate_profile(0.05, 40)
    figure = plots.collapse_figure(
        candidates=profile.n,
        curves={0.05: (profile.p_s, profile.p_i)},
        asymptotes={0.05: [resolution.identification_asymptote(0.05, n) for n in profile.n]},
        delta=0.1,
        measured=[plots.Overlay([2, 4, 8], [0.9, 0.8, 0.6], "measured p_I^n", panel=1)],
    )
    similarity_axes, identification_axes = figure.axes
    assert "Δ = 0.1" in similarity_axes.get_title()
    assert "measured p_I^n" in [line.get_label() for line in identification_axes.get_lines()]
    assert "measured p_I^n" not in [line.get_label() for line in similarity_axes.get_lines()]
    assert any("b:" in text for text in legend_texts(similarity_axes))


def test_abstraction_and_ssd_titles_carry_their_parameters():
    sigma_x = abstraction.two_factor_kernel([1.0, 1.0, 1.0, 0.5])
    sigma_y = abstraction.two_factor_kernel([1.0, 1.0, 1.0, 0.2])
    times = np.geomspace(1e-2, 1e4, 60)
    alpha = abstraction.alpha_trajectory(sigma_x, sigma_y, 1.0, 1e-3, times)
    figure = plots.abstraction_figure(
        times=times,
        alpha=alpha,
        alpha_terminal=abstraction.alpha_terminal(0.5, 0.2),
        alpha_max=float(np.max(alpha)),
        parameters={"ν_x": 0.5, "ν_y": 0.2, "κ": 1e-3, "γ": 1.0},
    )
    title = figure.axes[0].get_title()
    assert all(part in title for part in ("ν_x = 0.5", "ν_y = 0.2", "κ = 0.001", "γ = 1"))
    assert any(text.startswith("α:") for text in legend_texts(figure.axes[0]))

    sizes = np.geomspace(1, 1e5, 50)
    arguments = {"P": 40, "m": 4096, "V": 50257, "risk": 3.0}
    terms = ssd.bound(N=1000, **arguments)
    figure = plots.ssd_figure(
        sizes=sizes,
        totals=[ssd.bound(N=n, **arguments).total for n in sizes],
        floor=3.0,
        threshold=terms.vacuity_threshold,
        crossing=ssd.crossing_size(**arguments),
        parameters={"P": 40, "m": 4096, "V": 50257, "δ": 0.05},
        measured=[plots.Overlay(1000, terms.total, "this SAE")],
    )
    title = figure.axes[0].get_title()
    assert all(part in title for part in ("P = 40", "m = 4096", "V = 50257", "δ = 0.05"))
    legend = " ".join(legend_texts(figure.axes[0]))
    assert "vacuous" in legend and "this SAE" in legend and "P: pool size" in legend


def test_bad_overlays_say_what_is_wrong():
    with pytest.raises(ValueError, match="2 x values but 3 y values"):
        pareto(measured=[plots.Overlay([0.9, 0.8], [0.6, 0.7, 0.8], "bad")])
    with pytest.raises(ValueError, match="panel 2; this figure has panels 0 to 0"):
        pareto(measured=[plots.Overlay(0.9, 0.6, "bad", panel=2)])


def test_plot_writes_the_figure_atomically(tmp_path):
    universal = resolution.pareto_front(51)
    path = plots.plot_pareto(
        tmp_path / "front.svg",
        universal=(universal.p_s, universal.p_i),
        measured=[plots.pareto_point(0.6, 0.9)],
    )
    assert path.read_text().lstrip().startswith("<?xml")
    assert [p.name for p in tmp_path.iterdir()] == ["front.svg"]


def test_every_figure_of_the_plane_has_one_orientation_and_one_set_of_noise_curves(tmp_path):
    """The report's theory figure, the analysis's figure and the CLI's: p_S on x, p_I on y,
    and the fronts of the same noise floors."""
    import geomlens as gl
    from geomlens.report.figures import pareto_with_model

    universal = resolution.pareto_front(201)
    noisy = {d: resolution.pareto_front(201, delta=d) for d in resolution.NOISE_CURVES}
    cli_axes = plots.pareto_figure(
        universal=(universal.p_s, universal.p_i),
        noisy={d: (f.p_s, f.p_i) for d, f in noisy.items()},
    ).axes[0]
    site = "blocks.0.hook_resid_post"
    result = gl.Result("resolution", metrics={
        f"{site}.p_similarity": 0.7, f"{site}.p_identification": 0.8,
    })  # fmt: skip
    captured = {}
    import matplotlib.figure

    original = matplotlib.figure.Figure.savefig

    def keep(figure, *args, **kwargs):
        captured["axes"] = figure.axes[0]
        return original(figure, *args, **kwargs)

    matplotlib.figure.Figure.savefig = keep
    try:
        pareto_with_model({"resolution": result}, tmp_path / "front.png")
    finally:
        matplotlib.figure.Figure.savefig = original
    for axes in (cli_axes, captured["axes"]):
        assert "p_S" in axes.get_xlabel() and "p_I" in axes.get_ylabel()
        fronts = [line for line in axes.get_lines() if "Δ = 0." in line.get_label()]
        levels = sorted(float(line.get_label().split("Δ = ")[1].split()[0]) for line in fronts)
        assert levels == list(resolution.NOISE_CURVES)
        for line, delta in zip(sorted(fronts, key=lambda f: f.get_label()), levels):
            # Theorem 2 as (p_S, p_I): max p_S = 1/2 + (1−Δ)/(4(1+Δ)), max p_I = 1/(1+Δ)
            top_s = 0.5 + (1 - delta) / (4 * (1 + delta))
            assert max(line.get_xdata()) == pytest.approx(top_s, abs=1e-4)
            assert max(line.get_ydata()) == pytest.approx(1 / (1 + delta), abs=1e-4)
    layer = next(
        line for line in captured["axes"].get_lines() if line.get_label().startswith("layer")
    )
    assert layer.get_xdata().tolist() == [0.7] and layer.get_ydata().tolist() == [0.8]
    legend = " ".join(t.get_text() for t in captured["axes"].get_legend().get_texts())
    assert "n = 2: each test trial offers two candidates" in legend
