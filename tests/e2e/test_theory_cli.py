"""`geomlens theory …`: the printed numbers are the library's, figures are real images."""

import math
import re
import subprocess
import sys
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest
from typer.testing import CliRunner

from geomlens.cli.theory import app
from geomlens.theory import abstraction, resolution, ssd

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
NUMBER = r"[-+]?(?:\d+\.?\d*(?:e[-+]?\d+)?|inf)"


def invoke(*arguments: object):
    return CliRunner().invoke(app, [str(argument) for argument in arguments])


def succeed(*arguments: object) -> str:
    result = invoke(*arguments)
    assert result.exit_code == 0, result.output
    return result.output


def fail(*arguments: object) -> str:
    """Run a command that must be refused; return its message with whitespace collapsed."""
    result = invoke(*arguments)
    assert result.exit_code == 2, result.output
    return " ".join(result.output.split())


def numbers(line: str) -> list[float]:
    return [float(token) for token in re.findall(NUMBER, line)]


def table(output: str, header_start: str) -> list[list[str]]:
    """The whitespace-split rows under the header line that starts with ``header_start``."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:1] == [header_start])
    rows = []
    for line in lines[start + 1 :]:
        cells = line.split()
        if not cells or not re.fullmatch(NUMBER, cells[0]):
            break
        rows.append(cells)
    return rows


def assert_png(path: Path) -> None:
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    image = matplotlib.image.imread(path)
    assert image.ndim == 3 and min(image.shape[:2]) > 100
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary left


@pytest.mark.parametrize("delta", [0.0, 0.3])
def test_pareto_prints_the_front_with_regimes(delta):
    output = succeed("pareto", "--delta", delta, "--num", 6)
    rows = table(output, "b")
    assert len(rows) == 6
    for b, p_s, p_i, regime in rows:
        assert float(p_s) == pytest.approx(resolution.p_similarity(float(b), delta=delta), 1e-5)
        assert float(p_i) == pytest.approx(resolution.p_identification(float(b), delta=delta), 1e-5)
        assert regime == resolution.regime(float(b))
    optimum_line = next(line for line in output.splitlines() if line.startswith("optimum"))
    optimum = resolution.similarity_optimum(delta=delta)
    assert numbers(optimum_line) == pytest.approx([optimum.b, optimum.p_s, optimum.p_i], 1e-5)


def test_pareto_plot(tmp_path):
    figure = tmp_path / "front.png"
    output = succeed("pareto", "--delta", 0.2, "--plot", figure)
    assert f"figure: {figure}" in output
    assert_png(figure)


def test_collapse_prints_the_profiles_and_the_turning_points():
    output = succeed("collapse", "--b", 0.05, "--b", 0.5, "--n-max", 40)
    rows = table(output, "n")
    listed = [int(row[0]) for row in rows]
    assert listed[0] == 1 and listed[-1] == 40 and listed == sorted(set(listed))
    turns = resolution.similarity_turning_points(0.05, 40)
    assert turns == (5, 28)  # the non-monotone p_S^n of small b
    assert set(turns) <= set(listed)
    for n, *values in rows:
        expected = [
            f(b, int(n))
            for b in (0.05, 0.5)
            for f in (resolution.p_similarity, resolution.p_identification)
        ]
        assert [float(v) for v in values] == pytest.approx(expected, rel=1e-5)
    summary = {line.split(":")[0]: line for line in output.splitlines() if line.startswith("b =")}
    assert "min at n = 5" in summary["b = 0.05"] and "max at n = 28" in summary["b = 0.05"]
    assert "none (monotone)" in summary["b = 0.5"]


def test_collapse_plot(tmp_path):
    figure = tmp_path / "collapse.png"
    succeed("collapse", "--n-max", 60, "--plot", figure)
    assert_png(figure)


def test_abstraction_prints_the_trajectory_and_its_landmarks():
    output = succeed("abstraction", "--nu-x", 0.5, "--nu-y", 0.2, "--kappa", 1e-3, "--gamma", 2)
    sigma_x = abstraction.two_factor_kernel([1.0, 1.0, 1.0, 0.5])
    sigma_y = abstraction.two_factor_kernel([1.0, 1.0, 1.0, 0.2])
    rows = [[float(cell) for cell in row] for row in table(output, "t")]
    times, alphas = np.array(rows).T
    assert times[0] == 0.0 and times[-1] == math.inf and np.all(np.diff(times) > 0)
    expected = abstraction.alpha_trajectory(sigma_x, sigma_y, 2.0, 1e-3, times)
    # Times are printed to 6 significant digits; α moves by far less than 1e-5 over that.
    np.testing.assert_allclose(alphas, expected, atol=1e-5)
    assert alphas[0] == pytest.approx(1 / 3, abs=1e-6)  # α(Σ_x) = (1 − 0.5)/(1 + 0.5)
    landmark = {
        line.split(" = ")[0]: float(line.split(" = ")[-1])
        for line in output.splitlines()
        if line.startswith(("alpha_terminal", "alpha_max", "plateau"))
    }
    assert landmark["alpha_terminal"] == pytest.approx(abstraction.alpha_terminal(0.5, 0.2), 1e-5)
    assert landmark["alpha_terminal"] == pytest.approx(alphas[-1], 1e-5)
    assert landmark["alpha_max"] == pytest.approx(
        abstraction.alpha_max(sigma_x, sigma_y, 2.0, 1e-3), 1e-5
    )
    assert landmark["plateau (alpha >= 0.95) lasts t"] == pytest.approx(
        abstraction.plateau_length(sigma_x, sigma_y, 2.0, 1e-3), 1e-5
    )
    # The table spans the rise to the plateau and the decay toward α_∞.
    assert alphas.max() > 0.99 and alphas[-2] < 0.6


def test_abstraction_plot(tmp_path):
    figure = tmp_path / "alpha.png"
    succeed("abstraction", "--plot", figure)
    assert_png(figure)


SSD_ARGUMENTS = dict(P=10, m=100, V=4, risk=1.0, eps_loss=0.1, eta=0.05, delta=0.05)
SSD_OPTIONS = (
    *("--P", 10, "--m", 100, "--N", 1000, "--V", 4),
    *("--risk", 1.0, "--eps-loss", 0.1, "--eta", 0.05, "--delta", 0.05),
)


def test_ssd_prints_the_terms_and_the_crossing_size():
    output = succeed("ssd", *SSD_OPTIONS)
    value = {}
    lines = output.splitlines()
    for line in lines[lines.index(next(x for x in lines if x.startswith("term"))) + 1 :]:
        label, _, last = line.rpartition(" ")
        if label and re.fullmatch(NUMBER, last):
            value[label.strip()] = float(last)
    terms = ssd.bound(N=1000, **SSD_ARGUMENTS)
    expected = {
        "SSD = P ln(e m / P)": terms.ssd,
        "B = log2(V / a)": terms.loss_bound,
        "empirical risk R̂": terms.empirical_risk,
        "loss gap ε̂_loss": terms.eps_loss,
        "pool mismatch B η̂": terms.pool_mismatch,
        "complexity B √((SSD + ln(2/δ)) / 2N)": terms.complexity,
        "confidence B √(ln(4/δ) / 2N)": terms.confidence,
        "bound U": terms.total,
        "vacuity threshold log2 V": terms.vacuity_threshold,
        "crossing size N*": ssd.crossing_size(**SSD_ARGUMENTS),
    }
    assert value == pytest.approx(expected, rel=1e-5)
    assert "non-vacuous (U < log2 V): yes" in output


def test_ssd_reports_an_unreachable_threshold():
    output = succeed("ssd", "--P", 10, "--m", 100, "--N", 1000, "--V", 4, "--risk", 2.5)
    assert re.search(r"crossing size N\*\s+inf", output)
    assert "non-vacuous (U < log2 V): no" in output
    assert "no N certifies" in output


def test_ssd_plot(tmp_path):
    figure = tmp_path / "nested" / "bound.png"
    succeed("ssd", *SSD_OPTIONS, "--plot", figure)
    assert_png(figure)


def test_a_failed_plot_leaves_the_previous_figure_alone(tmp_path):
    figure = tmp_path / "front.notaformat"
    figure.write_bytes(b"previous")
    message = fail("pareto", "--plot", figure)
    assert f"could not write the figure {figure}" in message
    assert "Format 'notaformat' is not supported" in message
    assert figure.read_bytes() == b"previous"
    assert [p.name for p in tmp_path.iterdir()] == [figure.name]


def test_an_unwritable_figure_is_a_clean_error(tmp_path):
    occupied = tmp_path / "figure.png"
    occupied.mkdir()
    message = fail("ssd", "--P", 2, "--m", 10, "--N", 10, "--V", 4, "--plot", occupied)
    assert f"error: could not write the figure {occupied}" in message
    assert [p.name for p in tmp_path.iterdir()] == [occupied.name]  # no temporary left


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("pareto", "--delta", 1.5), "delta must be a noise level in [0, 1]"),
        (("pareto", "--num", 1), "num must be an integer >= 2"),
        (("collapse", "--b", 1.2), "b must be a ball measure in [0, 1]"),
        (("collapse", "--n-max", 0), "n must be an integer >= 1"),
        (("ssd", "--P", 200, "--m", 100, "--N", 10, "--V", 4), "expected 0 <= P <= m = 100"),
        (("ssd", "--P", 2, "--m", 100, "--N", 0, "--V", 4), "expected a finite N >= 1"),
        (("ssd", "--P", 2, "--m", 100, "--N", 10, "--V", 1), "expected a finite V >= 2"),
        (
            ("ssd", "--P", 2, "--m", 100, "--N", 10, "--V", 4, "--delta", 0),
            "expected 0 < delta < 1",
        ),
        (
            ("ssd", "--P", 2, "--m", 100, "--N", 10, "--V", 4, "--eta", 2),
            "expected 0 <= eta <= 1",
        ),
        (("abstraction", "--nu-x", -1), "expected nu_x >= 0, got -1.0"),
        (("abstraction", "--kappa", 0), "expected kappa > 0"),
        (("abstraction", "--gamma", -2), "expected gamma > 0"),
        (("ssd", "--P", 2, "--m", 100, "--V", 4), "Missing option '--N'"),
    ],
)
def test_bad_arguments_exit_with_a_clear_message(arguments, message):
    assert message in fail(*arguments)


def test_every_command_has_help():
    for command in ("pareto", "collapse", "abstraction", "ssd"):
        assert "Usage" in succeed(command, "--help")


def test_the_cli_does_not_import_matplotlib_until_it_plots():
    probe = "import sys, geomlens.cli.theory; print('matplotlib' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr
