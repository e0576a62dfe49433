"""What goes into a model and how it comes back per example: encoding
(:mod:`~geomlens.inputs.encoding`, :mod:`~geomlens.inputs.tensor_inputs`), the one batch loop
(:mod:`~geomlens.inputs.batches`), pooling, positions and the content tokens an SAE reads."""
