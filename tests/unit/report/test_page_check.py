"""The page checker (geomlens.report.page_check) catches each kind of sentence no page may hold,
and passes the sentences the readings write now (so a page that passes it is meaningful)."""

from __future__ import annotations

import pytest

from geomlens.report.page_check import problems, prose

#: Sentences from pages that bypassed the guards (the default and quick pages' worst), each
#: with the rule that must catch it.
PLANTED = [
    (
        "The same stimulus in another text has similarity −0.253: the text alone accounts for "
        "about 412 % of the drop to the nearest distance.",
        "share over 100 %",
    ),
    ("g(d₁) = 1.14 at the first distance.", "cosine outside [−1, 1]"),
    ("Corrected for noise, α is 1.05 (95 % interval 0.803 to 1.37).", "cosine outside [−1, 1]"),
    ("At layer 29 g falls to −1.53 already at the nearest distance.", "cosine outside [−1, 1]"),
    (
        "Side by side, the raw cosine gives half-width 96.4 years, (p_S, p_I) = (0.5, 0.501).",
        "accuracy read at chance",
    ),
    (
        "logits.p_identification_n2 0.504; p_identification_n2_ci_low 0.307",
        "identifier outside code",
    ),
    ("Its legend shows blocks.0.hook_resid_post.", "identifier outside code"),
    (
        "One scale does not fit: undefined of the fall happens on a fast scale.",
        "not a number in prose",
    ),
    ("The loss is nan nats.", "not a number in prose"),
    (
        "The MLP nonlinearity of layer(s) [4] is replaced by its linear version.",
        "Python list in prose",
    ),
    ("a fast scale ε_fast = < d₁ = 1 year (unresolved on a 1-year grid)", "garbled comparison"),
    ("At the two scales' half-widths ⟨b⟩ is ≤ undefined (fast).", "garbled comparison"),
]

#: Sentences a page may hold: notation, bounds in words, shares within 100 %, file names.
CLEAN = [
    "The same stimulus in another text has similarity 0.41: the text alone accounts for about "
    "62 % of the drop to the nearest distance.",
    "a similarity test is passed with probability p_S = 0.83 and an identification test with "
    "p_I = 0.71 (1/2 is chance for both).",
    "a fast scale ε_fast is below d₁ = 1 year (unresolved on a 1-year grid)",
    "g(0) = 1 falls to g(d₁) = 0.874 at the first distance: a drop of 1 − g(d₁) = 0.126.",
    "Every result is in results.json.",
    "The MLP nonlinearity of layer 28 is replaced by its linear version (identity).",
    "α ranges from 0.31 to 0.52 across the layers, but their 95 % intervals overlap.",
]


@pytest.mark.parametrize(("sentence", "rule"), PLANTED)
def test_each_planted_sentence_is_caught_by_its_rule(sentence, rule):
    found = problems(f"<p>{sentence}</p>")
    assert rule in {p.rule for p in found}, (sentence, [str(p) for p in found])


@pytest.mark.parametrize("sentence", CLEAN)
def test_a_clean_sentence_passes(sentence):
    assert problems(f"<p>{sentence}</p>") == []


def test_code_is_not_prose():
    html = (
        "<p>Run <code>geomlens report --quick</code> on <code>blocks.0.hook_resid_post</code>.</p>"
        "<pre>{'sites': ['blocks.0.hook_resid_post'], 'value': NaN}</pre>"
        "<script>var x = [1, 2];</script>"
    )
    assert problems(html) == []
    assert prose(html) == ["Run ‹code› on ‹code› ."]


def test_a_page_lists_every_problem_with_its_sentence():
    html = "<p>about 412 % of it</p><table><tr><td>alpha_ci_low</td><td>nan</td></tr></table>"
    found = problems(html)
    assert [p.rule for p in found] == [
        "share over 100 %",
        "identifier outside code",
        "not a number in prose",
    ]
    assert found[0].text == "about 412 % of it"
