"""Data containers and the stimulus sets shipped with geomlens.

The containers (which need torch) are imported on first use, so that the stimulus tables and
choice sets that the analyses' declarations name can be read without torch.
"""

from geomlens.lazy import lazy_attributes, lent

_EXPORTS = {
    **lent("geomlens.data.dataset", "Dataset", "as_dataset"),
    **lent("geomlens.data.stimuli", "StimulusSet", "render"),
    **lent("geomlens.data.stimulus_files", "load_stimuli"),
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_attributes(__name__, _EXPORTS)
