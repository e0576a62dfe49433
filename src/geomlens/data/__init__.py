"""Data containers and the stimulus sets shipped with geomlens.

The containers (which need torch) are imported on first use, so that the stimulus tables and
choice sets that the analyses' declarations name can be read without torch.
"""

from geomlens.lazy import lazy_attributes

_EXPORTS = {
    "Dataset": "geomlens.data.dataset",
    "as_dataset": "geomlens.data.dataset",
    "StimulusSet": "geomlens.data.stimuli",
    "render": "geomlens.data.stimuli",
    "load_stimuli": "geomlens.data.stimulus_files",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_attributes(__name__, _EXPORTS)
