"""Read every sentence of a rendered report page and name each one no reader should meet.

A report's numbers go through their metrics' guards (:mod:`geomlens.analyses.words.guards`);
this checker reads the page as a reader does, after every guard and every reading has run,
and finds what slipped past them: a share over 100 %, a cosine or similarity outside [−1, 1],
an accuracy printed as a number where it is at chance, an identifier or hook name outside a
code block, "undefined", "nan" or a Python list in prose, a comparison written after "=".

It reads text only (the page's ``<code>``, ``<pre>``, ``<script>`` and ``<style>`` are code,
not prose, and are skipped): ``problems(html)`` returns one :class:`Problem` per finding, with
the rule it breaks and the sentence it is in, so a test can print them all at once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser

__all__ = ["Problem", "RULES", "check_text", "problems", "prose"]

#: Elements whose text is code, not prose.
CODE_ELEMENTS = frozenset({"code", "pre", "script", "style", "kbd", "samp"})
#: Code elements inside a sentence (the others are blocks of their own).
INLINE_CODE = frozenset({"code", "kbd", "samp"})
#: Elements that end a run of text (a sentence never spans two of them).
BLOCK_ELEMENTS = frozenset(
    {"p", "li", "td", "th", "h1", "h2", "h3", "h4", "div", "section", "summary", "tr", "table",
     "ul", "ol", "nav", "details", "body", "title", "figcaption", "caption"}
)  # fmt: skip

_NUMBER = r"[−-]?\d[\d,]*(?:\.\d+)?"


def _value(text: str) -> float:
    return float(text.replace("−", "-").replace(",", ""))


@dataclass(frozen=True)
class Problem:
    """One finding: the rule broken, the offending words, and the block of text they are in."""

    rule: str
    found: str
    text: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.found!r} in {self.text!r}"


class _Prose(HTMLParser):
    """The page's text blocks, code elements left out."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[str] = []
        self._current: list[str] = []
        self._code_depth = 0

    def _flush(self) -> None:
        text = " ".join("".join(self._current).split())
        if text:
            self.blocks.append(text)
        self._current = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in CODE_ELEMENTS:
            if tag in INLINE_CODE:  # a code span is not part of the words around it
                self._current.append(" ‹code› ")
            else:
                self._flush()
            self._code_depth += 1
        elif tag in BLOCK_ELEMENTS:
            self._flush()

    def handle_endtag(self, tag: str) -> None:
        if tag in CODE_ELEMENTS:
            self._code_depth = max(0, self._code_depth - 1)
        elif tag in BLOCK_ELEMENTS:
            self._flush()

    def handle_data(self, data: str) -> None:
        if not self._code_depth:
            self._current.append(data)

    def close(self) -> None:
        super().close()
        self._flush()


def prose(html: str) -> list[str]:
    """The page's blocks of prose (paragraphs, list items, table cells), code left out."""
    parser = _Prose()
    parser.feed(html)
    parser.close()
    return parser.blocks


def _shares(text: str) -> list[str]:
    """Percentages over 100 (a share of something cannot exceed the whole)."""
    return [m.group(0) for m in re.finditer(rf"({_NUMBER})\s*%", text) if _value(m.group(1)) > 100]


#: Words after which a number is a cosine, a similarity or an abstraction α (a mean cosine):
#: values in [−1, 1].
_COSINE = re.compile(
    rf"(?:(?<![−-] )\bg\([^)]{{0,12}}\)|\bg\b(?: falls)? to|\bsimilarity|\bcosine(?: similarity)?|α(?: corrected for noise)?)"
    rf"(?: of| is| =|:)?\s*({_NUMBER})(?![\d.]|\s*(?:%|years?|tokens?|bits|nats|rows|candidates))"
)


def _cosines(text: str) -> list[str]:
    return [m.group(0) for m in _COSINE.finditer(text) if abs(_value(m.group(1))) > 1.0]


#: A two-choice accuracy (p_S, p_I) printed as a number within this of 1/2 without the words
#: "chance" in its block: the number is read where its guard says nothing was measured.
CHANCE_WINDOW = 0.01
_ACCURACY = re.compile(rf"\b(?:p_S|p_I)\s*(?:=|is)?\s*({_NUMBER})")
_PAIR = re.compile(rf"\(p_S, p_I\)\s*=\s*\(({_NUMBER}), ({_NUMBER})\)")


def _at_chance(text: str) -> list[str]:
    if "chance" in text.lower():
        return []
    found = [m.group(0) for m in _ACCURACY.finditer(text)]
    found = [f for f, m in zip(found, _ACCURACY.finditer(text)) if _near_half(m.group(1))]
    for m in _PAIR.finditer(text):
        if all(_near_half(m.group(i)) for i in (1, 2)):
            found.append(m.group(0))
    return found


def _near_half(text: str) -> bool:
    return abs(_value(text) - 0.5) <= CHANCE_WINDOW


#: A hook name or a metric key: ``blocks.0.hook_resid_post``, ``logits.p_identification_n2``,
#: ``alpha_ci_low`` (lower-case words joined by ``_``; "p_S", "ε_fast" are notation, not keys).
_IDENTIFIER = re.compile(
    r"\bblocks\.\d+(?:\.\w+)?|\bhook_\w+|(?<![\w.-])[a-z][a-z0-9]*(?:\.[a-z0-9]+)*_[a-z0-9_]*[a-z0-9](?![\w(])"
)
#: File names the page links to (``results.json``) are names, not identifiers in prose.
_FILE = re.compile(r"\b[\w.-]+\.(?:json|png|html|jsonl|csv)\b")


def _identifiers(text: str) -> list[str]:
    return _IDENTIFIER.findall(_FILE.sub("", text))


_NOT_A_NUMBER = re.compile(r"\b(?:undefined|nan|NaN|None|inf)\b")
_PY_LIST = re.compile(
    r"\[\s*(?:-?\d+|'[^']*'|\"[^\"]*\")(?:\s*,\s*(?:-?\d+|'[^']*'|\"[^\"]*\"))*\s*\]"
)
_GARBLED = re.compile(r"=\s*[<>≤≥‹›]|[<>≤≥]\s*undefined")


#: Each rule: its name and a function from a block of text to the offending words.
RULES = {
    "share over 100 %": _shares,
    "cosine outside [−1, 1]": _cosines,
    "accuracy read at chance": _at_chance,
    "identifier outside code": _identifiers,
    "not a number in prose": lambda text: _NOT_A_NUMBER.findall(text),
    "Python list in prose": lambda text: _PY_LIST.findall(text),
    "garbled comparison": lambda text: _GARBLED.findall(text),
}


def check_text(text: str) -> list[Problem]:
    """The problems of one block of prose."""
    return [Problem(rule, found, text) for rule, find in RULES.items() for found in find(text)]


def problems(html: str) -> list[Problem]:
    """Every problem of a rendered page, in page order."""
    return [problem for block in prose(html) for problem in check_text(block)]
