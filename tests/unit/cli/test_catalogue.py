"""The generated catalogue that `geomlens list` prints is exactly what the registry says."""

from __future__ import annotations

from geomlens.analyses.registry import ENTRY_POINT_GROUP as REGISTRY_GROUP
from geomlens.cli import catalogue
from geomlens.cli._catalogue import BUILTINS
from geomlens.formatting import plain_words


def test_the_catalogue_matches_the_registry():
    # On failure: python -m geomlens.cli.catalogue --write
    assert catalogue.builtin_catalogue() == BUILTINS


def test_the_catalogue_file_is_what_the_generator_writes():
    assert catalogue.GENERATED.read_text() == catalogue.render(BUILTINS)


def test_the_catalogue_reads_plugins_from_the_registrys_group():
    assert catalogue.ENTRY_POINT_GROUP == REGISTRY_GROUP


def test_a_changed_summary_is_seen():
    changed = (BUILTINS[0]._replace(summary=BUILTINS[0].summary + " More."), *BUILTINS[1:])
    assert changed != catalogue.builtin_catalogue()


def test_plain_words_drops_sphinx_markup():
    text = "See :func:`geomlens.data.stimuli.default_years` and ``choice_set`` (:mod:`~a.b`)."
    assert plain_words(text) == "See geomlens.data.stimuli.default_years and choice_set (a.b)."
