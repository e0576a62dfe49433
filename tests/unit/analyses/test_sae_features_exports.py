"""The sae-features package re-exports its submodules' public names once: each name is listed
in the ``__all__`` of the submodule that defines it, and the package's ``__all__`` is their
union, so a name added to (or dropped from) a submodule's list follows without a second edit."""

from geomlens.analyses import sae_features
from geomlens.analyses.sae_features import analysis, config, counting, splicing

#: The names users import from the package today; they stay (public API).
PUBLIC = {
    "CALIBRATION", "COSINE_FIDELITY", "DEFAULT_CALIBRATION_ROWS", "DEFAULT_HELDOUT_ROWS",
    "DEFAULT_MAX_TOKENS", "DEFAULT_OOD_ROWS", "HELDOUT", "NEVER", "POOL_SATURATION",
    "SMOOTHED_BITS", "ConditionStats", "SAEFeatures", "SAEFeaturesConfig", "SiteState",
    "cosine_distance_per_sequence", "smoothed_bits_from_log_probs", "smoothed_bits_per_sequence",
}  # fmt: skip


def test_the_package_exports_the_union_of_its_submodules_lists():
    modules = (analysis, config, counting, splicing)
    listed = [name for module in modules for name in module.__all__]
    assert sae_features.__all__ == listed
    assert len(set(listed)) == len(listed)  # no name claimed by two submodules
    for module in modules:
        for name in module.__all__:
            assert getattr(sae_features, name) is getattr(module, name), name


def test_the_public_names_stay():
    assert set(sae_features.__all__) == PUBLIC
