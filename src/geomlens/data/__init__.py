"""Data containers and the stimulus sets shipped with geomlens."""

from geomlens.data.dataset import Dataset, as_dataset

__all__ = ["Dataset", "as_dataset"]
