"""An offline English corpus: the docstrings of Python's standard library.

Real prose that needs no download (~2,500 paragraphs on CPython 3.11). Paragraphs are taken
in a fixed module order, so a given Python version always yields the same corpus; results
record the Python version in their provenance.
"""

from __future__ import annotations

import importlib
import inspect
import re
import warnings
from typing import Any

#: Paragraphs of the bundled corpus used when an analysis runs on it without a limit.
DEFAULT_CORPUS_SIZE = 64

#: Modules with plenty of prose docstrings, all importable on every platform.
CORPUS_MODULES = (
    "argparse", "asyncio", "calendar", "collections", "concurrent.futures", "configparser",
    "contextlib", "csv", "dataclasses", "datetime", "decimal", "difflib", "email", "enum",
    "fractions", "functools", "gettext", "heapq", "html", "http.client", "inspect", "io",
    "ipaddress", "itertools", "json", "logging", "mailbox", "multiprocessing", "numbers",
    "os", "pathlib", "pickle", "pprint", "queue", "random", "re", "shutil", "smtplib",
    "socket", "statistics", "string", "subprocess", "tarfile", "tempfile", "textwrap",
    "threading", "tkinter", "typing", "unittest", "urllib.parse", "uuid", "xml.dom.minidom",
    "zipfile",
)  # fmt: skip
_WORDS = re.compile(r"[A-Za-z]{2,}")


def _docstrings(module_name: str) -> list[str]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module = importlib.import_module(module_name)
    except ImportError:
        return []
    found = [inspect.getdoc(module) or ""]
    for _, member in sorted(vars(module).items()):
        if getattr(member, "__module__", None) != module.__name__:
            continue
        found.append(inspect.getdoc(member) or "")
        if inspect.isclass(member):
            for _, method in sorted(vars(member).items()):
                if callable(method):
                    found.append(inspect.getdoc(method) or "")
    return found


def is_prose(paragraph: str, min_words: int = 8) -> bool:
    """Keep paragraphs that read as English sentences, not code or tables."""
    if paragraph.startswith((">>>", "    ", "-", "*", "=", "|")):
        return False
    words = _WORDS.findall(paragraph)
    return len(words) >= min_words and len(words) / max(len(paragraph.split()), 1) > 0.7


def stdlib_paragraphs(limit: int | None = None) -> list[str]:
    """Distinct prose paragraphs from the standard library's docstrings, in a fixed order."""
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be a positive number of paragraphs, got {limit}.")
    seen: set[str] = set()
    paragraphs: list[str] = []
    for module_name in CORPUS_MODULES:
        for doc in _docstrings(module_name):
            for block in doc.split("\n\n"):
                text = " ".join(block.split())
                if text not in seen and is_prose(block.strip()):
                    seen.add(text)
                    paragraphs.append(text)
                    if limit is not None and len(paragraphs) >= limit:
                        return paragraphs
    return paragraphs


#: Disjoint parts of the corpus, by paragraph index modulo 5: interleaved, so every part draws
#: from every module (the same distribution), and no paragraph is in two parts.
CORPUS_PARTS = {"calibration": (0,), "heldout": (1,), "training": (2, 3, 4)}


def corpus_split(part: str, limit: int | None = None) -> list[str]:
    """Paragraphs of one part of the corpus: ``calibration`` (1/5), ``heldout`` (1/5) or
    ``training`` (3/5), the first ``limit`` of them. The parts never share a paragraph, so an
    SAE trained on ``training`` and a pool read on ``calibration`` are judged on unseen text."""
    if part not in CORPUS_PARTS:
        raise ValueError(f"Unknown corpus part {part!r}; the parts are {sorted(CORPUS_PARTS)}.")
    residues = CORPUS_PARTS[part]
    chosen = [p for i, p in enumerate(stdlib_paragraphs()) if i % 5 in residues]
    return chosen[:limit] if limit is not None else chosen


def corpus_dataset(limit: int | None = None) -> Any:
    """The bundled corpus as a Dataset whose provenance names it and its size."""
    import platform

    from geomlens.data.dataset import Dataset

    texts = stdlib_paragraphs(limit)
    return Dataset(
        texts=texts,
        source=(
            f"bundled corpus: Python {platform.python_version()} standard-library docstrings, "
            f"first {len(texts)} paragraphs"
        ),
    )
