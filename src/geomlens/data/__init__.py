"""Data containers and the stimulus sets shipped with geomlens."""

from geomlens.data.dataset import Dataset, as_dataset
from geomlens.data.stimuli import StimulusSet, render
from geomlens.data.stimulus_files import load_stimuli

__all__ = ["Dataset", "StimulusSet", "as_dataset", "load_stimuli", "render"]
