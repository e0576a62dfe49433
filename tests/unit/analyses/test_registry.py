import pytest
from helpers.minimal_analysis import register_minimal_analysis

import geomlens as gl
from geomlens.analyses.registry import Registry, UnknownNameError


def test_lookup_by_name_and_alias():
    registry: Registry[int] = Registry("widget")
    registry.add("alpha", 1, aliases=("a",))
    assert registry.get("alpha") == 1
    assert registry.get("a") == 1
    assert registry.names() == ["alpha"]


def test_unknown_name_lists_available_and_nearest():
    registry: Registry[int] = Registry("widget")
    registry.add("similarity", 1)
    registry.add("abstraction", 2)
    with pytest.raises(UnknownNameError) as info:
        registry.get("similarty")
    message = str(info.value)
    assert "Did you mean 'similarity'" in message
    assert "abstraction" in message and "similarity" in message


def test_duplicate_name_is_refused():
    registry: Registry[object] = Registry("widget")
    registry.add("x", object())
    with pytest.raises(ValueError, match="already registered"):
        registry.add("x", object())


def test_builtin_analysis_is_listed_and_unknown_errors_list_it():
    assert "activation-stats" in gl.list_analyses()
    assert gl.analysis_class("stats") is gl.analysis_class("activation-stats")
    with pytest.raises(UnknownNameError, match="activation-stats"):
        gl.analysis_class("no-such-analysis")


def test_unknown_option_names_the_valid_ones():
    with pytest.raises(ValueError, match="dead_threshold"):
        gl.analysis_class("activation-stats")(not_an_option=1)


def test_register_decorator_sets_name():
    # The helper defines a plain Analysis subclass under @gl.register_analysis(name).
    thing = register_minimal_analysis("test-only-registered")
    assert thing.name == "test-only-registered"
    assert gl.analysis_class("test-only-registered") is thing


def test_only_analysis_subclasses_can_be_registered():
    from geomlens.analyses.registry import ANALYSES, register_analysis

    class NotAnAnalysis:
        pass

    with pytest.raises(TypeError, match="Only Analysis subclasses"):
        register_analysis("test-registry-not-an-analysis")(NotAnAnalysis)
    with pytest.raises(TypeError, match="Only Analysis subclasses"):
        ANALYSES.add("test-registry-a-function", len)
    assert "test-registry-not-an-analysis" not in ANALYSES


def test_a_lazy_entry_is_imported_on_first_lookup_and_checked():
    registry = Registry("thing", check=lambda obj: None if callable(obj) else _refuse(obj))
    registry.add_lazy("join", "os.path:join", aliases=("path-join",))
    assert registry.names() == ["join"] and "path-join" in registry
    import os.path

    assert registry.get("path-join") is os.path.join
    registry.add_lazy("separator", "os.path:sep")
    with pytest.raises(TypeError, match="not callable"):
        registry.get("separator")


def _refuse(obj):
    raise TypeError(f"{obj!r} is not callable")


def test_the_builtins_are_the_folders_that_declare_an_analysis():
    from pathlib import Path

    import geomlens.analyses
    from geomlens.analyses.registry import builtin_analyses, walk_builtins

    folders = sorted(
        p.parent.name
        for p in Path(geomlens.analyses.__file__).parent.glob("*/__init__.py")
        if "DECLARATION = Declaration(" in p.read_text(encoding="utf-8")
    )
    found = list(walk_builtins())
    assert sorted(declared.package.split(".")[2] for declared in found) == folders
    assert builtin_analyses() == sorted(declared.name for declared in found)  # the run order
    for declared in found:
        cls = gl.analysis_class(declared.name)
        assert cls.declaration == declared and cls.name == declared.name
        assert cls.Config is declared.config and cls.metric_specs == declared.metrics
        for alias in declared.aliases:
            assert gl.analysis_class(alias) is cls
    assert gl.analysis_class("stats") is gl.analysis_class("activation_stats")
    assert gl.analysis_class("ssd") is gl.analysis_class("sae_features")
    assert gl.analysis_class("linearization_effect").name == "linearization-effect"


def test_the_default_report_leaves_out_what_its_declaration_keeps_out():
    from geomlens.analyses.registry import builtin_analyses, declaration, report_analyses

    assert "llc" in builtin_analyses() and "llc" not in report_analyses()
    assert report_analyses() == [n for n in builtin_analyses() if n != "llc"]
    assert declaration("llc").requires == ("devinterp",)
