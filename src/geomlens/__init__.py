"""geomlens: representation-geometry analyses for TransformerLens and nnsight models."""

__version__ = "0.1.0"
