"""`geomlens theory …`: the printed numbers are the library's, figures are real images."""

import re
from pathlib import Path

import matplotlib.image
import pytest
from typer.testing import CliRunner

from geomlens.theory import resolution, ssd
from geomlens.theory.cli import app

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
    assert "Format 'notaformat' is not supported" in message
    assert figure.read_bytes() == b"previous"
    assert [p.name for p in tmp_path.iterdir()] == [figure.name]


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
        (("ssd", "--P", 2, "--m", 100, "--V", 4), "Missing option '--N'"),
    ],
)
def test_bad_arguments_exit_with_a_clear_message(arguments, message):
    assert message in fail(*arguments)


def test_every_command_has_help():
    for command in ("pareto", "collapse", "ssd"):
        assert "Usage" in succeed(command, "--help")
